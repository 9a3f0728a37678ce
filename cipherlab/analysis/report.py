"""The results chapter's analysis of your own runs: ``python -m cipherlab report RUNS_DIR --out DIR``.

RUNS_DIR holds one of three kinds of input:

- records as ``python -m cipherlab train`` and ``ablate`` write them: ``c1.json`` ... ``c5.json``, each
  beside its training log ``c1.log.jsonl`` (and ``errors.json`` where ``results/analysis.py`` ran);
- records as ``results/learn/probe.py`` writes them, the kind of the reference ablation
  (``results/reference``): ``<name>-c1-seed0.json`` ..., every probe set scored line by line;
- your own model's predictions: one ``.txt`` file per configuration (``c1.txt`` ... ``c5.txt``, or any
  name), one predicted plaintext line per line of ``--references FILE``, scored by :mod:`cipherlab.analysis.score`.

``DIR/report.md`` holds only Markdown tables and figures, each with a caption naming its measures: the
results in every unit the inputs allow, each configuration against C1 on the same lines (McNemar's exact
test, :func:`cipherlab.analysis.ablation.mcnemar`), where the errors are, the random-string probe, free against
length-aware decoding and the training curves (``curves.png``). A section appears only when the inputs
hold its data; the table "Not available" names each input and what it lacks. The tables are made by
the functions the results chapter calls (:mod:`cipherlab.analysis.ablation`), so a report on ``results/reference`` holds
the results chapter's main table cell for cell.

Nothing is written inside the repository's committed ``results/`` folder, nor into a folder that is not
empty unless ``--force`` is given. Bad input (a missing or empty folder, records of runs that cannot be
compared, a broken record, a prediction file of the wrong length) stops the command with one line that
names the file and the fix (:func:`cipherlab.base.errors.run_command`).
"""

from __future__ import annotations

import collections
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from cipherlab.analysis import ablation
from cipherlab.data.cipher import PERIOD
from cipherlab.base.config import CONFIG_NAMES
from cipherlab.base.errors import first_line, outside_results, writable_folder, write_text_atomic
from cipherlab.analysis.score import DEFAULT_CHUNKS, DEFAULT_FIRST, read_text_lines, score_predictions

__all__ = ["DEFAULT_CHUNK_CHARS", "LENGTH_BINS", "REPORT_FILE", "Block", "Report", "build_report",
           "check_out", "parts_summary", "write_report"]

DEFAULT_CHUNK_CHARS = 32  # the cpu preset's chunk length (Config.chunk_chars): lines are decoded chunk by chunk
LENGTH_BINS = ((0, 100), (100, 200), (200, 400), (400, 800), (800, 10**6))  # as results/analysis.py bins lines
REPORT_FILE = "report.md"
CURVES_FILE = "curves.png"
PROBE_GLOB = "*c[1-5]*-seed*.json"  # what ablation.load_learn_runs reads
TRAIN_FILE = re.compile(r"c[1-5]\.json")  # what ablation.load_run reads
SECTIONS = ("What the recipe hands the model", "Results", "Paired comparisons against the baseline",
            "Where the errors are", "Random-string probe", "Free or length-aware decoding", "Training curves")
RECIPE, RESULTS, PAIRED, ERRORS, RANDOM, DECODING, CURVES = SECTIONS
CHAR_KINDS = ("capital", "lowercase", "digit", "space", "punctuation")  # ablation.char_kind's classes
_SET_FIELDS = ("lines", "exact_lines", "char_accuracy", "bit_accuracy", "sequence_accuracy")
_PROBE_FIELDS = ("config", "seed", "epochs", "best_epoch", "train_seconds")
_RANDOM_SETS = ("random_letters", "random_alphabet")
_FREE, _AWARE = "brown_test_free", "brown_test"


# --------------------------------------------------------------------------- the report


@dataclass
class Block:
    """One captioned part of a section: a Markdown table, or a figure (``body`` is then its file name)."""

    kind: str
    caption: str
    body: str


@dataclass
class Report:
    """What ``report.md`` holds: the inputs, the sections' blocks, what is not available, and the figures."""

    inputs: list[list[str]]
    sections: dict[str, list[Block]] = field(default_factory=lambda: {name: [] for name in SECTIONS})
    missing: list[list[str]] = field(default_factory=list)
    figures: dict = field(default_factory=dict)  # file name -> matplotlib Figure

    def table(self, section: str, caption: str, markdown: str) -> None:
        """Add a Markdown table with its caption to ``section``."""
        self.sections[section].append(Block("table", caption, markdown))

    def figure(self, section: str, caption: str, name: str, fig) -> None:
        """Add a figure, saved as ``name`` beside report.md, with its caption to ``section``."""
        self.sections[section].append(Block("figure", caption, name))
        self.figures[name] = fig

    def lack(self, section: str, source: str, what: str) -> None:
        """Record that ``source`` lacks ``what`` for ``section``: a row of the "Not available" table."""
        self.missing.append([section, source, what])

    def tables(self) -> list[Block]:
        """Every table of the report, in order."""
        return [b for blocks in self.sections.values() for b in blocks if b.kind == "table"]

    def markdown(self) -> str:
        """The text of report.md: headings, captioned tables and figure links, no sentences."""
        parts = ["# cipherlab report", "", "## Findings", "", FINDINGS_PROMPT, "",
                 "*Table 1. Inputs: the folder, the kind of files read, what they hold*",
                 "", ablation.markdown_table(["input", "value"], self.inputs)]
        tables, figures = 1, 0
        for title, blocks in self.sections.items():
            if blocks:
                parts += ["", f"## {title}"]
            for block in blocks:
                if block.kind == "table":
                    tables += 1
                    parts += ["", f"*Table {tables}. {block.caption}*", "", block.body]
                else:
                    figures += 1
                    label = f"Figure {figures}. {block.caption}"
                    parts += ["", f"![{label}]({block.body})", "", f"*{label}*"]
        if self.missing:
            parts += ["", "## Not available", "", f"*Table {tables + 1}. Sections left out: the input and the data "
                      "it lacks*", "", ablation.markdown_table(["section", "input", "lacks"], self.missing)]
        return "\n".join(parts) + "\n"


