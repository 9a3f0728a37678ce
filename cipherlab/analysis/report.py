"""The analysis of your own runs: ``python -m cipherlab report RUNS_DIR --out DIR``.

RUNS_DIR holds one of two kinds of input:

- run records (:mod:`cipherlab.runner.record`, one layout whoever wrote them): ``c1.json`` ... ``c5.json``
  as ``python -m cipherlab train`` and ``ablate`` write them (and ``errors.json``, where the run's errors were
  analysed), or ``<name>-c1-seed0.json`` ..., one record per configuration and seed. Each
  record holds its decrypted sets (``sets``: ``test``, ``test_free``, ``random_letters`` ...) and its
  training log (``log``);
- your own model's predictions: one ``.txt`` file per configuration (``c1.txt`` ... ``c5.txt``, or any
  name), one predicted plaintext line per line of ``--references FILE``, scored by :mod:`cipherlab.analysis.score`.

``DIR/report.md`` holds only Markdown tables and figures, each with a caption naming its measures: for run
records the course handout's metrics and costs first (:mod:`cipherlab.analysis.handout`, which the command also
prints, and writes as PNG and PDF figures and LaTeX tables with ``--figures`` and ``--latex``), then the
results in every unit the inputs allow, each configuration against C1 on the same lines (McNemar's exact
test, :func:`cipherlab.analysis.ablation.mcnemar`), where the errors are, the random-string probe, free against
length-aware decoding and the training curves (``curves.png``). A section appears only when the inputs
hold its data; the table "Not available" names each input and what it lacks. The tables are made by
the functions of :mod:`cipherlab.analysis.ablation`, so a report on ``results/reference`` holds the reference
tables cell for cell.

Nothing is written inside the repository's committed ``results/`` folder, nor into a folder that is not
empty unless ``--force`` is given. Bad input (a missing or empty folder, records of runs that cannot be
compared, a broken record or one an older cipherlab wrote, a prediction file of the wrong length) stops the
command with one line that names the file and the fix (:func:`cipherlab.runner.errors.run_command`).
"""

from __future__ import annotations

import collections
import re
from dataclasses import dataclass, field
from pathlib import Path

from cipherlab.analysis import ablation, handout
from cipherlab.data.cipher import PERIOD
from cipherlab.base.config import CONFIG_NAMES, make_config
from cipherlab.runner.errors import first_line, outside_results, writable_folder
from cipherlab.base.files import write_atomic
from cipherlab.base.markdown import num
from cipherlab.analysis.score import DEFAULT_CHUNKS, DEFAULT_FIRST, read_text_lines, score_predictions
from cipherlab.runner.record import SCHEMA, read_record
from cipherlab.student.parts import mixed_parts, part_places

__all__ = ["DEFAULT_CHUNK_CHARS", "LENGTH_BINS", "REPORT_FILE", "Block", "Report", "build_report",
           "check_out", "parts_summary", "write_report"]

DEFAULT_CHUNK_CHARS = 32  # the cpu preset's chunk length (Config.chunk_chars): lines are decoded chunk by chunk
LENGTH_BINS = ((0, 100), (100, 200), (200, 400), (400, 800), (800, 10**6))  # line lengths in characters, as errors.json bins them
REPORT_FILE = "report.md"
CURVES_FILE = "curves.png"
PROBE_GLOB = "*c[1-5]*-seed*.json"  # <name>-c1-seed0.json, one per configuration and seed (ablation.load_learn_runs)
TRAIN_FILE = re.compile(r"c[1-5]\.json")  # c1.json (train/ablate, ablation.load_run)
SECTIONS = ("What the recipe hands the model", "Results", "Paired comparisons against the baseline",
            "Where the errors are", "Random-string probe", "Free or length-aware decoding", "Training curves")
