"""The tables of the learn and reference ablations, seed by seed, and the goals they set themselves.

Those ablations score every configuration and seed on several probe sets (the records of
``<name>-c1-seed0.json`` ..., read by :func:`cipherlab.analysis.ablation.records.load_learn_runs`): the learn
ablation trained an earlier recipe, the reference ablation the default one. The ``learn_*`` functions lay out
the learn ablation against :data:`LEARN_GOALS`; :func:`reference_tables` and :func:`goals_table` the reference
ablation against :data:`REFERENCE_GOALS`; :func:`paired_table` and :func:`recipe_comparison` the paired
outcomes of the same lines (:func:`cipherlab.analysis.ablation.stats.mcnemar`); :func:`recipe_cost_table` the
recipe ablation, each part of the default recipe taken out as :data:`RECIPE_OFF` says.
"""

from __future__ import annotations

from cipherlab.base.config import CONFIG_NAMES
from cipherlab.analysis.ablation.records import REFERENCE_SETS, section
from cipherlab.analysis.ablation.stats import mcnemar
from cipherlab.base.markdown import markdown_table

__all__ = [
    "LEARN_GOALS",
    "LEARN_HEADERS",
    "RECIPE_OFF",
    "REFERENCE_GOALS",
    "first_step",
    "goals_table",
    "learning_curve_table",
    "learn_goal_row",
    "learn_goal_values",
    "learn_row",
    "learn_tables",
    "paired_table",
    "recipe_comparison",
    "recipe_cost_table",
    "reference_row",
    "reference_tables",
]


# --------------------------------------------------------------------------- the learn ablation


# The goals of the learn ablation for the cpu preset, at most 30 minutes of training per configuration:
# (record section, measure, at least, label). A goal is met when every seed meets it.
LEARN_GOALS = (
    ("random_letters", "char_accuracy", 0.999, "random strings: characters"),
    ("random_letters", "sequence_accuracy", 0.95, "random strings: exact"),
    ("stdlib", "bit_accuracy", 0.999, "stdlib (English outside Brown): bits"),
    ("stdlib", "sequence_accuracy", 0.90, "stdlib: exact lines"),
    ("test_free", "bit_accuracy", 0.999, "Brown, all test lines, free decoding: bits"),
    ("test_free", "sequence_accuracy", 0.95, "Brown, all test lines, free decoding: exact lines"),
)


def learn_goal_values(runs: dict[tuple[str, int], dict], goal: tuple) -> dict[str, list[float]]:
    """``{config: [value of seed 0, seed 1, ...]}`` of one of :data:`LEARN_GOALS`' measures."""
    name, measure = goal[0], goal[1]
    values: dict[str, list[float]] = {}
    for (config, _seed), record in runs.items():
        values.setdefault(config, []).append(section(record, name)[measure])
    return values


LEARN_HEADERS = ("config", "seed", "epochs", "best epoch", "training minutes", "val token accuracy %",
                 "random strings: characters % / exact", "stdlib: bit % / exact", "Brown test, free: bit % / exact",
                 "Brown test, length-aware: bit % / exact")


def learn_row(record: dict) -> list[str]:
    """One run of a learn ablation as table cells (:data:`LEARN_HEADERS`)."""
    def pair(scored: dict, key: str, digits: int) -> str:
        return f"{100 * scored[key]:.{digits}f} / {scored['exact_lines']} of {scored['lines']}"

    return [record["config"].upper(), str(record["seed"]), str(record["epochs"]), str(record["best_epoch"]),
            f"{record['train_seconds'] / 60:.1f}", f"{100 * record['best_val_accuracy']:.3f}",
            pair(section(record, "random_letters"), "char_accuracy", 2),
            pair(section(record, "stdlib"), "bit_accuracy", 3), pair(section(record, "test_free"), "bit_accuracy", 3),
            pair(section(record, "test"), "bit_accuracy", 3)]


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


# --------------------------------------------------------------------------- the reference ablation