def build_report(runs_dir: str | Path, references: str | Path | None = None, *,
                 chunk_chars: int = DEFAULT_CHUNK_CHARS, baseline: str = "c1") -> Report:
    """The report of the records or prediction files in ``runs_dir`` (see the module docstring).

    ``references``: the reference plaintext lines for prediction files; ``baseline``: the configuration
    (or prediction file name) every other is compared with. Raises FileNotFoundError / ValueError with
    a one-line message naming the file and the fix for input that cannot be reported on.
    """
    folder = Path(runs_dir)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder; pass the folder that holds the run records "
                                "(e.g. runs/cpu) or your prediction files")
    if chunk_chars < 1:
        raise ValueError(f"--chunk-chars {chunk_chars}: a chunk holds at least 1 character")
    if references is not None:
        return _prediction_report(folder, Path(references), chunk_chars, baseline)
    train = sorted(p for p in folder.glob("c*.json") if TRAIN_FILE.fullmatch(p.name))
    probe = sorted(folder.glob(PROBE_GLOB))
    if train and probe:
        raise ValueError(f"{folder}: holds records of two kinds ({train[0].name}, written by train/ablate, and "
                         f"{probe[0].name}, by results/learn/probe.py); put each run in its own folder")
    if train:
        return _train_report(folder, baseline)
    if probe:
        return _probe_report(folder, probe, baseline)
    raise _nothing_to_report(folder)


def _nothing_to_report(folder: Path) -> ValueError:
    """The error for a folder without records: it names sub-folders that have some, and prediction files."""
    inside = sorted(p.parent.name for p in folder.glob("*/*.json")
                    if TRAIN_FILE.fullmatch(p.name) or p.match(PROBE_GLOB))
    if inside:
        return ValueError(f"{folder}: no run records here, but in its sub-folder(s) "
                          f"{', '.join(dict.fromkeys(inside))}; pass one of those")
    if any(folder.glob("*.txt")):
        return ValueError(f"{folder}: holds .txt files but no run records; to score them as predictions, pass "
                          "--references FILE with the reference plaintext lines")
    return ValueError(f"{folder}: no run records (c1.json ... c5.json from train/ablate, or <name>-c1-seed0.json "
                      "from results/learn/probe.py); pass the folder a run wrote, or prediction files with "
                      "--references")


# --------------------------------------------------------------------------- reading and checking records


def _read_object(path: Path) -> dict:
    """A JSON object file; ValueError naming the file when it is not valid JSON or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}); write it "
                         "again with cipherlab, or move it out of the folder") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text; a run record is a JSON file written by cipherlab") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: holds a JSON {type(data).__name__}, not a run record (a JSON object); "
                         "move it out of the folder")
    return data


def _has(record: dict, name: str) -> bool:
    """Whether a probe record holds probe set ``name`` (``random_letters`` is stored as ``random_strings``)."""
    try:
        return isinstance(ablation.section(record, name), dict)
    except KeyError:
        return False


def _check_probe_record(record: dict, path: Path) -> None:
    """ValueError naming the file and the field when a probe record cannot be reported on."""
    missing = [k for k in _PROBE_FIELDS if k not in record]
    if missing:
        raise ValueError(f"{path}: missing field(s) {', '.join(missing)}; it is not a record written by "
                         "results/learn/probe.py: move it out of the folder")
    if record["config"] not in CONFIG_NAMES:
        raise ValueError(f"{path}: configuration {record['config']!r} is none of "
                         f"{', '.join(CONFIG_NAMES)}; move it out of the folder")
    held = [name for name, _ in ablation.REFERENCE_SETS if _has(record, name)]
    if not held:
        raise ValueError(f"{path}: holds no probe set ({', '.join(n for n, _ in ablation.REFERENCE_SETS)}); "
                         "decode the sets again with results/learn/probe.py")
    for name in held:
        part = ablation.section(record, name)
        lacking = [k for k in _SET_FIELDS if k not in part]
        if lacking:
            raise ValueError(f"{path}: probe set {name} lacks {', '.join(lacking)}; decode it again")
        outcomes = part.get("exact_by_line")
        if outcomes is not None and (not isinstance(outcomes, str) or len(outcomes) != part["lines"]
                                     or set(outcomes) - {"0", "1"}):
            raise ValueError(f"{path}: {name}.exact_by_line is not one 0/1 per line of its {part['lines']} "
                             "lines; decode the set again")


def _same(folder: Path, where: dict, read, what: str) -> None:
    """ValueError when the records (``{file: record}``) differ in ``read(record)``: they cannot be compared."""
    seen: dict = {}
    for path, record in where.items():
        seen.setdefault(read(record), path)
    if len(seen) > 1:
        (a, pa), (b, pb) = list(seen.items())[:2]
        raise ValueError(f"{folder}: records of different {what} cannot be compared ({pa.name}: {a}, "
                         f"{pb.name}: {b}); put each run in its own folder and report on each")


def _load_probe_records(folder: Path, files: list[Path]) -> tuple[dict, dict]:
    """``({(config, seed): record}, {(config, seed): file})`` of a folder's probe records, checked."""
    runs, where = {}, {}
    for path in files:
        record = _read_object(path)
        _check_probe_record(record, path)
        key = (record["config"], record["seed"])
        if key in runs:
            raise ValueError(f"{folder}: {where[key].name} and {path.name} are both {key[0].upper()} seed "
                             f"{key[1]}, records of two runs; put each run in its own folder and report on each")
        runs[key], where[key] = record, path
    by_file = {where[k]: r for k, r in runs.items()}
    _same(folder, by_file, lambda r: r.get("preset"), "presets")
    _same(folder, by_file, lambda r: r.get("recipe"), "recipes")
    for name, label in ablation.REFERENCE_SETS:
        holding = {p: r for p, r in by_file.items() if _has(r, name)}
        _same(folder, holding, lambda r: ablation.section(r, name)["lines"], f"numbers of {label} lines")
    return dict(sorted(runs.items())), where


