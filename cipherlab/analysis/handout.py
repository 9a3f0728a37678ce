"""The course handout's metrics and costs, from run records: what ``report`` prints, and ``--figures``, ``--latex``.

The handout grades every configuration on the test lines decoded greedily: bit accuracy, sequence
accuracy (whole lines exact), Levenshtein distance and, for the tokenised C1-C4, BLEU and ROUGE; and C5
(the Byte Latent Transformer) against C1 in training speed, computational overhead and peak memory
during training. Its report is 6 pages at 12 pt with tables and plots, so here are

- :func:`metrics_table`: per run, the metrics of one set (``test``: the records' length-aware greedy
  decoding; ``test_free``: free greedy), with Levenshtein both as mean edits per line and normalised
  (edits per reference character, the character error rate) and chrF (characters: C5 too), every value read
  from the record;
- :func:`costs_tables`: per run, parameters, training tokens per second, seconds and steps per epoch, FLOPs
  per step and per epoch (:mod:`cipherlab.analysis.plan`'s estimate, from a ``plan --json`` file:
  measuring them takes minutes, so ``report`` reads them rather than computing them) and peak memory labelled
  by what it is (``torch.cuda.max_memory_allocated`` on a GPU, the process's peak RSS elsewhere,
  :func:`cipherlab.runner.hooks.peak_memory_bytes`); then each run over the baseline's, the ratios;
- :func:`handout_figures`: learning curves and bars of the test metrics and of the cost ratios, each
  :data:`FIGURE_INCHES` (a 6.3-inch text width: A4 or Letter with 1-inch margins) with text of at least
  :data:`FONT_PT` points; :func:`write_figures` saves each as PNG and PDF;
- :class:`Table`'s :meth:`~Table.latex`: a booktabs ``tabular`` to ``\\input`` (:func:`write_latex`, one
  file per table, so each goes where the report discusses it).

A value a record lacks is "not recorded", never guessed; a metric the record marks not comparable (BLEU
and ROUGE of the token-free C5) is "n/c".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cipherlab.runner.errors import require_file
from cipherlab.base.files import write_atomic
from cipherlab.base.markdown import markdown_table

__all__ = ["FIGURE_INCHES", "FONT_PT", "HANDOUT_SETS", "NOT_RECORDED", "Table", "costs_tables", "handout_figures",
           "handout_tables", "latex_escape", "memory_kind", "metrics_table", "plan_estimate", "read_plan",
           "write_figures", "write_latex"]

NOT_RECORDED = "not recorded"
NOT_COMPARABLE = "n/c"
FIGURE_INCHES = (6.3, 2.6)  # the text width of A4 or Letter with 1-inch margins, by a third of its height
FONT_PT = 9  # the smallest text in a figure: readable beside 12-point body text
HANDOUT_SETS = (("test", "test lines"), ("test_free", "test lines, free decoding"))
# the plan's sizes that make its model and batches the record's (max_epochs and patience only set how long it ran)
_PLAN_SIZES = ("d_model", "n_heads", "enc_layers", "dec_layers", "ffn_dim", "chunk_chars", "token_budget",
               "max_batch_size", "source_mode", "src_vocab", "tgt_vocab")
_PLAN_FIX = "write it with python -m cipherlab plan --preset PRESET --json FILE"
# (record key, header, format as percent?, digits)
_METRICS = (("bit_accuracy", "bit acc %", True, 3), ("sequence_accuracy", "sequence acc %", True, 2),
            ("levenshtein", "Levenshtein per line", False, 3), ("char_error_rate", "Levenshtein per char %", True, 3),
            ("chrf", "chrF", False, 2), ("bleu", "BLEU", False, 2), ("rouge1", "ROUGE-1", False, 4), ("rouge2", "ROUGE-2", False, 4),
            ("rougeL", "ROUGE-L", False, 4))
_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "–": "--", "—": "---", "−": "$-$", "×": r"$\times$", "≥": r"$\geq$", "≤": r"$\leq$"}


@dataclass
class Table:
    """One handout table: its file name (``--latex``), caption, header and rows of formatted cells."""

    name: str
    caption: str
    headers: list[str]
    rows: list[list[str]]

    def markdown(self) -> str:
        return markdown_table(self.headers, self.rows)

    def latex(self) -> str:
        """A booktabs ``tabular`` (``\\usepackage{booktabs}``), the caption as a comment above it; the first
        column left-aligned, the others right-aligned, a header of several words on two lines (so the tables fit
        a 6.3-inch text width at 12 pt); ``%``, ``_``, ``&`` and the rest escaped."""
        def line(cells) -> str:
            return " & ".join(latex_escape(str(c)) for c in cells) + r" \\"

        headers = [_two_lines(h, "l" if i == 0 else "r") for i, h in enumerate(self.headers)]
        return "\n".join([
            f"% {latex_escape(self.caption)}",
            "% written by python -m cipherlab report --latex; \\input it inside a table float "
            "(needs \\usepackage{booktabs})",
            r"\begin{tabular}{l" + "r" * (len(self.headers) - 1) + "}",
            r"\toprule", " & ".join(headers) + r" \\", r"\midrule", *(line(r) for r in self.rows), r"\bottomrule",
            r"\end{tabular}", ""])


def _two_lines(header: str, align: str) -> str:
    """A header cell in LaTeX: one of several words as two lines (``\\shortstack``), split at the space nearest
    its middle; one word as it is."""
    words = header.split(" ")
    if len(words) == 1:
        return latex_escape(header)
    split = min(range(1, len(words)), key=lambda i: abs(len(" ".join(words[:i])) - len(" ".join(words[i:]))))
    top, bottom = (latex_escape(" ".join(part)) for part in (words[:split], words[split:]))
    return rf"\shortstack[{align}]{{{top}\\{bottom}}}"


def latex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped, and the dashes and signs of the tables in LaTeX.

    >>> latex_escape("bit acc % of c1_seed0 & C5 × 2")
    'bit acc \\\\% of c1\\\\_seed0 \\\\& C5 $\\\\times$ 2'
    """
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


