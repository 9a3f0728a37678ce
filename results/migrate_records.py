"""Convert run records of the two older layouts into the one record (cipherlab.pipeline.record).

    python results/migrate_records.py            # say what would change, write nothing
    python results/migrate_records.py --write    # convert every record under results/ in place
    python results/migrate_records.py --write results/notes/cpu/c1.json ...

Until this layout, ``train`` and ``ablate`` wrote one layout (the test metrics under ``test``, the
training log beside the record as ``<config>.log.jsonl``) and ``results/learn/probe.py`` another
(each decrypted set a top-level field, ``random_letters`` stored as ``random_strings``, the test lines
as ``brown_test`` and ``brown_test_free``, the versions at the top). The conversion moves fields and
renames them; it computes nothing it cannot read off the file:

- every set goes under ``sets``: ``test``/``brown_test`` -> ``sets.test``, ``brown_test_free`` ->
  ``sets.test_free``, ``random_strings`` -> ``sets.random_letters``, the other probe sets by name;
- a train record's test set gains ``exact_lines`` (its sequence accuracy times its lines, an integer)
  and ``decoding``: "free greedy", how every train record before the field was decoded (its bit
  accuracy equals ``test_free`` in ``errors.json``; ``tests/test_records.py`` checks it);
  ``char_accuracy`` was not measured and is None;
- a ``<config>.log.jsonl`` beside a train record becomes its ``log`` and is removed;
- a probe record's ``components`` and ``source_mode`` are read off its hyperparameters, its versions
  go under ``versions``, and ``seconds_per_epoch`` is its ``train_seconds`` over its epochs' log;
- what a layout did not record (a probe record's device, commit, peak memory) is None.

Each converted record lists the conversion under ``updates``. A record already in the layout is left
as it is, so running the script twice changes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cipherlab.base.config import config_from_dict  # noqa: E402
from cipherlab.pipeline.record import RECORD_FIELDS, SCHEMA, check_record  # noqa: E402

PROBE_SETS = {"random_strings": "random_letters", "random_alphabet": "random_alphabet", "stdlib": "stdlib",
              "stdlib_upper": "stdlib_upper", "stdlib_long": "stdlib_long", "brown_test": "test",
              "brown_test_free": "test_free"}
VERSIONS = ("python", "torch", "numpy", "cipherlab", "threads")
EXTRAS = ("parts", "export", "tokens", "curve", "updates")


def layout(record) -> str | None:
    """"record" (already converted), "train", "probe", or None for a file that is no run record."""
    if not isinstance(record, dict):
        return None
    if record.get("schema") == SCHEMA:
        return "record"
    if isinstance(record.get("test"), dict) and "components" in record:
        return "train"
    if isinstance(record.get("brown_test"), dict):
        return "probe"
    return None


def _read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _ordered(record: dict) -> dict:
    return {key: record.get(key) for key in RECORD_FIELDS} | {k: record[k] for k in EXTRAS if k in record}


def from_train(record: dict, log: list[dict]) -> dict:
    test = dict(record["test"])
    test["exact_lines"] = round(test["sequence_accuracy"] * test["lines"])
    test.setdefault("char_accuracy", None)
    test.setdefault("decoding", "free greedy")
    new = {key: record.get(key) for key in RECORD_FIELDS if key in record}
    new.update(
        schema=SCHEMA, name=record["config"], recipe=record.get("recipe") or record["hyperparameters"].get("recipe"),
        recipe_caveats=record.get("recipe_caveats", []), overrides=None, command=record.get("command"),
        best_val_accuracy=record.get("best_val_accuracy"), wall_seconds=record.get("wall_seconds"),
        train_seconds=sum(row["seconds"] for row in log) if log else None,
        device_name=record.get("device_name") or record.get("device"),
        versions=record.get("versions") or {"torch": record.get("torch_version")},
        log=log, sets={"test": test},
    )
    for key in EXTRAS:
        if key in record:
            new[key] = record[key]
    return _ordered(new)


def from_probe(record: dict) -> dict:
    config = config_from_dict(record["hyperparameters"])
    log = record.get("log") or []
    new = {key: record.get(key) for key in RECORD_FIELDS if key in record}
    new.update(
        schema=SCHEMA, components=config.components(), source_mode=config.source_mode,
        recipe=record.get("recipe") or config.recipe, recipe_caveats=record.get("recipe_caveats", []),
        seed=record.get("seed", config.seed), wall_seconds=record.get("wall_seconds"),
        best_val_accuracy=record.get("best_val_accuracy"),
        seconds_per_epoch=record["train_seconds"] / len(log) if log and record.get("train_seconds") else None,
        train_tokens_per_s=(sum(row["train_tokens"] for row in log) / record["train_seconds"]
                            if log and record.get("train_seconds") and all("train_tokens" in row for row in log)
                            else None),
        device=None, device_name=None, git_commit=None, peak_memory_bytes=None,
        versions={key: record.get(key) for key in VERSIONS}, log=log,
        sets={new_name: record[old] for old, new_name in PROBE_SETS.items() if old in record},
    )
    for key in EXTRAS:
        if key in record:
            new[key] = record[key]
    return _ordered(new)


def convert(path: Path) -> tuple[dict | None, list[Path]]:
    """The converted record of ``path`` and the files it absorbs; (None, []) when there is nothing to do."""
    record = json.loads(path.read_text(encoding="utf-8"))
    kind = layout(record)
    if kind in (None, "record"):
        return None, []
    if kind == "train":
        sidecar = path.with_name(f"{path.stem}.log.jsonl")
        log = _read_log(sidecar) if sidecar.is_file() else []
        new, absorbed = from_train(record, log), [sidecar] if sidecar.is_file() else []
        note = "train record" + (f" with {sidecar.name}" if absorbed else " (no log beside it: log is empty)")
    else:
        new, absorbed = from_probe(record), []
        note = "probe record" + ("" if record.get("log") else " (it kept no log: log is empty)")
    new.setdefault("updates", [])
    new["updates"] = [*new["updates"], {"converted": f"{note} -> {SCHEMA}", "by": "results/migrate_records.py"}]
    return check_record(new, path), absorbed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="records to convert (default: every *.json under results/)")
    parser.add_argument("--write", action="store_true", help="write the converted records (default: only say)")
    args = parser.parse_args(argv)
    files = args.files or sorted((ROOT / "results").rglob("*.json"))
    changed = 0
    for path in files:
        try:
            new, absorbed = convert(path)
        except (OSError, ValueError, KeyError) as e:
            print(f"{path}: cannot convert ({e})", file=sys.stderr)
            return 1
        if new is None:
            continue
        changed += 1
        print(f"{path}: {new['updates'][-1]['converted']}")
        if args.write:
            path.write_text(json.dumps(new, indent=2) + "\n", encoding="utf-8")
            for file in absorbed:
                file.unlink()
    print(f"{changed} record(s) {'converted' if args.write else 'to convert (pass --write)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
