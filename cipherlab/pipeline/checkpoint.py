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

The checksums, the checks of a file read back and their messages (a file an older cipherlab wrote: one
line naming the converter) are :mod:`cipherlab.pipeline.integrity`'s (:class:`CheckpointError` among them,
importable from here too).
"""

from __future__ import annotations

import json
import math
import os
import random
import warnings
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import save_file
from torch import nn

from cipherlab.pipeline.codec import OWN_MODEL, Codec, ModelBuilder, codec_from_artifacts
from cipherlab.base.config import Config, config_from_dict
from cipherlab.base.device import pick_device
from cipherlab.base.errors import PartError, first_line, require_file, student_place, why, writable_file
from cipherlab.base.files import write_atomic
from cipherlab.pipeline.integrity import (EXPORT_FORMAT, HUB_CONFIG_FILE, HUB_MODEL_FILE, CheckpointError,
                                          check_current, check_fits, check_sum, check_weights, export_sha256,
                                          payload_sha256, payload_tensors, read_export, read_log_torn,
                                          read_model_folder, tensors_sha256)

__all__ = ["CHECKPOINT_FORMAT", "EXPORT_FORMAT", "CheckpointError", "MAX_MODEL_VALUES", "STORED_MODEL_LIMITS",
           "check_data", "check_model_size", "export_sha256", "export_checkpoint", "HUB_CONFIG_FILE",
           "HUB_MODEL_FILE", "read_model_folder", "load_checkpoint", "load_trained", "model_from_payload",
           "payload_sha256", "payload_tensors", "read_log", "read_payload", "rng_state", "save_checkpoint",
           "set_rng_state", "tensors_sha256"]

CHECKPOINT_FORMAT = "cipherlab-checkpoint-1"
_PAYLOAD_PARTS = ("config", "identity", "artifacts", "model")  # what every checkpoint holds, each a dict
_CHECKPOINT_FIX = "pass a best.pt or last.pt written by `python -m cipherlab train`"


# --------------------------------------------------------------------------- training checkpoints


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
    check_weights(path, payload["model"], _CHECKPOINT_FIX)
    check_sum(path, payload)
    check_current(path, payload["config"])
    check_fits(path, payload, config, identity)
    return payload


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
        return read_log_torn(path)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# --------------------------------------------------------------------------- model files


def load_trained(path: str | os.PathLike, device: torch.device | str | None = None, *,
                 builder: ModelBuilder = OWN_MODEL) -> tuple[nn.Module, Codec, Config]:
    """(model in eval mode on ``device``, its codec, its configuration) from a checkpoint file.

    ``path`` is a training checkpoint (``best.pt``, read with ``weights_only=True``) or a model
    exported by :func:`export_checkpoint` (``.safetensors``: tensors and JSON, no pickle at all).
    ``builder``: what builds the model (:class:`~cipherlab.pipeline.codec.ModelBuilder`); a model trained with
    other classes in place of cipherlab's loads only with a builder that puts the same ones in.
    """
    return model_from_payload(read_payload(path), pick_device(device), path, builder=builder)


def read_payload(path: str | os.PathLike) -> dict:
    """What :func:`load_trained` reads: a checkpoint's payload, or an export's in the same shape; ``path`` may
    also be a model folder for the Hugging Face hub (:func:`read_model_folder`)."""
    path = Path(path)
    if path.is_dir() and (path / HUB_MODEL_FILE).exists():
        return read_model_folder(path)
    return read_export(path) if path.suffix == ".safetensors" else load_checkpoint(path)


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot store {type(value).__name__} in a model export's JSON metadata")


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


def model_from_payload(payload: dict, device: torch.device, path: str | os.PathLike = "the checkpoint", *,
                       builder: ModelBuilder = OWN_MODEL) -> tuple[nn.Module, Codec, Config]:
    """(model in eval mode on ``device``, its codec, its configuration) from :func:`read_payload`'s dict.

    A payload whose configuration, codec or weights do not fit together is a CheckpointError naming ``path``;
    a ``builder`` that cannot rebuild it (other classes than it was trained with, or one that does not fit) a
    PartError naming it.
    """
    try:
        config = config_from_dict(payload["config"])
        problem = builder.refuse(payload["artifacts"].get("parts") or [])
        if problem:
            raise PartError(f"{path}: {problem}")
        builder.prepare(config)
        codec = codec_from_artifacts(config, payload["artifacts"])
        check_model_size(config, codec, payload["model"], path, builder=builder)  # before any weight is allocated
        model = builder(config, codec)
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


# The largest model cipherlab builds from a file: a stored configuration beyond these is refused before
# any weight is allocated (the assignment's models have d_model 256, 4 layers, about 10^7 values).
STORED_MODEL_LIMITS = {
    "d_model": 4096, "n_heads": 256, "ffn_dim": 16384, "enc_layers": 64, "dec_layers": 64,
    "blt_local_layers": 64, "blt_window": 65536, "blt_patch_tgt": 4096, "blt_max_patch": 4096,
}
MAX_MODEL_VALUES = 10**9  # weights and buffers (4 GB in float32)


def check_model_size(config: Config, codec: Codec, tensors: dict[str, torch.Tensor],
                     path: str | os.PathLike = "the checkpoint", *, builder: ModelBuilder = OWN_MODEL) -> None:
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
            built = builder(config, codec).state_dict()
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