# --------------------------------------------------------------------------- the metrics


def _cell(scored: dict, key: str, as_pct: bool, digits: int) -> str:
    """One metric of a set: "n/c" where the record marks it not comparable, "not recorded" where it has none."""
    if key in (scored.get("not_comparable") or {}):
        return NOT_COMPARABLE
    value = scored.get(key)
    if value is None:
        return NOT_RECORDED
    return f"{100 * value if as_pct else value:.{digits}f}"


def metrics_table(runs: dict, names: dict, set_name: str = "test", label: str = "test lines") -> Table | None:
    """The handout's metrics of ``set_name`` for every run that holds it (``runs``: ``{(config, seed):
    record}``, ``names``: each run's name in the tables); None when no run holds the set."""
    held = {key: r["sets"][set_name] for key, r in runs.items() if set_name in r["sets"]}
    if not held:
        return None
    decodings = sorted({s["decoding"] for s in held.values()})
    lines = sorted({s["lines"] for s in held.values()})
    mixed = len(decodings) > 1
    headers = ["run", *(["decoding"] if mixed else []), *(h for _, h, _, _ in _METRICS)]
    rows = [[names[key], *([s["decoding"]] if mixed else []), *(_cell(s, k, p, d) for k, _, p, d in _METRICS)]
            for key, s in held.items()]
    caption = (f"The handout's metrics, {label} ({' / '.join(map(str, lines))} lines), decoded "
               f"{' / '.join(decodings)} (as the records say): bit accuracy %, sequence accuracy % (the lines "
               "decoded exactly), Levenshtein distance as mean edits per line and normalised (edits per reference character, "
               "%), chrF (0-100, characters: all five), BLEU (0-100), ROUGE-1/2/L F1 (0-1); n/c: not comparable "
               f"(BLEU and ROUGE are for the tokenised C1-C4 only); {NOT_RECORDED}: the record lacks it")
    return Table(f"metrics_{set_name}", caption, headers, rows)