def _load_train_records(folder: Path) -> dict[str, dict]:
    """The train/ablate records of a folder (:func:`cipherlab.analysis.ablation.load_run`), checked comparable."""
    records = ablation.load_run(folder)
    by_file = {folder / f"{name}.json": r for name, r in records.items()}
    _same(folder, by_file, lambda r: r.get("preset"), "presets")
    _same(folder, by_file, lambda r: r.get("recipe"), "recipes")
    _same(folder, by_file, lambda r: r["test"]["lines"], "numbers of test lines")
    return records


# --------------------------------------------------------------------------- formatting


def _pct(value: float | None, digits: int = 3) -> str:
    """A fraction as percent; "–" where there is none."""
    return "–" if value is None else f"{100 * value:.{digits}f}"


def _num(value, fmt: str) -> str:
    """A number formatted; "n/c" where the record marks it not comparable (None)."""
    return "n/c" if value is None else format(value, fmt)


def _of(exact: int, lines: int) -> str:
    """Exact lines as "n of N"."""
    return f"{exact} of {lines}"


def _mcnemar_cell(before: str | None, after: str | None) -> str:
    """"+gained −lost, p" of McNemar's exact test on two per-line outcome strings; "–" without them."""
    if not before or not after:
        return "–"
    only_before, only_after, p = ablation.mcnemar(before, after)
    return f"+{only_after} −{only_before}, p = {p:.2g}"


def _paired_summary(rows: list[dict]) -> str:
    """How many paired tests, how many below 0.05 and below the Bonferroni threshold, and the lowest p."""
    lowest = min(rows, key=lambda row: row["p"])
    seed = "" if lowest["seed"] == "–" else f", seed {lowest['seed']}"  # prediction files have no seed
    where = f"{lowest['config'].upper()}{seed}, {lowest['label']}"
    threshold = 0.05 / len(rows)
    return ablation.markdown_table(
        ["tests", "p < 0.05", "Bonferroni threshold (0.05 / tests)", "p below it", "lowest p", "where"],
        [[len(rows), sum(r["p"] < 0.05 for r in rows), f"{threshold:.2g}", sum(r["p"] < threshold for r in rows),
          f"{lowest['p']:.2g}", where]])


def _add_paired(report: Report, rows: list[dict], baseline: str) -> None:
    """The paired table (:func:`cipherlab.analysis.ablation.paired_table`) and its summary."""
    report.table(PAIRED, f"Exact lines of {baseline.upper()} → each configuration on the same lines, the lines "
                 f"only the configuration got right (+) and only {baseline.upper()} got right (−), and McNemar's "
                 "exact two-sided p-value on those paired per-line outcomes", ablation.paired_table(rows, baseline))
    report.table(PAIRED, "McNemar's exact tests: their number, how many have p below 0.05 and below the "
                 "Bonferroni threshold, and the lowest p-value", _paired_summary(rows))


# --------------------------------------------------------------------------- probe records (results/reference)


def _probe_report(folder: Path, files: list[Path], baseline: str) -> Report:
    """The report of ``results/learn/probe.py`` records: the kind of ``results/reference``."""
    runs, where = _load_probe_records(folder, files)
    first = next(iter(runs.values()))
    report = Report([["folder", str(folder)], ["kind", "probe records (results/learn/probe.py)"],
                     ["records", ", ".join(p.name for p in where.values())],
                     ["preset", str(first.get("preset", "?"))], ["recipe", str(first.get("recipe", "not recorded"))],
                     ["seeds", ", ".join(str(s) for s in sorted({s for _, s in runs}))]])
    _add_recipe(report, {f"{config.upper()} seed {seed}": r for (config, seed), r in runs.items()})
    _probe_results(report, runs)
    _probe_paired(report, runs, baseline, folder)
    report.lack(ERRORS, f"{folder} (probe records)", "per-character errors and line lengths: each set keeps "
                "only per-line outcomes (exact_by_line) and right characters per line; for key phase, chunk "
                "position, character class and line length, score a file of predictions with --references")
    _probe_random(report, runs, folder)
    _probe_decoding(report, runs, folder)
    _probe_curves(report, runs, folder)
    _add_parts(report, {f"{config.upper()} seed {seed}": r for (config, seed), r in runs.items()})
    return report


def _held_sets(runs: dict) -> list[tuple[str, str]]:
    """The probe sets (name, label) that every record holds, in :data:`cipherlab.analysis.ablation.REFERENCE_SETS` order."""
    return [(n, label) for n, label in ablation.REFERENCE_SETS if all(_has(r, n) for r in runs.values())]


_LEARN_SETS = ("random_letters", "stdlib", "brown_test_free", "brown_test")


def _main_table(runs: dict) -> tuple[str, str]:
    """(caption, table): the results chapter's own table for these records (reference_tables, else learn_tables)."""
    held = _held_sets(runs)
    if len(held) == len(ablation.REFERENCE_SETS):
        return ("Every run: epochs, best epoch, training minutes, and for each probe set characters right % / "
                "exact lines of the lines decoded (the results chapter's main table, ablation.reference_tables)",
                ablation.reference_tables(runs)[0])
    names = {n for n, _ in held}
    if set(_LEARN_SETS) <= names and all("best_val_accuracy" in r for r in runs.values()):
        return ("Every run: epochs, best epoch, training minutes, best teacher-forced validation token accuracy %, "
                "and per set characters or bits right % / exact lines (ablation.learn_tables)",
                ablation.learn_tables(runs)[0])
    headers = ["config", "seed", "epochs", "best epoch", "training minutes",
               *(f"{label}: characters % / exact" for _, label in held)]
    rows = [[r["config"].upper(), r["seed"], r["epochs"], r["best_epoch"], f"{r['train_seconds'] / 60:.1f}",
             *(f"{_pct(ablation.section(r, n)['char_accuracy'])} / "
               f"{_of(ablation.section(r, n)['exact_lines'], ablation.section(r, n)['lines'])}" for n, _ in held)]
            for r in runs.values()]
    return ("Every run: epochs, best epoch, training minutes, and for each probe set all runs decoded characters "
            "right % / exact lines", ablation.markdown_table(headers, rows))