# The goals of the reference ablation: the limit is 100 % on any text. (record section, measure, at least,
# label); a goal is met when every seed meets it.
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
    ("test_free", "bit_accuracy", 0.9999, "Brown, all test lines, free decoding: bits"),
    ("test_free", "sequence_accuracy", 0.99, "Brown, all test lines, free decoding: exact"),
)


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


# --------------------------------------------------------------------------- paired outcomes of the same lines


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
                      sets: tuple = ("random_letters", "stdlib", "test_free")) -> str:
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


# The recipe ablation: runs of the default recipe (RECIPES["cipher"]) with one part off, {part: {field: the
# value it takes instead}}; without phase shuffles there are no case flips either (they apply to shuffled
# chunks only).
RECIPE_OFF = {
    "phase_embedding": {"phase_embedding": False},
    "bit_embeddings": {"bit_embeddings": False},
    "phase_shuffle": {"phase_shuffle": 0.0, "case_flip": 0.0},
    "case_flip": {"case_flip": 0.0},
    "source_eos": {"source_eos": False},
    "select_on": {"select_on": "val_loss"},
}


def recipe_cost_table(reference: dict[tuple[str, int], dict], ablations: dict[str, dict[tuple[str, int], dict]],
                      configs: tuple = ("c1", "c2"),
                      sets: tuple = ("random_letters", "random_alphabet", "test_free")) -> str:
    """What each part of the recipe is worth: for each part taken out (``ablations``, as
    :func:`cipherlab.analysis.ablation.records.load_recipe_runs` returns them) and each configuration, the exact
    lines of each set with every part (``reference``) -> without it, seed by seed, and McNemar's exact
    p-value of the paired outcomes."""
    labels = dict(REFERENCE_SETS)
    rows = []
    for part, runs in ablations.items():
        for config in configs:
            keys = sorted(key for key in runs if key[0] == config and key in reference)
            if not keys:
                continue
            changed = RECIPE_OFF.get(part, {part: None})
            cells = [" and ".join(f"`{field}`" for field in changed), config.upper()]
            for name in sets:
                parts = []
                for key in keys:
                    x, y = section(reference[key], name), section(runs[key], name)
                    _, _, p = mcnemar(x["exact_by_line"], y["exact_by_line"])
                    parts.append(f"seed {key[1]}: {x['exact_lines']} → {y['exact_lines']} (p = {p:.2g})")
                cells.append("; ".join(parts))
            rows.append(cells)
    return markdown_table(["part taken out", "config",
                           *(f"{labels[n]}: exact lines with it → without it" for n in sets)], rows)


# --------------------------------------------------------------------------- how fast a run learned


def first_step(curve: list[dict], key: str, level: float) -> int | None:
    """The first step of a learning curve (``Config.eval_every``'s ``curve.jsonl``) at which ``key``
    reached ``level``; None if it never did."""
    return next((point["step"] for point in curve or [] if point[key] >= level), None)


def learning_curve_table(runs: dict[tuple[str, int], dict]) -> str:
    """How fast each run of a learn ablation learned: the first validation at which the token accuracy
    reached 99 % and 99.9 %, and the validation chunks with every token right 99 %, from each record's
    ``curve``."""
    rows = []
    for (config, seed), record in runs.items():
        curve = record.get("curve") or []
        steps = [first_step(curve, key, level) for key, level in
                 (("val_accuracy", 0.99), ("val_accuracy", 0.999), ("val_exact_chunks", 0.99))]
        rows.append([config.upper(), str(seed), str(record["log"][0]["step"]),
                     *("not reached" if s is None else str(s) for s in steps),
                     f"{100 * max((p['val_accuracy'] for p in curve), default=0):.3f}"])
    return markdown_table(["config", "seed", "steps per epoch", "val tokens ≥ 99 %", "val tokens ≥ 99.9 %",
                           "val chunks exact ≥ 99 %", "best val token accuracy %"], rows)
