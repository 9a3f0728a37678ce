"""The ablation's results, read back and compared (chapter 9: results and the ablation).

Training writes one record per configuration into ``results/<run>/`` (``cipherlab train`` and
``cipherlab ablate``; see :func:`cipherlab.evaluate.write_results`). This module reads them back and
turns them into tables, statistics and plots, for the book and for ``results/README.md`` alike. It
says nothing in words: chapter 9 prints what these functions return and states each finding itself,
with an ``assert`` beside it, so a changed result fails the chapter instead of rewriting its text.

- :func:`load_run`, :func:`load_curve`, :func:`load_beam`, :func:`load_generalisation`,
  :func:`load_errors`, :func:`load_calibration` read the committed files; a missing file is a
  FileNotFoundError naming it, a broken one a ValueError naming the file and what is wrong;
- :data:`REFERENCES` holds the figures others reported -- the course notes (seed 000) and the best
  public results -- each with where it comes from, ``None`` where nothing was stated;
- :func:`comparison_table` is the Markdown table of a run beside those figures;
  :func:`plot_accuracy`, :func:`plot_costs` and :func:`plot_curves` draw them;
- :func:`difference`, :func:`exact_lines_stderr`, :func:`exact_difference_stderr`,
  :func:`rate_difference_stderr` and :func:`single_change_rows` judge each change against C1 by
  exact lines and their binomial standard error; :func:`ablation_table`, :func:`budget_table` and
  :func:`equal_epochs_table` lay them out, at equal minutes and at equal epochs (:data:`EQUAL_EPOCHS_RUN`);
- :data:`TARGETS`, :func:`target_rows` and :func:`targets_table`: the goals of the reference run, met or
  not, for every model, decoded freely and length-aware;
- ``errors.json`` (``results/analysis.py``): :func:`decoding_table` compares free with length-aware
  decoding; :func:`profile_rows` finds where in a chunk and at which key phase the errors fall,
  :func:`edits`, :func:`edit_summary` and :func:`prior_favours` what they are, :func:`exact_by_length`
  how exact lines fall with length against independent errors;
- :func:`merge_curves`, :func:`plot_extended`, :func:`extended_table`, :func:`continued_from`,
  :func:`trained_on` and :func:`extension_table`: C2 and C5 trained on, and how, from their records and logs.

Every table is laid out by :func:`markdown_table`, the package's one table writer, which lives in
:mod:`cipherlab.tables` (so that :mod:`cipherlab.evaluate`, earlier in the flow, uses it too) and is
re-exported here. The attention maps of the committed models live in :mod:`cipherlab.attention_maps`.

Runs are named by their folder under ``results/`` (``"notes/cpu"``, ``"notes/cpu-bits"``, ``"notes/equal-epochs/cpu"``,
``"notes/extended/cpu"``); a path works too.
``$CIPHERLAB_RESULTS_DIR`` points the names at another results folder.
"""

from __future__ import annotations

import collections
import difflib
import html
import itertools
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cipherlab.checkpoint import read_log
from cipherlab.cipher import KEY
from cipherlab.config import CONFIG_NAMES, make_config
from cipherlab.tables import markdown_table

__all__ = [
    "ANALYSIS_RUNS",
    "BITS_RUN",
    "EQUAL_EPOCHS_RUN",
    "EXTENDED_RUN",
    "NOISE_SE",
    "PERIOD",
    "PRIMARY_RUN",
    "REFERENCES",
    "REFERENCE_FIELDS",
    "SEED_RANGES",
    "SPIKE_RATIO",
    "SPIKE_Z",
    "TARGETS",
    "Range",
    "Reference",
    "Target",
    "ablation_table",
    "beam_gains",
    "beam_table",
    "budget_table",
    "byte_aligned",
    "calibration_table",
    "change_from_c1",
    "char_kind",
    "common_epoch",
    "comparison_table",
    "continued_from",
    "context_counts",
    "decoding_gains",
    "decoding_rows",
    "decoding_table",
    "difference",
    "edit_summary",
    "edit_table",
    "edits",
    "entry_label",
    "epoch_seconds",
    "equal_epochs_table",
    "error_entry",
    "exact_by_length",
    "exact_difference_stderr",
    "exact_lines_stderr",
    "excess",
    "extended_table",
    "extension_table",
    "generalisation_table",
    "goals_table",
    "late_vs_early",
    "length_table",
    "lines_of",
    "load_beam",
    "load_calibration",
    "load_curve",
    "load_errors",
    "load_generalisation",
    "load_reference_runs",
    "load_run",
    "mcnemar",
    "loss_at_epoch",
    "markdown_table",
    "merge_curves",
    "metric",
    "mode_gains",
    "mode_table",
    "paired_rows",
    "paired_table",
    "plot_accuracy",
    "plot_costs",
    "plot_curves",
    "plot_error_profiles",
    "plot_extended",
    "position_counts",
    "prior_favours",
    "profile_rows",
    "profile_table",
    "provenance",
    "rate_difference_stderr",
    "reference",
    "results_dir",
    "run_label",
    "run_path",
    "single_change_rows",
    "target_rows",
    "targets_table",
    "tokenization",
]

RESULTS_ENV = "CIPHERLAB_RESULTS_DIR"
REPO_RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"
PRIMARY_RUN = "notes/cpu"  # the course notes recipe's reference run: C1-C4 read the cipher in bytes mode
BITS_RUN = "notes/cpu-bits"  # the same preset with the course notes' bits mode for C1-C4
EQUAL_EPOCHS_RUN = "notes/equal-epochs/cpu"  # every cpu run continued (--resume) to the same number of epochs
EXTENDED_RUN = "notes/extended/cpu"  # C2 and C5 trained on further (--resume): the committed models
PERIOD = len(KEY)  # the cipher's key length: characters 8 apart share a key byte
# results/analysis.py names each entry of errors.json after the runs/ folder it read ("cpu-long/c2")
ANALYSIS_RUNS = {PRIMARY_RUN: "cpu", BITS_RUN: "cpu-bits", EQUAL_EPOCHS_RUN: "cpu-5ep", EXTENDED_RUN: "cpu-long"}
# A difference of exact-line rates counts as one when it exceeds NOISE_SE binomial standard errors of the difference.
NOISE_SE = 2.0


# --------------------------------------------------------------------------- reading the files


def results_dir() -> Path:
    """The results folder: ``$CIPHERLAB_RESULTS_DIR``, else the repository's ``results/``."""
    return Path(os.environ.get(RESULTS_ENV) or REPO_RESULTS_DIR).expanduser()


def run_path(run: str | os.PathLike) -> Path:
    """The folder of a run: a name such as ``"cpu"`` or ``"notes/extended/cpu"`` lives in :func:`results_dir`;
    a ``Path``, an absolute path, or a relative one that exists only from the working directory, is a path."""
    if isinstance(run, str) and not Path(run).is_absolute():
        named = results_dir() / run
        if named.exists() or not Path(run).exists():
            return named
    return Path(run)


_REQUIRED = ("config", "source_mode", "components", "test", "params", "seconds_per_epoch", "epochs")
_REQUIRED_TEST = ("lines", "bit_accuracy", "sequence_accuracy", "levenshtein", "char_error_rate", "chrf")


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}); "
                         "restore the file from git or write it again with cipherlab") from None


def _read_record(path: Path, name: str) -> dict:
    record = _read_json(path)
    if not isinstance(record, dict):
        raise ValueError(f"{path}: expected a JSON object (one configuration's record), got {type(record).__name__}")
    missing = [k for k in _REQUIRED if k not in record]
    missing += [f"test.{k}" for k in _REQUIRED_TEST if k not in (record.get("test") or {})]
    if missing:
        raise ValueError(f"{path}: missing field(s) {', '.join(missing)}; it is not a record written by "
                         "cipherlab.evaluate.write_results")
    if record["config"] != name:
        raise ValueError(f"{path}: holds configuration {record['config']!r}, not {name!r}")
    return record


def load_run(folder: str | os.PathLike) -> dict[str, dict]:
    """Every ``c1.json`` ... ``c5.json`` of a run, as ``{"c1": record, ...}`` in configuration order.

    A configuration without a file is left out (``notes/cpu-bits`` has only C1-C4). Raises
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


# Did the models learn the cipher? The controlled ablation with phase shuffles, bit-factored
# and key-phase embeddings, two seeds (results/learn/ablation, written by results/learn/probe.py).
LEARN_RUN = "learn/ablation"
# Its goals for the cpu preset, at most 30 minutes of training per configuration:
# (record section, measure, at least, label). A goal is met when every seed meets it.
LEARN_GOALS = (
    ("random_strings", "char_accuracy", 0.999, "random strings: characters"),
    ("random_strings", "sequence_accuracy", 0.95, "random strings: exact"),
    ("stdlib", "bit_accuracy", 0.999, "stdlib (English outside Brown): bits"),
    ("stdlib", "sequence_accuracy", 0.90, "stdlib: exact lines"),
    ("brown_test_free", "bit_accuracy", 0.999, "Brown, all test lines, free decoding: bits"),
    ("brown_test_free", "sequence_accuracy", 0.95, "Brown, all test lines, free decoding: exact lines"),
)


def load_learn_runs(folder: str | os.PathLike = LEARN_RUN) -> dict[tuple[str, int], dict]:
    """The records ``[<prefix>-]<config>-seed<k>.json`` of a learn run, as ``{(config, seed): record}`` in order."""
    path = run_path(folder)
    files = sorted(path.glob("*c[1-5]*-seed*.json"))
    if not files:
        raise _missing(path / "c1-seed0.json", "python results/learn/probe.py, see results/learn/ablation/README.md")
    records = {}
    for file in files:
        record = _read_json(file)
        records[(record["config"], record["seed"])] = record
    return dict(sorted(records.items()))


def learn_goal_values(runs: dict[tuple[str, int], dict], goal: tuple) -> dict[str, list[float]]:
    """``{config: [value of seed 0, seed 1, ...]}`` of one of :data:`LEARN_GOALS`' measures."""
    section, measure = goal[0], goal[1]
    values: dict[str, list[float]] = {}
    for (config, _seed), record in runs.items():
        values.setdefault(config, []).append(record[section][measure])
    return values


