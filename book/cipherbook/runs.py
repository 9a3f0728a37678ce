"""The book's runs under ``results/``, its committed models, and the figures others reported that they are
compared with.

The library reads any run folder; which folders the book's chapters and ``results/README.md`` read,
and what the course notes and the best public results reported, are the book's, so they live here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cipherlab.analysis import ablation

__all__ = ["ANALYSIS_RUNS", "BITS_RUN", "CHECKPOINTS_FOLDER", "EQUAL_EPOCHS_RUN", "EXTENDED_RUN", "LEARN_RUN",
           "PRIMARY_RUN", "RECIPE_FOLDERS", "REFERENCES", "REFERENCE_FIELDS", "REFERENCE_RUN", "SEED_RANGES", "Range",
           "Reference", "committed_checkpoint", "comparison_table", "load_committed_model", "plot_accuracy",
           "reference"]

PRIMARY_RUN = "notes/cpu"  # the course notes recipe's reference run: C1-C4 read the cipher in bytes mode
BITS_RUN = "notes/cpu-bits"  # the same preset with the course notes' bits mode for C1-C4
EQUAL_EPOCHS_RUN = "notes/equal-epochs/cpu"  # every cpu run continued (--resume) to the same number of epochs
EXTENDED_RUN = "notes/extended/cpu"  # C2 and C5 trained on further (--resume): the committed models
# Did the models learn the cipher? The controlled ablation with phase shuffles, bit-factored and key-phase
# embeddings, two seeds (results/learn/ablation, written by results/learn/probe.py).
LEARN_RUN = "learn/ablation"
# results/analysis.py names each entry of errors.json after the runs/ folder it read ("cpu-long/c2"):
# {results folder: that name}, for the folders whose errors.json it wrote (the names argument of
# ablation.error_entry, entry_label and the tables that label the entries)
ANALYSIS_RUNS = {PRIMARY_RUN: "cpu", BITS_RUN: "cpu-bits", EQUAL_EPOCHS_RUN: "cpu-5ep", EXTENDED_RUN: "cpu-long"}

# The reference ablation: the default recipe, the cpu preset, two seeds (results/reference, written by
# results/learn/probe.py). Its goals are cipherlab.analysis.ablation.REFERENCE_GOALS.
REFERENCE_RUN = "reference"

# The recipe ablation: C1 and C2 of the reference ablation trained again with one part of the default
# recipe off (the value each field takes instead: cipherlab.analysis.ablation.RECIPE_OFF), seeds 0 and 1
# (results/recipe/<folder>, written by results/recipe/run.sh), and all five without the key-phase embedding
# (results/nophase). {part: its folder}, the argument of ablation.load_recipe_runs.
RECIPE_FOLDERS = {
    "phase_embedding": "nophase",
    "bit_embeddings": "recipe/no-bit-embeddings",
    "phase_shuffle": "recipe/no-phase-shuffle",
    "case_flip": "recipe/no-case-flip",
    "source_eos": "recipe/no-source-eos",
    "select_on": "recipe/select-on-loss",
}


# The committed reference models: the seed-0 models of the reference ablation (REFERENCE_RUN), exported as
# results/checkpoints/<config>.safetensors.
CHECKPOINTS_FOLDER = "checkpoints"


def committed_checkpoint(config: str) -> Path:
    """The committed reference model of a configuration: ``results/checkpoints/<config>.safetensors``, the
    seed-0 run of the reference ablation (``results/reference``), trained with the default recipe."""
    return ablation.results_dir() / CHECKPOINTS_FOLDER / f"{config}.safetensors"


def load_committed_model(config: str):
    """(model, codec, Config) of the committed reference model of ``config`` (:func:`committed_checkpoint`), on the CPU.

    Raises FileNotFoundError naming the file when it is not there.
    """
    from cipherlab.runner.trained import load_trained

    path = committed_checkpoint(config)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no committed model of {config.upper()} (the reference ablation's seed-0 "
                                "models are results/checkpoints/c1..c5.safetensors; restore the file from git)")
    return load_trained(path, device="cpu")


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


def _seed_sections() -> str:
    """The places in the course notes that the seed figures come from: "§7.2 Q2, §7.2 Q4, ..."."""
    places = {place for figures in REFERENCES["seed"]["configs"].values() for figure in figures.values()
              if figure is not None for place in figure.where.split(", ")}
    return ", ".join(sorted(places))


def _columns(kind: str) -> dict[str, dict[str, float | None]]:
    return {name: {field: reference(kind, name, field) for field in ("bit_accuracy", "exact_lines")}
            for name in REFERENCES[kind]["configs"]}


def comparison_table(run_folder: str | os.PathLike, bits_folder: str | os.PathLike | None = None) -> str:
    """:func:`cipherlab.analysis.ablation.comparison_table` of one run beside the course notes' and the best
    public figures."""
    return ablation.comparison_table(
        run_folder, bits_folder, references={"notes": _columns("seed"), "best public": _columns("public")},
        note=f"Reported figures: \"notes\" = {_SEED}, the figures quoted in its viva answers "
             f"({_seed_sections()}; it gives none for C2); \"best public\" = {_PUBLIC}. Those runs used "
             "other sizes and budgets: compare the pattern across configurations more than the level.",
        bits_label="the course notes' BPE over cipher bits")


def plot_accuracy(records: dict[str, dict], bits_records: dict[str, dict] | None = None):
    """:func:`cipherlab.analysis.ablation.plot_accuracy` with the reported figures marked beside the bars."""
    marks = [(REFERENCES[kind]["label"], marker, color, _columns(kind))
             for kind, marker, color in (("seed", "x", "black"), ("public", "*", "tab:red"))]
    return ablation.plot_accuracy(records, bits_records, marks=marks)
