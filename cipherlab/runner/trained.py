"""Trained models read back and written out: :func:`load_trained` (a checkpoint, an export or a model folder),
:func:`export_checkpoint` (the model alone as one ``.safetensors`` file), and the checks a stored model passes
before any weight is allocated (:func:`check_model_size`).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import save_file
from torch import nn

from cipherlab.base.config import Config, config_from_dict
from cipherlab.base.device import pick_device
from cipherlab.base.files import write_atomic
from cipherlab.pipeline.codec import OWN_MODEL, Codec, ModelBuilder, codec_from_artifacts
from cipherlab.pipeline.checkpoint import tensors_sha256
from cipherlab.runner.errors import PartError, first_line, student_place, why, writable_file
from cipherlab.runner.integrity import (EXPORT_FORMAT, HUB_MODEL_FILE, CheckpointError, export_sha256, load_checkpoint,
                                      read_export, read_model_folder)

__all__ = ["MAX_MODEL_VALUES", "STORED_MODEL_LIMITS", "check_data", "check_model_size", "export_checkpoint",
           "load_trained", "model_from_payload", "read_payload"]


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
