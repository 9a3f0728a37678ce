"""Where the results live, and reading them back.

Every run writes one record per model into ``results/<run>/`` (:mod:`cipherlab.runner.record`); this
module finds the run folders (``$CIPHERLAB_RESULTS_DIR`` points the names at
another results folder), and reads the records and side files back: a missing file is a FileNotFoundError
naming it, a broken one a ValueError naming the file and what is wrong. It also reads single facts off a record (a metric,
what it changes from C1, how it tokenised) and the plaintext lines a record was scored on.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cipherlab.runner.record import read_record
from cipherlab.base.config import CONFIG_NAMES
from cipherlab.base.config import change_from_c1 as components_change
from cipherlab.runner.errors import REPO_RESULTS_DIR

__all__ = [
    "REFERENCE_SETS",
    "REPO_RESULTS_DIR",
    "RESULTS_ENV",
    "byte_aligned",
    "change_from_c1",
    "entry_label",
    "error_entry",
    "lines_of",
    "load_beam",
    "load_calibration",
    "load_curve",
    "load_errors",
    "load_generalisation",
    "load_learn_runs",
    "load_recipe_runs",
    "load_run",
    "metric",
    "provenance",
    "results_dir",
    "run_path",
    "section",
    "tokenization",
]


RESULTS_ENV = "CIPHERLAB_RESULTS_DIR"

REFERENCE_SETS = (("random_letters", "random letters"), ("random_alphabet", "random alphabet"),
                  ("stdlib", "docstrings"), ("stdlib_upper", "upper case"), ("stdlib_long", "long lines"),
                  ("test_free", "Brown free"), ("test", "Brown length-aware"))


# --------------------------------------------------------------------------- reading the files


def results_dir() -> Path:
    """The results folder: ``$CIPHERLAB_RESULTS_DIR``, else the repository's ``results/``."""
    return Path(os.environ.get(RESULTS_ENV) or REPO_RESULTS_DIR).expanduser()


def run_path(run: str | os.PathLike) -> Path:
    """The folder of a run: a name such as ``"cpu"`` or ``"runs/cpu"`` lives in :func:`results_dir`;
    a ``Path``, an absolute path, or a relative one that exists only from the working directory, is a path."""
    if isinstance(run, str) and not Path(run).is_absolute():
        named = results_dir() / run
        if named.exists() or not Path(run).exists():
            return named
    return Path(run)


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))  # -sig: an editor's BOM
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}); "
                         "restore the file from git or write it again with cipherlab") from None


def _read_record(path: Path, name: str) -> dict:
    record = read_record(path)
    if record["config"] != name:
        raise ValueError(f"{path}: holds configuration {record['config']!r}, not {name!r}")
    return record


def load_run(folder: str | os.PathLike) -> dict[str, dict]:
    """Every ``c1.json`` ... ``c5.json`` of a run, as ``{"c1": record, ...}`` in configuration order.

    A configuration without a file is left out (a run of C1-C4 alone has four). Raises
    FileNotFoundError when the folder or all five files are missing, and ValueError naming the
    file for one that is not valid JSON or lacks a field of cipherlab's records.
    """
    path = run_path(folder)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such results folder; train it first "
                                "(python -m cipherlab ablate --preset cpu) or check the run name")
    records = {name: _read_record(path / f"{name}.json", name)
               for name in CONFIG_NAMES if (path / f"{name}.json").is_file()}
    if not records:
        raise FileNotFoundError(f"{path}: none of {', '.join(f'{n}.json' for n in CONFIG_NAMES)} is there")
    return records


def load_learn_runs(folder: str | os.PathLike) -> dict[tuple[str, int], dict]:
    """The records ``[<prefix>-]<config>-seed<k>.json`` of a learn run, as ``{(config, seed): record}`` in order."""
    path = run_path(folder)
    files = sorted(path.glob("*c[1-5]*-seed*.json"))
    if not files:
        raise _missing(path / "c1-seed0.json", "one run record per configuration and seed, <name>-c1-seed0.json ...")
    records = {}
    for file in files:
        record = read_record(file)
        records[(record["config"], record["seed"])] = record
    return dict(sorted(records.items()))