def _units_table(runs: dict) -> str:
    """Every probe set of every run in every unit: bits %, characters %, CER %, exact lines, their decoding."""
    rows = []
    for r in runs.values():
        for name, label in ablation.REFERENCE_SETS:
            if _has(r, name):
                s = ablation.section(r, name)
                rows.append([r["config"].upper(), r["seed"], label, s.get("decoding", "?"), s["lines"],
                             _pct(s["bit_accuracy"]), _pct(s["char_accuracy"]), _pct(s.get("char_error_rate")),
                             _of(s["exact_lines"], s["lines"]), _pct(s["sequence_accuracy"], 2)])
    return ablation.markdown_table(["config", "seed", "set", "decoding", "lines", "bit acc %", "characters %",
                                   "CER %", "exact lines", "exact lines %"], rows)


def _probe_results(report: Report, runs: dict) -> None:
    """The main table, the goals the sets allow (ablation.goals_table) and every unit."""
    report.table(RESULTS, *_main_table(runs))
    names = {n for n, _ in _held_sets(runs)}
    goals = tuple(g for g in ablation.REFERENCE_GOALS if g[0] in names)
    if goals:
        report.table(RESULTS, "The reference goals these sets allow (ablation.REFERENCE_GOALS): each seed's "
                     "characters, bits or exact lines %, met when every seed meets the target",
                     ablation.goals_table(runs, goals))
    report.table(RESULTS, "Every probe set of every run: bit accuracy %, characters right %, character error "
                 "rate %, exact lines, and how the set was decoded", _units_table(runs))


def _probe_paired(report: Report, runs: dict, baseline: str, folder: Path) -> None:
    """Each configuration against ``baseline`` with the same seed (ablation.paired_rows)."""
    if not any(config == baseline for config, _ in runs):
        report.lack(PAIRED, str(folder), f"a {baseline.upper()} record to compare with (--baseline)")
        return
    sets = tuple(n for n, _ in ablation.REFERENCE_SETS
                 if all("exact_by_line" in ablation.section(r, n) for r in runs.values() if _has(r, n)))
    rows = ablation.paired_rows(runs, baseline, sets) if sets else []
    if not rows:
        report.lack(PAIRED, str(folder), "per-line outcomes (exact_by_line) of another configuration with the "
                    f"seed of a {baseline.upper()} record")
        return
    _add_paired(report, rows, baseline)


def _probe_random(report: Report, runs: dict, folder: Path) -> None:
    """The random-string sets, where the records have them."""
    labels = dict(ablation.REFERENCE_SETS)
    rows = [[r["config"].upper(), r["seed"], labels[n], ablation.section(r, n)["lines"],
             _pct(ablation.section(r, n)["char_accuracy"]), _pct(ablation.section(r, n)["bit_accuracy"]),
             _of(ablation.section(r, n)["exact_lines"], ablation.section(r, n)["lines"])]
            for r in runs.values() for n in _RANDOM_SETS if _has(r, n)]
    if not rows:
        report.lack(RANDOM, str(folder), "random-string sets (random_strings, random_alphabet)")
        return
    report.table(RANDOM, "Random strings no language model can predict: characters right %, bit accuracy %, "
                 "exact lines", ablation.markdown_table(["config", "seed", "set", "lines", "characters %",
                                                        "bit acc %", "exact lines"], rows))


def _probe_decoding(report: Report, runs: dict, folder: Path) -> None:
    """Brown test lines decoded freely and length-aware, with McNemar's test on the paired outcomes."""
    both = [r for r in runs.values() if _has(r, _FREE) and _has(r, _AWARE)]
    if not both:
        report.lack(DECODING, str(folder), "both Brown test decodings (brown_test_free and brown_test)")
        return
    rows = []
    for r in both:
        free, aware = r[_FREE], r[_AWARE]
        rows.append([r["config"].upper(), r["seed"], free["lines"], _pct(free["bit_accuracy"]),
                     _pct(aware["bit_accuracy"]), _pct(free["char_accuracy"]), _pct(aware["char_accuracy"]),
                     _of(free["exact_lines"], free["lines"]), _of(aware["exact_lines"], aware["lines"]),
                     _mcnemar_cell(free.get("exact_by_line"), aware.get("exact_by_line"))])
    report.table(DECODING, "Brown test lines, greedy decoding free (EOS where the model puts it) and length-aware: "
                 "bit accuracy %, characters right %, exact lines, and McNemar's exact test of length-aware "
                 "against free (+ lines only length-aware got exact, − only free)",
                 ablation.markdown_table(["config", "seed", "lines", "free: bit acc %", "length-aware: bit acc %",
                                         "free: characters %", "length-aware: characters %", "free: exact",
                                         "length-aware: exact", "length-aware vs free"], rows))


def _valid_log(log) -> bool:
    """Whether a training log is a list of epochs with epoch, val_loss and seconds (what plot_curves reads)."""
    keys = ("epoch", "val_loss", "seconds")
    return isinstance(log, list) and bool(log) and all(isinstance(e, dict) and all(k in e for k in keys)
                                                       for e in log)


def _probe_curves(report: Report, runs: dict, folder: Path) -> None:
    """Validation loss per epoch of every run with a log (the record's ``log``)."""
    curves = {f"{c} seed {s}": r["log"] for (c, s), r in runs.items() if _valid_log(r.get("log"))}
    lacking = [f"{c.upper()} seed {s}" for (c, s), r in runs.items() if not _valid_log(r.get("log"))]
    if lacking:
        report.lack(CURVES, str(folder), f"a training log (log: epoch, val_loss, seconds) in {', '.join(lacking)}")
    if not curves:
        return
    last = max(e["epoch"] for log in curves.values() for e in log)
    rows = []
    for (c, s), r in runs.items():
        losses = {e["epoch"]: e["val_loss"] for e in r["log"]} if _valid_log(r.get("log")) else {}
        loss_cells = [f"{losses[k]:.4f}" if k in losses else "–" for k in range(1, last + 1)]
        rows.append([c.upper(), s, r["best_epoch"], *loss_cells, _pct(r.get("best_val_accuracy"))])
    report.table(CURVES, "Validation loss (nats per target unit) after each epoch, the best epoch, and the best "
                 "teacher-forced validation token accuracy %",
                 ablation.markdown_table(["config", "seed", "best epoch",
                                         *(f"val loss, epoch {k}" for k in range(1, last + 1)),
                                         "best val token accuracy %"], rows))
    report.figure(CURVES, "Validation loss per epoch and against training minutes, every run",
                  CURVES_FILE, ablation.plot_curves(curves))


