"""Checkpoints and model files: save, load, resume, export (chapters 8 and 9).

- :func:`save_checkpoint` / :func:`load_checkpoint`: a training checkpoint (``best.pt``,
  ``last.pt``), written atomically (temporary file, then ``os.replace``) and read with
  ``torch.load(weights_only=True)``: it holds tensors and plain Python values only, so loading
  one never runs code from the file. Like an export, it carries :func:`tensors_sha256` of every
  tensor in it (weights, optimiser state, random-number state), so a damaged file is refused
  rather than decoding wrongly. A checkpoint made with another configuration, tokenizer or data
  is refused with :class:`CheckpointError` naming the difference.
- :func:`rng_state` / :func:`set_rng_state`: every random-number generator, as tensors, so that
  a resumed run continues bit for bit.
- :func:`read_log`: the run's ``log.jsonl``, one record per epoch.
- :func:`export_checkpoint`: the model alone as one ``.safetensors`` file (tensors and JSON, no
  pickle at all), checked against :func:`tensors_sha256` when it is read back.
- :func:`load_trained`: (model, codec, configuration) from either kind of file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import random
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import nn

from cipherlab.codec import Codec, build_model, codec_from_artifacts
from cipherlab.config import Config, config_from_dict
from cipherlab.device import pick_device
from cipherlab.errors import first_line, require_file, why, writable_file
from cipherlab.parts import parts_for_checkpoint, using

__all__ = [
    "CHECKPOINT_FORMAT",
    "EXPORT_FORMAT",
    "CheckpointError", "parts_in_place",
    "check_data",
    "export_checkpoint",
    "load_checkpoint",
    "load_trained",
    "model_from_payload",
    "payload_tensors",
    "read_log",
    "read_payload",
    "rng_state",
    "save_checkpoint",
    "set_rng_state",
    "tensors_sha256",
]

CHECKPOINT_FORMAT = "cipherlab-checkpoint-1"
EXPORT_FORMAT = "cipherlab-model-1"
# Config fields a resumed run may change: budgets, not the model or the data. Raising max_epochs
# continues a finished run, e.g. to bring every configuration to the same number of epochs.
_RUNTIME_FIELDS = ("time_budget_s", "max_epochs", "eval_every")  # may change on --resume
_PAYLOAD_PARTS = ("config", "identity", "artifacts", "model")  # what every checkpoint holds, each a dict
_CHECKPOINT_FIX = "pass a best.pt or last.pt written by `python -m cipherlab train`"


class CheckpointError(ValueError):
    """A checkpoint that is unreadable, or was made with another configuration or tokenizer."""


# --------------------------------------------------------------------------- training checkpoints


def payload_tensors(payload, prefix: str = "") -> dict[str, torch.Tensor]:
    """Every tensor inside a checkpoint's nested dicts and lists, by its dotted place in them
    (``model.encoder.embed.weight``, ``optimizer.state.0.exp_avg``, ``rng.torch``, ...)."""
    if isinstance(payload, dict):
        items = payload.items()
    elif isinstance(payload, (list, tuple)):
        items = enumerate(payload)
    else:
        return {}
    found = {}
    for key, value in items:
        name = f"{prefix}{key}"
        found.update({name: value} if isinstance(value, torch.Tensor) else payload_tensors(value, f"{name}."))
    return found


def save_checkpoint(path: str | os.PathLike, payload: dict) -> None:
    """Write ``payload`` with its tensors' checksum to ``path`` atomically: a reader sees the old
    file or the new one, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    payload = {**payload, "sha256": tensors_sha256(payload_tensors(payload))}
    with open(tmp, "wb") as f:
        torch.save(payload, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_checkpoint(
    path: str | os.PathLike, *, config: Config | None = None, identity: dict | None = None
) -> dict:
    """Read a checkpoint safely (``weights_only=True``) and check it fits ``config`` and ``identity``.

    Raises FileNotFoundError for a missing file and CheckpointError for a file that is not a
    cipherlab checkpoint, is damaged (its tensors do not match their checksum), or was made with
    another configuration or tokenizer.
    """
    path = require_file(path, "checkpoint", _CHECKPOINT_FIX)
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # any unpickling failure means "not a checkpoint we can trust"
        raise CheckpointError(f"{path}: not a readable cipherlab checkpoint ({why(e)}); "
                              f"{_CHECKPOINT_FIX}") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: not a cipherlab checkpoint (expected format {CHECKPOINT_FORMAT!r}); "
                              f"{_CHECKPOINT_FIX}")
    missing = [part for part in _PAYLOAD_PARTS if not isinstance(payload.get(part), dict)]
    if missing:
        raise CheckpointError(f"{path}: a cipherlab checkpoint without its {', '.join(missing)}; {_CHECKPOINT_FIX}")
    _check_sum(path, payload)
    if config is not None:
        saved, now = payload["config"], config.to_dict()
        # A field the checkpoint does not know was added to Config after it was written; the
        # run goes on with that field's value now (its default reproduces the old behaviour).
        diffs = [
            f"{key}: {saved.get(key)!r} in the checkpoint, {now[key]!r} now"
            for key in now
            if key in saved and key not in _RUNTIME_FIELDS and _plain(saved[key]) != _plain(now[key])
        ]
        if diffs:
            raise CheckpointError(
                f"{path} was made with another configuration ({'; '.join(diffs)}); use the same "
                "--config and --preset to resume, or train into a new --out folder"
            )
    if identity is not None:
        diffs = [
            f"{key}: {payload['identity'].get(key)} in the checkpoint, {value} now"
            for key, value in identity.items()
            if payload["identity"].get(key) != value
        ]
        if diffs:
            raise CheckpointError(
                f"{path} was made with another tokenizer or data ({'; '.join(diffs)}); "
                "train into a new --out folder"
            )
    return payload