def load_recipe_runs(folders: dict[str, str | os.PathLike]) -> dict[str, dict[tuple[str, int], dict]]:
    """The runs of a recipe ablation, ``folders`` ``{part: its run folder}``, as ``{part: {(config, seed): record}}``
    in the order of ``folders``, for the parts whose folder holds records (a part not yet run is left out)."""
    runs = {}
    for part, folder in folders.items():
        if any(run_path(folder).glob("*c[1-5]*-seed*.json")):
            runs[part] = load_learn_runs(folder)
    return runs


def section(record: dict, name: str) -> dict:
    """One decrypted set of a record (``"test"``, ``"random_letters"``, ...: :mod:`cipherlab.runner.record`)."""
    return record["sets"][name]


def _missing(path: Path, what: str) -> FileNotFoundError:
    """The error for a missing file of a run, saying what the file holds (``what``)."""
    return FileNotFoundError(f"{path}: no such file ({what}); if it is part of the committed results, restore it "
                             "from git or make it again with the command that results/README.md names for it")


def load_curve(folder: str | os.PathLike, config: str) -> list[dict]:
    """The per-epoch training log of ``<config>.json`` of a run (its ``log``, oldest first).

    Each row has at least ``epoch``, ``train_loss``, ``val_loss``, ``seconds`` and ``tokens_per_s``.
    Raises FileNotFoundError naming the record when it is not there.
    """
    path = run_path(folder) / f"{config}.json"
    if not path.is_file():
        raise _missing(path, "a run record, as python -m cipherlab train writes it")
    return read_record(path)["log"]