# --------------------------------------------------------------------------- train/ablate records


def _train_report(folder: Path, baseline: str) -> Report:
    """The report of ``train``/``ablate`` records (``c1.json`` ...), their logs and ``errors.json``."""
    records = _load_train_records(folder)
    first = next(iter(records.values()))
    decodings = sorted({r["test"].get("decoding", "free greedy") for r in records.values()})
    report = Report([["folder", str(folder)], ["kind", "train/ablate records"],
                     ["records", ", ".join(f"{n}.json" for n in records)], ["preset", str(first.get("preset", "?"))],
                     ["recipe", str(first.get("recipe") or "not recorded")],
                     ["test lines", str(first["test"]["lines"])], ["decoding", ", ".join(decodings)]])
    _add_recipe(report, {name.upper(): r for name, r in records.items()})
    report.table(RESULTS, "Test lines: bit accuracy %, exact lines %, Levenshtein edits per line, BLEU, chrF, "
                 "ROUGE-L, parameters, peak memory MiB, seconds per epoch, training tokens per second, beside "
                 "the course notes' and the best public figures (ablation.comparison_table; n/c: not comparable)",
                 ablation.comparison_table(folder).split("\n\n")[0])
    report.table(RESULTS, "Test lines in every unit: bit accuracy %, exact lines, Levenshtein edits per line, "
                 "character error rate %, chrF, BLEU, ROUGE F1 (n/c: not comparable)", _train_units(records))
    _train_paired(report, records, baseline, folder)
    _train_errors(report, records, folder)
    report.lack(RANDOM, str(folder), "random-string sets: train/ablate records score the test lines only "
                "(results/learn/probe.py records hold the probe sets)")
    _train_curves(report, records, folder)
    _add_parts(report, {name.upper(): r for name, r in records.items()})
    return report


_TEST_KEYS = ("bit_accuracy", "sequence_accuracy", "levenshtein", "char_error_rate", "chrf", "bleu", "rouge1",
              "rouge2", "rougeL")


def _train_units(records: dict[str, dict]) -> str:
    """Every test metric of every record."""
    rows = []
    for name, r in records.items():
        t, m = r["test"], {key: ablation.metric(r, key) for key in _TEST_KEYS}
        rows.append([name.upper(), t.get("decoding", "free greedy"), t["lines"], _pct(m["bit_accuracy"]),
                     _of(round(m["sequence_accuracy"] * t["lines"]), t["lines"]), _pct(m["sequence_accuracy"], 2),
                     _num(m["levenshtein"], ".2f"), _pct(m["char_error_rate"]), _num(m["chrf"], ".2f"),
                     _num(m["bleu"], ".2f"), _num(m["rouge1"], ".4f"), _num(m["rouge2"], ".4f"),
                     _num(m["rougeL"], ".4f")])
    return ablation.markdown_table(["config", "decoding", "lines", "bit acc %", "exact lines", "exact lines %",
                                   "Levenshtein", "CER %", "chrF", "BLEU", "ROUGE-1", "ROUGE-2", "ROUGE-L"], rows)


def _train_paired(report: Report, records: dict[str, dict], baseline: str, folder: Path) -> None:
    """McNemar's test where the records keep per-line outcomes, else the unpaired comparison of the results chapter."""
    if baseline not in records:
        report.lack(PAIRED, str(folder), f"{baseline}.json, the record to compare with (--baseline)")
        return
    if all(isinstance(r["test"].get("exact_by_line"), str) for r in records.values()):
        base = records[baseline]["test"]
        rows = []
        for name, r in records.items():
            if name != baseline:
                only_base, only_config, p = ablation.mcnemar(base["exact_by_line"], r["test"]["exact_by_line"])
                rows.append({"config": name, "seed": r.get("seed", "?"), "label": "test lines",
                             "lines": base["lines"], "base_exact": base["exact_by_line"].count("1"),
                             "exact": r["test"]["exact_by_line"].count("1"), "only_base": only_base,
                             "only_config": only_config, "p": p})
        if rows:
            _add_paired(report, rows, baseline)
        return
    report.lack(PAIRED, str(folder), "per-line outcomes (test.exact_by_line) in every record, for McNemar's test")
    if baseline == "c1" and len(records) > 1 and all(r.get("seconds_per_epoch") for r in records.values()):
        report.table(PAIRED, "Unpaired instead: each configuration against C1 in bit accuracy and exact lines "
                     "(points), twice the binomial standard error of the exact-line difference, the reading, "
                     "and the cost ratios (ablation.ablation_table)", ablation.ablation_table(records))


def _substitution_table(errors: dict) -> str | None:
    """Per model of ``errors.json``: its example edits by kind, substitutions by the right character's class."""
    counts = collections.defaultdict(collections.Counter)
    for item in ablation.edits(errors):
        for model in item["models"]:
            kind = ablation.char_kind(item["reference"][0]) if item["op"] == "substitute" else item["op"]
            counts[model][kind] += 1
    columns = [*CHAR_KINDS, "drop", "add"]
    models = [ablation.entry_label(key) for key in errors]
    rows = [[model, *(counts[model][k] for k in columns)] for model in models if model in counts]
    return ablation.markdown_table(["model", *(f"substituted: {k}" for k in CHAR_KINDS), "drops", "additions"],
                                  rows) if rows else None