RECIPE, RESULTS, PAIRED, ERRORS, RANDOM, DECODING, CURVES = SECTIONS
CHAR_KINDS = ("capital", "lowercase", "digit", "space", "punctuation")  # ablation.char_kind's classes
_RANDOM_SETS = ("random_letters", "random_alphabet")
_LEARN_SETS = ("random_letters", "stdlib", "test_free", "test")  # what ablation.learn_tables reads
_FREE, _AWARE = "test_free", "test"
# the test set's further metrics where a record has them (train/ablate score them): key, header, format
_FURTHER = (("levenshtein", "Levenshtein", ".2f"), ("chrf", "chrF", ".2f"), ("bleu", "BLEU", ".2f"),
            ("rouge1", "ROUGE-1", ".4f"), ("rouge2", "ROUGE-2", ".4f"), ("rougeL", "ROUGE-L", ".4f"))


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
    handout: list = field(default_factory=list)  # the handout's tables (handout.Table): stdout and --latex
    handout_figures: dict = field(default_factory=dict)  # file stem -> Figure: --figures, as PNG and PDF

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
                 chunk_chars: int = DEFAULT_CHUNK_CHARS, baseline: str = "c1", plan: str | Path | None = None
                 ) -> Report:
    """The report of the records or prediction files in ``runs_dir`` (see the module docstring).

    ``references``: the reference plaintext lines for prediction files; ``baseline``: the configuration
    (or prediction file name) every other is compared with; ``plan``: a ``python -m cipherlab plan --json``
    file, whose estimated FLOPs the costs table shows (:mod:`cipherlab.analysis.handout`). Raises
    FileNotFoundError / ValueError with a one-line message naming the file and the fix for input that cannot
    be reported on.
    """
    folder = Path(runs_dir)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder; pass the folder that holds the run records "
                                "(e.g. runs/cpu) or your prediction files")
    if chunk_chars < 1:
        raise ValueError(f"--chunk-chars {chunk_chars}: a chunk holds at least 1 character")
    if references is not None:
        if plan is not None:
            raise ValueError(f"--plan {plan}: the FLOPs it estimates go beside run records' costs, and prediction "
                             "files (--references) hold no training; leave --plan out, or report on run records")
        return _prediction_report(folder, Path(references), chunk_chars, baseline)
    return _record_report(folder, baseline, None if plan is None else handout.read_plan(plan))


def _is_record(path: Path) -> bool:
    """Whether a file is named as run records are (``c1.json``, ``<name>-c1-seed0.json``)."""
    return TRAIN_FILE.fullmatch(path.name) is not None or path.match(PROBE_GLOB)


def _nothing_to_report(folder: Path) -> ValueError:
    """The error for a folder without records: it names sub-folders that have some, and prediction files."""
    inside = sorted(p.parent.name for p in folder.glob("*/*.json") if _is_record(p))
    if inside:
        return ValueError(f"{folder}: no run records here, but in its sub-folder(s) "
                          f"{', '.join(dict.fromkeys(inside))}; pass one of those")
    if any(folder.glob("*.txt")):
        return ValueError(f"{folder}: holds .txt files but no run records; to score them as predictions, pass "
                          "--references FILE with the reference plaintext lines")
    return ValueError(f"{folder}: no run records (c1.json ... c5.json from train/ablate, or <name>-c1-seed0.json "
                      "..., one per configuration and seed); pass the folder a run wrote, or prediction files with "
                      "--references")


# --------------------------------------------------------------------------- reading and checking records


def _same(folder: Path, where: dict, read, what: str) -> None:
    """ValueError when the records (``{file: record}``) differ in ``read(record)``: they cannot be compared."""
    seen: dict = {}
    for path, record in where.items():
        seen.setdefault(read(record), path)
    if len(seen) > 1:
        (a, pa), (b, pb) = list(seen.items())[:2]
        raise ValueError(f"{folder}: records of different {what} cannot be compared ({pa.name}: {a}, "
                         f"{pb.name}: {b}); put each run in its own folder and report on each")


def _load_records(folder: Path) -> tuple[dict, dict]:
    """``({(config, seed): record}, {(config, seed): file})`` of a folder's records
    (:func:`cipherlab.runner.record.read_record`), checked comparable."""
    files = sorted(p for p in folder.glob("*.json") if _is_record(p))
    if not files:
        raise _nothing_to_report(folder)
    runs, where = {}, {}
    for path in files:
        record = read_record(path)
        if record["config"] not in CONFIG_NAMES:
            raise ValueError(f"{path}: configuration {record['config']!r} is none of "
                             f"{', '.join(CONFIG_NAMES)}; move it out of the folder")
        key = (record["config"], record["seed"])
        if key in runs:
            raise ValueError(f"{folder}: {where[key].name} and {path.name} are both {key[0].upper()} seed "
                             f"{key[1]}, records of two runs; put each run in its own folder and report on each")
        runs[key], where[key] = record, path
    by_file = {where[k]: r for k, r in runs.items()}
    _same(folder, by_file, lambda r: r["preset"], "presets")
    _same(folder, by_file, lambda r: r["recipe"], "recipes")
    for name in _sets(runs, every=False):
        _same(folder, {p: r for p, r in by_file.items() if name in r["sets"]},
              lambda r: r["sets"][name]["lines"], f"numbers of {_label(runs, name)} lines")
    return dict(sorted(runs.items())), where