LEARN_HEADERS = ("config", "seed", "epochs", "best epoch", "training minutes", "val token accuracy %",
                 "random strings: characters % / exact", "stdlib: bit % / exact", "Brown test, free: bit % / exact",
                 "Brown test, length-aware: bit % / exact")


def learn_row(record: dict) -> list[str]:
    """One run of a learn ablation as table cells (:data:`LEARN_HEADERS`)."""
    def pair(section: dict, key: str, digits: int) -> str:
        return f"{100 * section[key]:.{digits}f} / {section['exact_lines']} of {section['lines']}"

    return [record["config"].upper(), str(record["seed"]), str(record["epochs"]), str(record["best_epoch"]),
            f"{record['train_seconds'] / 60:.1f}", f"{100 * record['best_val_accuracy']:.3f}",
            pair(record["random_strings"], "char_accuracy", 2), pair(record["stdlib"], "bit_accuracy", 3),
            pair(record["brown_test_free"], "bit_accuracy", 3), pair(record["brown_test"], "bit_accuracy", 3)]


def learn_goal_row(runs: dict[tuple[str, int], dict], goal: tuple) -> list[str]:
    """One of :data:`LEARN_GOALS` against every configuration: each seed's value in percent, and
    whether every seed met it."""
    least, label = goal[2], goal[3]
    values = learn_goal_values(runs, goal)
    digits = 1 if goal[1] == "sequence_accuracy" else 3  # exact lines in tenths, characters and bits finer
    cells = [" / ".join(f"{100 * v:.{digits}f}" for v in values[name]) + (" (met)" if min(values[name]) >= least
                                                                    else " (not met)")
             if name in values else "not run" for name in CONFIG_NAMES]
    return [label, f"≥ {100 * least:.1f}", *cells]


def learn_tables(runs: dict[tuple[str, int], dict]) -> tuple[str, str]:
    """(every run, the goals) of a learn ablation as two Markdown tables."""
    seeds = " / ".join(f"seed {s}" for s in sorted({seed for _, seed in runs}))
    every = markdown_table(list(LEARN_HEADERS), [learn_row(r) for r in runs.values()])
    goals = markdown_table(["goal", "target %", *(f"{n.upper()}: {seeds}" for n in CONFIG_NAMES)],
                           [learn_goal_row(runs, goal) for goal in LEARN_GOALS])
    return every, goals


# The reference ablation: the default recipe, the cpu preset, two seeds (results/reference, written by
# results/learn/probe.py). Its goals: the limit is 100 % on any text. (record section, measure, at
# least, label); a goal is met when every seed meets it.
REFERENCE_RUN = "reference"
REFERENCE_GOALS = (
    ("random_letters", "char_accuracy", 0.9999, "random strings, letters and space: characters"),
    ("random_letters", "sequence_accuracy", 0.99, "random strings, letters and space: exact"),
    ("random_alphabet", "char_accuracy", 0.9999, "random strings, training alphabet: characters"),
    ("random_alphabet", "sequence_accuracy", 0.99, "random strings, training alphabet: exact"),
    ("stdlib", "char_accuracy", 0.9999, "docstring English: characters"),
    ("stdlib", "sequence_accuracy", 0.98, "docstring English: exact"),
    ("stdlib_upper", "char_accuracy", 0.9999, "the same in upper case: characters"),
    ("stdlib_upper", "sequence_accuracy", 0.98, "the same in upper case: exact"),
    ("stdlib_long", "char_accuracy", 0.9999, "2,600-character lines: characters"),
    ("stdlib_long", "sequence_accuracy", 0.98, "2,600-character lines: exact"),
    ("brown_test_free", "bit_accuracy", 0.9999, "Brown, all test lines, free decoding: bits"),
    ("brown_test_free", "sequence_accuracy", 0.99, "Brown, all test lines, free decoding: exact"),
)
# record sections: the probe records call the letters set "random_strings"
_SECTION = {"random_letters": "random_strings"}
REFERENCE_SETS = (("random_letters", "random letters"), ("random_alphabet", "random alphabet"),
                  ("stdlib", "docstrings"), ("stdlib_upper", "upper case"), ("stdlib_long", "long lines"),
                  ("brown_test_free", "Brown free"), ("brown_test", "Brown length-aware"))


def section(record: dict, name: str) -> dict:
    """One probe set of a learn or reference record (``random_letters`` is stored as ``random_strings``)."""
    return record[_SECTION.get(name, name)]


def reference_row(record: dict) -> list[str]:
    """One run of the reference ablation: epochs, minutes, then characters % / exact lines of every set."""
    cells = [record["config"].upper(), str(record["seed"]), str(record["epochs"]), str(record["best_epoch"]),
             f"{record['train_seconds'] / 60:.1f}"]
    for name, _label in REFERENCE_SETS:
        part = section(record, name)
        cells.append(f"{100 * part['char_accuracy']:.3f} / {part['exact_lines']} of {part['lines']}")
    return cells


def reference_tables(runs: dict[tuple[str, int], dict], goals: tuple = REFERENCE_GOALS) -> tuple[str, str]:
    """(every run, the goals) of the reference ablation as two Markdown tables."""
    headers = ["config", "seed", "epochs", "best epoch", "training minutes",
               *(f"{label}: characters % / exact" for _name, label in REFERENCE_SETS)]
    every = markdown_table(headers, [reference_row(r) for r in runs.values()])
    return every, goals_table(runs, goals)


def goals_table(runs: dict[tuple[str, int], dict], goals: tuple = REFERENCE_GOALS) -> str:
    """``goals`` (:data:`REFERENCE_GOALS` or some of them) against every configuration of a learn or
    reference ablation: each seed's value in percent, and whether every seed met it."""
    seeds = " / ".join(f"seed {s}" for s in sorted({seed for _, seed in runs}))
    rows = []
    for name, measure, least, label in goals:
        values: dict[str, list[float]] = {}
        for (config, _seed), record in runs.items():
            values.setdefault(config, []).append(section(record, name)[measure])
        cells = [" / ".join(f"{100 * v:.{2 if measure == 'sequence_accuracy' else 3}f}" for v in values[c])
                 + (" (met)" if min(values[c]) >= least else " (not met)") if c in values else "not run"
                 for c in CONFIG_NAMES]
        rows.append([label, f"≥ {100 * least:.2f}", *cells])
    return markdown_table(["goal", "target %", *(f"{n.upper()}: {seeds}" for n in CONFIG_NAMES)], rows)


def mcnemar(a: str, b: str) -> tuple[int, int, float]:
    """McNemar's exact test of two models scored on the same lines: ``a`` and ``b`` are per-line
    outcomes (``"1"`` exact, ``"0"`` not, as the records' ``exact_by_line``). Returns (lines only ``a``
    got right, lines only ``b`` got right, the two-sided p-value). Only the discordant lines carry
    information; under the null each is equally likely to go either way.

    >>> mcnemar("1110", "1000")
    (2, 0, 0.5)
    """
    if len(a) != len(b):
        raise ValueError(f"per-line outcomes of {len(a)} and {len(b)} lines: not the same lines")
    only_a = sum(x == "1" and y == "0" for x, y in zip(a, b))
    only_b = sum(x == "0" and y == "1" for x, y in zip(a, b))
    n, k = only_a + only_b, min(only_a, only_b)
    p = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n) if n else 1.0
    return only_a, only_b, p


def load_reference_runs(folder: str | os.PathLike = REFERENCE_RUN) -> dict[tuple[str, int], dict]:
    """The reference ablation (``results/reference``) as ``{(config, seed): record}``: every set's
    per-line outcomes are in ``exact_by_line``."""
    return load_learn_runs(folder)