def _train_errors(report: Report, records: dict[str, dict], folder: Path) -> None:
    """Free against length-aware decoding and where the errors are, from ``errors.json`` if the run has one."""
    if not (folder / "errors.json").is_file():
        for section in (ERRORS, DECODING):
            report.lack(section, str(folder), "errors.json (results/analysis.py writes it from the checkpoints)")
        return
    errors = ablation.load_errors(folder)
    report.table(DECODING, "errors.json: lines of the wrong length decoded freely, bit accuracy %, exact lines % "
                 "and character error rate, free and length-aware greedy", ablation.decoding_table(errors))
    try:
        lengths = [len(line) for line in ablation.lines_of(next(iter(records.values())))]
        profile = ablation.profile_table(ablation.profile_rows(errors, lengths))
        by_length = ablation.length_table(errors, list(errors), lengths)
    except (OSError, ValueError, KeyError) as e:
        report.lack(ERRORS, f"{folder}/errors.json", f"the test lines it was scored on ({first_line(e)})")
    else:
        report.table(ERRORS, "errors.json: wrong characters, error rate %, the chunk position and key phase with the "
                     "largest excess (× the model's mean error rate, z against counting noise), and the error "
                     "rate of a chunk's second half over its first", profile)
        report.table(ERRORS, "errors.json: exact lines % by line length, and (in parentheses) the % independent "
                     "character errors at the model's character error rate would leave exact", by_length)
    edits = _substitution_table(errors)
    if edits:
        report.table(ERRORS, "errors.json's example wrong lines aligned with their references (difflib): "
                     "substitutions by class of the right character, drops and additions", edits)


def _train_curves(report: Report, records: dict[str, dict], folder: Path) -> None:
    """The training logs ``<config>.log.jsonl`` beside the records (ablation.budget_table, plot_curves)."""
    curves = {}
    for name in records:
        if (folder / f"{name}.log.jsonl").is_file():
            curves[name] = ablation.load_curve(folder, name)
    lacking = [f"{name}.log.jsonl" for name in records if name not in curves]
    if lacking:
        report.lack(CURVES, str(folder), f"training logs {', '.join(lacking)} (train copies them beside the record)")
    if not curves:
        return
    report.table(CURVES, "Epochs, seconds per epoch (mean, fastest–slowest), validation loss after each epoch, "
                 "test bit accuracy % and exact lines % (ablation.budget_table)", ablation.budget_table(records, curves))
    report.figure(CURVES, "Validation loss per epoch and against training minutes", CURVES_FILE,
                  ablation.plot_curves(curves))


# --------------------------------------------------------------------------- prediction files


def _prediction_files(folder: Path, references: Path) -> dict[str, Path]:
    """``{name: file}`` of the ``.txt`` files in ``folder`` (C1-C5 first), the references file left out."""
    skip = references.resolve() if references.exists() else None
    files = [p for p in sorted(folder.glob("*.txt")) if p.is_file() and p.resolve() != skip]
    if not files:
        raise ValueError(f"{folder}: no prediction files (.txt, one predicted plaintext line per line of "
                         f"{references}); write c1.txt ... c5.txt there")
    named: dict[str, Path] = {}
    for path in files:
        name = path.stem.lower() if path.stem.lower() in CONFIG_NAMES else path.stem
        if name in named:
            raise ValueError(f"{folder}: {named[name].name} and {path.name} both name {name}; keep one")
        named[name] = path
    order = [n for n in CONFIG_NAMES if n in named] + sorted(n for n in named if n not in CONFIG_NAMES)
    return {n: named[n] for n in order}


def _read_predictions(files: dict[str, Path], references: Path, refs: list[str]) -> dict[str, list[str]]:
    """Each file's lines, which must be as many as the references."""
    predictions = {}
    for name, path in files.items():
        lines = read_text_lines(path, "prediction file", f"one predicted line per line of {references}")
        if len(lines) != len(refs):
            raise ValueError(f"{path}: {len(lines)} lines but {references} has {len(refs)}; write one predicted "
                             "line per reference line, in the same order (an empty line for an empty prediction)")
        predictions[name] = lines
    return predictions


def _prediction_report(folder: Path, references: Path, chunk_chars: int, baseline: str) -> Report:
    """The report of prediction files scored against ``references`` (:func:`cipherlab.analysis.score.score_predictions`)."""
    refs = read_text_lines(references, "references file", "one reference plaintext line per line")
    files = _prediction_files(folder, references)
    predictions = _read_predictions(files, references, refs)
    chunks = tuple(sorted({chunk_chars, *DEFAULT_CHUNKS}))
    scores = {n: score_predictions(p, refs, first=DEFAULT_FIRST, chunks=chunks) for n, p in predictions.items()}
    report = Report([["folder", str(folder)], ["kind", "prediction files"],
                     ["prediction files", ", ".join(p.name for p in files.values())],
                     ["references", f"{references} ({len(refs)} lines)"],
                     ["chunk length", f"{chunk_chars} characters"]])
    _prediction_results(report, predictions, refs, scores, chunks)
    _prediction_paired(report, predictions, refs, baseline, references, folder)
    _prediction_errors(report, predictions, refs, chunk_chars)
    for section, what in ((RANDOM, "random-string predictions: the files hold one set of lines, the references'"),
                          (DECODING, "a second decoding: a prediction file holds one decoding"),
                          (CURVES, "training logs: prediction files hold no training")):
        report.lack(section, str(folder), what)
    return report


def _char_accuracy(predictions: list[str], refs: list[str]) -> float:
    """Reference characters predicted at their own position, over all reference characters."""
    right = sum(sum(a == b for a, b in zip(p, r)) for p, r in zip(predictions, refs))
    return right / max(sum(map(len, refs)), 1)


