"""One record per trained model: what every run writes and every reader reads.

``train``, ``ablate`` and any script that trains or probes a model through :func:`make_record`
all write this one JSON object, and ``report``, the tables and the book read it back through
:func:`check_record`. A record is

- who the model is: ``name``, ``config``, ``preset``, ``components``, ``source_mode``, ``recipe``
  (with ``recipe_caveats``), ``seed``, the full ``hyperparameters``, and how it was made
  (``command``, ``overrides``, ``parts`` where a student's classes replaced cipherlab's);
- how training went: ``epochs``, ``best_epoch``, ``best_val_loss``, ``best_val_accuracy``,
  ``stopped``, ``params``, and the per-epoch ``log`` itself (the rows of the run's ``log.jsonl``);
- what it cost and where it ran: ``seconds_per_epoch``, ``train_seconds``, ``wall_seconds``,
  ``train_tokens_per_s``, ``peak_memory_bytes``, ``device``, ``device_name``, ``versions``,
  ``git_commit``;
- ``sets``: what it decrypted, one entry per set of lines, each scored by :func:`set_metrics` and
  naming its ``decoding``. ``test`` is the preset's test lines (``lines`` of them, the first ones);
  ``test_free`` the same lines decoded freely where ``test`` was length-aware; the probe sets of
  :func:`cipherlab.analysis.probes.probe_sets` (``random_letters``, ``stdlib``, ...) keep their names.

``schema`` names this layout (:data:`SCHEMA`). A field that a run could not measure is ``None``
(peak memory off CUDA and Linux, parameters of a run probed again without training). A record an older
cipherlab wrote (another layout, or hyperparameters without every field) is refused by :func:`check_record`
with one line naming the converter (:func:`cipherlab.base.config.older`).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import numpy as np
import torch

from cipherlab.base.config import Config, lacking_fields, older, recipe_caveats

__all__ = [
    "RECORD_FIELDS",
    "SCHEMA",
    "SET_FIELDS",
    "check_record",
    "device_name",
    "git_commit",
    "make_record",
    "read_record",
    "set_metrics",
    "versions",
]

SCHEMA = "cipherlab-record/1"

# every record has every one of these (None where a run could not measure it)
RECORD_FIELDS = (
    "schema", "name", "config", "preset", "components", "source_mode", "recipe", "recipe_caveats", "seed",
    "command", "overrides", "epochs", "best_epoch", "best_val_loss", "best_val_accuracy", "stopped", "params",
    "seconds_per_epoch", "train_seconds", "wall_seconds", "train_tokens_per_s", "peak_memory_bytes",
    "device", "device_name", "versions", "git_commit", "log", "sets", "hyperparameters",
)
# every set has these; scored sets also keep exact_by_line (one "0"/"1" per line, for paired tests)
SET_FIELDS = ("lines", "bit_accuracy", "char_accuracy", "sequence_accuracy", "exact_lines", "char_error_rate",
              "decoding")


def git_commit() -> str | None:
    """The repository's HEAD, with ``-dirty`` when tracked files differ from it; None outside a checkout."""

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=Path(__file__).parent, timeout=10)

    try:
        head = git("rev-parse", "HEAD")
        if head.returncode != 0:
            return None
        dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("-dirty" if dirty else "")


def device_name(device) -> str:
    """The device a run used, as people name it (``NVIDIA H100 80GB HBM3``, ``cpu``)."""
    device = torch.device(device)
    if device.type == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(device)
    return device.type


def versions() -> dict:
    """Python, torch, NumPy and cipherlab versions, recorded with every result."""
    try:
        cipherlab_version = metadata.version("cipherlab")
    except metadata.PackageNotFoundError:
        cipherlab_version = None
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "cipherlab": cipherlab_version,
        "threads": torch.get_num_threads(),
    }


def set_metrics(predictions: list[str], plain: list[str], metrics: dict, *, decoding: str, seconds: float) -> dict:
    """One set of a record: ``metrics`` (:func:`cipherlab.pipeline.metrics.compute_metrics` of the
    predictions) with the counts every set carries, each line's outcome, the decoding and its speed."""
    chars = sum(len(r) for r in plain)
    right = [sum(a == b for a, b in zip(p, r)) for p, r in zip(predictions, plain)]
    return {
        **metrics,
        "lines": len(plain),
        "char_accuracy": sum(right) / chars if chars else 0.0,
        "exact_lines": sum(p == r for p, r in zip(predictions, plain)),
        "decoding": decoding,
        "decode_seconds": seconds,
        "decode_lines_per_s": len(plain) / max(seconds, 1e-9),
        "exact_by_line": "".join("1" if p == r else "0" for p, r in zip(predictions, plain)),
        "right_chars_by_line": right,
        "examples": [{"reference": r, "prediction": p} for p, r in list(zip(predictions, plain))[:3]],
    }


