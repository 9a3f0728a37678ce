"""What a model file read back must pass, and what is said when it does not.

- :func:`load_checkpoint`: a checkpoint of :func:`cipherlab.pipeline.checkpoint.save_checkpoint` read back with
  ``weights_only=True`` and every check below; :func:`export_sha256`: the checksum over a whole model export;
- the checks of a file read back: its checksums (:func:`check_sum`, :func:`check_whole`), its weights
  (:func:`check_weights`), its configuration and tokenizers against the run's (:func:`check_fits`), an export's
  metadata (:func:`metadata_dict`); each a :class:`CheckpointError` of one line naming the file and the fix;
- a model export read back (:func:`read_export`) and a Hugging Face model folder (:func:`read_model_folder`), each
  checked as it is read;
- a file an older cipherlab wrote (no checksum over the whole model, a configuration field missing): refused with
  one line naming the converter (:func:`check_current`, :func:`cipherlab.base.config.older`);
- a ``log.jsonl`` whose last line a stopped run cut short (:func:`read_log_torn`): read with a note, not refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import warnings
from pathlib import Path

import torch
from safetensors import safe_open

from cipherlab.base.config import Config, lacking_fields, older
from cipherlab.pipeline.checkpoint import CHECKPOINT_FORMAT, payload_sha256, payload_tensors, tensors_sha256
from cipherlab.runner.errors import require_file, why

__all__ = ["EXPORT_FORMAT", "HUB_CONFIG_FILE", "HUB_MODEL_FILE", "CheckpointError", "check_current", "check_fits",
           "check_sum", "check_weights", "check_whole", "export_sha256", "load_checkpoint", "metadata_dict",
           "read_export", "read_log_torn", "read_model_folder"]

EXPORT_FORMAT = "cipherlab-model-1"
HUB_MODEL_FILE = "model.safetensors"  # a model folder's model: an export, as export_checkpoint writes it
HUB_CONFIG_FILE = "config.json"  # its configuration, for readers and the hub's page: checked against the model

# Config fields a resumed run may change: budgets, not the model or the data. Raising max_epochs
# continues a finished run, e.g. to bring every configuration to the same number of epochs.
_RUNTIME_FIELDS = ("time_budget_s", "max_epochs", "eval_every")  # may change on --resume
_PAYLOAD_PARTS = ("config", "identity", "artifacts", "model")  # what every checkpoint holds, each a dict
_CHECKPOINT_FIX = "pass a best.pt or last.pt written by `python -m cipherlab train`"


class CheckpointError(ValueError):
    """A checkpoint that is unreadable, or was made with another configuration or tokenizer."""


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



def check_fits(path: Path, payload: dict, config: Config | None, identity: dict | None) -> None:
    """Refuse (CheckpointError naming ``path``) a checkpoint made with another configuration than ``config`` (but
    for :data:`_RUNTIME_FIELDS`) or another tokenizer or data than ``identity``; None checks nothing."""
    if config is not None:
        saved, now = payload["config"], config.to_dict()
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


def check_sum(path: Path, payload: dict) -> None:
    """Refuse a checkpoint whose tensors, or anything else in it, differ from the checksums saved with them."""
    stored, whole = payload.pop("sha256", None), payload.pop("model_sha256", None)
    if not all(value is None or isinstance(value, str) for value in (stored, whole)):
        raise CheckpointError(f"{path}: its checksums are not text (sha256 {stored!r:.20}, model_sha256 "
                              f"{whole!r:.20}): the file is damaged; copy it again, or use another checkpoint of "
                              "the run (last.pt, best.pt) or train again")
    if whole is None:
        raise CheckpointError(older(path, "no checksum over the whole model"))
    digest = tensors_sha256(payload_tensors(payload))
    if stored is not None and digest != stored:
        raise CheckpointError(f"{path}: its tensors do not match the checksum saved with them (sha256 "
                              f"{stored[:12]}...): the file is damaged; copy it again, or use another "
                              "checkpoint of the run (last.pt, best.pt) or train again")
    check_whole(path, whole, payload_sha256(payload, digest),
                "copy it again, or use another checkpoint of the run (last.pt, best.pt) or train again")


def check_weights(path: Path, model: dict, fix: str) -> None:
    """Refuse a checkpoint whose model part holds anything but tensors named by text (a damaged file)."""
    wrong = next(((name, value) for name, value in model.items()
                  if not isinstance(name, str) or not isinstance(value, torch.Tensor)), None)
    if wrong is not None:
        raise CheckpointError(f"{path}: its model holds {wrong[0]!r:.40} = {type(wrong[1]).__name__}, not a named "
                              f"tensor: the file is damaged or not a cipherlab checkpoint; {fix}")


def _plain(value):
    """Tuples and lists compare equal after a round trip through a checkpoint."""
    return list(value) if isinstance(value, tuple) else value


def metadata_dict(path: Path, metadata: dict[str, str], part: str) -> dict:
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


# --------------------------------------------------------------------------- one checksum over the whole model

_CHECKSUM_KEYS = ("sha256", "model_sha256")  # what a file stores about itself, not covered by itself


def export_sha256(metadata: dict[str, str], tensors_digest: str) -> str:
    """SHA-256 over a whole model export: its tensors' checksum and every metadata string as stored
    (format, configuration, tokenizers, identity). An export stores it as ``model_sha256``."""
    values = {key: value for key, value in metadata.items() if key not in _CHECKSUM_KEYS}
    text = json.dumps({"tensors": tensors_digest, "metadata": values}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_whole(path: Path, stored: str, actual: str, fix: str) -> None:
    """Refuse a file whose whole-model checksum differs from ``stored``: a changed byte in its
    configuration or tokenizers, or another model's metadata on these tensors."""
    if actual != stored:
        raise CheckpointError(f"{path}: its configuration or tokenizers do not match the checksum saved with the "
                              f"model (sha256 {stored[:12]}...): the file was changed after it was written (a "
                              f"damaged byte, or another model's configuration); {fix}")