def paired_rows(runs: dict[tuple[str, int], dict], baseline: str = "c1",
                sets: tuple[str, ...] | None = None) -> list[dict]:
    """Each configuration against ``baseline`` with the same seed, on every probe set both scored line by
    line (``exact_by_line``; ``sets`` defaults to :data:`REFERENCE_SETS`): exact lines of both, the
    discordant lines and McNemar's exact p-value (:func:`mcnemar`). Sets a record lacks are skipped."""
    names = sets or tuple(name for name, _ in REFERENCE_SETS)
    labels = dict(REFERENCE_SETS)
    rows = []
    for (config, seed), record in runs.items():
        base = runs.get((baseline, seed))
        if config == baseline or base is None:
            continue
        for name in names:
            key = _SECTION.get(name, name)
            if key not in record or key not in base or "exact_by_line" not in record[key]:
                continue
            x, y = section(base, name), section(record, name)
            only_base, only_config, p = mcnemar(x["exact_by_line"], y["exact_by_line"])
            rows.append({"config": config, "seed": seed, "set": name, "label": labels.get(name, name),
                         "lines": x["lines"], "base_exact": x["exact_lines"], "exact": y["exact_lines"],
                         "only_base": only_base, "only_config": only_config, "p": p})
    return rows


def paired_table(rows: list[dict], baseline: str = "c1") -> str:
    """:func:`paired_rows` as one Markdown row per configuration and seed, one column per probe set:
    exact lines of the baseline -> the configuration, the discordant lines and the p-value."""
    sets = list(dict.fromkeys(row["label"] for row in rows))
    cells: dict[tuple[str, int], dict[str, str]] = {}
    for row in rows:
        cells.setdefault((row["config"], row["seed"]), {})[row["label"]] = (
            f"{row['base_exact']} → {row['exact']} of {row['lines']} "
            f"(+{row['only_config']} −{row['only_base']}, p = {row['p']:.2g})")
    body = [[config.upper(), str(seed), *(got.get(label, "–") for label in sets)]
            for (config, seed), got in sorted(cells.items())]
    return markdown_table(["config", "seed", *(f"{label}: {baseline.upper()} → config" for label in sets)], body)


def recipe_comparison(before: dict[tuple[str, int], dict], after: dict[tuple[str, int], dict],
                      sets: tuple = ("random_letters", "stdlib", "brown_test_free")) -> str:
    """Two learn ablations scored on the same lines, configuration by configuration and seed by seed:
    exact lines before -> after on each set, with McNemar's exact p-value of the paired outcomes."""
    labels = dict(REFERENCE_SETS)
    rows = []
    for key in sorted(set(before) & set(after)):
        cells = [key[0].upper(), str(key[1])]
        for name in sets:
            x, y = section(before[key], name), section(after[key], name)
            only_x, only_y, p = mcnemar(x["exact_by_line"], y["exact_by_line"])
            cells.append(f"{x['exact_lines']} → {y['exact_lines']} of {x['lines']} (+{only_y} −{only_x}, p = {p:.2g})")
        rows.append(cells)
    return markdown_table(["config", "seed", *(f"{labels[n]}: exact lines" for n in sets)], rows)


def _missing(path: Path, made_by: str) -> FileNotFoundError:
    return FileNotFoundError(f"{path}: no such file; it is part of the committed results, so restore it from git "
                             f"or make it again ({made_by})")


def load_curve(folder: str | os.PathLike, config: str) -> list[dict]:
    """The per-epoch training log ``<config>.log.jsonl`` of a run (oldest first).

    Each record has at least ``epoch``, ``train_loss``, ``val_loss``, ``seconds`` and ``tokens_per_s``.
    Raises FileNotFoundError naming the file when it is not there.
    """
    path = run_path(folder) / f"{config}.log.jsonl"
    if not path.is_file():
        raise _missing(path, "cipherlab train writes it beside the record")
    try:
        return read_log(path)
    except json.JSONDecodeError:  # read_log parses line by line; find the line to name it
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            try:
                json.loads(line or "null")
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: line {number} is not valid JSON ({e.msg})") from None
        raise