def _prediction_results(report: Report, predictions: dict, refs: list[str], scores: dict, chunks: tuple) -> None:
    """Whole-line metrics, then the same predictions cut into the other units people report."""
    rows = []
    for name, p in predictions.items():
        w = scores[name]["whole_lines"]
        exact = sum(a == b for a, b in zip(p, refs))
        rows.append([name.upper(), w["lines"], _pct(w["bit_accuracy"]), _pct(_char_accuracy(p, refs)),
                     _pct(w["char_error_rate"]), _of(exact, len(refs)), _pct(w["sequence_accuracy"], 2),
                     sum(len(a) != len(b) for a, b in zip(p, refs)), _num(w["levenshtein"], ".2f"),
                     _num(w["chrf"], ".2f"), _num(w["bleu"], ".2f"), _num(w["rougeL"], ".4f")])
    report.table(RESULTS, "Whole lines: bit accuracy %, characters right at their position %, character error "
                 "rate %, exact lines, lines of the wrong length, Levenshtein edits per line, chrF, BLEU, ROUGE-L F1",
                 ablation.markdown_table(["predictions", "lines", "bit acc %", "characters %", "CER %", "exact lines",
                                         "exact lines %", "wrong length", "Levenshtein", "chrF", "BLEU", "ROUGE-L"],
                                        rows))
    headers = ["predictions", *(f"first {n} characters: bit acc % / exact %" for n in DEFAULT_FIRST),
               *(f"chunks of {k}: exact % of chunks / of full chunks" for k in chunks)]
    rows = [[name.upper(),
             *(f"{_pct(s['first_chars'][str(n)]['bit_accuracy'])} / {_pct(s['first_chars'][str(n)]['exact'], 2)}"
               for n in DEFAULT_FIRST),
             *(f"{_pct(s['chunks'][str(k)]['exact'], 2)} of {s['chunks'][str(k)]['chunks']} / "
               f"{_pct(s['chunks'][str(k)]['exact_full_chunks_only'], 2)}" for k in chunks)]
            for name, s in scores.items()]
    report.table(RESULTS, "The same predictions in the units other reports use: the first characters of each line "
                 "(bit accuracy %, exact %), and chunks of k characters (exact % of all chunks / of full chunks only)",
                 ablation.markdown_table(headers, rows))


def _outcomes(predictions: list[str], refs: list[str]) -> str:
    """Per-line outcomes as the records keep them: "1" exact, "0" not."""
    return "".join("1" if p == r else "0" for p, r in zip(predictions, refs))


def _prediction_paired(report: Report, predictions: dict, refs: list[str], baseline: str, references: Path,
                       folder: Path) -> None:
    """Each file against the baseline's file, McNemar's exact test on the per-line outcomes."""
    if baseline not in predictions:
        report.lack(PAIRED, str(folder), f"{baseline}.txt, the predictions to compare with (--baseline)")
        return
    base = _outcomes(predictions[baseline], refs)
    rows = []
    for name, p in predictions.items():
        if name != baseline:
            mine = _outcomes(p, refs)
            only_base, only_config, pvalue = ablation.mcnemar(base, mine)
            rows.append({"config": name, "seed": "–", "label": references.name, "lines": len(refs),
                         "base_exact": base.count("1"), "exact": mine.count("1"), "only_base": only_base,
                         "only_config": only_config, "p": pvalue})
    if not rows:
        report.lack(PAIRED, str(folder), f"a prediction file other than {baseline}.txt")
        return
    _add_paired(report, rows, baseline)


def _position_errors(predictions: list[str], refs: list[str], period: int) -> tuple[list[int], list[int]]:
    """(wrong, seen) reference characters at each position modulo ``period``; a missing character is wrong."""
    wrong, seen = [0] * period, [0] * period
    for p, r in zip(predictions, refs):
        for i, c in enumerate(r):
            seen[i % period] += 1
            wrong[i % period] += i >= len(p) or p[i] != c
    return wrong, seen


def _class_errors(predictions: list[str], refs: list[str]) -> dict[str, tuple[int, int]]:
    """``{class: (wrong, seen)}`` of the reference characters by :func:`cipherlab.analysis.ablation.char_kind`."""
    counts = {kind: [0, 0] for kind in CHAR_KINDS}
    for p, r in zip(predictions, refs):
        for i, c in enumerate(r):
            cell = counts[ablation.char_kind(c)]
            cell[0] += i >= len(p) or p[i] != c
            cell[1] += 1
    return {kind: (w, n) for kind, (w, n) in counts.items()}


def _rate(wrong: int, seen: int) -> str:
    """An error rate cell: "rate % (wrong)"; "–" where no character was seen."""
    return f"{100 * wrong / seen:.2f} ({wrong})" if seen else "–"


def _length_rows(predictions: dict, refs: list[str]) -> list[list]:
    """Exact lines by length bin per file, beside what independent errors at the file's CER would leave."""
    right = {}  # per file: the share of reference characters right at their position
    for name, p in predictions.items():
        wrong, seen = _position_errors(p, refs, 1)
        right[name] = 1 - wrong[0] / max(seen[0], 1)
    rows = []
    for lo, hi in LENGTH_BINS:
        inside = [i for i, r in enumerate(refs) if lo <= len(r) < hi]
        if inside:
            cells = []
            for name, p in predictions.items():
                exact = sum(p[i] == refs[i] for i in inside) / len(inside)
                independent = sum(right[name] ** len(refs[i]) for i in inside) / len(inside)
                cells.append(f"{_pct(exact, 1)} ({_pct(independent, 1)})")
            rows.append([f"{lo}+" if hi >= 10**6 else f"{lo}–{hi - 1}", len(inside), *cells])
    return rows