def _check_sum(path: Path, payload: dict) -> None:
    """Refuse a checkpoint whose tensors differ from the checksum saved with them."""
    stored = payload.pop("sha256", None)
    if stored is None:  # saved before checkpoints carried one: still readable, but unchecked
        print(f"cipherlab: note: {path} has no tensor checksum (saved by an older cipherlab), so damage to it "
              "cannot be detected; training on saves a checked last.pt", file=sys.stderr)
        return
    if tensors_sha256(payload_tensors(payload)) != stored:
        raise CheckpointError(f"{path}: its tensors do not match the checksum saved with them (sha256 "
                              f"{stored[:12]}...): the file is damaged; copy it again, or use another "
                              "checkpoint of the run (last.pt, best.pt) or train again")


def _plain(value):
    """Tuples and lists compare equal after a round trip through a checkpoint."""
    return list(value) if isinstance(value, tuple) else value


def rng_state() -> dict:
    """Every generator's state, as tensors (so ``torch.load(weights_only=True)`` can read it)."""
    version, mt, gauss_next = random.getstate()
    _, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    state = {
        "python": torch.tensor([version, *mt], dtype=torch.int64),
        "python_gauss": torch.tensor(math.nan if gauss_next is None else gauss_next, dtype=torch.float64),
        "numpy": torch.from_numpy(np_keys.astype(np.int64)),
        "numpy_extra": torch.tensor([np_pos, np_has_gauss, np_gauss], dtype=torch.float64),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    if torch.backends.mps.is_available():
        state["mps"] = torch.mps.get_rng_state()
    return state


def set_rng_state(state: dict) -> None:
    """Inverse of :func:`rng_state`."""
    version, *mt = state["python"].tolist()
    gauss = state["python_gauss"].item()
    random.setstate((version, tuple(mt), None if math.isnan(gauss) else gauss))
    pos, has_gauss, gauss = state["numpy_extra"].tolist()
    np.random.set_state(("MT19937", state["numpy"].numpy().astype(np.uint32), int(pos), int(has_gauss), gauss))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "mps" in state and torch.backends.mps.is_available():
        torch.mps.set_rng_state(state["mps"])


def read_log(path: str | os.PathLike) -> list[dict]:
    """The records of a log.jsonl, oldest first (empty when there is none yet)."""
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# --------------------------------------------------------------------------- model files


def load_trained(path: str | os.PathLike, device: torch.device | str | None = None) -> tuple[nn.Module, Codec, Config]:
    """(model in eval mode on ``device``, its codec, its configuration) from a checkpoint file.

    ``path`` is a training checkpoint (``best.pt``, read with ``weights_only=True``) or a model
    exported by :func:`export_checkpoint` (``.safetensors``: tensors and JSON, no pickle at all).
    """
    return model_from_payload(read_payload(path), pick_device(device), path)


@contextlib.contextmanager
def parts_in_place(path: str | os.PathLike, values, *, load):
    """Run the block with the ``--part`` classes (``values``, "PART=FILE.py:NAME"; ``load`` loads
    one) that the checkpoint ``path`` was trained with.

    With ``--part`` the checkpoint is read first, to load and try the classes with its configuration
    and compare them with its record. Without, a checkpoint that needs parts fails to load inside the
    block; only then is it read again, to say in one line which ``--part`` to pass.
    """
    parts = parts_for_checkpoint(read_payload(path), values, path, load=load) if values else {}
    try:
        with using(parts):
            yield
    except CheckpointError:
        if not values:
            parts_for_checkpoint(read_payload(path), values, path, load=load)  # PartError: parts missing
        raise


def read_payload(path: str | os.PathLike) -> dict:
    """What :func:`load_trained` reads: a checkpoint's payload, or an export's in the same shape."""
    path = Path(path)
    return _read_export(path) if path.suffix == ".safetensors" else load_checkpoint(path)


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot store {type(value).__name__} in a model export's JSON metadata")


def tensors_sha256(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 over every tensor's name, dtype, shape and bytes, in name order: stored in an
    export's metadata at export time and checked at load time, so a corrupted file is refused."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def export_checkpoint(path: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Write the model of training checkpoint ``path`` as one safetensors file ``out``.

    Only what decryption needs travels: the weights (float32, as trained), the configuration,
    and the codec (tokenizer files as text, or C5's entropy tables as tensors) -- no optimiser
    state, so the file is a quarter of ``best.pt``. Tied weights are stored once per name.
    """
    out = Path(out)
    if out.suffix != ".safetensors":
        raise ValueError(f"{out}: a model export is a .safetensors file; name it e.g. c2.safetensors")
    writable_file(out, "--out")  # before reading the checkpoint
    payload = load_checkpoint(path)
    tensors = {f"model.{k}": v.detach().clone().contiguous() for k, v in payload["model"].items()}
    artifacts = {}
    for key, value in payload["artifacts"].items():
        if isinstance(value, torch.Tensor):
            tensors[f"artifacts.{key}"] = value.detach().clone().contiguous()
        else:
            artifacts[key] = value
    metadata = {
        "format": EXPORT_FORMAT,
        "config": json.dumps(payload["config"], default=_json_default),
        "artifacts": json.dumps(artifacts, default=_json_default),
        "identity": json.dumps(payload["identity"], default=_json_default),
        "sha256": tensors_sha256(tensors),
    }
    try:
        save_file(tensors, str(out), metadata=metadata)
    except SafetensorError as e:  # e.g. a disk that is read-only or full
        raise CheckpointError(f"{out}: cannot write the export ({first_line(e)}); choose a location on a "
                              "writable disk with --out") from None
    return out


def _read_export(path: Path) -> dict:
    """The payload of a model written by :func:`export_checkpoint`, in the shape of a checkpoint's."""
    require_file(path, "model file", "pass a .safetensors file written by `cipherlab export`")
    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            metadata = f.metadata() or {}
            tensors = {key: f.get_tensor(key) for key in f.keys()}
    except Exception as e:
        raise CheckpointError(f"{path}: not a readable safetensors file ({why(e)}); "
                              "pass a .safetensors file written by `cipherlab export`") from None
    if metadata.get("format") != EXPORT_FORMAT:
        raise CheckpointError(
            f"{path}: not a cipherlab model export (metadata format {metadata.get('format')!r}, "
            f"expected {EXPORT_FORMAT!r})"
        )
    stored = metadata.get("sha256")
    if stored is None:
        raise CheckpointError(f"{path}: no tensor checksum in its metadata (written by an older cipherlab); "
                              "export it again with `python -m cipherlab export`")
    if tensors_sha256(tensors) != stored:
        raise CheckpointError(f"{path}: its tensors do not match the checksum stored when it was exported "
                              f"(sha256 {stored[:12]}...): the file is damaged; copy or export it again")
    artifacts = json.loads(metadata["artifacts"])
    model = {}
    for key, value in tensors.items():
        group, _, name = key.partition(".")
        (model if group == "model" else artifacts)[name] = value
    return {
        "config": json.loads(metadata["config"]),
        "artifacts": artifacts,
        "identity": json.loads(metadata["identity"]),
        "model": model,
    }


def model_from_payload(payload: dict, device: torch.device, path: str | os.PathLike = "the checkpoint"
                       ) -> tuple[nn.Module, Codec, Config]:
    """(model in eval mode on ``device``, its codec, its configuration) from :func:`read_payload`'s dict.

    A payload whose configuration, codec or weights do not fit together is a CheckpointError naming ``path``.
    """
    try:
        config = config_from_dict(payload["config"])
        codec = codec_from_artifacts(config, payload["artifacts"])
        model = build_model(config, codec)
        model.load_state_dict(payload["model"])
    except (KeyError, TypeError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"{path}: its configuration, tokenizers and weights do not fit together "
                              f"({why(e)}); export or train it again") from None
    return model.to(device).eval(), codec, config


def check_data(payload: dict, corpus, path: str | os.PathLike, remedy: str) -> None:
    """Refuse (CheckpointError) a model trained on other data than ``corpus``: its test split
    would not be held out. ``remedy`` ends the message: what the reader can do instead."""
    trained_on = payload["identity"].get("data")
    if trained_on != corpus.sha256:
        raise CheckpointError(
            f"{path} was trained on other data (digest {str(trained_on)[:12]}..., this data "
            f"{corpus.sha256[:12]}...); {remedy}"
        )