def _sets(runs: dict, every: bool = True) -> list[str]:
    """The sets every record holds (``every``) or any does, those of :data:`ablation.REFERENCE_SETS` first."""
    names = dict.fromkeys([n for n, _ in ablation.REFERENCE_SETS] + [n for r in runs.values() for n in r["sets"]])
    held = all if every else any
    return [n for n in names if held(n in r["sets"] for r in runs.values())]


def _label(runs: dict, name: str) -> str:
    """A set's name in the tables (:data:`ablation.REFERENCE_SETS`); the test lines name their decoding
    where it is not length-aware (train/ablate decode them freely)."""
    decodings = sorted({r["sets"][name]["decoding"] for r in runs.values() if name in r["sets"]})
    if name == "test" and decodings != ["length-aware greedy"]:
        return f"test lines, {' / '.join(decodings)}"
    return dict(ablation.REFERENCE_SETS).get(name, name)


def _names(runs: dict) -> dict:
    """Each run's name in the tables: "C1", or "C1 seed 0" where the folder holds several seeds of C1."""
    configs = [c for c, _ in runs]
    return {(c, s): c.upper() if configs.count(c) == 1 else f"{c.upper()} seed {s}" for c, s in runs}


# --------------------------------------------------------------------------- formatting


def _pct(value: float | None, digits: int = 3) -> str:
    """A fraction as percent; "–" where there is none."""
    return "–" if value is None else f"{100 * value:.{digits}f}"


def _of(exact: int, lines: int) -> str:
    """Exact lines as "n of N"."""
    return f"{exact} of {lines}"


def _metric(scored: dict, key: str, fmt: str) -> str:
    """A metric of a set: "n/c" where the record marks it not comparable, "–" where it has none."""
    return "n/c" if key in (scored.get("not_comparable") or {}) else num(scored.get(key), fmt)


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


# --------------------------------------------------------------------------- run records


def _record_report(folder: Path, baseline: str, plan: dict | None = None) -> Report:
    """The report of a folder of run records: the handout's metrics and costs first, then every section their
    sets, logs and ``errors.json`` allow."""
    runs, where = _load_records(folder)
    first = next(iter(runs.values()))
    scored = {n: next(r["sets"][n] for r in runs.values() if n in r["sets"]) for n in _sets(runs, every=False)}
    report = Report([["folder", str(folder)], ["kind", f"run records ({SCHEMA})"],
                     ["records", ", ".join(p.name for p in sorted(where.values()))],
                     ["preset", str(first["preset"])], ["recipe", str(first["recipe"] or "not recorded")],
                     ["seeds", ", ".join(str(s) for s in sorted({s for _, s in runs}))],
                     ["sets", ", ".join(f"{n} ({s['lines']} lines, {s['decoding']})" for n, s in scored.items())]])
    named = {_names(runs)[key]: r for key, r in runs.items()}
    _add_recipe(report, named)
    _handout(report, runs, baseline, plan)
    _results(report, runs, where, folder)
    _paired(report, runs, baseline, folder)
    _errors(report, runs, folder)
    _random(report, runs, folder)
    _decoding(report, runs, folder)
    _curves(report, runs, folder)
    _add_parts(report, named)
    return report