# --------------------------------------------------------------------------- the costs


def memory_kind(record: dict) -> str:
    """What a record's ``peak_memory_bytes`` measured: the GPU's allocated memory on CUDA, else the process's
    peak resident set size on that device (:func:`cipherlab.runner.hooks.peak_memory_bytes`)."""
    device = str(record.get("device") or "")
    if device.startswith("cuda"):
        return "GPU max_memory_allocated"
    return f"peak RSS ({device.split(':')[0].upper()})" if device else "peak memory (device not recorded)"


def read_plan(path: str | Path) -> dict:
    """The plan in ``path`` (``python -m cipherlab plan --json``), checked; one-line errors naming the file."""
    path = require_file(path, "plan file", _PLAN_FIX)
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"--plan {path}: not a JSON plan ({type(e).__name__}); {_PLAN_FIX}") from None
    configs = plan.get("configs") if isinstance(plan, dict) else None
    if not isinstance(configs, list) or not all(
            isinstance(c, dict) and "config" in c and isinstance(c.get("typical_batch"), dict)
            and "flops" in c["typical_batch"] for c in configs):
        raise ValueError(f"--plan {path}: no configurations with typical_batch.flops, not a plan's --json file; "
                         f"{_PLAN_FIX}")
    return plan


def plan_estimate(plan: dict | None, record: dict) -> dict | str:
    """``{"step": FLOPs, "epoch": FLOPs}`` the plan estimates for the record's configuration, or why not."""
    if plan is None:
        return "not estimated (--plan)"
    entry = next((c for c in plan["configs"] if c["config"] == record["config"]), None)
    if entry is None:
        return f"not in the plan ({record['config'].upper()})"
    if plan.get("preset") != record["preset"]:
        return f"plan of preset {plan.get('preset')}"
    hyper = record.get("hyperparameters") or {}
    differ = [k for k in _PLAN_SIZES if k in (plan.get("sizes") or {}) and k in hyper and plan["sizes"][k] != hyper[k]]
    if differ:
        return f"plan's {differ[0]} differs"
    epoch = (entry.get("train_epoch") or {}).get("train_flops")
    return {"step": entry["typical_batch"]["flops"], "epoch": epoch}


def _steps_per_epoch(record: dict) -> float | None:
    """Optimiser steps an epoch took, from the log (its ``step`` counts every step so far)."""
    log = record.get("log") or []
    if not log or not all(isinstance(r, dict) and "step" in r for r in log):
        return None
    return log[-1]["step"] / len(log)


def _flops(x: float) -> str:
    """FLOPs with an SI prefix, three significant digits: 206 G."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
        if x >= scale:
            return f"{x / scale:.3g} {prefix}"
    return f"{x:.3g}"


def _measures(record: dict, plan: dict | None) -> dict:
    """A run's costs: ``{measure: value or None}``, and the plan's reason where it gives no FLOPs."""
    estimate = plan_estimate(plan, record)
    peak = record.get("peak_memory_bytes")
    return {"params": record.get("params"), "tokens_per_s": record.get("train_tokens_per_s"),
            "seconds_per_epoch": record.get("seconds_per_epoch"), "steps_per_epoch": _steps_per_epoch(record),
            "flops_step": estimate["step"] if isinstance(estimate, dict) else None,
            "flops_epoch": estimate["epoch"] if isinstance(estimate, dict) else None,
            "peak_mib": None if peak is None else peak / 2**20,
            "why_no_flops": estimate if isinstance(estimate, str) else NOT_RECORDED}


_COST_FORMATS = {"params": lambda v: f"{v:,}", "tokens_per_s": lambda v: f"{v:,.0f}",
                 "seconds_per_epoch": lambda v: f"{v:,.1f}", "steps_per_epoch": lambda v: f"{v:,.0f}",
                 "flops_step": _flops, "flops_epoch": _flops, "peak_mib": lambda v: f"{v:,.0f}"}
# the ratios: measure, header
_RATIOS = (("params", "params ×"), ("tokens_per_s", "train tokens/s ×"), ("seconds_per_epoch", "s/epoch ×"),
           ("flops_step", "FLOPs/step ×"), ("flops_epoch", "FLOPs/epoch ×"), ("peak_mib", "peak memory ×"))


def _baseline_for(runs: dict, key: tuple, baseline: str) -> tuple[list[tuple], str]:
    """The baseline runs a run is compared with: the one of its seed, else every seed's (their mean)."""
    seeds = sorted(s for c, s in runs if c == baseline)
    if key[1] in seeds:
        label = baseline.upper() if len(seeds) == 1 else f"{baseline.upper()} seed {key[1]}"
        return [(baseline, key[1])], label
    return [(baseline, s) for s in seeds], f"{baseline.upper()} (mean of seeds {', '.join(map(str, seeds))})"


