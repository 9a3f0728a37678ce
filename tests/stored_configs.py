"""The configurations stored under ``results/`` and what each leaves to the defaults (tests/test_config.py).

Every committed model file (``results/**/*.safetensors``, ``*.pt``) and results record (``results/**/*.json``
with ``"hyperparameters"``) stores a configuration; one written before a field existed lacks that field, and
:func:`cipherlab.base.config.config_from_dict` fills it in. ``stored_configs.json`` holds, for each, the fields
it lacks and the value each was given. It was written when ``Config()``'s defaults were still the course
notes' (before they became ``make_config("c1")``'s), so a file that loads otherwise now has changed meaning.

    PYTHONPATH=. python tests/stored_configs.py            # adds new files, drops removed ones
    PYTHONPATH=. python tests/stored_configs.py --rewrite  # also rewrites the entry of each file kept

Run it when a file under ``results/`` is added or removed: entries for files already there are kept as they
are, so the values they recorded before the defaults changed survive. ``--rewrite`` is only for a file that
was itself rewritten; a difference for a file that did not change is what the test is there to catch.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
SNAPSHOT = Path(__file__).with_name("stored_configs.json")


def stored_configurations() -> dict[str, dict]:
    """{place: stored configuration}: each model file by its path, each record by ``path:hyperparameters``."""
    from cipherlab.pipeline.checkpoint import read_payload

    found = {}
    for path in sorted([*RESULTS.rglob("*.safetensors"), *RESULTS.rglob("*.pt")]):
        found[path.relative_to(ROOT).as_posix()] = read_payload(path)["config"]
    for path in sorted(RESULTS.rglob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(record, dict) and isinstance(record.get("hyperparameters"), dict):
            found[f"{path.relative_to(ROOT).as_posix()}:hyperparameters"] = record["hyperparameters"]
    return found


def filled_in(stored: dict) -> dict:
    """The fields ``stored`` lacks, with the values :func:`config_from_dict` gives them (as JSON has them)."""
    from cipherlab.base.config import config_from_dict

    config = dataclasses.asdict(config_from_dict(stored))
    return json.loads(json.dumps({field: value for field, value in config.items() if field not in stored}))


def main(rewrite: bool = False) -> None:
    kept = {} if rewrite or not SNAPSHOT.exists() else json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    snapshot = {place: kept[place] if place in kept else filled_in(stored)
                for place, stored in stored_configurations().items()}
    SNAPSHOT.write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{SNAPSHOT}: {len(snapshot)} stored configurations, {sum(map(bool, snapshot.values()))} lacking fields")


if __name__ == "__main__":
    import sys

    main(rewrite="--rewrite" in sys.argv[1:])