def _handout(report: Report, runs: dict, baseline: str, plan: dict | None) -> None:
    """The handout's metrics and costs (:mod:`cipherlab.analysis.handout`) at the head of the results, and its
    figures: the learning curves beside the training curves, the test metrics and cost ratios in the results."""
    names = _names(runs)
    report.handout = handout.handout_tables(runs, names, baseline, plan)
    for table in report.handout:
        report.table(RESULTS, table.caption, table.markdown())
    report.handout_figures = handout.handout_figures(runs, names, report.handout)
    captions = {"learning_curves": (CURVES, "Validation token accuracy % and validation loss against the optimiser "
                                    "step, every run (its curve where recorded, else one point an epoch)"),
                "test_metrics": (RESULTS, "Test lines, greedy decoding: sequence accuracy %, bit accuracy % (both "
                                 "axes start below the lowest bar) and Levenshtein edits per line"),
                "cost_ratios": (RESULTS, f"Each configuration's costs over {baseline.upper()}'s (1 = the same; no "
                                "bar where a value is not recorded or not comparable)")}
    for stem, fig in report.handout_figures.items():
        section, caption = captions[stem]
        report.figure(section, caption, f"{stem}.png", fig)


def _main_table(runs: dict) -> tuple[str, str]:
    """(caption, table): the reference ablation's own table for these records (reference_tables, else
    learn_tables), else one column per set every record holds."""
    held = _sets(runs)
    timed = all(r["train_seconds"] is not None for r in runs.values())
    if timed and all(n in held for n, _ in ablation.REFERENCE_SETS):
        return ("Every run: epochs, best epoch, training minutes, and for each probe set characters right % / "
                "exact lines of the lines decoded (ablation.reference_tables)",
                ablation.reference_tables(runs)[0])
    if timed and set(_LEARN_SETS) <= set(held) and all(r["best_val_accuracy"] is not None for r in runs.values()):
        return ("Every run: epochs, best epoch, training minutes, best teacher-forced validation token accuracy %, "
                "and per set characters or bits right % / exact lines (ablation.learn_tables)",
                ablation.learn_tables(runs)[0])
    headers = ["config", "seed", "epochs", "best epoch", "training minutes",
               *(f"{_label(runs, n)}: bits % / characters % / exact" for n in held)]
    rows = [[c.upper(), s, r["epochs"], r["best_epoch"], num(r["train_seconds"] and r["train_seconds"] / 60, ".1f"),
             *(f"{_pct(x['bit_accuracy'])} / {_pct(x['char_accuracy'])} / {_of(x['exact_lines'], x['lines'])}"
               for x in (r["sets"][n] for n in held))] for (c, s), r in runs.items()]
    return ("Every run: epochs, best epoch, training minutes, and for each set all runs decoded bits right % / "
            "characters right % / exact lines", ablation.markdown_table(headers, rows))


def _units_table(runs: dict) -> str:
    """Every set of every run in every unit it was scored in (the test set's further metrics where present)."""
    names = _sets(runs, every=False)
    further = [m for m in _FURTHER if any(m[0] in r["sets"].get(n, {}) for r in runs.values() for n in names)]
    rows = [[c.upper(), s, _label(runs, n), x["decoding"], x["lines"], _pct(x["bit_accuracy"]),
             _pct(x["char_accuracy"]), _pct(x["char_error_rate"]), _of(x["exact_lines"], x["lines"]),
             _pct(x["sequence_accuracy"], 2), *(_metric(x, key, fmt) for key, _, fmt in further)]
            for (c, s), r in runs.items() for n in names if (x := r["sets"].get(n))]
    return ablation.markdown_table(["config", "seed", "set", "decoding", "lines", "bit acc %", "characters %",
                                   "CER %", "exact lines", "exact lines %", *(h for _, h, _ in further)], rows)


def _results(report: Report, runs: dict, where: dict, folder: Path) -> None:
    """The main table, the run table of train/ablate records (ablation.comparison_table),
    the goals the sets allow (ablation.goals_table) and every unit."""
    report.table(RESULTS, *_main_table(runs))
    if all(TRAIN_FILE.fullmatch(p.name) for p in where.values()):  # the files ablation.load_run reads
        report.table(RESULTS, "Test lines: bit accuracy %, exact lines %, Levenshtein edits per line, BLEU, chrF, "
                     "ROUGE-L, parameters, peak memory MiB, seconds per epoch, training tokens per second "
                     "(ablation.comparison_table; n/c: not comparable)",
                     ablation.comparison_table(folder).split("\n\n")[0])
    goals = tuple(g for g in ablation.REFERENCE_GOALS if g[0] in _sets(runs))
    if goals:
        report.table(RESULTS, "The reference goals these sets allow (ablation.REFERENCE_GOALS): each seed's "
                     "characters, bits or exact lines %, met when every seed meets the target",
                     ablation.goals_table(runs, goals))
    report.table(RESULTS, "Every set of every run: bit accuracy %, characters right %, character error rate %, "
                 "exact lines, how the set was decoded, and Levenshtein edits per line, chrF, BLEU and ROUGE F1 "
                 "where the record has them (n/c: not comparable)", _units_table(runs))