def _ratio(mine: dict, theirs: list[dict], measure: str, kinds: tuple[str, list[str]]) -> str:
    """``mine / mean(theirs)`` of one measure as "1.17"; why not where it cannot be computed."""
    if measure == "peak_mib" and any(k != kinds[0] for k in kinds[1]):
        return "n/c (another kind of memory)"
    values = [t[measure] for t in theirs]
    if mine[measure] is None or any(v is None for v in values):
        return NOT_RECORDED if measure not in ("flops_step", "flops_epoch") else mine["why_no_flops"]
    base = sum(values) / len(values)
    return f"{mine[measure] / base:.3f}" if base else "–"


def costs_tables(runs: dict, names: dict, baseline: str = "c1", plan: dict | None = None) -> list[Table]:
    """The costs of every run, then each run's costs over the baseline's (where the folder has a baseline)."""
    measures = {key: _measures(r, plan) for key, r in runs.items()}
    kinds = {key: memory_kind(r) for key, r in runs.items()}
    one_kind = len(set(kinds.values())) == 1
    memory = f"{next(iter(kinds.values()))} MiB" if one_kind else "peak memory MiB (what it is)"
    rows = []
    for key, r in runs.items():
        m = measures[key]
        cells = [m[k] and _COST_FORMATS[k](m[k]) or NOT_RECORDED for k in ("params", "tokens_per_s",
                                                                            "seconds_per_epoch", "steps_per_epoch")]
        cells += [_COST_FORMATS[k](m[k]) if m[k] else m["why_no_flops"] for k in ("flops_step", "flops_epoch")]
        peak = NOT_RECORDED if m["peak_mib"] is None else _COST_FORMATS["peak_mib"](m["peak_mib"])
        if not one_kind and m["peak_mib"] is not None:
            peak += f" ({kinds[key]})"
        rows.append([names[key], str(r.get("device") or NOT_RECORDED), *cells, peak])
    source = (f"FLOPs: ESTIMATES by cipherlab.analysis.plan (plan --json, preset {plan.get('preset')}): one "
              "training step (forward, loss, backward) of a full batch of whole chunks, and every training batch "
              "of an epoch" if plan is not None else
              "FLOPs: not estimated; pass --plan FILE, written by python -m cipherlab plan --preset PRESET --json "
              "FILE (about a minute a configuration)")
    devices = ", ".join(dict.fromkeys(str(r.get("device_name") or NOT_RECORDED) for r in runs.values()))
    tables = [Table("costs", f"Training costs as recorded: device ({devices}), parameters, training tokens per second (each "
                    "configuration's own target units: BPE pieces for C1-C4, bytes for C5), seconds and optimiser "
                    f"steps per epoch, FLOPs per step and per epoch (G: 10^9, T: 10^12), and peak memory during training "
                    "in MiB (torch.cuda.max_memory_allocated on a GPU, the whole process's peak resident set size on a "
                    "CPU); "
                    f"{source}; {NOT_RECORDED}: the record lacks it",
                    ["run", "device", "params", "train tokens/s", "s/epoch", "steps/epoch", "FLOPs/step (est.)",
                     "FLOPs/epoch (est.)", memory], rows)]
    others = [key for key in runs if key[0] != baseline]
    if not others or not any(c == baseline for c, _ in runs):
        return tables
    rows = []
    for key in others:
        against, label = _baseline_for(runs, key, baseline)
        rows.append([names[key], label, *(_ratio(measures[key], [measures[b] for b in against], m,
                                                 (kinds[key], [kinds[b] for b in against])) for m, _ in _RATIOS)])
    tables.append(Table("cost_ratios", f"Each configuration's costs over {baseline.upper()}'s (the run of the same "
                        f"seed, else the mean of {baseline.upper()}'s seeds): above 1 is more parameters, faster "
                        "training (tokens/s, in each configuration's own units), slower epochs, more FLOPs (estimated), "
                        f"more peak memory; {source}",
                        ["run", "against", *(h for _, h in _RATIOS)], rows))
    return tables


