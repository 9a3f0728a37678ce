"""Checkpoints: what a training run saves, so that it can resume exactly.

- :func:`save_checkpoint`: a training checkpoint (``best.pt``, ``last.pt``), written atomically (temporary file,
  then ``os.replace``), holding tensors and plain Python values only, so that ``torch.load(weights_only=True)``
  reads it without running code from the file. It carries :func:`tensors_sha256` of every tensor in it
  (weights, optimiser state, random-number state) and one checksum over the whole file (:func:`payload_sha256`).
- :func:`rng_state` / :func:`set_rng_state`: every random-number generator, as tensors, so that a resumed run
  continues bit for bit.
- :func:`read_log`: the run's ``log.jsonl``, one record per epoch.

Reading a checkpoint back with every check (its checksums, its configuration against the run's), model exports
and trained models are :mod:`cipherlab.runner.integrity` and :mod:`cipherlab.runner.trained`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from pathlib import Path

import numpy as np
import torch

from cipherlab.base.files import write_atomic

__all__ = ["CHECKPOINT_FORMAT", "payload_sha256", "payload_tensors", "read_log", "rng_state", "save_checkpoint",
           "set_rng_state", "tensors_sha256"]

CHECKPOINT_FORMAT = "cipherlab-checkpoint-1"


def save_checkpoint(path: str | os.PathLike, payload: dict) -> None:
    """Write ``payload`` with its tensors' checksum to ``path`` atomically: a reader sees the old
    file or the new one, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {**payload, "sha256": tensors_sha256(payload_tensors(payload))}
    payload["model_sha256"] = payload_sha256(payload, payload["sha256"])  # the config, tokenizers, ... too
    write_atomic(path, lambda tmp: torch.save(payload, tmp))


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


# --------------------------------------------------------------------------- checksums


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


def tensors_sha256(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 over every tensor's name, dtype, shape and bytes, in name order: stored in an
    export's metadata at export time and checked at load time, so a corrupted file is refused."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


_CHECKSUM_KEYS = ("sha256", "model_sha256")  # what a file stores about itself, not covered by itself


def payload_sha256(payload: dict, tensors_digest: str | None = None) -> str:
    """SHA-256 over a whole checkpoint: :func:`tensors_sha256` of its tensors and every other value
    in it (configuration, identity, tokenizers, part records, progress, optimiser settings) as
    canonical JSON. A checkpoint stores it as ``model_sha256``, beside the tensors' ``sha256``."""
    rest = {key: value for key, value in payload.items() if key not in _CHECKSUM_KEYS}
    digest = tensors_sha256(payload_tensors(rest)) if tensors_digest is None else tensors_digest
    text = json.dumps({"tensors": digest, "values": _skeleton(rest)}, sort_keys=True, default=repr)
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