def check_current(path: Path, config: dict) -> None:
    """Refuse a file whose configuration lacks a :class:`Config` field: an older cipherlab wrote it."""
    missing = lacking_fields(config)
    if missing:
        raise CheckpointError(older(path, f"its configuration has no {', '.join(missing)}"))


def read_log_torn(path: Path) -> list[dict]:
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


# --------------------------------------------------------------------------- model exports and folders read back


def read_export(path: Path) -> dict:
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
    stored, whole = metadata.get("sha256"), metadata.get("model_sha256")
    if stored is None or whole is None:
        lacking = "tensor checksum" if stored is None else "checksum over the whole model"
        raise CheckpointError(older(path, f"no {lacking}"))
    digest = tensors_sha256(tensors)
    if digest != stored:
        raise CheckpointError(f"{path}: its tensors do not match the checksum stored when it was exported "
                              f"(sha256 {stored[:12]}...): the file is damaged; copy or export it again")
    check_whole(path, whole, export_sha256(metadata, digest), "copy or export it again")
    payload = {part: metadata_dict(path, metadata, part) for part in ("config", "artifacts", "identity")}
    check_current(path, payload["config"])
    payload["model"] = {}
    for key, value in tensors.items():
        group, _, name = key.partition(".")
        (payload["model"] if group == "model" else payload["artifacts"])[name] = value
    return payload


def read_model_folder(folder: str | os.PathLike) -> dict:
    """The payload of a model folder written by ``cipherlab export --hub`` (:mod:`cipherlab.runner.hub`).

    The model is ``model.safetensors`` alone, read and checksummed as any export. ``config.json`` and the
    tokenizer files beside it are copies for the people who read the folder on the hub; each must agree with
    what the model holds, so a hand-edited copy is refused rather than believed.
    """
    folder = Path(folder)
    payload = read_export(folder / HUB_MODEL_FILE)
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
