"""Markdown tables of a run's records.

Each function takes what :mod:`cipherlab.analysis.ablation.records` read (and the rows of
:mod:`cipherlab.analysis.ablation.stats`) and returns a Markdown table laid out by
:func:`cipherlab.base.markdown.markdown_table`: a run, beside figures others reported (:func:`comparison_table`),
the source modes, beam search, out-of-corpus lines and the calibration runs, each change against C1
at equal minutes and at equal epochs, this repository's :data:`TARGETS`, how far each model trained
in its budget, C2 and C5 trained on, and free against length-aware decoding. The learn and reference
ablations' tables are in :mod:`cipherlab.analysis.ablation.probe_tables`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from cipherlab.base.config import CONFIG_NAMES
from cipherlab.analysis.ablation.records import (_source_modes, change_from_c1, error_entry, load_curve,
                                       load_run, metric, run_path)
from cipherlab.analysis.ablation.stats import NOISE_SE, decoding_rows, epoch_seconds, single_change_rows
from cipherlab.base.markdown import markdown_table, num, pct, pct2

__all__ = [
    "TARGETS",
    "Target",
    "ablation_table",
    "beam_table",
    "budget_table",
    "calibration_table",
    "comparison_table",
    "continued_from",
    "decoding_table",
    "equal_epochs_table",
    "extended_table",
    "extension_table",
    "generalisation_table",
    "mode_table",
    "target_rows",
    "targets_table",
    "trained_on",
]


# --------------------------------------------------------------------------- a run beside the reported figures


def comparison_table(run_folder: str | os.PathLike, bits_folder: str | os.PathLike | None = None, *,
                     references: dict[str, dict[str, dict]] | None = None, note: str = "",
                     bits_label: str = "a BPE over cipher bits") -> str:
    """A Markdown table of one run, beside figures others reported when ``references`` is given.

    Per configuration: bit accuracy and exact lines (percent), mean Levenshtein distance per line,
    BLEU, chrF, ROUGE-L, parameters, peak memory (MiB), seconds per epoch and training tokens per
    second of ``run_folder``; the bits-mode bit accuracy and exact lines of ``bits_folder`` when
    given; then ``references``, ``{column label: {config: {"bit_accuracy": x, "exact_lines": y}}}``
    (fractions, None where none was reported), explained by ``note``.
    """
    records = load_run(run_folder)
    bits = load_run(bits_folder) if bits_folder is not None else {}
    references = references or {}
    headers = ["config", "change from C1", "bit acc %", "exact lines %", "Levenshtein", "BLEU", "chrF",
               "ROUGE-L", "params", "peak MiB", "s/epoch", "train tok/s"]
    if bits:
        headers += ["bits mode: bit acc %", "bits mode: exact %"]
    for label in references:
        headers += [f"{label}: bit acc %", f"{label}: exact %"]
    rows = []
    for name, r in records.items():
        peak = r.get("peak_memory_bytes")
        row = [name.upper(), change_from_c1(r), pct2(metric(r, "bit_accuracy")), pct(metric(r, "sequence_accuracy")),
               num(metric(r, "levenshtein"), ".1f"), num(metric(r, "bleu"), ".1f", "n/c"),
               num(metric(r, "chrf"), ".1f"), num(metric(r, "rougeL"), ".3f", "n/c"), f"{r['params']:,}",
               num(peak and peak / 2**20, ".0f"), num(r["seconds_per_epoch"], ".1f"),
               num(r.get("train_tokens_per_s"), ".0f")]
        if bits:
            b = bits.get(name)
            row += [pct2(b and metric(b, "bit_accuracy")), pct(b and metric(b, "sequence_accuracy"))]
        for figures in references.values():
            given = figures.get(name, {})
            row += [pct2(given.get("bit_accuracy")), pct(given.get("exact_lines"))]
        rows.append(row)
    first = next(iter(records.values()))
    lines = [
        markdown_table(headers, rows),
        "",
        f"Run `{run_path(run_folder).name}`: preset `{first.get('preset', '?')}`, C1-C4 source mode "
        f"`{_source_modes(records)}`, "
        f"{first['sets']['test']['lines']} test lines, greedy decoding, device {first.get('device', '?')}. "
        "Exact lines = sequence accuracy (whole lines right). Levenshtein: mean character edits per line. "
        "n/c: not comparable (BLEU and ROUGE are reported for the tokenised C1-C4 only). "
        "Training tokens are each configuration's own target units (BPE pieces for C1-C4, bytes for C5). "
        "Peak memory: CUDA max_memory_allocated on a GPU, the process's peak resident set size on a CPU.",
    ]
    if bits:
        lines[-1] += f" Bits mode: run `{run_path(bits_folder).name}`, {bits_label}."
    if note:
        lines += ["", note]
    return "\n".join(lines) + "\n"


def mode_table(records: dict[str, dict], bits_records: dict[str, dict]) -> str:
    """Bit accuracy, exact lines (percent) and epochs trained of C1-C4 with each source mode, side by side."""
    rows = [[name.upper(), pct2(metric(records[name], "bit_accuracy")), pct2(metric(b, "bit_accuracy")),
             pct(metric(records[name], "sequence_accuracy")), pct(metric(b, "sequence_accuracy")),
             records[name]["epochs"], b["epochs"]]
            for name, b in bits_records.items() if name in records]
    mine, theirs = _source_modes(records), _source_modes(bits_records)
    return markdown_table(["config", f"bit acc %: {mine}", theirs, f"exact lines %: {mine}", theirs,
                           f"epochs: {mine}", theirs], rows)


def beam_table(beam: dict) -> str:
    """Every decoding of every configuration in ``beam.json``: bit accuracy, exact lines, Levenshtein, chrF."""
    rows = [[name.upper(), decoding, m.get("lines", "?"), pct2(metric(m, "bit_accuracy")),
             pct(metric(m, "sequence_accuracy")), num(metric(m, "levenshtein"), ".1f"), num(metric(m, "chrf"), ".1f")]
            for name, entry in beam.items() for decoding, m in entry.items()]
    return markdown_table(["config", "decoding", "lines", "bit acc %", "exact lines %", "Levenshtein", "chrF"], rows)


def generalisation_table(records: dict[str, dict], general: dict) -> str:
    """The Brown test lines against the out-of-corpus lines, per configuration of ``generalisation.json``.

    ``records`` must be the run of the models that decoded the docstrings; a configuration it lacks gets an
    empty Brown row.
    """
    rows = []
    for name, out in general.items():
        brown = records[name]["sets"]["test"] if name in records else {}
        for label, m in (("Brown test lines", brown), ("stdlib docstrings", out)):
            rows.append([name.upper(), label, m.get("lines", "?"), pct2(metric(m, "bit_accuracy")),
                         pct(metric(m, "sequence_accuracy")), num(metric(m, "char_error_rate"), ".3f"),
                         num(metric(m, "chrf"), ".1f")])
    return markdown_table(["config", "text", "lines", "bit acc %", "exact lines %", "CER", "chrF"], rows)


def calibration_table(calibration: dict) -> str:
    """The calibration runs: what each changed from the ``cpu`` preset, how far it got, its validation scores."""
    rows = []
    for run in calibration["runs"]:
        val = run.get("val60") or {}
        changes = ", ".join(f"{k}={v}" for k, v in (run.get("overrides") or {}).items()) or "-"
        rows.append([run["id"], run["config"].upper(), changes, len(run.get("epochs", [])),
                     pct(val.get("bit_accuracy")), pct(val.get("sequence_accuracy")),
                     num(val.get("char_error_rate"), ".3f"), run.get("note", "")])
    return markdown_table(["run", "config", "settings", "epochs", "val bit acc %", "val exact %", "val CER",
                           "what it tests"], rows)


# --------------------------------------------------------------------------- each change against C1


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
                     pct2(before and metric(before, "bit_accuracy")), pct2(metric(r, "bit_accuracy")),
                     pct(before and metric(before, "sequence_accuracy")), pct(metric(r, "sequence_accuracy")),
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


def target_rows(runs: dict[str, dict[str, dict]], errors: dict | None = None, *,
                names: dict[str, str] | None = None) -> list[dict]:
    """Every model of ``runs`` (``{run: records}``) under each decoding, with its targets.

    Decodings: ``"free"`` (the record's own test metrics) and ``"length-aware"`` (from ``errors``,
    where it has the model; ``names`` as for :func:`~cipherlab.analysis.ablation.records.error_entry`). Each
    row: config, run, epochs, decoding, metrics and ``checks``, a list of (Target, value, met).
    """
    rows = []
    for name in CONFIG_NAMES:
        for run, records in runs.items():
            if name not in records:
                continue
            decodings = [("free", records[name]["sets"]["test"])]
            entry = error_entry(errors, run, name, names=names)
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
                      pct2(metric(row["metrics"], "bit_accuracy")),
                      pct(metric(row["metrics"], "sequence_accuracy")), ", ".join(met) or "–", verdict])
    return markdown_table(["config", "model", "decoding", "bit acc %", "exact lines %", "targets met", "verdict"],
                          table)


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
        rows.append([name.upper(), r["epochs"], num(r["seconds_per_epoch"], ".0f"), spread]
                    + [num(losses.get(epoch), ".4f") for epoch in range(1, last + 1)]
                    + [pct2(metric(r, "bit_accuracy")), pct(metric(r, "sequence_accuracy"))])
    return markdown_table(["config", "epochs", "s/epoch", "fastest–slowest epoch, s"]
                          + [f"val loss, epoch {epoch}" for epoch in range(1, last + 1)]
                          + ["bit acc %", "exact lines %"], rows)


# --------------------------------------------------------------------------- C2 and C5 trained on


def extended_table(stages: dict[str, dict[str, dict]], errors: dict | None = None, *,
                   names: dict[str, str] | None = None) -> str:
    """Each configuration of the last stage through every stage (``{run: records}``, oldest first): epochs,
    best validation loss, and the test metrics with free and (from ``errors``, ``names`` as for
    :func:`~cipherlab.analysis.ablation.records.error_entry`) length-aware greedy decoding."""
    last = list(stages.values())[-1]
    rows = []
    for name in last:
        for run, records in stages.items():
            if name not in records:
                continue
            r = records[name]
            aware = (error_entry(errors, run, name, names=names) or {}).get("test_length_aware")
            rows.append([name.upper(), run, r["epochs"], num(r.get("best_val_loss"), ".4f"),
                         pct2(metric(r, "bit_accuracy")), pct(metric(r, "sequence_accuracy")),
                         pct2(aware and metric(aware, "bit_accuracy")),
                         pct(aware and metric(aware, "sequence_accuracy"))])
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
               extended_run: str | os.PathLike) -> dict[str, dict]:
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
                     f"{budget:.0f}" if budget else "none", num(hp.get("max_epochs"), "d"), r.get("stopped", "?"),
                     r.get("best_epoch", "?")])
    return markdown_table(["config", "continued", "epochs before", "epochs after", "time budget, s", "max_epochs",
                           "stopped by", "best epoch"], rows)


# --------------------------------------------------------------------------- free or length-aware decoding


def decoding_table(errors: dict, *, names: dict[str, str] | None = None) -> str:
    """Free against length-aware greedy decoding for every model ``errors.json`` analysed (``names`` as for
    :func:`~cipherlab.analysis.ablation.stats.decoding_rows`)."""
    rows = [[r["label"], f"{r['wrong_length']} of {r['lines']}",
             pct2(metric(r["free"], "bit_accuracy")), pct2(metric(r["aware"], "bit_accuracy")),
             pct(metric(r["free"], "sequence_accuracy")), pct(metric(r["aware"], "sequence_accuracy")),
             num(metric(r["free"], "char_error_rate"), ".4f"), num(metric(r["aware"], "char_error_rate"), ".4f")]
            for r in decoding_rows(errors, names=names)]
    return markdown_table(["model", "free: lines of wrong length", "free: bit acc %", "length-aware: bit acc %",
                           "free: exact %", "length-aware: exact %", "free: CER", "length-aware: CER"], rows)
