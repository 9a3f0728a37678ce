"""Convert files written by an older cipherlab into today's layout; cipherlab refuses such a file with one line
that names this script.

    python tools/convert_older.py FILE ...   # model exports (.safetensors), checkpoints (.pt), run records (.json)

An older file lacks configuration fields (their values were then the defaults below, :data:`OLD_DEFAULTS`, not
today's), or the checksum over the whole model, or, for a run record, the one record layout
(:mod:`cipherlab.runner.record`: the train layout kept its test set under ``test`` and its log beside it as
``<config>.log.jsonl``; the probe layout each set at the top, the test lines as ``brown_test``). The conversion
writes every field as the file meant it, today's checksums and that layout; it computes nothing it cannot read
off the file, copies the weights bit for bit, checks the file it wrote with cipherlab's own reader and replaces
each file atomically. A file already in today's layout is left as it is.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from cipherlab.base.config import config_from_dict  # noqa: E402
from cipherlab.base.files import write_atomic  # noqa: E402
from cipherlab.pipeline.checkpoint import (CHECKPOINT_FORMAT, payload_sha256, payload_tensors,  # noqa: E402
                                           save_checkpoint, tensors_sha256)
from cipherlab.runner.integrity import EXPORT_FORMAT, export_sha256, load_checkpoint, read_export  # noqa: E402
from cipherlab.runner.record import RECORD_FIELDS, SCHEMA, check_record  # noqa: E402

# What a configuration stored before Config's defaults became make_config("c1")'s meant by a field it lacks: the
# dataclass defaults until then (the assignment's sizes, the course notes' BPE over bits and their recipe), and no
# onset check (onset_step and onset_accuracy came later). Never change it: it is what those files meant.
OLD_DEFAULTS = {
    "name": "c1", "preset": "assignment",
    "pos_encoding": "sinusoidal", "rope_cross_attention": True, "attn_type": "mha", "norm": "layernorm",
    "tokenization": "bpe",
    "d_model": 256, "n_heads": 8, "n_kv_heads": 2, "enc_layers": 4, "dec_layers": 4, "ffn_dim": 1024, "dropout": 0.1,
    "blt_local_layers": 1, "blt_window": 128, "blt_patch_tgt": 4, "blt_max_patch": 12, "blt_entropy_percentile": 75.0,
    "blt_source_memory": "bytes",
    "source_mode": "bits", "src_vocab": 1024, "tgt_vocab": 8000, "target_tokens": "bpe", "merges_on": "lines",
    "bpe_dropout": 0.0, "chunk_chars": 256, "max_train_lines": None, "max_eval_lines": None,
    "phase_shuffle": 0.0, "case_flip": 0.0, "substitution": 0.0, "source_eos": False, "bit_embeddings": False,
    "phase_embedding": False,
    "lr": 3e-4, "betas": (0.9, 0.98), "weight_decay": 0.01, "token_budget": 8192, "max_batch_size": 64,
    "label_smoothing": 0.1, "warmup_steps": 1000, "grad_clip": 1.0, "max_epochs": 100, "patience": 10,
    "select_on": "val_loss", "augment_val": False, "time_budget_s": None, "eval_every": None,
    "onset_step": None, "onset_accuracy": 0.25, "seed": 0,
}
BY = "tools/convert_older.py"
PROBE_SETS = {"random_strings": "random_letters", "random_alphabet": "random_alphabet", "stdlib": "stdlib",
              "stdlib_upper": "stdlib_upper", "stdlib_long": "stdlib_long", "brown_test": "test",
              "brown_test_free": "test_free"}
EXTRAS = ("parts", "export", "tokens", "curve", "updates")


def full_config(stored: dict) -> dict:
    """Every field of ``stored`` (a configuration as a file kept it), a field it lacks as the file meant it."""
    return json.loads(json.dumps(config_from_dict({**OLD_DEFAULTS, **stored}).to_dict()))


def convert_export(path: Path) -> bool:
    with safe_open(str(path), framework="pt", device="cpu") as f:
        metadata, tensors = dict(f.metadata() or {}), {key: f.get_tensor(key) for key in f.keys()}
    if metadata.get("format") != EXPORT_FORMAT:
        raise ValueError(f"not a cipherlab model export (format {metadata.get('format')!r})")
    digest = tensors_sha256(tensors)
    whole = export_sha256({key: value for key, value in metadata.items() if key != "model_sha256"}, digest)
    if metadata.get("sha256", digest) != digest or metadata.get("model_sha256", whole) != whole:
        raise ValueError("it does not match its checksums: the file is damaged; copy or export it again")
    config = full_config(json.loads(metadata["config"]))
    if "model_sha256" in metadata and json.loads(metadata["config"]) == config:
        return False
    metadata.update(config=json.dumps(config), sha256=digest)
    metadata["model_sha256"] = export_sha256({k: v for k, v in metadata.items() if k != "model_sha256"}, digest)
    write_atomic(path, lambda tmp: save_file(tensors, str(tmp), metadata=metadata))
    read_export(path)
    return True


def convert_checkpoint(path: Path) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        payload = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"not a cipherlab checkpoint (format {CHECKPOINT_FORMAT!r})")
    stored, whole = payload.pop("sha256", None), payload.pop("model_sha256", None)
    digest = tensors_sha256(payload_tensors(payload))
    if stored not in (None, digest) or whole not in (None, payload_sha256(payload, digest)):
        raise ValueError("it does not match its checksums: the file is damaged; copy it again")
    config = full_config(payload["config"])
    if whole is not None and payload["config"] == config:
        return False
    save_checkpoint(path, {**payload, "config": config})  # atomic; it adds both checksums
    load_checkpoint(path)
    return True


def _record_layout(record: dict, path: Path) -> tuple[dict, str | None]:
    """``record`` in the one layout, and what was converted (None: it was in it)."""
    if "schema" in record:
        return record, None
    config = config_from_dict({**OLD_DEFAULTS, **record["hyperparameters"]})
    if isinstance(record.get("test"), dict) and "components" in record:  # the train layout
        sidecar = path.with_name(f"{path.stem}.log.jsonl")
        log = ([json.loads(line) for line in sidecar.read_text(encoding="utf-8").splitlines() if line.strip()]
               if sidecar.is_file() else [])
        test = {"char_accuracy": None, "decoding": "free greedy", **record["test"]}  # train records decoded freely
        test["exact_lines"] = round(test["sequence_accuracy"] * test["lines"])
        sets, note = {"test": test}, "train record" + (f" with {sidecar.name}" if log else "")
        extra = dict(name=record["config"], overrides=None, log=log,
                     train_seconds=sum(r["seconds"] for r in log) if log else None,
                     device_name=record.get("device_name") or record.get("device"),
                     versions=record.get("versions") or {"torch": record.get("torch_version")})
    elif isinstance(record.get("brown_test"), dict):  # the probe layout
        log, seconds = record.get("log") or [], record.get("train_seconds")
        sets, note = {new: record[old] for old, new in PROBE_SETS.items() if old in record}, "probe record"
        extra = dict(components=config.components(), source_mode=config.source_mode, log=log,
                     seconds_per_epoch=seconds / len(log) if log and seconds else None,
                     train_tokens_per_s=(sum(r["train_tokens"] for r in log) / seconds if log and seconds
                                         and all("train_tokens" in r for r in log) else None),
                     device=None, device_name=None, git_commit=None, peak_memory_bytes=None,
                     versions={k: record.get(k) for k in ("python", "torch", "numpy", "cipherlab", "threads")})
    elif all(key in record for key in RECORD_FIELDS if key != "schema"):
        return {"schema": SCHEMA, **record}, "schema field added"
    else:
        raise ValueError("not a run record of any layout cipherlab wrote (no schema, test or brown_test)")
    new = {key: record.get(key) for key in RECORD_FIELDS} | {
        "schema": SCHEMA, "recipe": record.get("recipe") or config.recipe, "seed": record.get("seed", config.seed),
        "recipe_caveats": record.get("recipe_caveats", []), "sets": sets, **extra}
    new = {key: new[key] for key in RECORD_FIELDS} | {key: record[key] for key in EXTRAS if key in record}
    return new, f"{note} -> {SCHEMA}"


def convert_record(path: Path) -> bool:
    record = json.loads(path.read_text(encoding="utf-8-sig"))
    if not isinstance(record, dict) or not isinstance(record.get("hyperparameters"), dict):
        raise ValueError("not a run record of any layout cipherlab wrote (it has no hyperparameters)")
    record, layout = _record_layout(record, path)
    hyper = full_config(record["hyperparameters"])
    notes = [layout] if layout else []
    if record["hyperparameters"] != hyper:
        notes.append("hyperparameters: every field, as the file meant it")
    if not notes:
        return False
    record["hyperparameters"] = hyper
    record["updates"] = [*record.get("updates", []), {"converted": "; ".join(notes), "by": BY}]
    check_record(record, path)
    write_atomic(path, json.dumps(record, indent=2) + "\n")
    if layout and layout.startswith("train record with"):
        path.with_name(f"{path.stem}.log.jsonl").unlink()
    return True


def convert(path: Path) -> bool:
    """Convert ``path`` in place; False when it was already in today's layout."""
    kind = {".safetensors": convert_export, ".pt": convert_checkpoint, ".json": convert_record}.get(path.suffix)
    if kind is None:
        raise ValueError("not a model export (.safetensors), a checkpoint (.pt) or a run record (.json)")
    return kind(path)


def main(argv: list[str] | None = None) -> int:
    paths = [Path(p) for p in (sys.argv[1:] if argv is None else argv)]
    if not paths:
        print("usage: python tools/convert_older.py FILE ... (model exports, checkpoints, run records)", file=sys.stderr)
        return 2
    for path in paths:
        try:
            print(f"{path}: {'converted' if convert(path) else 'already in the current layout'}")
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"{path}: cannot convert ({e})", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