def _paired(report: Report, runs: dict, baseline: str, folder: Path) -> None:
    """Each configuration against ``baseline`` with the same seed on every set all records scored line by
    line (ablation.paired_rows); without per-line outcomes the unpaired comparison (ablation.ablation_table)."""
    if not any(config == baseline for config, _ in runs):
        report.lack(PAIRED, str(folder), f"a {baseline.upper()} record to compare with (--baseline)")
        return
    sets = tuple(n for n in _sets(runs) if all("exact_by_line" in r["sets"][n] for r in runs.values()))
    rows = ablation.paired_rows(runs, baseline, sets) if sets else []
    if rows:
        _add_paired(report, [{**row, "label": _label(runs, row["set"])} for row in rows], baseline)
        return
    report.lack(PAIRED, str(folder), "per-line outcomes (exact_by_line) of a set every record holds, in another "
                f"configuration with the seed of a {baseline.upper()} record")
    by_config = {c: r for (c, _), r in runs.items()}
    if baseline == "c1" and len(by_config) == len(runs) > 1 and all(
            r["seconds_per_epoch"] and r["params"] and "test" in r["sets"] for r in runs.values()):
        report.table(PAIRED, "Unpaired instead: each configuration against C1 in bit accuracy and exact lines "
                     "(points), twice the binomial standard error of the exact-line difference, the reading, "
                     "and the cost ratios (ablation.ablation_table)", ablation.ablation_table(by_config))


def _substitution_table(errors: dict) -> str | None:
    """Per model of ``errors.json``: its example edits by kind, substitutions by the right character's class."""
    counts = collections.defaultdict(collections.Counter)
    for item in ablation.edits(errors):
        for model in item["models"]:
            kind = ablation.char_kind(item["reference"][0]) if item["op"] == "substitute" else item["op"]
            counts[model][kind] += 1
    columns = [*CHAR_KINDS, "drop", "add"]
    models = [ablation.entry_label(key) for key in errors]  # named as errors.json names them
    rows = [[model, *(counts[model][k] for k in columns)] for model in models if model in counts]
    return ablation.markdown_table(["model", *(f"substituted: {k}" for k in CHAR_KINDS), "drops", "additions"],
                                  rows) if rows else None


def _errors(report: Report, runs: dict, folder: Path) -> None:
    """Where the errors are, and free against length-aware decoding, from ``errors.json`` if the folder has one."""
    if not (folder / "errors.json").is_file():
        report.lack(ERRORS, str(folder), "errors.json (where the models go wrong, analysed from their checkpoints): the "
                    "records keep only per-line outcomes and right characters per line; for key phase, chunk "
                    "position, character class and line length, score a file of predictions with --references")
        return
    errors = ablation.load_errors(folder)
    report.table(DECODING, "errors.json: lines of the wrong length decoded freely, bit accuracy %, exact lines % "
                 "and character error rate, free and length-aware greedy", ablation.decoding_table(errors))
    try:
        lengths = [len(line) for line in ablation.lines_of(next(r for r in runs.values() if "test" in r["sets"]))]
        profile = ablation.profile_table(ablation.profile_rows(errors, lengths))
        by_length = ablation.length_table(errors, list(errors), lengths)
    except (OSError, ValueError, KeyError, StopIteration) as e:
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


def _random(report: Report, runs: dict, folder: Path) -> None:
    """The random-string sets, where the records have them."""
    rows = [[c.upper(), s, _label(runs, n), x["lines"], _pct(x["char_accuracy"]), _pct(x["bit_accuracy"]),
             _of(x["exact_lines"], x["lines"])]
            for (c, s), r in runs.items() for n in _RANDOM_SETS if (x := r["sets"].get(n))]
    if not rows:
        report.lack(RANDOM, str(folder), f"random-string sets ({', '.join(_RANDOM_SETS)}; a record holds them "
                    "when its model was also scored on cipherlab.analysis.probes' sets)")
        return
    report.table(RANDOM, "Random strings no language model can predict: characters right %, bit accuracy %, "
                 "exact lines", ablation.markdown_table(["config", "seed", "set", "lines", "characters %",
                                                        "bit acc %", "exact lines"], rows))