def handout_tables(runs: dict, names: dict, baseline: str = "c1", plan: dict | None = None) -> list[Table]:
    """Every handout table of these runs: the metrics of each greedy decoding the records hold, then the costs."""
    tables = [t for name, label in HANDOUT_SETS if (t := metrics_table(runs, names, name, label)) is not None]
    return tables + costs_tables(runs, names, baseline, plan)


# --------------------------------------------------------------------------- the figures


def _rc() -> dict:
    return {"font.size": FONT_PT, "axes.titlesize": FONT_PT, "axes.labelsize": FONT_PT, "xtick.labelsize": FONT_PT,
            "ytick.labelsize": FONT_PT, "legend.fontsize": FONT_PT, "figure.titlesize": FONT_PT}


def _short(name: str) -> str:
    return name.replace(" seed ", "/s")


def _curve(record: dict) -> list[dict]:
    """Validation points of a run against the optimiser step: its ``curve`` (every eval_every steps) where it
    has one, else its per-epoch ``log``; the points with step, val_accuracy and val_loss."""
    points = record.get("curve") if isinstance(record.get("curve"), list) and record.get("curve") else record["log"]
    keys = ("step", "val_accuracy", "val_loss")
    return [p for p in points or [] if isinstance(p, dict) and all(p.get(k) is not None for k in keys)]


def _learning_curves(curves: dict):
    from cipherlab.analysis.ablation import figure

    fig, (acc, loss) = figure(2, width=FIGURE_INCHES[0] / 2, height=FIGURE_INCHES[1])
    for name, points in curves.items():
        steps = [p["step"] for p in points]
        acc.plot(steps, [100 * p["val_accuracy"] for p in points], marker=".", ms=3, lw=1, label=_short(name))
        loss.plot(steps, [p["val_loss"] for p in points], marker=".", ms=3, lw=1, label=_short(name))
    acc.set_ylabel("val. token accuracy %")
    loss.set_ylabel("val. loss (nats/unit)")
    loss.set_yscale("log")
    for ax in (acc, loss):
        ax.set_xlabel("optimiser step")
    acc.legend(fontsize=FONT_PT, ncol=2, frameon=False)
    return fig


def _bars(ax, labels: list[str], values: list[float | None], title: str, zoom: bool = False) -> None:
    """Bars of ``values`` (a missing one left empty, "–" above it), each labelled; ``zoom``: the y axis from
    just below the lowest bar, for accuracies near 100."""
    x = range(len(labels))
    ax.bar(x, [v or 0 for v in values], color="tab:blue")
    ax.set_xticks(list(x), labels, rotation=90 if len(labels) > 4 else 0)
    ax.set_title(title)
    known = [v for v in values if v is not None]
    if zoom and known:
        low = min(known)
        ax.set_ylim(max(0.0, low - max(0.1, (100 - low) * 0.5)), 100.0)
    for i, v in zip(x, values):
        if v is None:
            ax.text(i, 0, "–", ha="center", va="bottom")


