"""The ablation's results, read back and compared (chapter 9: results and the ablation).

Training writes one record per configuration into ``results/<run>/`` (``cipherlab train`` and
``cipherlab ablate``; see :func:`cipherlab.evaluate.write_results`). This module reads them back and
puts them in context, for the book and for ``results/README.md`` alike:

- :func:`load_run`, :func:`load_curve`, :func:`load_beam`, :func:`load_generalisation` read the
  committed files; errors name the file and what is wrong with it;
- :data:`REFERENCES` holds the figures others reported -- the course notes (seed 000) and the best
  public results -- each with where it comes from, ``None`` where nothing was stated;
- :func:`comparison_table` is the Markdown table of a run beside those figures;
  :func:`plot_accuracy`, :func:`plot_costs` and :func:`plot_curves` draw them;
- :func:`difference` and :func:`exact_lines_stderr` support the "what did each change show" reading;
- :func:`load_committed_model` and :func:`attention_view` look inside the committed C2 and C5 models:
  their attention weights, mapped back from tokens or patches to characters so the two models can be
  compared on one grid, with :func:`band_mass` (the diagonal) and :func:`same_phase_share` (the
  cipher's period of 8) to measure what the pictures show.

Runs are named by their folder under ``results/`` (``"cpu"``, ``"cpu-bits"``); a path works too.
``$CIPHERLAB_RESULTS_DIR`` points the names at another results folder.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import torch

from cipherlab.cipher import KEY
from cipherlab.config import CONFIG_NAMES, Config, make_config
from cipherlab.train import read_log, teacher_forcing_logits

__all__ = [
    "BITS_RUN",
    "PERIOD",
    "PRIMARY_RUN",
    "REFERENCES",
    "REFERENCE_FIELDS",
    "SEED_RANGES",
    "AttentionView",
    "Range",
    "Reference",
    "ablation_table",
    "attention_summary",
    "attention_table",
    "attention_view",
    "band_mass",
    "beam_gains",
    "beam_table",
    "byte_aligned",
    "calibration_table",
    "change_from_c1",
    "committed_checkpoint",
    "comparison_table",
    "coverage",
    "difference",
    "exact_lines_stderr",
    "example_chunks",
    "generalisation_table",
    "load_beam",
    "load_calibration",
    "load_committed_model",
    "load_curve",
    "load_generalisation",
    "load_run",
    "markdown_table",
    "metric",
    "mode_gains",
    "mode_table",
    "offset_profile",
    "plot_accuracy",
    "plot_costs",
    "plot_curves",
    "plot_head",
    "plot_heads",
    "plot_offsets",
    "provenance",
    "reference",
    "results_dir",
    "run_label",
    "run_path",
    "same_phase_share",
    "to_characters",
    "tokenization",
    "uniform_same_phase_share",
]

RESULTS_ENV = "CIPHERLAB_RESULTS_DIR"
REPO_RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"
PRIMARY_RUN = "cpu"  # the committed reference run: C1-C4 read the cipher in bytes mode
BITS_RUN = "cpu-bits"  # the same preset with the course notes' bits mode for C1-C4
PERIOD = len(KEY)  # the cipher's key length: characters 8 apart share a key byte


# --------------------------------------------------------------------------- reading the files


def results_dir() -> Path:
    """The results folder: ``$CIPHERLAB_RESULTS_DIR``, else the repository's ``results/``."""
    return Path(os.environ.get(RESULTS_ENV) or REPO_RESULTS_DIR).expanduser()


def run_path(run: str | os.PathLike) -> Path:
    """The folder of a run: a bare name such as ``"cpu"`` lives in :func:`results_dir`; a path is a path."""
    if isinstance(run, str) and not any(sep in run for sep in ("/", os.sep)):
        return results_dir() / run
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

    A configuration without a file is left out (``cpu-bits`` has only C1-C4). Raises
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