def _decoding(report: Report, runs: dict, folder: Path) -> None:
    """The test lines decoded freely and length-aware, with McNemar's test on the paired outcomes."""
    both = {key: r["sets"] for key, r in runs.items() if _FREE in r["sets"] and _AWARE in r["sets"]}
    if not both:
        if not report.sections[DECODING]:  # errors.json compares the decodings where a folder has it
            report.lack(DECODING, str(folder), f"both decodings of the test lines (sets {_FREE} and {_AWARE}), "
                        "or errors.json")
        return
    rows = []
    for (c, s), sets in both.items():
        free, aware = sets[_FREE], sets[_AWARE]
        rows.append([c.upper(), s, free["lines"], _pct(free["bit_accuracy"]), _pct(aware["bit_accuracy"]),
                     _pct(free["char_accuracy"]), _pct(aware["char_accuracy"]), _of(free["exact_lines"], free["lines"]),
                     _of(aware["exact_lines"], aware["lines"]),
                     _mcnemar_cell(free.get("exact_by_line"), aware.get("exact_by_line"))])
    report.table(DECODING, "Test lines, greedy decoding free (EOS where the model puts it) and length-aware: "
                 "bit accuracy %, characters right %, exact lines, and McNemar's exact test of length-aware "
                 "against free (+ lines only length-aware got exact, − only free)",
                 ablation.markdown_table(["config", "seed", "lines", "free: bit acc %", "length-aware: bit acc %",
                                         "free: characters %", "length-aware: characters %", "free: exact",
                                         "length-aware: exact", "length-aware vs free"], rows))


def _valid_log(log) -> bool:
    """Whether a training log is a list of epochs with epoch, val_loss and seconds (what plot_curves reads)."""
    keys = ("epoch", "val_loss", "seconds")
    return bool(log) and all(isinstance(e, dict) and all(k in e for k in keys) for e in log)


def _curves(report: Report, runs: dict, folder: Path) -> None:
    """Each record's ``log``: seconds and validation loss per epoch (ablation.plot_curves)."""
    names = _names(runs)
    logs = {key: r["log"] for key, r in runs.items() if _valid_log(r["log"])}
    lacking = [names[key] for key in runs if key not in logs]
    if lacking:
        report.lack(CURVES, str(folder), f"a training log (log: epoch, val_loss, seconds) in {', '.join(lacking)}")
    if not logs:
        return
    last = max(e["epoch"] for log in logs.values() for e in log)
    rows = []
    for (c, s), r in runs.items():
        log = logs.get((c, s), [])
        losses = {e["epoch"]: e["val_loss"] for e in log}
        rows.append([c.upper(), s, r["epochs"], r["best_epoch"], num(r["seconds_per_epoch"], ".0f"),
                     "{:.0f}–{:.0f}".format(*ablation.epoch_seconds(log)) if log else "–",
                     *(num(losses.get(k), ".4f") for k in range(1, last + 1)), _pct(r["best_val_accuracy"])])
    report.table(CURVES, "Epochs, best epoch, seconds per epoch (mean, fastest–slowest), validation loss (nats per "
                 "target unit) after each epoch, and the best teacher-forced validation token accuracy %",
                 ablation.markdown_table(["config", "seed", "epochs", "best epoch", "s/epoch",
                                         "fastest–slowest epoch, s", *(f"val loss, epoch {k}" for k in
                                                                       range(1, last + 1)),
                                         "best val token accuracy %"], rows))
    report.figure(CURVES, "Validation loss per epoch and against training minutes, every run with a log",
                  CURVES_FILE, ablation.plot_curves({names[key]: log for key, log in logs.items()}))


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
    """The report of prediction files scored against ``references``
    (:func:`cipherlab.analysis.score.score_predictions`)."""
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
                     sum(len(a) != len(b) for a, b in zip(p, refs)), num(w["levenshtein"], ".2f", "n/c"),
                     num(w["chrf"], ".2f", "n/c"), num(w["bleu"], ".2f", "n/c"), num(w["rougeL"], ".4f", "n/c")])
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