def _test_metrics(runs: dict, names: dict):
    from cipherlab.analysis.ablation import figure

    held = {names[k]: r["sets"]["test"] for k, r in runs.items() if "test" in r["sets"]}
    labels = [_short(n) for n in held]
    fig, axes = figure(3, width=FIGURE_INCHES[0] / 3, height=FIGURE_INCHES[1])
    _bars(axes[0], labels, [100 * s["sequence_accuracy"] for s in held.values()], "sequence acc. %", zoom=True)
    _bars(axes[1], labels, [100 * s["bit_accuracy"] for s in held.values()], "bit acc. %", zoom=True)
    _bars(axes[2], labels, [s.get("levenshtein") for s in held.values()], "Levenshtein / line")
    return fig


def _cost_ratios(table: Table):
    from cipherlab.analysis.ablation import figure

    fig, axes = figure(1, width=FIGURE_INCHES[0], height=FIGURE_INCHES[1])
    ax = axes[0]
    measures = table.headers[2:]
    width = 0.8 / max(len(table.rows), 1)
    for i, row in enumerate(table.rows):
        values = [float(c) if c.replace(".", "", 1).isdigit() else float("nan") for c in row[2:]]  # nan: no bar
        ax.bar([j + (i - (len(table.rows) - 1) / 2) * width for j in range(len(measures))], values, width,
               label=f"{_short(row[0])} / {_short(row[1])}")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_ylim(0, 1.35 * max([float(c) for row in table.rows for c in row[2:] if c.replace(".", "", 1).isdigit()]
                              or [1.0]))  # room for the legend above the bars
    ax.set_xticks(range(len(measures)), [m.replace(" ×", "") for m in measures])
    ax.set_ylabel("ratio to the baseline")
    ax.legend(fontsize=FONT_PT, ncol=min(len(table.rows), 4), frameon=False)
    return fig


def handout_figures(runs: dict, names: dict, tables: list[Table]) -> dict:
    """``{file stem: Figure}``: learning curves, the test metrics and the cost ratios, where the records hold
    their data; each :data:`FIGURE_INCHES`, its text :data:`FONT_PT` points or more."""
    import matplotlib

    figures = {}
    with matplotlib.rc_context(_rc()):
        curves = {names[k]: c for k, r in runs.items() if (c := _curve(r))}
        if curves:
            figures["learning_curves"] = _learning_curves(curves)
        if any("test" in r["sets"] for r in runs.values()):
            figures["test_metrics"] = _test_metrics(runs, names)
        ratios = next((t for t in tables if t.name == "cost_ratios"), None)
        if ratios is not None:
            figures["cost_ratios"] = _cost_ratios(ratios)
    for fig in figures.values():
        fig.set_size_inches(*FIGURE_INCHES)
    return figures


def write_figures(figures: dict, folder: Path) -> list[Path]:
    """Each figure as ``folder/<stem>.png`` (200 dpi) and ``.pdf``, at its own size (no tight bounding box, so
    the page is :data:`FIGURE_INCHES`); the paths written."""
    import matplotlib

    written = []
    with matplotlib.rc_context(_rc()):
        for stem, fig in figures.items():
            for suffix, dpi in ((".png", 200), (".pdf", None)):
                path = folder / f"{stem}{suffix}"
                fig.savefig(path, dpi=dpi, metadata=None if suffix == ".png" else {"CreationDate": None})
                written.append(path)
    return written


def write_latex(tables: list[Table], folder: Path) -> list[Path]:
    """Each table as ``folder/<name>.tex``, a booktabs tabular to ``\\input``; the paths written."""
    return [write_atomic(folder / f"{t.name}.tex", t.latex()) for t in tables]