def _load_file(folder: str | os.PathLike, name: str, made_by: str) -> dict:
    """A JSON object file of a run; FileNotFoundError naming it when absent, ValueError when not an object."""
    path = run_path(folder) / name
    if not path.is_file():
        raise _missing(path, made_by)
    data = _read_json(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object keyed by configuration, got {type(data).__name__}")
    return data


_MADE_BY = {"beam.json": "python results/extras.py", "generalisation.json": "python results/extras.py",
            "errors.json": "python results/analysis.py"}


def _per_config(data: dict) -> dict:
    """The configuration entries of a file, in configuration order (its "about" entry left out)."""
    return {name: data[name] for name in CONFIG_NAMES if name in data}


def load_beam(folder: str | os.PathLike) -> dict:
    """``beam.json`` of a run as ``{"c2": {"greedy": metrics, "beam4": metrics}, ...}``.

    Only the configuration entries; :func:`provenance` reads the file's "about" entry.
    """
    return _per_config(_load_file(folder, "beam.json", _MADE_BY["beam.json"]))


def load_generalisation(folder: str | os.PathLike) -> dict:
    """``generalisation.json`` of a run as ``{"c2": metrics, "c5": metrics}`` (out-of-corpus lines)."""
    return _per_config(_load_file(folder, "generalisation.json", _MADE_BY["generalisation.json"]))


def provenance(folder: str | os.PathLike, name: str) -> str:
    """How a file of a run was made: the command and commit its "about" entry records ("not recorded" if none)."""
    about = _load_file(folder, name, _MADE_BY.get(name, "see results/README.md")).get("about") or {}
    if not about:
        return "not recorded"
    return f"{about.get('command', '?')} (commit {str(about.get('git_commit') or about.get('commit') or '?')[:12]})"


def load_calibration() -> dict:
    """``results/calibration/calibration.json``, the short validation runs that chose the ``cpu`` preset."""
    path = results_dir() / "calibration" / "calibration.json"
    if not path.is_file():
        raise _missing(path, "results/calibration/calibrate.py")
    data = _read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        raise ValueError(f"{path}: expected an object with a list of runs under \"runs\"")
    return data


def metric(record: dict, key: str) -> float | None:
    """A test metric of a record (``"bit_accuracy"``, ``"bleu"``, ...); None where it is not comparable.

    Also reads a bare metrics dict such as one entry of ``beam.json``.
    """
    test = record.get("test", record)
    if key in (test.get("not_comparable") or {}):
        return None
    return test.get(key)


def change_from_c1(record: dict) -> str:
    """What a configuration changes from C1, e.g. ``"pos_encoding=rope"`` (``"baseline"`` for C1)."""
    baseline = make_config("c1").components()
    changed = [f"{k}={v}" for k, v in record["components"].items() if baseline.get(k) != v]
    return ", ".join(changed) or "baseline"


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


# --------------------------------------------------------------------------- what others reported


@dataclass(frozen=True)
class Reference:
    """A figure someone else reported: its value, the document (``source``) and the places in it."""

    value: float
    source: str
    where: str = ""  # e.g. "§7.2 Q7, §7.4 Q6"

    def __str__(self) -> str:
        return f"{self.source} {self.where}".strip()


REFERENCE_FIELDS = ("bit_accuracy", "exact_lines", "params", "peak_memory_gb", "train_time_vs_c1")
_SEED = "seed 000 (the course notes)"
_PUBLIC = ("the best public whole-line results for this assignment, one team's, on the official "
           "letters-and-spaces data, whole test lines, on a GPU at the assignment's sizes, 40 epochs "
           "(129 minutes for C1)")


def _figures(**given: Reference) -> dict[str, Reference | None]:
    return {field: given.get(field) for field in REFERENCE_FIELDS}


def _seed(value: float, where: str) -> Reference:
    return Reference(value, _SEED, where)


# The course notes print no results table (§6 only describes one); these are all the figures
# their viva answers quote. Fractions, not percentages; params as counts; memory in GB as printed.
REFERENCES: dict[str, dict] = {
    "seed": {
        "label": "course notes",
        "source": _SEED,
        "configs": {
            "c1": _figures(bit_accuracy=_seed(0.712, "§7.2 Q7, §7.4 Q6"), exact_lines=_seed(0.004, "§7.9 Q3"),
                           params=_seed(9.68e6, "§7.2 Q2"), peak_memory_gb=_seed(3.00, "§7.2 Q4, §7.4 Q6")),
            "c2": _figures(),  # §7.3 Q8 and §7.9 Q2 say only that C2 beat C1, "by a huge margin"
            "c3": _figures(bit_accuracy=_seed(0.704, "§7.2 Q7"), params=_seed(8.89e6, "§7.2 Q2, §7.9 Q6"),
                           peak_memory_gb=_seed(2.99, "§7.2 Q4")),
            "c4": _figures(bit_accuracy=_seed(0.707, "§7.4 Q6"), peak_memory_gb=_seed(2.85, "§7.4 Q6")),
            # §7.9 Q3 also says C5 "roughly quadruples training time" compared with C1
            "c5": _figures(bit_accuracy=_seed(0.97, "§7.9 Q3"), exact_lines=_seed(0.36, "§7.9 Q3"),
                           train_time_vs_c1=_seed(4.0, "§7.9 Q3")),
        },
    },
    "public": {
        "label": "best public",
        "source": _PUBLIC,
        "configs": {
            name: _figures(bit_accuracy=Reference(bit, _PUBLIC), exact_lines=Reference(exact, _PUBLIC))
            for name, bit, exact in [("c1", 0.9996, 0.972), ("c2", 0.966, 0.737), ("c3", 0.9969, 0.893),
                                     ("c4", 0.9981, 0.962), ("c5", 0.9999, 0.934)]
        },
    },
}


@dataclass(frozen=True)
class Range:
    """A claim about several configurations at once: ``low <= value <= high`` (None: unbounded)."""

    low: float | None
    high: float | None
    configs: tuple[str, ...]
    source: str


# Claims the course notes make about C1-C4 together, without per-configuration figures.
SEED_RANGES = {
    "exact_lines": Range(0.0, 0.05, ("c1", "c2", "c3", "c4"), f"{_SEED} §7.8 Q3 (\"0-5%\")"),
    "bleu": Range(60.0, None, ("c1", "c2", "c3", "c4"), f"{_SEED} §7.8 Q3 (\"BLEU is 60+\")"),
}


def reference(kind: str, config: str, field: str) -> float | None:
    """The value of a reported figure (``kind`` "seed" or "public"), or None where none was stated."""
    if kind not in REFERENCES:
        raise KeyError(f"unknown reference {kind!r}; choose one of {sorted(REFERENCES)}")
    if field not in REFERENCE_FIELDS:
        raise KeyError(f"unknown reference field {field!r}; choose one of {REFERENCE_FIELDS}")
    figure = REFERENCES[kind]["configs"].get(config, {}).get(field)
    return None if figure is None else figure.value


# --------------------------------------------------------------------------- comparing configurations


def difference(records: dict[str, dict], config: str, key: str, baseline: str = "c1") -> float | None:
    """``metric(config) - metric(baseline)``; None when either is missing or not comparable."""
    if config not in records or baseline not in records:
        return None
    a, b = metric(records[config], key), metric(records[baseline], key)
    return None if a is None or b is None else a - b


def exact_lines_stderr(record: dict) -> float:
    """Binomial standard error of the exact-line rate over the test lines, sqrt(p (1 - p) / n).

    ``record`` is a configuration's record or a bare metrics dict with ``lines`` (an entry of
    ``beam.json``). This is only the uncertainty of *sampling the test lines*: it says nothing about
    how much another training seed would change the model, which is usually larger.
    """
    test = record.get("test", record)
    p, n = metric(test, "sequence_accuracy"), test["lines"]
    return math.sqrt(p * (1 - p) / n) if n else math.nan


def rate_difference_stderr(a: dict, b: dict) -> float:
    """Binomial standard error of the difference of two exact-line rates (records or metrics dicts),
    taken as independent samples: sqrt(se_a^2 + se_b^2)."""
    return math.hypot(exact_lines_stderr(a), exact_lines_stderr(b))


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _num(value, fmt: str, missing: str = "–") -> str:
    return missing if value is None else format(value, fmt)


def _pct2(value: float | None) -> str:
    """A percentage to two decimals, for accuracies near 100 % (one target is 99.9 %)."""
    return "–" if value is None else f"{100 * value:.2f}"


def _ref(kind: str, config: str, field: str) -> str:
    """A reported figure as percent: bit accuracies with two decimals (the best public ones sit near 100)."""
    value = reference(kind, config, field)
    return _pct2(value) if field == "bit_accuracy" else _pct(value)


def comparison_table(run_folder: str | os.PathLike, bits_folder: str | os.PathLike | None = None) -> str:
    """A Markdown table of one run beside the course notes' and the best public figures.

    Per configuration: bit accuracy and exact lines (percent), mean Levenshtein distance per line,
    BLEU, chrF, ROUGE-L, parameters, peak memory (MiB), seconds per epoch and training tokens per
    second of ``run_folder``; the bits-mode bit accuracy and exact lines of ``bits_folder`` when
    given; then the reported figures. Reads only the files, so the README and the book agree.
    """
    records = load_run(run_folder)
    bits = load_run(bits_folder) if bits_folder is not None else {}
    headers = ["config", "change from C1", "bit acc %", "exact lines %", "Levenshtein", "BLEU", "chrF",
               "ROUGE-L", "params", "peak MiB", "s/epoch", "train tok/s"]
    if bits:
        headers += ["bits mode: bit acc %", "bits mode: exact %"]
    headers += ["notes: bit acc %", "notes: exact %", "best public: bit acc %", "best public: exact %"]
    rows = []
    for name, r in records.items():
        peak = r.get("peak_memory_bytes")
        row = [name.upper(), change_from_c1(r), _pct2(metric(r, "bit_accuracy")), _pct(metric(r, "sequence_accuracy")),
               _num(metric(r, "levenshtein"), ".1f"), _num(metric(r, "bleu"), ".1f", "n/c"),
               _num(metric(r, "chrf"), ".1f"), _num(metric(r, "rougeL"), ".3f", "n/c"), f"{r['params']:,}",
               _num(peak and peak / 2**20, ".0f"), _num(r["seconds_per_epoch"], ".1f"),
               _num(r.get("train_tokens_per_s"), ".0f")]
        if bits:
            b = bits.get(name)
            row += [_pct2(b and metric(b, "bit_accuracy")), _pct(b and metric(b, "sequence_accuracy"))]
        row += [_ref("seed", name, "bit_accuracy"), _ref("seed", name, "exact_lines"),
                _ref("public", name, "bit_accuracy"), _ref("public", name, "exact_lines")]
        rows.append(row)
    first = next(iter(records.values()))
    lines = [
        markdown_table(headers, rows),
        "",
        f"Run `{run_path(run_folder).name}`: preset `{first.get('preset', '?')}`, C1-C4 source mode "
        f"`{_source_modes(records)}`, "
        f"{first['test']['lines']} test lines, greedy decoding, device {first.get('device', '?')}. "
        "Exact lines = sequence accuracy (whole lines right). Levenshtein: mean character edits per line. "
        "n/c: not comparable (BLEU and ROUGE are reported for the tokenised C1-C4 only). "
        "Training tokens are each configuration's own target units (BPE pieces for C1-C4, bytes for C5). "
        "Peak memory: CUDA max_memory_allocated on a GPU, the process's peak resident set size on a CPU.",
        "",
        f"Reported figures: \"notes\" = {_SEED}, the figures quoted in its viva answers "
        f"({_seed_sections()}; it gives none for C2); \"best public\" = {_PUBLIC}. Those runs used "
        "other sizes and budgets: compare the pattern across configurations more than the level.",
    ]
    if bits:
        lines[-3] += f" Bits mode: run `{run_path(bits_folder).name}`, the course notes' BPE over cipher bits."
    return "\n".join(lines) + "\n"


def _seed_sections() -> str:
    """The places in the course notes that the seed figures come from: "§7.2 Q2, §7.2 Q4, ..."."""
    places = {place for figures in REFERENCES["seed"]["configs"].values() for figure in figures.values()
              if figure is not None for place in figure.where.split(", ")}
    return ", ".join(sorted(places))


def _source_modes(records: dict[str, dict]) -> str:
    """How the run's C1-C4 read the cipher: "bits", "bytes" ("-" for a run without them)."""
    return "/".join(sorted({r["source_mode"] for r in records.values()
                            if r["components"]["tokenization"] == "bpe"})) or "-"


def mode_gains(records: dict[str, dict], bits_records: dict[str, dict], key: str = "bit_accuracy") -> dict[str, float]:
    """Per configuration of the bits run: ``metric(primary) - metric(bits run)`` (bytes minus bits)."""
    return {name: metric(records[name], key) - metric(b, key) for name, b in bits_records.items() if name in records}


def mode_table(records: dict[str, dict], bits_records: dict[str, dict]) -> str:
    """Bit accuracy, exact lines (percent) and epochs trained of C1-C4 with each source mode, side by side."""
    rows = [[name.upper(), _pct2(metric(records[name], "bit_accuracy")), _pct2(metric(b, "bit_accuracy")),
             _pct(metric(records[name], "sequence_accuracy")), _pct(metric(b, "sequence_accuracy")),
             records[name]["epochs"], b["epochs"]]
            for name, b in bits_records.items() if name in records]
    mine, theirs = _source_modes(records), _source_modes(bits_records)
    return markdown_table(["config", f"bit acc %: {mine}", theirs, f"exact lines %: {mine}", theirs,
                           f"epochs: {mine}", theirs], rows)


def beam_gains(beam: dict, key: str = "sequence_accuracy") -> dict[str, float | None]:
    """Per configuration of ``beam.json``: beam minus greedy; None where there is no beam row."""
    gains = {}
    for name, entry in beam.items():
        widths = [k for k in entry if k.startswith("beam")]
        gains[name] = (metric(entry[widths[0]], key) - metric(entry["greedy"], key)
                       if widths and "greedy" in entry else None)
    return gains


def beam_table(beam: dict) -> str:
    """Every decoding of every configuration in ``beam.json``: bit accuracy, exact lines, Levenshtein, chrF."""
    rows = [[name.upper(), decoding, m.get("lines", "?"), _pct2(metric(m, "bit_accuracy")),
             _pct(metric(m, "sequence_accuracy")), _num(metric(m, "levenshtein"), ".1f"), _num(metric(m, "chrf"), ".1f")]
            for name, entry in beam.items() for decoding, m in entry.items()]
    return markdown_table(["config", "decoding", "lines", "bit acc %", "exact lines %", "Levenshtein", "chrF"], rows)


def generalisation_table(records: dict[str, dict], general: dict) -> str:
    """The Brown test lines against the out-of-corpus lines, per configuration of ``generalisation.json``.

    ``records`` must be the run of the models that decoded the docstrings (for the committed models,
    :data:`EXTENDED_RUN`); a configuration it lacks gets an empty Brown row.
    """
    rows = []
    for name, out in general.items():
        brown = records[name]["test"] if name in records else {}
        for label, m in (("Brown test lines", brown), ("stdlib docstrings", out)):
            rows.append([name.upper(), label, m.get("lines", "?"), _pct2(metric(m, "bit_accuracy")),
                         _pct(metric(m, "sequence_accuracy")), _num(metric(m, "char_error_rate"), ".3f"),
                         _num(metric(m, "chrf"), ".1f")])
    return markdown_table(["config", "text", "lines", "bit acc %", "exact lines %", "CER", "chrF"], rows)


def calibration_table(calibration: dict) -> str:
    """The calibration runs: what each changed from the ``cpu`` preset, how far it got, its validation scores."""
    rows = []
    for run in calibration["runs"]:
        val = run.get("val60") or {}
        changes = ", ".join(f"{k}={v}" for k, v in (run.get("overrides") or {}).items()) or "-"
        rows.append([run["id"], run["config"].upper(), changes, len(run.get("epochs", [])),
                     _pct(val.get("bit_accuracy")), _pct(val.get("sequence_accuracy")),
                     _num(val.get("char_error_rate"), ".3f"), run.get("note", "")])
    return markdown_table(["run", "config", "settings", "epochs", "val bit acc %", "val exact %", "val CER",
                           "what it tests"], rows)


def exact_difference_stderr(records: dict[str, dict], config: str, baseline: str = "c1") -> float:
    """Binomial standard error of ``exact(config) - exact(baseline)``, the two rates taken as independent.

    Only the sampling of the test lines, and it ignores that both models were scored on the *same* lines,
    so it overstates that noise for a paired comparison (:func:`mcnemar` uses the pairing); a second
    training seed would move both rates too, which one seed per configuration cannot measure. For
    records without per-line outcomes it is the only yardstick there is.
    """
    return rate_difference_stderr(records[config], records[baseline])


def single_change_rows(records: dict[str, dict], baseline: str = "c1", k: float = NOISE_SE) -> list[dict]:
    """Each configuration against ``baseline``: the differences in bit accuracy and exact lines, the
    standard error of the exact-line difference, and ``reading``: ``"better"`` or ``"worse"`` when the
    exact-line difference exceeds ``k`` standard errors, else ``"within noise"``."""
    rows = []
    for name, r in records.items():
        if name == baseline or baseline not in records:
            continue
        d_exact, se = difference(records, name, "sequence_accuracy", baseline), exact_difference_stderr(records, name,
                                                                                                          baseline)
        reading = "within noise" if abs(d_exact) <= k * se else "better" if d_exact > 0 else "worse"
        rows.append({"config": name, "change": change_from_c1(r), "epochs": r["epochs"],
                     "baseline_epochs": records[baseline]["epochs"],
                     "bit": difference(records, name, "bit_accuracy", baseline), "exact": d_exact, "se": se,
                     "reading": reading})
    return rows


_READING = {"better": "better than C1", "worse": "worse than C1", "within noise": f"within {NOISE_SE:g} s.e."}


def ablation_table(records: dict[str, dict]) -> str:
    """Each of C2-C5 against C1: metric differences (points), twice the sampling error of the exact-line
    difference, what that makes of it (:func:`single_change_rows`), and the cost ratios."""
    c1 = records["c1"]
    rows = []
    for row in single_change_rows(records):
        r = records[row["config"]]
        rows.append([row["config"].upper(), row["change"], f"{100 * row['bit']:+.1f}", f"{100 * row['exact']:+.1f}",
                     f"{100 * NOISE_SE * row['se']:.1f}", _READING[row["reading"]],
                     f"{r['seconds_per_epoch'] / c1['seconds_per_epoch']:.2f}×", f"{r['params'] / c1['params']:.2f}×",
                     f"{r['epochs']} (C1 {c1['epochs']})"])
    return markdown_table(["config", "change", "bit acc, points vs C1", "exact lines, points",
                           f"{NOISE_SE:g} × sampling s.e.", "exact lines: reading", "s/epoch vs C1", "params vs C1",
                           "epochs"], rows)


def equal_epochs_table(controlled: dict[str, dict], equal: dict[str, dict]) -> str:
    """The ablation twice: within the time budget (``controlled``) and continued to equal epochs (``equal``).

    Per configuration: epochs, bit accuracy and exact lines of both runs, and at equal epochs the exact-line
    difference from C1 with twice its binomial standard error and the reading (:func:`single_change_rows`).
    """
    judged = {row["config"]: row for row in single_change_rows(equal)}
    rows = []
    for name, r in equal.items():
        before = controlled.get(name)
        row = judged.get(name)
        rows.append([name.upper(), change_from_c1(r), before["epochs"] if before else "–", r["epochs"],
                     _pct2(before and metric(before, "bit_accuracy")), _pct2(metric(r, "bit_accuracy")),
                     _pct(before and metric(before, "sequence_accuracy")), _pct(metric(r, "sequence_accuracy")),
                     f"{100 * row['exact']:+.1f}" if row else "–",
                     f"{100 * NOISE_SE * row['se']:.1f}" if row else "–",
                     _READING[row["reading"]] if row else "baseline" if name == "c1" else "no C1 to compare"])
    return markdown_table(["config", "change", "epochs: time budget", "equal epochs", "bit acc %: time budget",
                           "equal epochs", "exact lines %: time budget", "equal epochs",
                           "exact lines vs C1, points", f"{NOISE_SE:g} × s.e.", "reading"], rows)


# --------------------------------------------------------------------------- targets, and how far each model trained


@dataclass(frozen=True)
class Target:
    """A goal the reference run set itself: ``metric >= at_least`` on the whole test lines, greedy decoding."""

    configs: tuple[str, ...]
    key: str
    at_least: float
    label: str


# This repository's targets for the reference run (whole test lines, greedy decoding).
TARGETS = (
    Target(tuple(CONFIG_NAMES), "bit_accuracy", 0.99, "bit acc ≥ 99 %"),
    Target(("c2", "c5"), "bit_accuracy", 0.999, "bit acc ≥ 99.9 %"),
    Target(("c2", "c5"), "sequence_accuracy", 0.95, "exact lines ≥ 95 %"),
)


def load_errors(folder: str | os.PathLike = PRIMARY_RUN) -> dict:
    """``errors.json`` of a run (``results/analysis.py``) without its "about" entry.

    Keyed ``"<runs folder>/<config>"`` (see :data:`ANALYSIS_RUNS`), each value with ``test_free`` and
    ``test_length_aware`` (metrics of free and length-aware greedy decoding), ``lines``,
    ``lines_with_wrong_length``, ``char_error_by_chunk_position``, ``char_error_by_key_phase``,
    ``exact_lines_by_length``, ``exact_chunks`` and a few ``errors``.
    """
    data = _load_file(folder, "errors.json", _MADE_BY["errors.json"])
    return {key: entry for key, entry in data.items() if key != "about"}


def error_entry(errors: dict | None, run: str, config: str) -> dict | None:
    """The ``errors.json`` entry of one configuration of a run (``"cpu"``, ``"notes/extended/cpu"``); None when
    ``errors`` is None (no analysis given) or the analysis did not cover that model (notes/equal-epochs/cpu)."""
    return None if errors is None else errors.get(f"{ANALYSIS_RUNS.get(run, run)}/{config}")


def entry_label(key: str) -> str:
    """``"cpu-long/c2"`` -> ``"C2, notes/extended/cpu"``: an ``errors.json`` key named like the results folders."""
    folder, config = key.rsplit("/", 1)
    runs = {analysed: run for run, analysed in ANALYSIS_RUNS.items()}
    return f"{config.upper()}, {runs.get(folder, folder)}"


def target_rows(runs: dict[str, dict[str, dict]], errors: dict | None = None) -> list[dict]:
    """Every model of ``runs`` (``{"cpu": records, "notes/extended/cpu": records}``) under each decoding, with its targets.

    Decodings: ``"free"`` (the record's own test metrics) and ``"length-aware"`` (from ``errors``,
    where it has the model). Each row: config, run, epochs, decoding, metrics and ``checks``, a list
    of (Target, value, met).
    """
    rows = []
    for name in CONFIG_NAMES:
        for run, records in runs.items():
            if name not in records:
                continue
            decodings = [("free", records[name]["test"])]
            entry = error_entry(errors, run, name)
            if entry is not None:
                decodings.append(("length-aware", entry["test_length_aware"]))
            for decoding, metrics in decodings:
                checks = [(t, metric(metrics, t.key)) for t in TARGETS if name in t.configs]
                rows.append({"config": name, "run": run, "epochs": records[name]["epochs"], "decoding": decoding,
                             "metrics": metrics,
                             "checks": [(t, v, v is not None and v >= t.at_least) for t, v in checks]})
    return rows


def targets_table(rows: list[dict]) -> str:
    """:func:`target_rows` as a Markdown table: bit accuracy to two decimals, since one target is 99.9 %."""
    table = []
    for row in rows:
        met = [t.label for t, _, ok in row["checks"] if ok]
        missed = [t.label for t, _, ok in row["checks"] if not ok]
        verdict = "all met" if not missed else "missed: " + ", ".join(missed)
        table.append([row["config"].upper(), f"{row['run']}, {row['epochs']} epochs", row["decoding"],
                      _pct2(metric(row["metrics"], "bit_accuracy")),
                      _pct(metric(row["metrics"], "sequence_accuracy")), ", ".join(met) or "–", verdict])
    return markdown_table(["config", "model", "decoding", "bit acc %", "exact lines %", "targets met", "verdict"],
                          table)


def common_epoch(curves: dict[str, list[dict] | None]) -> int | None:
    """The last epoch that every configuration with a log reached (None without logs)."""
    reached = [log[-1]["epoch"] for log in curves.values() if log]
    return min(reached) if reached else None


def loss_at_epoch(curves: dict[str, list[dict] | None], epoch: int) -> dict[str, float]:
    """Validation loss of each configuration after ``epoch`` epochs (those whose log has that epoch)."""
    return {name: r["val_loss"] for name, log in curves.items() if log for r in log if r["epoch"] == epoch}


def epoch_seconds(log: list[dict]) -> tuple[float, float]:
    """(fastest, slowest) training seconds of one run's epochs."""
    seconds = [r["seconds"] for r in log]
    return min(seconds), max(seconds)


def budget_table(records: dict[str, dict], curves: dict[str, list[dict] | None]) -> str:
    """How far each configuration trained in its time budget, beside what it reached.

    Epochs, seconds per epoch (mean, and the fastest and slowest epoch), the validation loss after
    every epoch (so configurations can be compared at equal epochs), and the test accuracies.
    """
    last = max((log[-1]["epoch"] for log in curves.values() if log), default=0)
    rows = []
    for name, r in records.items():
        log = curves.get(name)
        losses = {e["epoch"]: e["val_loss"] for e in log or []}
        spread = "{:.0f}–{:.0f}".format(*epoch_seconds(log)) if log else "–"
        rows.append([name.upper(), r["epochs"], _num(r["seconds_per_epoch"], ".0f"), spread]
                    + [_num(losses.get(epoch), ".4f") for epoch in range(1, last + 1)]
                    + [_pct2(metric(r, "bit_accuracy")), _pct(metric(r, "sequence_accuracy"))])
    return markdown_table(["config", "epochs", "s/epoch", "fastest–slowest epoch, s"]
                          + [f"val loss, epoch {epoch}" for epoch in range(1, last + 1)]
                          + ["bit acc %", "exact lines %"], rows)


def merge_curves(controlled: list[dict] | None, extended: list[dict] | None) -> list[dict]:
    """One curve from a controlled run's log and the log of the run that resumed it.

    A resumed run's log holds every epoch, the controlled ones too; where it holds only the new ones,
    the controlled epochs come first. The extended log wins where both have an epoch.
    """
    by_epoch = {r["epoch"]: r for r in (controlled or [])}
    by_epoch |= {r["epoch"]: r for r in (extended or [])}
    return [by_epoch[e] for e in sorted(by_epoch)]


def plot_extended(curves: dict[str, tuple[list[dict] | None, list[dict] | None]]):
    """Validation loss per epoch of each extended configuration, ``{name: (controlled log, extended log)}``:
    the controlled epochs solid, the epochs trained on dashed, a dotted line where the controlled run stopped."""
    fig, axes = _figure(1, width=6.4, height=3.6)
    ax = axes[0]
    for i, (name, (controlled, extended)) in enumerate(curves.items()):
        merged = merge_curves(controlled, extended)
        if not merged:
            continue
        color = f"C{i}"
        stop = controlled[-1]["epoch"] if controlled else 0
        first = [r for r in merged if r["epoch"] <= stop]
        later = [r for r in merged if r["epoch"] >= stop]
        if first:
            ax.plot([r["epoch"] for r in first], [r["val_loss"] for r in first], marker="o", color=color,
                    label=f"{name.upper()}, controlled run")
        if len(later) > 1 or not first:
            ax.plot([r["epoch"] for r in later], [r["val_loss"] for r in later], marker=".", ls="--", color=color,
                    label=f"{name.upper()}, trained on")
        if stop:
            ax.axvline(stop, color=color, lw=0.8, ls=":")
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation loss (nats per target unit)")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    return fig


def extended_table(stages: dict[str, dict[str, dict]], errors: dict | None = None) -> str:
    """Each configuration of the last stage through every stage (``{"cpu": records, ...,
    "notes/extended/cpu": records}``, oldest first): epochs, best validation loss, and the test metrics with free
    and (from ``errors``) length-aware greedy decoding."""
    last = list(stages.values())[-1]
    rows = []
    for name in last:
        for run, records in stages.items():
            if name not in records:
                continue
            r = records[name]
            aware = (error_entry(errors, run, name) or {}).get("test_length_aware")
            rows.append([name.upper(), run, r["epochs"], _num(r.get("best_val_loss"), ".4f"),
                         _pct2(metric(r, "bit_accuracy")), _pct(metric(r, "sequence_accuracy")),
                         _pct2(aware and metric(aware, "bit_accuracy")),
                         _pct(aware and metric(aware, "sequence_accuracy"))])
    return markdown_table(["config", "run", "epochs", "best val loss", "bit acc %", "exact lines %",
                           "length-aware: bit acc %", "length-aware: exact %"], rows)


def continued_from(log: list[dict] | None, earlier: dict[str, list[dict] | None]) -> str | None:
    """Which of the ``earlier`` runs' logs (``{run: log}``) the resumed ``log`` continues: the one with the
    most epochs whose every epoch ``log`` repeats (same epoch, same validation loss). None if none does."""
    if not log:
        return None
    mine = {r["epoch"]: r["val_loss"] for r in log}
    found = [(len(other), run) for run, other in earlier.items()
             if other and all(mine.get(r["epoch"]) == r["val_loss"] for r in other) and len(log) > len(other)]
    return max(found)[1] if found else None


def trained_on(stages: dict[str, dict[str, dict]], extended: dict[str, dict],
               extended_run: str | os.PathLike = EXTENDED_RUN) -> dict[str, dict]:
    """For each configuration of the runs trained on further: which of the earlier ``stages`` (``{run:
    records}``) it continued (``source``, by :func:`continued_from` on their logs; None if no log matches),
    that run's record (``before``) and log (``earlier_log``), and its own log (``log``)."""
    out = {}
    for name in extended:
        log = load_curve(extended_run, name)
        earlier = {run: load_curve(run, name) for run, records in stages.items() if name in records}
        source = continued_from(log, earlier)
        out[name] = {"source": source, "before": stages[source][name] if source else None,
                     "earlier_log": earlier.get(source), "log": log}
    return out


def extension_table(history: dict[str, dict], extended: dict[str, dict]) -> str:
    """How each run of :func:`trained_on` was trained on, from its record: the run it continued, epochs
    before and after, its time budget and epoch limit, what stopped it, and its best epoch."""
    rows = []
    for name, h in history.items():
        r = extended[name]
        hp = r.get("hyperparameters") or {}
        budget = hp.get("time_budget_s")
        rows.append([name.upper(), f"results/{h['source']}" if h["source"] else "no committed log matches",
                     h["before"]["epochs"] if h["before"] else "–", r["epochs"],
                     f"{budget:.0f}" if budget else "none", _num(hp.get("max_epochs"), "d"), r.get("stopped", "?"),
                     r.get("best_epoch", "?")])
    return markdown_table(["config", "continued", "epochs before", "epochs after", "time budget, s", "max_epochs",
                           "stopped by", "best epoch"], rows)


# --------------------------------------------------------------------------- free or length-aware decoding


def decoding_rows(errors: dict) -> list[dict]:
    """Per ``errors.json`` entry: its label, free and length-aware metrics, and the free lines of the wrong length."""
    return [{"key": key, "label": entry_label(key), "free": e["test_free"], "aware": e["test_length_aware"],
             "lines": e["lines"], "wrong_length": e["lines_with_wrong_length"]} for key, e in errors.items()]


def decoding_table(errors: dict) -> str:
    """Free against length-aware greedy decoding for every model ``errors.json`` analysed."""
    rows = [[r["label"], f"{r['wrong_length']} of {r['lines']}",
             _pct2(metric(r["free"], "bit_accuracy")), _pct2(metric(r["aware"], "bit_accuracy")),
             _pct(metric(r["free"], "sequence_accuracy")), _pct(metric(r["aware"], "sequence_accuracy")),
             _num(metric(r["free"], "char_error_rate"), ".4f"), _num(metric(r["aware"], "char_error_rate"), ".4f")]
            for r in decoding_rows(errors)]
    return markdown_table(["model", "free: lines of wrong length", "free: bit acc %", "length-aware: bit acc %",
                           "free: exact %", "length-aware: exact %", "free: CER", "length-aware: CER"], rows)


def decoding_gains(errors: dict, key: str = "bit_accuracy") -> dict[str, float]:
    """Per ``errors.json`` entry: length-aware minus free."""
    return {r["key"]: metric(r["aware"], key) - metric(r["free"], key) for r in decoding_rows(errors)}


# --------------------------------------------------------------------------- where the errors are

# A position stands out when its errors exceed the pooled rate by SPIKE_Z Poisson standard deviations AND
# its rate is SPIKE_RATIO times the model's mean: errors cluster within lines, so z alone overstates.
SPIKE_Z = 3.0
SPIKE_RATIO = 2.0


def lines_of(record: dict, split: str = "test", data_dir: str | os.PathLike | None = None) -> list[str]:
    """The plaintext lines of a split as a record's preset selects them; for ``"test"``, the first
    ``test.lines``, the lines its test metrics (and ``errors.json``) were computed on."""
    from cipherlab.config import config_from_dict
    from cipherlab.data import load_corpus
    from cipherlab.codec import select_lines

    config = config_from_dict(record["hyperparameters"])
    plain, _ = select_lines(load_corpus(data_dir), config).lines(split)
    return plain[: record["test"]["lines"]] if split == "test" else plain


def position_counts(lengths: Sequence[int], period: int) -> list[int]:
    """How many characters of lines of these lengths sit at each position modulo ``period``."""
    counts = [0] * period
    for n in lengths:
        for i in range(period):
            counts[i] += (n - i + period - 1) // period if n > i else 0
    return counts


def excess(rates: Sequence[float | None], seen: Sequence[float]) -> list[float | None]:
    """Per position: (observed - expected errors) / sqrt(expected), expected at the pooled error rate.

    ``rates`` are error rates per position, ``seen`` how many characters each rate was measured on.
    Counting noise alone makes this about a standard normal; :data:`SPIKE_Z` or more stands out.
    """
    pairs = [(r * s, s) for r, s in zip(rates, seen) if r is not None and s]
    pooled = sum(e for e, _ in pairs) / sum(s for _, s in pairs) if pairs else 0.0
    if pooled == 0:
        return [None if r is None else 0.0 for r in rates]
    return [None if r is None or not s else (r * s - pooled * s) / math.sqrt(pooled * s) for r, s in zip(rates, seen)]


def late_vs_early(rates: Sequence[float | None], seen: Sequence[float]) -> tuple[float | None, float]:
    """(error rate of a chunk's second half / its first half, z of the difference): exposure bias makes
    later positions of a chunk err more, since each step conditions on the model's own earlier outputs."""
    half = len(rates) // 2

    def pooled(part):
        pairs = [(r * s, s) for r, s in part if r is not None and s]
        return sum(e for e, _ in pairs), sum(s for _, s in pairs)

    (e1, n1), (e2, n2) = pooled(zip(rates[:half], seen[:half])), pooled(zip(rates[half:], seen[half:]))
    if not (n1 and n2) or e1 + e2 == 0:
        return None, 0.0
    p1, p2, p = e1 / n1, e2 / n2, (e1 + e2) / (n1 + n2)
    return (p2 / p1 if p1 else None), (p2 - p1) / math.sqrt(p * (1 - p) * (1 / n1 + 1 / n2))


def profile_rows(errors: dict, lengths: Sequence[int]) -> list[dict]:
    """Per ``errors.json`` entry: the error rate on the lines of the right length, the chunk position and
    key phase with the largest excess (:func:`excess`), and the second-half/first-half ratio of a chunk.

    ``lengths``: the test lines' lengths. The file gives rates, not counts, so the characters behind each
    rate are reconstructed from the lengths, scaled by the share of lines that came out the right length.
    """
    rows = []
    for key, e in errors.items():
        if e["lines"] != len(lengths):
            raise ValueError(f"errors.json entry {key} covers {e['lines']} lines, but {len(lengths)} lengths "
                             "were given; pass the lengths of the test lines it was scored on")
        share = 1 - e["lines_with_wrong_length"] / e["lines"]
        chunk, phase = e["char_error_by_chunk_position"], e["char_error_by_key_phase"]
        seen_chunk = [share * c for c in position_counts(lengths, len(chunk))]
        seen_phase = [share * c for c in position_counts(lengths, len(phase))]
        z_chunk, z_phase = excess(chunk, seen_chunk), excess(phase, seen_phase)
        ratio, z_trend = late_vs_early(chunk, seen_chunk)
        pairs = [(r * s, s) for r, s in zip(phase, seen_phase) if r is not None]
        worst_chunk = max(range(len(chunk)), key=lambda i: z_chunk[i] if z_chunk[i] is not None else -math.inf)
        worst_phase = max(range(len(phase)), key=lambda i: z_phase[i] if z_phase[i] is not None else -math.inf)
        rate = sum(x for x, _ in pairs) / sum(s for _, s in pairs) if pairs else None
        rows.append({"key": key, "label": entry_label(key), "rate": rate, "errors": round(sum(x for x, _ in pairs)),
                     "chunk_position": worst_chunk, "chunk_z": z_chunk[worst_chunk] or 0.0,
                     "chunk_ratio": (chunk[worst_chunk] or 0.0) / rate if rate else None,
                     "phase": worst_phase, "phase_z": z_phase[worst_phase] or 0.0,
                     "phase_ratio": (phase[worst_phase] or 0.0) / rate if rate else None,
                     "late_ratio": ratio, "late_z": z_trend})
    return rows


def profile_table(rows: list[dict]) -> str:
    """:func:`profile_rows` as a Markdown table."""
    table = [[r["label"], f"{r['errors']:,}", _pct2(r["rate"]),
              f"{r['chunk_position']}: {_num(r['chunk_ratio'], '.1f')}× (z = {r['chunk_z']:.1f})",
              f"{r['phase']}: {_num(r['phase_ratio'], '.1f')}× (z = {r['phase_z']:.1f})",
              f"{_num(r['late_ratio'], '.2f')} (z = {r['late_z']:+.1f})"] for r in rows]
    return markdown_table(["model", "wrong characters (about)", "error rate %", "worst chunk position: × mean",
                           "worst key phase: × mean", "second half / first half of a chunk"], table)


def plot_error_profiles(errors: dict, keys: Sequence[str] | None = None):
    """Error rate by chunk position and by key phase, relative to each model's mean (1 = its mean)."""
    fig, axes = _figure(2, width=5.0, height=3.2)
    for key in keys or list(errors):
        e = errors[key]
        for ax, values in zip(axes, (e["char_error_by_chunk_position"], e["char_error_by_key_phase"])):
            known = [v for v in values if v is not None]
            mean = sum(known) / len(known) if known else 0
            if mean:
                ax.plot(range(len(values)), [None if v is None else v / mean for v in values], marker=".",
                        label=entry_label(key))
    for ax, title in zip(axes, ("position in the 32-character chunk", "key phase (position mod 8)")):
        ax.axhline(1.0, color="grey", lw=0.6)
        ax.set_xlabel(title)
        ax.set_ylabel("error rate / the model's mean")
    axes[0].legend(fontsize=7, ncol=2)
    return fig


def edits(errors: dict, width: int = 12) -> list[dict]:
    """Every edit that turns a reference line of the ``errors.json`` examples into its prediction.

    The edits are difflib's opcodes between the two strings: ``"substitute"`` (some characters for
    others), ``"drop"`` (characters the prediction lacks) and ``"add"`` (characters it has in excess).
    Each edit is listed once per (line, position, predicted text), with every model that made it, its
    position in the line, the two texts, and the reference around it (``width`` characters each side).
    """
    found: dict[tuple, dict] = {}
    names = {"replace": "substitute", "delete": "drop", "insert": "add"}
    for key, e in errors.items():
        for example in e.get("errors", []):
            ref, pred = example["reference"], example["prediction"]
            matcher = difflib.SequenceMatcher(None, ref, pred, autojunk=False)
            for op, i1, i2, j1, j2 in matcher.get_opcodes():
                if op == "equal":
                    continue
                item = found.setdefault((example["line"], i1, pred[j1:j2]), {
                    "models": [], "line": example["line"], "index": i1, "end": i2, "op": names[op],
                    "reference": ref[i1:i2], "prediction": pred[j1:j2],
                    "before": ref[max(0, i1 - width):i1], "after": ref[i2:i2 + width]})
                item["models"].append(entry_label(key))
    return sorted(found.values(), key=lambda item: (item["line"], item["index"]))


def char_kind(c: str) -> str:
    """``"capital"``, ``"lowercase"``, ``"digit"``, ``"space"`` or ``"punctuation"``."""
    if c.isupper():
        return "capital"
    if c.islower():
        return "lowercase"
    if c.isdigit():
        return "digit"
    return "space" if c.isspace() else "punctuation"


def context_counts(lines: Sequence[str], order: int = 2) -> collections.Counter:
    """How often each string of ``order + 1`` characters occurs in ``lines`` (a character n-gram model)."""
    counts = collections.Counter()
    for line in lines:
        counts.update(line[i:i + order + 1] for i in range(len(line) - order))
    return counts


def prior_favours(item: dict, counts: collections.Counter, order: int = 2) -> str:
    """For a one-character substitution: which character the training text makes likelier after the
    ``order`` characters before it -- ``"prediction"``, ``"reference"`` or ``"neither"`` (equal counts)."""
    context = item["before"][-order:]
    pred, ref = counts[context + item["prediction"]], counts[context + item["reference"]]
    return "prediction" if pred > ref else "reference" if ref > pred else "neither"


def _single(item: dict) -> bool:
    return item["op"] == "substitute" and len(item["reference"]) == len(item["prediction"]) == 1


def _shown(text: str) -> str:
    """An edit's text for a table: ∅ where it is empty (a drop's prediction, an addition's reference)."""
    return text or "∅"


def edit_table(items: list[dict], train_lines: Sequence[str], order: int = 2, limit: int = 16) -> str:
    """The edits of :func:`edits`: where, which characters, how rare the right one is in the training
    text, and (one-character substitutions) which of the two the training text's n-grams favour."""
    counts, chars = context_counts(train_lines, order), collections.Counter("".join(train_lines))
    total = sum(chars.values())
    rows = []
    for item in items[:limit]:
        first = item["reference"][:1] or item["prediction"][:1]
        shown = (f"<code>…{html.escape(item['before'])}[{html.escape(_shown(item['reference']))}→"
                 f"{html.escape(_shown(item['prediction']))}]{html.escape(item['after'])}…</code>")
        rows.append([", ".join(item["models"]), item["line"], item["op"], shown.replace("|", "&#124;"),
                     f"{item['index'] % 32} / {item['index'] % PERIOD}", char_kind(first),
                     f"{10_000 * chars[first] / total:.1f}",
                     prior_favours(item, counts, order) if _single(item) else "–"])
    return markdown_table(["models", "test line", "edit", "reference [right→predicted]", "chunk pos. / key phase",
                           "first right character", "its training frequency per 10,000",
                           f"{order}-character context favours"], rows)


def edit_summary(items: list[dict], train_lines: Sequence[str], text_lines: Sequence[str], order: int = 2) -> dict:
    """Counts behind the reading of :func:`edits`: the kinds of the substituted characters, how rare they
    are in the training text against an ordinary character of ``text_lines``, what the n-gram prior
    favoured, and where the drops and additions sit (at a full stop, running to a chunk's end)."""
    counts, chars = context_counts(train_lines, order), collections.Counter("".join(train_lines))
    total = sum(chars.values())
    subs = [i for i in items if i["op"] == "substitute"]
    singles = [i for i in subs if _single(i)]
    lengths = [i for i in items if i["op"] != "substitute"]
    text = "".join(text_lines)

    def median(values):
        values = sorted(values)
        return values[len(values) // 2] if values else None

    return {
        "substitutions": len(subs),
        "kinds": collections.Counter(char_kind(i["reference"][0]) for i in subs),
        "right_frequency": median(10_000 * chars[i["reference"][0]] / total for i in subs),
        "text_frequency": median(10_000 * chars[c] / total for c in text),
        "single": len(singles),
        "prior": collections.Counter(prior_favours(i, counts, order) for i in singles),
        "length_edits": len(lengths),
        "at_full_stop": sum(i["before"][-1:] == "." if i["op"] == "drop" else i["prediction"][:1] == "."
                            for i in lengths),
        "drops": sum(i["op"] == "drop" for i in lengths),
        "to_chunk_end": sum(i["op"] == "drop" and i["end"] % 32 == 0 for i in lengths),
    }


def exact_by_length(entry: dict, lengths: Sequence[int]) -> list[dict]:
    """The entry's exact-line rate per length bin beside ``(1 - CER)^n`` averaged over the bin's lines:
    what independent character errors at the model's own (free) CER would leave exact."""
    p = 1 - metric(entry["test_free"], "char_error_rate")
    rows = []
    for b in entry["exact_lines_by_length"]:
        lo, hi = b["chars"]
        inside = [n for n in lengths if lo <= n < hi]
        if len(inside) != b["lines"]:
            raise ValueError(f"the bin {lo}-{hi} characters holds {b['lines']} lines in errors.json but "
                             f"{len(inside)} of the given lengths; pass the test lines it was scored on")
        rows.append({"chars": (lo, hi), "lines": b["lines"], "exact": b["exact"],
                     "independent": sum(p ** n for n in inside) / len(inside) if inside else None})
    return rows


def length_table(errors: dict, keys: Sequence[str], lengths: Sequence[int]) -> str:
    """Exact lines by line length for some models, measured and as independent errors would leave them."""
    columns = {key: exact_by_length(errors[key], lengths) for key in keys}
    first = next(iter(columns.values()))
    rows = []
    for i, b in enumerate(first):
        lo, hi = b["chars"]
        span = f"{lo}+" if hi >= 10**5 else f"{lo}–{hi - 1}"
        rows.append([span, b["lines"]] + [f"{_pct(col[i]['exact'])} ({_pct(col[i]['independent'])})"
                                          for col in columns.values()])
    return markdown_table(["line length, characters", "lines"]
                          + [f"{entry_label(k)}: exact % (independent %)" for k in keys], rows)


# --------------------------------------------------------------------------- plots


def _figure(ncols: int, width: float = 4.2, height: float = 3.4, nrows: int = 1):
    """A figure and its axes (flattened), already closed in pyplot: it is shown once, by whoever
    displays it (``display(fig)`` in a notebook, ``fig.savefig`` elsewhere), never twice."""
    import matplotlib.pyplot as plt  # importing pyplot lets Jupyter draw the returned Figure

    fig, axes = plt.subplots(nrows, ncols, squeeze=False, figsize=(width * ncols, height * nrows),
                             layout="constrained")
    plt.close(fig)
    return fig, axes.flatten()


def plot_accuracy(records: dict[str, dict], bits_records: dict[str, dict] | None = None):
    """Bars of bit accuracy and exact lines per configuration, the reported figures marked beside them."""
    names = list(records)
    fig, axes = _figure(2, width=5.2, height=3.6)
    panels = [("bit_accuracy", "bit_accuracy", "bit accuracy (%)"),
              ("sequence_accuracy", "exact_lines", "exact lines (%)")]
    width = 0.38 if bits_records else 0.6
    for ax, (key, field, title) in zip(axes, panels):
        x = range(len(names))
        shift = -width / 2 if bits_records else 0.0
        ax.bar([i + shift for i in x], [100 * (metric(records[n], key) or 0) for n in names], width,
               label=f"this run ({run_label(records)})", color="tab:blue")
        if bits_records:
            ax.bar([i + width / 2 for i in x],
                   [100 * (metric(bits_records[n], key) or 0) if n in bits_records else 0 for n in names],
                   width, label=f"bits mode ({run_label(bits_records)})", color="tab:cyan", hatch="//")
        for kind, marker, color in (("seed", "x", "black"), ("public", "*", "tab:red")):
            points = [(i, reference(kind, n, field)) for i, n in enumerate(names)]
            points = [(i, 100 * v) for i, v in points if v is not None]
            if points:
                ax.scatter(*zip(*points), marker=marker, s=70, color=color, zorder=3,
                           label=REFERENCES[kind]["label"])
        ax.set_xticks(list(x), [n.upper() for n in names])
        ax.set_ylim(0, 105)
        ax.set_title(title)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=8)
    return fig


def run_label(records: dict[str, dict]) -> str:
    """E.g. ``"cpu, bytes"``: the preset and the C1-C4 source mode of a run's records."""
    return f"{next(iter(records.values())).get('preset', '?')}, {_source_modes(records)}"


def plot_costs(records: dict[str, dict]):
    """Bars of parameters, peak memory and seconds per epoch per configuration."""
    names = list(records)
    fig, axes = _figure(3, width=3.4, height=3.0)
    panels = [("parameters (thousands)", lambda r: r["params"] / 1e3),
              ("peak memory (MiB)", lambda r: (r.get("peak_memory_bytes") or 0) / 2**20),
              ("seconds per epoch", lambda r: r["seconds_per_epoch"])]
    for ax, (title, read) in zip(axes, panels):
        ax.bar(range(len(names)), [read(records[n]) for n in names], color="tab:gray")
        ax.set_xticks(range(len(names)), [n.upper() for n in names])
        ax.set_title(title, fontsize=10)
    return fig


def plot_curves(curves: dict[str, list[dict] | None]):
    """Validation loss per epoch, and against cumulative training time, for each configuration with a log."""
    fig, (by_epoch, by_time) = _figure(2, width=4.8, height=3.4)
    for name, log in curves.items():
        if not log:
            continue
        epochs = [r["epoch"] for r in log]
        minutes = [m / 60 for m in itertools.accumulate(r["seconds"] for r in log)]
        by_epoch.plot(epochs, [r["val_loss"] for r in log], marker=".", label=name.upper())
        by_time.plot(minutes, [r["val_loss"] for r in log], marker=".", label=name.upper())
    by_epoch.set_xlabel("epoch")
    by_time.set_xlabel("training minutes (excluding validation)")
    for ax in (by_epoch, by_time):
        ax.set_ylabel("validation loss (nats per target unit)")
    by_epoch.legend(fontsize=8)
    return fig