def _prediction_errors(report: Report, predictions: dict, refs: list[str], chunk_chars: int) -> None:
    """Error rates by key phase, chunk position, character class, and exact lines by line length."""
    names = [n.upper() for n in predictions]
    for what, period, label in (("key phase (position mod 8)", PERIOD, "key phase"),
                                (f"position in the {chunk_chars}-character chunk", chunk_chars, "chunk position")):
        counts = [_position_errors(p, refs, period) for p in predictions.values()]
        rows = [[i, *(_rate(w[i], s[i]) for w, s in counts)] for i in range(period)]
        report.table(ERRORS, f"Character error rate % (wrong characters) by {what}; a missing character counts as "
                     "wrong", ablation.markdown_table([label, *(f"{n}: error % (wrong)" for n in names)], rows))
    classes = [_class_errors(p, refs) for p in predictions.values()]
    rows = [[kind, classes[0][kind][1], *(_rate(*c[kind]) for c in classes)] for kind in CHAR_KINDS]
    report.table(ERRORS, "Character error rate % (wrong characters) by class of the reference character",
                 ablation.markdown_table(["class", "characters", *(f"{n}: error % (wrong)" for n in names)], rows))
    report.table(ERRORS, "Exact lines % by reference line length, and (in parentheses) the % independent character "
                 "errors at the file's own error rate would leave exact",
                 ablation.markdown_table(["line length, characters", "lines",
                                         *(f"{n}: exact % (independent %)" for n in names)],
                                        _length_rows(predictions, refs)))


# --------------------------------------------------------------------------- writing, and the command


def check_out(out: str | Path, force: bool = False) -> Path:
    """``out`` as a Path if the report may be written there: never inside the repository's committed
    ``results/``, and a folder that is not empty only with ``force``. Checks only; creates nothing."""
    out = outside_results(out, "--out")
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out {out}: a file, not a folder; name a folder for report.md and its figures")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise FileExistsError(f"--out {out}: the folder is not empty; choose a new folder, or pass --force to "
                              f"write {REPORT_FILE} and its figures over what is there")
    return out


def write_report(report: Report, out: str | Path, force: bool = False) -> Path:
    """Write ``out/report.md`` and its figures (PNG); return the path of report.md."""
    out = writable_folder(check_out(out, force), "--out")
    for name, fig in report.figures.items():
        fig.savefig(out / name, dpi=110)
    return write_text_atomic(out / REPORT_FILE, report.markdown())  # whole or not at all (a full disk)


# --------------------------------------------------------------------------- the parts each run was trained with


def _short(digest) -> str:
    return digest[:12] if isinstance(digest, str) and digest else "–"


def _own_parts(record: dict) -> list[dict]:
    """A record's ``parts`` (:func:`cipherlab.student.parts.part_records`): the student's classes it was trained with."""
    parts = record.get("parts")
    return [p for p in parts if isinstance(p, dict) and "part" in p] if isinstance(parts, list) else []


def parts_summary(runs: dict[str, dict]) -> str | None:
    """One line on the parts of ``runs`` (label -> record): whose each replaced part is in which runs, and
    whether the folder mixes the student's parts with cipherlab's own or two versions of one class; None when
    every run used cipherlab's own parts."""
    own = {label: {p["part"]: p for p in _own_parts(r)} for label, r in runs.items()}
    names = list(dict.fromkeys(part for parts in own.values() for part in parts))
    if not names:
        return None
    said, mixed = [], []
    for part in names:
        yours = [label for label in runs if part in own[label]]
        theirs = [label for label in runs if part not in own[label]]
        versions = {(own[label][part].get("class"), own[label][part].get("class_sha256") or
                     own[label][part].get("sha256")) for label in yours}
        said.append(f"{part}: yours in {', '.join(yours)}" + (f", cipherlab's in {', '.join(theirs)}" if theirs else ""))
        if theirs:
            mixed.append(f"{part} is yours in {', '.join(yours)} and cipherlab's in {', '.join(theirs)}")
        if len(versions) > 1:
            mixed.append(f"{part} is {len(versions)} different classes or versions of one (see the sha256s)")
    line = "; ".join(said)
    if mixed:
        line += (" — MIXED: " + "; ".join(mixed) + ": a comparison between these runs compares the parts too, "
                 "not only the configurations")
    return line


def _parts_table(runs: dict[str, dict]) -> str:
    """Each run's parts: the student's class, its file and hashes, or cipherlab's own."""
    rows = []
    for label, record in runs.items():
        parts = _own_parts(record)
        if not parts:
            rows.append([label, "all", "cipherlab's own", "–", "–", "–"])
        for p in parts:
            rows.append([label, p["part"], str(p.get("class", "?")), str(p.get("file") or "–"),
                         _short(p.get("class_sha256")), _short(p.get("sha256"))])
    return ablation.markdown_table(["run", "part", "class", "file", "class sha256", "file sha256"], rows)


def _add_parts(report: Report, runs: dict[str, dict]) -> None:
    """Where any run was trained with the student's parts: a row of the inputs table saying whose parts are
    in which run (and whether the folder mixes them) and a table of each run's parts (--part, cipherlab.student.parts)."""
    summary = parts_summary(runs)
    if summary is None:
        return
    report.inputs.append(["parts", summary])
    report.table(RESULTS, "Parts each run was trained with (--part): the part, your class, its file, the sha256 "
                 "of the class's own source and of the file (first 12 hex digits; – where not recorded); "
                 "cipherlab's own where a run replaced none", _parts_table(runs))


# --------------------------------------------------------------------------- the report's skeleton: findings first

FINDINGS_PROMPT = ("<!-- Write your findings here, before the tables: one short paragraph each, the strongest "
                   "first, each naming the table below that shows it. Say first what the recipe hands every "
                   "model (the next section) and whether your comparison survives that. The results chapter of the "
                   "book is a worked example. -->")


def _add_recipe(report: Report, runs: dict[str, dict]) -> None:
    """The table of the recipe's parts in these runs and what each knows of the task
    (:data:`cipherlab.base.config.RECIPE_KNOWLEDGE`); a lack where the records do not say."""
    from cipherlab.base.config import RECIPE_KNOWLEDGE

    rows = []
    for part, knows in RECIPE_KNOWLEDGE.items():
        values = {str(r.get("hyperparameters", {}).get(part)) for r in runs.values()}
        if values == {"None"}:
            continue
        rows.append([f"`{part}`", ", ".join(sorted(values)), knows])
    if rows:
        report.table(RECIPE, "The recipe's parts in these runs (every value that occurs) and what each knows of the "
                     "task beyond the training pairs", ablation.markdown_table(["part", "value", "what it knows"], rows))
    else:
        report.lack(RECIPE, ", ".join(runs), "the recipe's fields (records written before the recipe existed)")