def check_out(out: str | Path, force: bool = False, option: str = "--out") -> Path:
    """``out`` as a Path if the report (or, ``option`` --figures or --latex, its figures or LaTeX tables) may be
    written there: never inside the repository's committed ``results/``, and a folder that is not empty only
    with ``force``. Checks only; creates nothing."""
    out = outside_results(out, option)
    what = f"{REPORT_FILE} and its figures" if option == "--out" else "the files"
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"{option} {out}: a file, not a folder; name a folder for {what}")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise FileExistsError(f"{option} {out}: the folder is not empty; choose a new folder, or pass --force to "
                              f"write {what} over what is there")
    return out


def write_report(report: Report, out: str | Path, force: bool = False) -> Path:
    """Write ``out/report.md`` and its figures (PNG); return the path of report.md."""
    out = writable_folder(check_out(out, force), "--out")
    for name, fig in report.figures.items():
        fig.savefig(out / name, dpi=110)
    return write_atomic(out / REPORT_FILE, report.markdown())  # whole or not at all (a full disk)


# --------------------------------------------------------------------------- the parts each run was trained with


def _short(digest) -> str:
    return digest[:12] if isinstance(digest, str) and digest else "–"


def _own_parts(record: dict) -> list[dict]:
    """A record's ``parts`` (:func:`cipherlab.student.parts.part_records`): the student's classes it was
    trained with."""
    parts = record.get("parts")
    return [p for p in parts if isinstance(p, dict) and "part" in p] if isinstance(parts, list) else []


def _components(label: str, record: dict) -> dict | None:
    """A run's ablated components: its record's, else its configuration's (named by the record or the label)."""
    if isinstance(record.get("components"), dict):
        return record["components"]
    name = record.get("config") or label.lower()
    return make_config(name).components() if name in CONFIG_NAMES else None


def parts_summary(runs: dict[str, dict]) -> str | None:
    """One line on the parts of ``runs`` (label -> record): whose each replaced part is in which runs (and which
    runs have no place for it), and whether the folder mixes the student's parts with cipherlab's own or two
    versions of one class where the runs hold the same component (:func:`cipherlab.student.parts.mixed_parts`:
    not C2's missing sinusoidal encoding, nor C4's RMSNorm against C1's LayerNorm); None when every run used
    cipherlab's own parts."""
    own = {label: {p["part"]: p for p in _own_parts(r)} for label, r in runs.items()}
    names = list(dict.fromkeys(part for parts in own.values() for part in parts))
    if not names:
        return None
    components = {label: _components(label, r) for label, r in runs.items()}
    places = {label: part_places(c) for label, c in components.items()}
    said = []
    for part in names:
        yours = [label for label in runs if part in own[label]]
        theirs = [label for label in runs if part not in own[label] and part in places[label]]
        none = [label for label in runs if part not in own[label] and part not in places[label]]
        said.append(f"{part}: yours in {', '.join(yours)}"
                    + (f", cipherlab's in {', '.join(theirs)}" if theirs else "")
                    + (f" (no place for it in {', '.join(none)})" if none else ""))
    mixed = mixed_parts({label: (components[label], list(own[label].values())) for label in runs})
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
    in which run (and whether the folder mixes them) and a table of each run's parts (--part,
    cipherlab.student.parts)."""
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
                   "model (the next section) and whether your comparison survives that. The book's own "
                   "results are a worked example. -->")


def _add_recipe(report: Report, runs: dict[str, dict]) -> None:
    """The table of the recipe's parts in these runs and what each knows of the task
    (:data:`cipherlab.base.config.RECIPE_KNOWLEDGE`); every checked record holds every field."""
    from cipherlab.base.config import RECIPE_KNOWLEDGE

    rows = [[f"`{part}`", ", ".join(sorted({str(r["hyperparameters"][part]) for r in runs.values()})), knows]
            for part, knows in RECIPE_KNOWLEDGE.items()]
    report.table(RECIPE, "The recipe's parts in these runs (every value that occurs) and what each knows of the "
                 "task beyond the training pairs", ablation.markdown_table(["part", "value", "what it knows"], rows))