def load_curve(folder: str | os.PathLike, config: str) -> list[dict] | None:
    """The per-epoch training log ``<config>.log.jsonl`` of a run (oldest first), or None when absent.

    Each record has at least ``epoch``, ``train_loss``, ``val_loss``, ``seconds`` and ``tokens_per_s``.
    """
    path = run_path(folder) / f"{config}.log.jsonl"
    if not path.is_file():
        return None
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


def _load_optional(folder: str | os.PathLike, name: str) -> dict | None:
    path = run_path(folder) / name
    if not path.is_file():
        return None
    data = _read_json(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object keyed by configuration, got {type(data).__name__}")
    return data


def _per_config(data: dict | None) -> dict | None:
    """The configuration entries of a file, in configuration order (its "about" entry left out)."""
    return None if data is None else {name: data[name] for name in CONFIG_NAMES if name in data}


def load_beam(folder: str | os.PathLike) -> dict | None:
    """``beam.json`` of a run as ``{"c2": {"greedy": metrics, "beam4": metrics}, ...}``, or None when absent.

    Only the configuration entries; :func:`provenance` reads the file's "about" entry.
    """
    return _per_config(_load_optional(folder, "beam.json"))


def load_generalisation(folder: str | os.PathLike) -> dict | None:
    """``generalisation.json`` of a run as ``{"c2": metrics, "c5": metrics}`` (out-of-corpus lines), or None."""
    return _per_config(_load_optional(folder, "generalisation.json"))


def provenance(folder: str | os.PathLike, name: str) -> str:
    """How a file of a run was made: the command and commit its "about" entry records (or "not recorded")."""
    about = (_load_optional(folder, name) or {}).get("about") or {}
    if not about:
        return "not recorded"
    return f"{about.get('command', '?')} (commit {str(about.get('git_commit') or about.get('commit') or '?')[:12]})"


def load_calibration() -> dict | None:
    """``results/calibration/calibration.json``, the short validation runs that chose the ``cpu`` preset."""
    path = results_dir() / "calibration" / "calibration.json"
    if not path.is_file():
        return None
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
_PUBLIC = "issue #9: the best public results for this assignment"


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
            for name, bit, exact in [("c1", 0.927, 0.52), ("c2", 0.955, 0.59), ("c3", 0.921, 0.50),
                                     ("c4", 0.928, 0.55), ("c5", 1.0, 0.93)]
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

    This is only the uncertainty of *sampling the test lines*: it says nothing about how much
    another training seed would change the model, which is usually larger.
    """
    p, n = metric(record, "sequence_accuracy"), record["test"]["lines"]
    return math.sqrt(p * (1 - p) / n) if n else math.nan


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _num(value, fmt: str, missing: str = "–") -> str:
    return missing if value is None else format(value, fmt)


def _ref(kind: str, config: str, field: str) -> str:
    return _pct(reference(kind, config, field))


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
        row = [name.upper(), change_from_c1(r), _pct(metric(r, "bit_accuracy")), _pct(metric(r, "sequence_accuracy")),
               _num(metric(r, "levenshtein"), ".1f"), _num(metric(r, "bleu"), ".1f", "n/c"),
               _num(metric(r, "chrf"), ".1f"), _num(metric(r, "rougeL"), ".3f", "n/c"), f"{r['params']:,}",
               _num(peak and peak / 2**20, ".0f"), _num(r["seconds_per_epoch"], ".1f"),
               _num(r.get("train_tokens_per_s"), ".0f")]
        if bits:
            b = bits.get(name)
            row += [_pct(b and metric(b, "bit_accuracy")), _pct(b and metric(b, "sequence_accuracy"))]
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


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence]) -> str:
    """A Markdown table from a header row and rows of cells (already formatted)."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return "\n".join([*lines, *("| " + " | ".join(str(c) for c in row) + " |" for row in rows)])


def mode_gains(records: dict[str, dict], bits_records: dict[str, dict], key: str = "bit_accuracy") -> dict[str, float]:
    """Per configuration of the bits run: ``metric(primary) - metric(bits run)`` (bytes minus bits)."""
    return {name: metric(records[name], key) - metric(b, key) for name, b in bits_records.items() if name in records}


def mode_table(records: dict[str, dict], bits_records: dict[str, dict]) -> str:
    """Bit accuracy and exact lines of C1-C4 with each source mode, side by side (percent)."""
    rows = [[name.upper(), _pct(metric(records[name], "bit_accuracy")), _pct(metric(b, "bit_accuracy")),
             _pct(metric(records[name], "sequence_accuracy")), _pct(metric(b, "sequence_accuracy"))]
            for name, b in bits_records.items() if name in records]
    mine, theirs = _source_modes(records), _source_modes(bits_records)
    return markdown_table(["config", f"bit acc %: {mine}", theirs, f"exact lines %: {mine}", theirs], rows)


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
    rows = [[name.upper(), decoding, m.get("lines", "?"), _pct(metric(m, "bit_accuracy")),
             _pct(metric(m, "sequence_accuracy")), _num(metric(m, "levenshtein"), ".1f"), _num(metric(m, "chrf"), ".1f")]
            for name, entry in beam.items() for decoding, m in entry.items()]
    return markdown_table(["config", "decoding", "lines", "bit acc %", "exact lines %", "Levenshtein", "chrF"], rows)


def generalisation_table(records: dict[str, dict], general: dict) -> str:
    """The Brown test lines against the out-of-corpus lines, per configuration of ``generalisation.json``."""
    rows = []
    for name, out in general.items():
        for label, m in (("Brown test lines", records[name]["test"]), ("stdlib docstrings", out)):
            rows.append([name.upper(), label, m.get("lines", "?"), _pct(metric(m, "bit_accuracy")),
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


def ablation_table(records: dict[str, dict]) -> str:
    """Each of C2-C5 against C1: metric differences (points), twice the sampling error of the exact-line
    difference, and the cost ratios."""
    c1 = records["c1"]
    rows = []
    for name, r in records.items():
        if name == "c1":
            continue
        noise = 2 * math.hypot(exact_lines_stderr(r), exact_lines_stderr(c1))
        rows.append([name.upper(), change_from_c1(r), f"{100 * difference(records, name, 'bit_accuracy'):+.1f}",
                     f"{100 * difference(records, name, 'sequence_accuracy'):+.1f}", f"{100 * noise:.1f}",
                     f"{r['seconds_per_epoch'] / c1['seconds_per_epoch']:.2f}×", f"{r['params'] / c1['params']:.2f}×",
                     f"{r['epochs']} (C1 {c1['epochs']})"])
    return markdown_table(["config", "change", "bit acc, points vs C1", "exact lines, points", "2 × sampling s.e.",
                           "s/epoch vs C1", "params vs C1", "epochs"], rows)


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


# --------------------------------------------------------------------------- inside the committed models


def committed_checkpoint(config: str) -> Path:
    """Where the committed model of a configuration lives: ``results/checkpoints/<config>.safetensors``."""
    return results_dir() / "checkpoints" / f"{config}.safetensors"


def load_committed_model(config: str, fallback_dir: str | os.PathLike | None = None):
    """(model, codec, Config, where it came from) for the committed model of ``config`` (on the CPU).

    When the file is missing, it says so and trains the tiny ``smoke`` preset of that configuration
    into ``fallback_dir`` (a temporary folder, removed afterwards, by default) instead: every later cell still runs, but
    a smoke model has learned next to nothing, so its pictures show the method, not the result.
    """
    from cipherlab.evaluate import load_trained

    path = committed_checkpoint(config)
    if path.is_file():
        model, codec, cfg = load_trained(path, device="cpu")
        return model, codec, cfg, f"the committed model {path.parent.name}/{path.name}"
    print(f"note: {path} is missing, so a smoke-sized {config.upper()} is trained here instead "
          "(seconds; it has learned almost nothing, so read its maps as a demonstration only)")
    from tqdm.auto import tqdm

    from cipherlab.train import train_config

    def quiet(*args, **kwargs):  # the trainer passes disable=None itself, so a partial would not do
        return tqdm(*args, **{**kwargs, "disable": True})

    quiet.write = tqdm.write
    with tempfile.TemporaryDirectory(prefix=f"cipherlab-{config}-") as scratch, \
            mock.patch("cipherlab.train.tqdm", quiet):  # no progress bars in the book
        run = train_config(make_config(config, "smoke"), Path(fallback_dir or scratch) / config, device="cpu")
        model, codec, cfg = load_trained(run.best_checkpoint, device="cpu")
    return model, codec, cfg, f"a smoke-sized {config.upper()} trained just now (no committed model found)"


def example_chunks(config: Config, n: int = 4, split: str = "test", corpus=None) -> list:
    """The first ``n`` full-length chunks (``config.chunk_chars`` characters) of a split, phase-aligned."""
    from cipherlab.data import load_corpus, make_chunks

    corpus = corpus or load_corpus()
    chunks = make_chunks(corpus.plain, corpus.cipher, corpus.splits[split], config.chunk_chars)
    full = [c for c in chunks if len(c.plain) == config.chunk_chars]
    if len(full) < n:
        raise ValueError(f"only {len(full)} full-length chunks in the {split} split; ask for fewer")
    return full[:n]


@dataclass
class AttentionView:
    """The attention weights of one model on a few chunks, mapped to characters.

    ``maps[(kind, layer)]`` is (B, H, L, L) for B chunks of L characters: row i is the query of
    (the token, patch or byte that holds) character i, column j the weight that reaches character j.
    A token's or patch's weight is shared equally among its characters (bits, for a BPE token over
    cipher bits), and a character's row is the row of the token that holds it, so every model --
    BPE tokens, bytes, patches -- lands on the same character grid and rows still sum to 1.
    """

    config: str
    texts: list[str]
    maps: dict[tuple[str, int], torch.Tensor]

    @property
    def kinds(self) -> list[str]:
        return list(dict.fromkeys(kind for kind, _ in self.maps))

    def layers(self, kind: str) -> int:
        return sum(k == kind for k, _ in self.maps)

    @property
    def n_heads(self) -> int:
        return next(iter(self.maps.values())).size(1)


def coverage(lengths: Sequence[int], unit: int) -> torch.Tensor:
    """(tokens, characters): how many of each token's ``unit``-sized pieces fall in each character.

    Token i covers units [start_i, start_i + lengths[i]); character c covers [c * unit, (c + 1) * unit).
    """
    total = sum(lengths)
    if total % unit:
        raise ValueError(f"tokens cover {total} units, not a whole number of {unit}-unit characters")
    cover = torch.zeros(len(lengths), total // unit)
    start = 0
    for i, length in enumerate(lengths):
        for c in range(start // unit, (start + length - 1) // unit + 1):
            cover[i, c] = min(start + length, (c + 1) * unit) - max(start, c * unit)
        start += length
    return cover


def to_characters(weights: torch.Tensor, query_cover: torch.Tensor, key_cover: torch.Tensor) -> torch.Tensor:
    """(H, Tq, Tk) token weights -> (H, L, L) character weights (see :class:`AttentionView`).

    ``*_cover`` are (tokens, L) coverage counts: a character's row is the mix of the rows of the
    tokens holding it (in proportion), a token's weight is spread over its characters (in proportion).
    """
    rows = query_cover / query_cover.sum(0, keepdim=True).clamp(min=1e-12)  # (Tq, L), columns sum to 1
    cols = key_cover / key_cover.sum(1, keepdim=True).clamp(min=1e-12)  # (Tk, L), rows sum to 1
    return rows.T @ weights @ cols  # (L, Tq) @ (H, Tq, Tk) @ (Tk, L) -> (H, L, L)


@contextlib.contextmanager
def _capturing(cores: dict):
    """Switch on ``capture`` of the given ScaledDotProductAttention modules for one forward pass."""
    for core in cores.values():
        core.capture = True
    try:
        yield
    finally:
        for core in cores.values():
            core.capture = False


def attention_view(model, codec, chunks: Sequence, name: str = "") -> AttentionView:
    """Teacher-forced attention weights of ``model`` on ``chunks`` (all the same length), per character.

    C1-C4 (``Seq2SeqTransformer``): ``"encoder self"`` over the source tokens and ``"cross"`` (decoder
    token -> source token). C5 (``BLTModel``): ``"encoder self"`` is the local encoder over cipher
    bytes, ``"cross"`` the local decoder's direct path from each plaintext byte to the source (its byte
    states, or its patches with ``source_memory="patches"``), and ``"global encoder self"`` the
    patch-level encoder.
    """
    lengths = {len(c.plain) for c in chunks}
    if len(lengths) != 1:
        raise ValueError(f"attention_view needs chunks of one length, got lengths {sorted(lengths)}")
    data = codec.dataset(chunks)
    batch = codec.collate([data[i] for i in range(len(data))])
    model.eval()
    if codec.kind == "bpe":
        cores = {("encoder self", i): layer.self_attn.attention for i, layer in enumerate(model.encoder.layers)}
        cores |= {("cross", i): layer.cross_attn.attention for i, layer in enumerate(model.decoder.layers)}
    else:
        cores = {("encoder self", i): layer.self_attn.attn.attention
                 for i, layer in enumerate(model.local_encoder.layers)}
        cores |= {("cross", i): layer.memory_attn.attention for i, layer in enumerate(model.local_decoder.layers)}
        cores |= {("global encoder self", i): layer.self_attn.attention
                  for i, layer in enumerate(model.global_encoder.layers)}
    with _capturing(cores), torch.no_grad():
        teacher_forcing_logits(model, batch)
    raw = {key: core.last_attn.float() for key, core in cores.items()}
    if codec.kind == "blt":  # the local encoder attends inside windows: put them back on the diagonal
        window = model.local_encoder.layers[0].self_attn.window
        raw |= {key: _unwindow(w, batch["src"].size(1), window) for key, w in raw.items() if key[0] == "encoder self"}
    maps = {key: [] for key in cores}
    for b, chunk in enumerate(chunks):
        for key, (q_cover, k_cover) in _covers(codec, batch, b, chunk, model).items():
            weights = raw[key][b, :, : q_cover.size(0), : k_cover.size(0)]  # (H, Tq, Tk) without padding
            maps[key].append(to_characters(weights, q_cover, k_cover))
    name = name or ("C5" if codec.kind == "blt" else "C1-C4")
    return AttentionView(config=name, texts=[c.plain for c in chunks],
                         maps={k: torch.stack(v) for k, v in maps.items()})


def _covers(codec, batch: dict, b: int, chunk, model) -> dict:
    """{(kind, layer): (query coverage, key coverage)} of example ``b``, both (tokens, characters)."""
    if codec.kind == "bpe":
        src_tokens, tgt_tokens = codec.src.tokenize(chunk.cipher), codec.tgt.tokenize(chunk.plain)
        n_src = int((batch["src"][b] != codec.src_pad_id).sum())
        if len(src_tokens) != n_src:
            raise ValueError(f"the source tokenizer cut chunk {b} into {len(src_tokens)} pieces but encoded "
                             f"{n_src} ids; attention_view cannot map its weights to characters")
        src = coverage([len(t) for t in src_tokens], 8)  # bits per token, 8 bits per character
        tgt = coverage([len(t) for t in tgt_tokens], 1)  # characters per token
        n_enc, n_dec = len(model.encoder.layers), len(model.decoder.layers)
        # cross-attention row i predicts token i + 1 of [BOS, t1, ..., tn, EOS]: rows 0..n-1 hold t1..tn
        return ({("encoder self", i): (src, src) for i in range(n_enc)}
                | {("cross", i): (tgt, src) for i in range(n_dec)})
    n = len(chunk.plain)
    member = batch["src_member"][b, :, :n].float()  # (Ks, n): which bytes each source patch holds
    member = member[: int((member.sum(1) > 0).sum())]  # drop the padding patches at the end
    byte = torch.eye(n)
    # the local decoder's direct path reads the source byte states, or (the course notes' design) the patches
    source = byte if getattr(model, "source_memory", "patches") == "bytes" else member
    return ({("encoder self", i): (byte, byte) for i in range(len(model.local_encoder.layers))}
            # row i of the local decoder reads [BOS] + plain[:i] and predicts plain[i]
            | {("cross", i): (byte, source) for i in range(len(model.local_decoder.layers))}
            | {("global encoder self", i): (member, member) for i in range(len(model.global_encoder.layers))})


def _unwindow(weights: torch.Tensor, L: int, window: int) -> torch.Tensor:
    """Windowed self-attention weights (B * n_win, H, W, W) -> the block-diagonal (B, H, L, L) they stand for."""
    W = min(window, L)
    n_win = -(-L // W)
    H = weights.size(1)
    blocks = weights.reshape(-1, n_win, H, W, W)  # (B, n_win, H, W, W)
    full = weights.new_zeros(blocks.size(0), H, n_win * W, n_win * W)
    for k in range(n_win):
        full[:, :, k * W:(k + 1) * W, k * W:(k + 1) * W] = blocks[:, k]
    return full[:, :, :L, :L]


def _offsets(L: int) -> torch.Tensor:
    """(L, L) key position minus query position."""
    idx = torch.arange(L)
    return idx[None, :] - idx[:, None]


def band_mass(weights: torch.Tensor, width: int = 0) -> torch.Tensor:
    """(..., L, L) -> (...,): mean over query rows of the weight on keys within ``width`` of the diagonal.

    1.0 means every character attends only to its own position (``width`` 0) or its neighbours.
    """
    near = (_offsets(weights.size(-1)).abs() <= width).to(weights.dtype)
    return (weights * near).sum(-1).mean(-1)


def same_phase_share(weights: torch.Tensor, period: int = PERIOD) -> torch.Tensor:
    """(..., L, L) -> (...,): of the weight a character gives to *other* positions, the share that goes
    to positions a multiple of ``period`` away -- those that share its key byte.

    Uniform attention gives about 1/period (see :func:`uniform_same_phase_share`).
    """
    offsets = _offsets(weights.size(-1))
    other = (offsets != 0).to(weights.dtype)
    same = ((offsets % period == 0) & (offsets != 0)).to(weights.dtype)
    return ((weights * same).sum(-1) / (weights * other).sum(-1).clamp(min=1e-12)).mean(-1)


def uniform_same_phase_share(L: int, period: int = PERIOD) -> float:
    """:func:`same_phase_share` of uniform attention over L positions: the share expected by chance."""
    return float(same_phase_share(torch.full((L, L), 1.0 / L), period))


def offset_profile(weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(offsets -L+1 .. L-1, mean weight at each offset (..., 2L - 1)), averaged over the query rows
    where that offset exists: a peak at multiples of 8 is the cipher's period."""
    L = weights.size(-1)
    offsets = _offsets(L)
    values = torch.arange(-L + 1, L)
    profile = torch.stack([weights[..., offsets == d].mean(-1) for d in values.tolist()], dim=-1)
    return values, profile


def attention_summary(views: dict[str, AttentionView]) -> list[dict]:
    """For every module of every view, averaged over its chunks: the best head on the diagonal
    (``band_mass``), within one character of it, and by same-key-phase share."""
    rows = []
    for name, view in views.items():
        for (kind, layer), weights in view.maps.items():
            mean = weights.mean(0)  # (H, L, L)
            diag, near, phase = band_mass(mean), band_mass(mean, 1), same_phase_share(mean)
            rows.append({"model": name, "kind": kind, "layer": layer,
                         "diagonal": diag.max().item(), "diagonal_head": int(diag.argmax()),
                         "near": near.max().item(), "phase": phase.max().item(), "phase_head": int(phase.argmax())})
    return rows


def attention_table(summary: list[dict]) -> str:
    """:func:`attention_summary` as a Markdown table."""
    rows = [[r["model"], r["kind"], r["layer"], f"{r['diagonal']:.2f} (head {r['diagonal_head']})", f"{r['near']:.2f}",
             f"{r['phase']:.2f} (head {r['phase_head']})"] for r in summary]
    return markdown_table(["model", "attention", "layer", "diagonal, best head", "±1 character",
                           "same key phase, best head"], rows)


def _draw_map(ax, weights: torch.Tensor, vmax: float) -> None:
    """One (L, L) character map with a grid line every PERIOD characters (the key's period)."""
    L = weights.size(-1)
    ax.imshow(weights.numpy(), cmap="viridis", vmin=0, vmax=vmax)
    for edge in range(PERIOD, L, PERIOD):
        ax.axvline(edge - 0.5, color="white", lw=0.4, alpha=0.6)
        ax.axhline(edge - 0.5, color="white", lw=0.4, alpha=0.6)


def plot_heads(view: AttentionView, kind: str, layer: int, example: int = 0):
    """Every head of one attention module on one chunk, with a grid line every 8 characters."""
    weights = view.maps[(kind, layer)][example]  # (H, L, L)
    H = weights.size(0)
    ncols = min(H, 4)
    fig, axes = _figure(ncols, width=2.4, height=2.6, nrows=-(-H // ncols))
    for ax in axes[H:]:
        ax.set_visible(False)
    for h, ax in enumerate(axes[:H]):
        _draw_map(ax, weights[h], float(weights.max()))
        ax.set_title(f"head {h}", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0].set_ylabel("query character")
    axes[(len(axes) - 1) // ncols * ncols].set_xlabel("key character")  # first panel of the last row
    fig.suptitle(f"{view.config}: {kind}, layer {layer}, chunk {example}", fontsize=10)
    return fig


def plot_head(view: AttentionView, kind: str, layer: int, head: int, example: int = 0):
    """One head on one chunk, large, with the chunk's text along the query axis."""
    weights = view.maps[(kind, layer)][example, head]  # (L, L)
    fig, axes = _figure(1, width=4.6, height=4.4)
    ax = axes[0]
    _draw_map(ax, weights, float(weights.max()))
    text = view.texts[example]
    ax.set_yticks(range(len(text)), list(text), fontsize=6, family="monospace")
    ax.set_xlabel("key character (source position)")
    ax.set_ylabel("query character")
    ax.set_title(f"{view.config}: {kind}, layer {layer}, head {head}", fontsize=10)
    return fig


def plot_offsets(view: AttentionView, kind: str, layer: int):
    """Mean attention weight by offset (key minus query character) for every head of one module."""
    values, profile = offset_profile(view.maps[(kind, layer)].mean(0))  # (H, 2L - 1)
    fig, axes = _figure(1, width=7.5, height=3.0)
    ax = axes[0]
    for h in range(profile.size(0)):
        ax.plot(values.numpy(), profile[h].numpy(), lw=1, label=f"head {h}")
    for edge in range(-values.max().item() // PERIOD * PERIOD, values.max().item() + 1, PERIOD):
        ax.axvline(edge, color="grey", lw=0.5, ls=":")
    ax.set_xlabel("key position minus query position (characters)")
    ax.set_ylabel("mean weight")
    ax.set_title(f"{view.config}: {kind}, layer {layer}", fontsize=10)
    ax.legend(fontsize=7, ncol=4)
    return fig