def _load_file(folder: str | os.PathLike, name: str, what: str) -> dict:
    """A JSON object file of a run; FileNotFoundError naming it when absent, ValueError when not an object."""
    path = run_path(folder) / name
    if not path.is_file():
        raise _missing(path, what)
    data = _read_json(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object keyed by configuration, got {type(data).__name__}")
    return data


_HOLDS = {"beam.json": "the run's models decoded greedily and with beam search",
          "generalisation.json": "the run's models on lines from outside the corpus",
          "errors.json": "where the run's models go wrong, decoded freely and length-aware"}


def _per_config(data: dict) -> dict:
    """The configuration entries of a file, in configuration order (its "about" entry left out)."""
    return {name: data[name] for name in CONFIG_NAMES if name in data}


def load_beam(folder: str | os.PathLike) -> dict:
    """``beam.json`` of a run as ``{"c2": {"greedy": metrics, "beam4": metrics}, ...}``.

    Only the configuration entries; :func:`provenance` reads the file's "about" entry.
    """
    return _per_config(_load_file(folder, "beam.json", _HOLDS["beam.json"]))


def load_generalisation(folder: str | os.PathLike) -> dict:
    """``generalisation.json`` of a run as ``{"c2": metrics, "c5": metrics}`` (out-of-corpus lines)."""
    return _per_config(_load_file(folder, "generalisation.json", _HOLDS["generalisation.json"]))


def provenance(folder: str | os.PathLike, name: str) -> str:
    """How a file of a run was made: the command and commit its "about" entry records ("not recorded" if none)."""
    about = _load_file(folder, name, _HOLDS.get(name, "a file of the run")).get("about") or {}
    if not about:
        return "not recorded"
    return f"{about.get('command', '?')} (commit {str(about.get('git_commit') or about.get('commit') or '?')[:12]})"


def load_calibration() -> dict:
    """``results/calibration/calibration.json``, the short validation runs that chose the ``cpu`` preset."""
    path = results_dir() / "calibration" / "calibration.json"
    if not path.is_file():
        raise _missing(path, "the short validation runs that chose the cpu preset")
    data = _read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        raise ValueError(f"{path}: expected an object with a list of runs under \"runs\"")
    return data


def load_errors(folder: str | os.PathLike) -> dict:
    """``errors.json`` of a run (where its models go wrong, from their checkpoints) without its "about" entry.

    Keyed ``"<runs folder>/<config>"`` (the folder the analysis read, see :func:`error_entry`), each value
    with ``test_free`` and ``test_length_aware`` (metrics of free and length-aware greedy decoding), ``lines``,
    ``lines_with_wrong_length``, ``char_error_by_chunk_position``, ``char_error_by_key_phase``,
    ``exact_lines_by_length``, ``exact_chunks`` and a few ``errors``.
    """
    data = _load_file(folder, "errors.json", _HOLDS["errors.json"])
    return {key: entry for key, entry in data.items() if key != "about"}


def error_entry(errors: dict | None, run: str, config: str, *, names: dict[str, str] | None = None) -> dict | None:
    """The ``errors.json`` entry of one configuration of a run; ``names`` ``{run: the name errors.json gives
    it}`` for runs whose entries are named otherwise than the run (None: every run as errors.json names it).
    None when ``errors`` is None (no analysis given) or the analysis did not cover that model."""
    return None if errors is None else errors.get(f"{(names or {}).get(run, run)}/{config}")


def entry_label(key: str, *, names: dict[str, str] | None = None) -> str:
    """``"cpu/c2"`` -> ``"C2, <run>"``: an ``errors.json`` key named after the run that ``names`` (``{run: the
    name errors.json gives it}``, as for :func:`error_entry`) gives that name, else (and with ``names`` None)
    after the name itself."""
    folder, config = key.rsplit("/", 1)
    runs = {analysed: run for run, analysed in (names or {}).items()}
    return f"{config.upper()}, {runs.get(folder, folder)}"


# --------------------------------------------------------------------------- reading a record


def metric(record: dict, key: str) -> float | None:
    """A test metric of a record (``"bit_accuracy"``, ``"bleu"``, ...); None where it is not comparable.

    Also reads a bare metrics dict such as one entry of ``beam.json``.
    """
    test = record["sets"]["test"] if "sets" in record else record
    if key in (test.get("not_comparable") or {}):
        return None
    return test.get(key)


def change_from_c1(record: dict) -> str:
    """What a configuration changes from C1, e.g. ``"pos_encoding=rope"`` (``"baseline"`` for C1)."""
    return components_change(record["components"])


def tokenization(record: dict) -> str:
    """How a configuration read the cipher and wrote the plaintext, from its hyperparameters.

    E.g. ``"source: cipher bytes, no merges; target: characters"`` or
    ``"source: BPE over cipher bits, 512 tokens; target: BPE, 1,000 tokens"``.
    """
    hp = record["hyperparameters"]
    if hp["tokenization"] == "blt":
        return "source: cipher bytes in entropy patches; target: bytes (no tokenizer)"
    unit = "cipher bits" if hp["source_mode"] == "bits" else "cipher bytes"
    source = f"BPE over {unit}, {hp['src_vocab']:,} tokens" if hp.get("src_vocab") else f"{unit}, no merges"
    target = f"BPE, {hp['tgt_vocab']:,} tokens" if hp.get("tgt_vocab") else "characters"
    return f"source: {source}; target: {target}"


def byte_aligned(record: dict) -> bool:
    """True when a C1-C4 record read the cipher one whole byte per token (bytes mode, no merges)."""
    hp = record["hyperparameters"]
    return hp["tokenization"] == "bpe" and hp["source_mode"] == "bytes" and not hp.get("src_vocab")


def _source_modes(records: dict[str, dict]) -> str:
    """How the run's C1-C4 read the cipher: "bits", "bytes" ("-" for a run without them)."""
    return "/".join(sorted({r["source_mode"] for r in records.values()
                            if r["components"]["tokenization"] == "bpe"})) or "-"


def lines_of(record: dict, split: str = "test", data_dir: str | os.PathLike | None = None) -> list[str]:
    """The plaintext lines of a split as a record's preset selects them; for ``"test"``, the first
    ``test.lines``, the lines its test metrics (and ``errors.json``) were computed on."""
    from cipherlab.base.config import config_from_dict
    from cipherlab.data.corpus import load_corpus
    from cipherlab.pipeline.codec import select_lines

    config = config_from_dict(record["hyperparameters"])
    plain, _ = select_lines(load_corpus(data_dir), config).lines(split)
    return plain[: record["sets"]["test"]["lines"]] if split == "test" else plain