def make_record(config: Config, *, name: str | None = None, fit: dict, log: list[dict], sets: dict[str, dict],
                device="cpu", **fields) -> dict:
    """A record of one trained model (fields as the module docstring lists them).

    ``fit``: ``epochs``, ``best_epoch``, ``best_val_loss``, ``best_val_accuracy``, ``stopped`` and
    ``params``; ``log``: the rows of its ``log.jsonl``; ``sets``: ``{name: set_metrics(...)}``;
    ``device``: where it trained (None where that is not known).
    ``fields`` fills the rest (``command``, ``overrides``, ``wall_seconds``, ``peak_memory_bytes``,
    ``parts``, ``export`` ...); a key outside the layout is refused. The seconds and training tokens
    per second are read off the log.
    """
    train_seconds = sum(row["seconds"] for row in log) if log else None
    record = {
        "schema": SCHEMA,
        "name": name or config.name,
        "config": config.name,
        "preset": config.preset,
        "components": config.components(),
        "source_mode": config.source_mode,
        "recipe": config.recipe,
        "recipe_caveats": recipe_caveats(config),  # what of the recipe this tokenization cannot take
        "seed": config.seed,
        "command": None,
        "overrides": {},
        **{key: fit.get(key) for key in ("epochs", "best_epoch", "best_val_loss", "best_val_accuracy", "stopped",
                                          "params")},
        "seconds_per_epoch": train_seconds / len(log) if log else None,
        "train_seconds": train_seconds,  # optimiser steps and validation, over every epoch of every --resume
        "wall_seconds": None,
        "train_tokens_per_s": (sum(row["train_tokens"] for row in log) / train_seconds
                               if train_seconds and all("train_tokens" in row for row in log) else None),
        "peak_memory_bytes": None,
        "device": None if device is None else str(device),
        "device_name": None if device is None else device_name(device),
        "versions": versions(),
        "git_commit": git_commit(),
        "log": log,
        "sets": sets,
        "hyperparameters": config.to_dict(),
    }
    unknown = set(fields) - set(RECORD_FIELDS) - {"parts", "export", "tokens", "curve", "updates"}
    if unknown:
        raise ValueError(f"make_record: {', '.join(sorted(unknown))} is no field of a record ({SCHEMA})")
    record.update(fields)
    return record


def check_record(record, path: str | os.PathLike) -> dict:
    """``record`` when it is a record of this layout; else ValueError naming ``path`` and what is wrong."""
    if not isinstance(record, dict):
        raise ValueError(f"{path}: holds a JSON {type(record).__name__}, not a run record (a JSON object); "
                         "move it out of the folder")
    if record.get("schema") != SCHEMA:
        raise ValueError(_schema_problem(record, path))
    missing = [key for key in RECORD_FIELDS if key not in record]
    if missing:
        raise ValueError(f"{path}: missing field(s) {', '.join(missing)}; write the record again with cipherlab")
    if not isinstance(record["sets"], dict) or not record["sets"]:
        raise ValueError(f"{path}: 'sets' holds no decrypted set; evaluate the model again")
    for name, scored in record["sets"].items():
        lacking = [key for key in SET_FIELDS if key not in (scored if isinstance(scored, dict) else {})]
        if lacking:
            raise ValueError(f"{path}: set {name} lacks {', '.join(lacking)}; evaluate the model again")
        outcomes = scored.get("exact_by_line")
        if outcomes is not None and (not isinstance(outcomes, str) or len(outcomes) != scored["lines"]
                                     or set(outcomes) - {"0", "1"}):
            raise ValueError(f"{path}: sets.{name}.exact_by_line is not one 0/1 per line of its {scored['lines']} "
                             "lines; evaluate the model again")
        _check_totals(scored, f"{path}: sets.{name}")
    if not isinstance(record["log"], list):
        raise ValueError(f"{path}: 'log' is not the list of the run's epochs; write the record again")
    if not isinstance(record["hyperparameters"], dict):
        raise ValueError(f"{path}: 'hyperparameters' is not the run's configuration; write the record again")
    missing = lacking_fields(record["hyperparameters"])
    if missing:
        raise ValueError(older(path, f"its hyperparameters have no {', '.join(missing)}"))
    return record


def _schema_problem(record: dict, path) -> str:
    """What to do with a record not of this layout: convert an older one, upgrade cipherlab for a newer one."""
    schema = record.get("schema")
    if "schema" not in record and any(isinstance(record.get(key), dict) for key in ("hyperparameters", "test",
                                                                                    "brown_test")):  # its layouts
        return older(path, f"no schema field, not a {SCHEMA} record")
    prefix, _, version = str(schema).rpartition("/")
    if prefix == SCHEMA.rpartition("/")[0] and version.isdigit() and int(version) > int(SCHEMA.rpartition("/")[2]):
        return (f"{path}: schema {schema!r}, written by a newer cipherlab than this one (which reads {SCHEMA}); "
                "update cipherlab (git pull, or pip install -U) to read it, or move it out of the folder")
    found = f"schema {schema!r}" if "schema" in record else "no schema field"
    return f"{path}: {found}, not a {SCHEMA} record; move it out of the folder"


def _check_totals(scored: dict, where: str) -> None:
    """Refuse a set whose per-line outcomes (``exact_by_line``) contradict its totals (``exact_lines``,
    ``sequence_accuracy``): one of them was changed by hand or torn, and a table would print the wrong one."""
    lines, exact, outcomes = scored.get("lines"), scored.get("exact_lines"), scored.get("exact_by_line")
    if isinstance(outcomes, str) and isinstance(exact, int) and outcomes.count("1") != exact:
        raise ValueError(f"{where}: exact_by_line marks {outcomes.count('1')} exact lines but exact_lines says "
                         f"{exact}; one was changed after evaluation: evaluate the model again")
    accuracy = scored.get("sequence_accuracy")
    if (isinstance(exact, int) and isinstance(lines, int) and lines > 0 and isinstance(accuracy, (int, float))
            and abs(accuracy - exact / lines) > 1e-9):
        raise ValueError(f"{where}: sequence_accuracy is {accuracy} but exact_lines says {exact} of {lines} lines "
                         f"({exact / lines}); one was changed after evaluation: evaluate the model again")


def read_record(path: str | os.PathLike) -> dict:
    """The record in ``path``, checked (:func:`check_record`); ValueError naming the file when it is not one."""
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8-sig"))  # -sig: an editor's BOM
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}); restore the "
                         "file from git or write it again with cipherlab") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text; a run record is a JSON file written by cipherlab") from None
    return check_record(record, path)
