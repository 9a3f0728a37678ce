"""Checkpoints and model files: save, load, resume, export (the training and results chapters).

- :func:`save_checkpoint` / :func:`load_checkpoint`: a training checkpoint (``best.pt``,
  ``last.pt``), written atomically (temporary file, then ``os.replace``) and read with
  ``torch.load(weights_only=True)``: it holds tensors and plain Python values only, so loading
  one never runs code from the file. Like an export, it carries :func:`tensors_sha256` of every
  tensor in it (weights, optimiser state, random-number state) and one checksum over the whole file
  (:func:`payload_sha256`: the tensors and the configuration, tokenizers, identity and records), so a
  damaged file, or one with another model's configuration, is refused rather than decoding wrongly.
  A checkpoint made with another configuration, tokenizer or data
  is refused with :class:`CheckpointError` naming the difference.
- :func:`rng_state` / :func:`set_rng_state`: every random-number generator, as tensors, so that
  a resumed run continues bit for bit.
- :func:`read_log`: the run's ``log.jsonl``, one record per epoch.
- :func:`export_checkpoint`: the model alone as one ``.safetensors`` file (tensors and JSON, no
  pickle at all), checked against :func:`tensors_sha256` and :func:`export_sha256` (its metadata too)
  when it is read back.
- :func:`read_model_folder`: a Hugging Face model folder (``export --hub``, :mod:`cipherlab.pipeline.hub`): its
  ``model.safetensors`` read as any export, the copies beside it checked against it.
- :func:`load_trained`: (model, codec, configuration) from either kind of file, or such a folder; the stored
  configuration is checked (:func:`check_model_size`) before any weight is allocated.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import nn

from cipherlab.pipeline.codec import Codec, build_model, codec_from_artifacts
from cipherlab.base.config import LEGACY_DEFAULTS, Config, config_from_dict
from cipherlab.base.device import pick_device
from cipherlab.base.errors import first_line, require_file, student_place, why, writable_file
from cipherlab.base.files import write_atomic
from cipherlab.student.parts import PartError, require_trained_parts, validate_parts

__all__ = [
    "CHECKPOINT_FORMAT",
    "EXPORT_FORMAT",
    "CheckpointError",
    "MAX_MODEL_VALUES",
    "STORED_MODEL_LIMITS",
    "check_data",
    "check_model_size",
    "export_sha256",
    "export_checkpoint",
    "HUB_CONFIG_FILE",
    "HUB_MODEL_FILE",
    "read_model_folder",
    "load_checkpoint",
    "load_trained",
    "model_from_payload",
    "payload_sha256",
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
    payload = {**payload, "sha256": tensors_sha256(payload_tensors(payload))}
    payload["model_sha256"] = payload_sha256(payload, payload["sha256"])  # the config, tokenizers, ... too
    write_atomic(path, lambda tmp: torch.save(payload, tmp))


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
        with warnings.catch_warnings():  # e.g. "Detected pickle protocol 4": a line of its own, before the error
            warnings.simplefilter("ignore")
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
    _check_weights(path, payload["model"], _CHECKPOINT_FIX)
    _check_sum(path, payload)
    if config is not None:
        saved, now = {**LEGACY_DEFAULTS, **payload["config"]}, config.to_dict()
        # A field the checkpoint lacks had its LEGACY_DEFAULTS value, as config_from_dict reads it; one added
        # to Config after that table goes on with its value now (its default reproduces the old behaviour).
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
    """Refuse a checkpoint whose tensors, or anything else in it, differ from the checksums saved with them."""
    stored, whole = payload.pop("sha256", None), payload.pop("model_sha256", None)
    if not all(value is None or isinstance(value, str) for value in (stored, whole)):
        raise CheckpointError(f"{path}: its checksums are not text (sha256 {stored!r:.20}, model_sha256 "
                              f"{whole!r:.20}): the file is damaged; copy it again, or use another checkpoint of "
                              "the run (last.pt, best.pt) or train again")
    if stored is None and whole is None:  # saved before checkpoints carried one: still readable, but unchecked
        print(f"cipherlab: note: {path} has no tensor checksum (saved by an older cipherlab), so damage to it "
              "cannot be detected; training on saves a checked last.pt", file=sys.stderr)
        return
    digest = tensors_sha256(payload_tensors(payload))
    if stored is not None and digest != stored:
        raise CheckpointError(f"{path}: its tensors do not match the checksum saved with them (sha256 "
                              f"{stored[:12]}...): the file is damaged; copy it again, or use another "
                              "checkpoint of the run (last.pt, best.pt) or train again")
    _check_whole(path, whole, payload_sha256(payload, digest), stored,
                 "copy it again, or use another checkpoint of the run (last.pt, best.pt) or train again")


def _check_weights(path: Path, model: dict, fix: str) -> None:
    """Refuse a checkpoint whose model part holds anything but tensors named by text (a damaged file)."""
    wrong = next(((name, value) for name, value in model.items()
                  if not isinstance(name, str) or not isinstance(value, torch.Tensor)), None)
    if wrong is not None:
        raise CheckpointError(f"{path}: its model holds {wrong[0]!r:.40} = {type(wrong[1]).__name__}, not a named "
                              f"tensor: the file is damaged or not a cipherlab checkpoint; {fix}")


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


def read_log(path: str | os.PathLike, *, torn_ok: bool = False) -> list[dict]:
    """The records of a log.jsonl, oldest first (empty when there is none yet).

    ``torn_ok``: a last line cut short (a run stopped while writing it) is dropped with a note, and
    any other line that is not JSON is a ValueError naming the file and the line (as ``--resume`` reads it).
    """
    path = Path(path)
    if not path.exists():
        return []
    if torn_ok:
        return _read_log_torn(path)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# --------------------------------------------------------------------------- model files


def load_trained(path: str | os.PathLike, device: torch.device | str | None = None, *,
                 parts: dict[str, type] | None = None) -> tuple[nn.Module, Codec, Config]:
    """(model in eval mode on ``device``, its codec, its configuration) from a checkpoint file.

    ``path`` is a training checkpoint (``best.pt``, read with ``weights_only=True``) or a model
    exported by :func:`export_checkpoint` (``.safetensors``: tensors and JSON, no pickle at all).
    ``parts``: the student's classes the model was trained with, e.g. ``{"attention": MyAttention}``
    (``cipherlab.student.parts``); a model trained with parts loads only with the same ones.
    """
    return model_from_payload(read_payload(path), pick_device(device), path, parts=parts)


def read_payload(path: str | os.PathLike) -> dict:
    """What :func:`load_trained` reads: a checkpoint's payload, or an export's in the same shape; ``path`` may
    also be a model folder for the Hugging Face hub (:func:`read_model_folder`)."""
    path = Path(path)
    if path.is_dir() and (path / HUB_MODEL_FILE).exists():
        return read_model_folder(path)
    return _read_export(path) if path.suffix == ".safetensors" else load_checkpoint(path)


HUB_MODEL_FILE = "model.safetensors"  # a model folder's model: an export, as export_checkpoint writes it
HUB_CONFIG_FILE = "config.json"  # its configuration, for readers and the hub's page: checked against the model


def read_model_folder(folder: str | os.PathLike) -> dict:
    """The payload of a model folder written by ``cipherlab export --hub`` (:mod:`cipherlab.pipeline.hub`).

    The model is ``model.safetensors`` alone, read and checksummed as any export. ``config.json`` and the
    tokenizer files beside it are copies for the people who read the folder on the hub; each must agree with
    what the model holds, so a hand-edited copy is refused rather than believed.
    """
    folder = Path(folder)
    payload = _read_export(folder / HUB_MODEL_FILE)
    fix = f"export the folder again with `python -m cipherlab export --hub {folder}`"
    try:
        described = json.loads((folder / HUB_CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{folder / HUB_CONFIG_FILE}: not a readable JSON file ({why(e)}); {fix}") from None
    if not isinstance(described, dict) or described.get("config") != payload["config"]:
        raise CheckpointError(f"{folder / HUB_CONFIG_FILE}: its configuration is not the one {HUB_MODEL_FILE} holds "
                              f"(edited by hand, or from another model); {fix}")
    for key, value in payload["artifacts"].items():
        copy = folder / f"{key}.json"
        if isinstance(value, str) and copy.exists() and copy.read_text(encoding="utf-8") != value:
            raise CheckpointError(f"{copy}: not the tokenizer {HUB_MODEL_FILE} holds (edited by hand, or from "
                                  f"another model); {fix}")
    return payload


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


def export_checkpoint(path: str | os.PathLike, out: str | os.PathLike, *, half: bool = False) -> Path:
    """Write the model of training checkpoint ``path`` as one safetensors file ``out``.

    Only what decryption needs travels: the weights (float32, as trained), the configuration,
    and the codec (tokenizer files as text, or C5's entropy tables as tensors) -- no optimiser
    state, so the file is a quarter of ``best.pt``. Tied weights are stored once per name.
    ``half`` stores the model's floating-point weights as float16 (half the file again; the
    loader widens them back to float32, so a model runs as trained up to float16 rounding);
    the codec's tensors stay as they are. The checksum covers the tensors as stored.
    """
    out = Path(out)
    if out.suffix != ".safetensors":
        raise ValueError(f"{out}: a model export is a .safetensors file; name it e.g. c2.safetensors")
    writable_file(out, "--out")  # before reading the checkpoint
    payload = load_checkpoint(path)
    tensors = {f"model.{k}": (v.detach().half() if half and v.is_floating_point() else v.detach()).clone().contiguous()
               for k, v in payload["model"].items()}
    artifacts = {}
    for key, value in payload["artifacts"].items():
        if isinstance(value, torch.Tensor):
            tensors[f"artifacts.{key}"] = value.detach().clone().contiguous()
        else:
            artifacts[key] = value
    metadata = {
        "format": EXPORT_FORMAT,
        "config": json.dumps(config_from_dict(payload["config"]).to_dict(), default=_json_default),  # every field
        "artifacts": json.dumps(artifacts, default=_json_default),
        "identity": json.dumps(payload["identity"], default=_json_default),
        "sha256": tensors_sha256(tensors),
    }
    metadata["model_sha256"] = export_sha256(metadata, metadata["sha256"])  # configuration, codec, ... too
    try:  # safetensors writes 0600; write_atomic makes a model to share as readable as any file
        write_atomic(out, lambda tmp: save_file(tensors, str(tmp), metadata=metadata))
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
    digest = tensors_sha256(tensors)
    if digest != stored:
        raise CheckpointError(f"{path}: its tensors do not match the checksum stored when it was exported "
                              f"(sha256 {stored[:12]}...): the file is damaged; copy or export it again")
    _check_whole(path, metadata.get("model_sha256"), export_sha256(metadata, digest), stored,
                 "copy or export it again")
    payload = {part: _metadata_dict(path, metadata, part) for part in ("config", "artifacts", "identity")}
    payload["model"] = {}
    for key, value in tensors.items():
        group, _, name = key.partition(".")
        (payload["model"] if group == "model" else payload["artifacts"])[name] = value
    return payload


def _metadata_dict(path: Path, metadata: dict[str, str], part: str) -> dict:
    """The JSON object an export's metadata holds as ``part`` (config, artifacts, identity); a CheckpointError
    naming ``path`` where it is missing or not a JSON object."""
    text = metadata.get(part)
    try:
        value = None if text is None else json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise CheckpointError(f"{path}: its metadata's {part} is not a JSON object ("
                              f"{'missing' if text is None else repr(text[:30])}): the file is damaged or not a "
                              "cipherlab model; copy or export it again")
    return value


def model_from_payload(payload: dict, device: torch.device, path: str | os.PathLike = "the checkpoint", *,
                       parts: dict[str, type] | None = None) -> tuple[nn.Module, Codec, Config]:
    """(model in eval mode on ``device``, its codec, its configuration) from :func:`read_payload`'s dict.

    A payload whose configuration, codec or weights do not fit together is a CheckpointError naming ``path``;
    ``parts`` other than the model was trained with (or a class that does not fit) a PartError naming it.
    """
    parts = dict(parts or {})
    try:
        config = config_from_dict(payload["config"])
        require_trained_parts(payload["artifacts"].get("parts") or [], parts, str(path))
        if parts:
            validate_parts(parts, config)
        codec = codec_from_artifacts(config, payload["artifacts"])
        check_model_size(config, codec, payload["model"], path, parts=parts)  # before any weight is allocated
        model = build_model(config, codec, parts=parts)
        model.load_state_dict(payload["model"])
    except CheckpointError:
        raise
    except PartError as e:
        raise PartError(str(e) if str(e).startswith(str(path)) else f"{path}: {e}") from None
    except (KeyError, TypeError, ValueError, RuntimeError) as e:
        if student_place(e):
            raise  # raised in a student's part: theirs to fix, named as such (errors.blame)
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


# --------------------------------------------------------------------------- one checksum over the whole model

_CHECKSUM_KEYS = ("sha256", "model_sha256")  # what a file stores about itself, not covered by itself


def payload_sha256(payload: dict, tensors_digest: str | None = None) -> str:
    """SHA-256 over a whole checkpoint: :func:`tensors_sha256` of its tensors and every other value
    in it (configuration, identity, tokenizers, part records, progress, optimiser settings) as
    canonical JSON. A checkpoint stores it as ``model_sha256``, beside the tensors' ``sha256``."""
    rest = {key: value for key, value in payload.items() if key not in _CHECKSUM_KEYS}
    digest = tensors_sha256(payload_tensors(rest)) if tensors_digest is None else tensors_digest
    text = json.dumps({"tensors": digest, "values": _skeleton(rest)}, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def export_sha256(metadata: dict[str, str], tensors_digest: str) -> str:
    """SHA-256 over a whole model export: its tensors' checksum and every metadata string as stored
    (format, configuration, tokenizers, identity). An export stores it as ``model_sha256``."""
    values = {key: value for key, value in metadata.items() if key not in _CHECKSUM_KEYS}
    text = json.dumps({"tensors": tensors_digest, "metadata": values}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _skeleton(value):
    """``value`` as plain JSON, each tensor a placeholder (the tensors have their own checksum)."""
    if isinstance(value, torch.Tensor):
        return "<tensor>"
    if isinstance(value, dict):
        return {str(key): _skeleton(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_skeleton(item) for item in value]
    if isinstance(value, np.generic):
        return value.item()
    return value if value is None or isinstance(value, (str, int, float, bool)) else repr(value)


_NOTED: set[str] = set()  # files already noted as checked by their tensors only (one note a file)


def _check_whole(path: Path, stored: str | None, actual: str, tensors_digest: str | None, fix: str) -> None:
    """Refuse a file whose whole-model checksum differs from ``stored``: a changed byte in its
    configuration or tokenizers, or another model's metadata on these tensors.

    A file written before files carried one (``stored`` None) is checked against the whole-model
    checksum recorded for it here if it is one of the committed models (:data:`_WHOLE_BY_TENSORS`,
    found by its tensors' checksum), else accepted on its tensors' checksum with a note.
    """
    expected = stored if stored is not None else _WHOLE_BY_TENSORS.get(tensors_digest or "")
    if expected is None:
        if str(path) not in _NOTED:
            _NOTED.add(str(path))
            print(f"cipherlab: note: {path} was written by an older cipherlab: its checksum covers its tensors "
                  "but not its configuration or tokenizers; export it again (or train on) for one over the whole "
                  "model", file=sys.stderr)
        return
    if actual != expected:
        raise CheckpointError(f"{path}: its configuration or tokenizers do not match the checksum saved with the "
                              f"model (sha256 {expected[:12]}...): the file was changed after it was written (a "
                              f"damaged byte, or another model's configuration); {fix}")


# The largest model cipherlab builds from a file: a stored configuration beyond these is refused before
# any weight is allocated (the assignment's models have d_model 256, 4 layers, about 10^7 values).
STORED_MODEL_LIMITS = {
    "d_model": 4096, "n_heads": 256, "ffn_dim": 16384, "enc_layers": 64, "dec_layers": 64,
    "blt_local_layers": 64, "blt_window": 65536, "blt_patch_tgt": 4096, "blt_max_patch": 4096,
}
MAX_MODEL_VALUES = 10**9  # weights and buffers (4 GB in float32)


def check_model_size(config: Config, codec: Codec, tensors: dict[str, torch.Tensor],
                     path: str | os.PathLike = "the checkpoint", *, parts: dict[str, type] | None = None) -> None:
    """Refuse (CheckpointError naming ``path``) a stored configuration whose model is beyond
    :data:`STORED_MODEL_LIMITS` or :data:`MAX_MODEL_VALUES`, or whose weights' names and shapes are
    not the file's ``tensors`` (names, shapes and dtypes), or whose weights hold NaN or infinite values: checked
    on torch's ``meta`` device, where nothing is allocated."""
    fix = "the file is damaged or not a cipherlab model; export or train it again"
    unfinite = next((key for key, t in tensors.items() if t.is_floating_point() and not torch.isfinite(t).all()), None)
    if unfinite is not None:
        raise CheckpointError(f"{path}: its weight {unfinite} holds NaN or infinite values, which no trained model "
                              f"has; {fix}")
    beyond = [f"{name}={getattr(config, name)}, at most {limit}" for name, limit in STORED_MODEL_LIMITS.items()
              if getattr(config, name) > limit]
    if beyond:
        raise CheckpointError(f"{path}: its configuration asks for a larger model than cipherlab builds "
                              f"from a file ({'; '.join(beyond)}); {fix}")
    try:
        with torch.device("meta"):
            built = build_model(config, codec, parts=parts).state_dict()
    except Exception:  # e.g. a student's part that needs real memory: load_state_dict checks instead
        return
    shapes = {key: tuple(t.shape) for key, t in built.items()}
    values = sum(math.prod(shape) for shape in shapes.values())
    if values > MAX_MODEL_VALUES:
        raise CheckpointError(f"{path}: its configuration makes a model of {values:,} values, more than the "
                              f"{MAX_MODEL_VALUES:,} cipherlab builds from a file; {fix}")
    stored = {key: tuple(t.shape) for key, t in tensors.items()}
    if shapes != stored:
        differ = sorted(set(shapes) ^ set(stored)) or [k for k in sorted(shapes) if shapes[k] != stored[k]]
        name = differ[0]
        raise CheckpointError(f"{path}: its configuration, tokenizers and weights do not fit together ({name}: "
                              f"{shapes.get(name, 'none')} from the configuration, {stored.get(name, 'none')} in "
                              f"the file); {fix}")
    def fits(want: torch.dtype, have: torch.dtype) -> bool:  # float16 where float32 is built: `export --half`
        return want == have or (want == torch.float32 and have == torch.float16)

    other = next((key for key in sorted(built) if not fits(built[key].dtype, tensors[key].dtype)), None)
    if other is not None:
        raise CheckpointError(f"{path}: its weight {other} is {tensors[other].dtype}, the model's is "
                              f"{built[other].dtype}; {fix}")


def _read_log_torn(path: Path) -> list[dict]:
    """:func:`read_log` with a torn last line dropped (with a note) and other bad lines named."""
    lines = [(n, line) for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if line.strip()]
    records = []
    for n, line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            if n == lines[-1][0]:
                print(f"cipherlab: note: {path}: line {n}, the last, is cut short (a run stopped while writing "
                      "it); it was dropped and that epoch's record is written again", file=sys.stderr)
                break
            raise ValueError(f"{path}: line {n} is not valid JSON ({e.msg}); repair or delete that line, "
                             "or train into a new --out folder") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}: line {n} is not a log record (a JSON object); repair or delete that "
                             "line, or train into a new --out folder")
        records.append(record)
    return records


# The models committed under results/ were exported before files carried a whole-model checksum, and
# results/ is never rewritten: each one's whole-model checksum (:func:`export_sha256`), recorded here
# by its tensors' checksum, so their configuration and tokenizers are checked too.
_WHOLE_BY_TENSORS = {
    "ca5566d6899ba71f1434da244ad113b3a2d14076fcf4db7532e3e32f928a4bff":  # results/aligned/c1.safetensors
        "104afc37397c0f89ddd3606367cba0211032bb447fbedbef7d87f9b069107e90",
    "bc2ee1f24f8eaccd5f87d1f11daadee717653514253ca64bf4e04757d6e8613d":  # results/aligned/c2.safetensors
        "771610b10ad381e0fc6e4c48cadbf47e337cabc85f06c5eb7ece5496d47fa60a",
    "981ab2d8bdda90b8a64b0a10d711b4f4864573cbf5d39b64817153f53803724e":  # results/aligned/c3.safetensors
        "f41ad54c5834d92d59c76f3b56bef4472b5c832a30bb9ae631589921daff59ff",
    "e8d85ffb28d416f76ceccefb7e87e9b5af471f8f2c11a60765f86da6aa087fbb":  # results/aligned/c4.safetensors
        "605c55451237cbe7f620230bddfacd4047bef88f5ede555674740ce454d63f70",
    "ef27492e286976a73bf6f7b6b24044d030c343ea5bb3cfc0fe05ca1d411b033c":  # results/checkpoints/c1.safetensors
        "98d182f64eaa98c259836ad4cec57fb3bfcaa8fbaba3dbf909e14d1ee554561c",
    "6a2f70a4b58497f0f2d7c290b432c188dbbd2285e7275ea07c473e842cefec55":  # results/checkpoints/c2.safetensors
        "8e6bd129715fd500d4dddfa0b6bc983087f057a48e1992836f3d1fb66916d120",
    "70eba904e78a004b710a3e25c56ac99ae9d08a055b5bf66d272f518bf06630fe":  # results/checkpoints/c3.safetensors
        "eb39cada5a92310bbc57106c71609c5669217b52fa461cd25ac96b19b7e69b50",
    "899b6f81b5fb797291e0547b162173f107aaad6377b8123563eac96b25204687":  # results/checkpoints/c4.safetensors
        "baac540b2b113bb11474797b4783e2530e7971750e66a52ec4d335df0af39449",
    "ab5afaad3a221ad910ac131c987252d9564ffe4d501d4101c0572a1476d9eaf0":  # results/checkpoints/c5.safetensors
        "cc3fbd6bfeb44ad224d68ad51f78dcde81ab32a9b66cc9439d7576227c74d8fe",
}
