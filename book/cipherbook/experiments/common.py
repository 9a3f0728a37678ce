"""What several chapters' experiments share: the assignment's sizes, the sinusoidal table, a fresh C1,
the calibration runs and the committed test records.

The sizes are the assignment preset's with the course notes' BPE and recipe (``cipherlab.base.config.make_config``) and the key period
is ``cipherlab.data.cipher.PERIOD``: none is typed here by hand. ``results/calibration/calibration.json``
holds the short runs that chose the cpu preset (the positions and BLT chapters quote them); ``run_records``
reads a committed results folder through ``cipherlab.analysis.ablation`` (the positions and tokenisation chapters), ``reference_runs`` results/reference,
``nophase_runs`` results/nophase (the same ablation without the key-phase embedding; the multi-head attention, positions, normalisation and results chapters).
"""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path

import torch

from cipherlab.data.cipher import PERIOD
from cipherlab.base.config import TOKENIZATIONS, make_config
from cipherlab.models.positional import SinusoidalPositionalEncoding
from cipherlab.models.transformer import ModelArgs, Seq2SeqTransformer
from cipherbook.runs import BITS_RUN, PRIMARY_RUN  # noqa: F401 -- PRIMARY_RUN: re-exported for the experiments
from cipherbook.runs import RECIPE_FOLDERS, REFERENCE_RUN
from cipherlab.analysis.ablation import (REFERENCE_GOALS, REFERENCE_SETS, first_step, load_learn_runs, load_run, metric,
                               paired_rows, section)

# the assignment preset's sizes with the course notes' 1024/8000 BPE over bits (Config()'s former defaults)
ASSIGNMENT_SIZES = make_config("c1", "assignment", recipe="notes", **TOKENIZATIONS["notes"])
D_MODEL, N_HEADS, FFN_DIM = ASSIGNMENT_SIZES.d_model, ASSIGNMENT_SIZES.n_heads, ASSIGNMENT_SIZES.ffn_dim
SRC_VOCAB, TGT_VOCAB = ASSIGNMENT_SIZES.src_vocab, ASSIGNMENT_SIZES.tgt_vocab  # the course notes' BPE vocabularies
MAX_LEN = 4096  # the positions a sinusoidal table holds (SinusoidalPositionalEncoding's default max_len)
KEY_PERIOD = PERIOD  # the key repeats every PERIOD characters (len(cipherlab.data.cipher.KEY))
CALIBRATION_FILE = Path(__file__).resolve().parents[3] / "results" / "calibration" / "calibration.json"
BITS = BITS_RUN  # the cpu preset with the course notes' bits-mode BPE on the cipher side


def sinusoidal_table(d_model: int = D_MODEL, length: int = MAX_LEN) -> torch.Tensor:
    """(length, d_model): what SinusoidalPositionalEncoding adds at positions 0..length-1 (added to zeros)."""
    module = SinusoidalPositionalEncoding(d_model, max_len=length, dropout=0.0)
    with torch.no_grad():
        return module(torch.zeros(1, length, d_model))[0]


@functools.lru_cache(maxsize=1)
def baseline_model() -> Seq2SeqTransformer:
    """A freshly initialised C1 model with the assignment's sizes and the course notes' BPE vocabularies, seeded."""
    torch.manual_seed(0)
    return Seq2SeqTransformer(ModelArgs(SRC_VOCAB, TGT_VOCAB, d_model=D_MODEL, n_heads=N_HEADS))


# --------------------------------------------------------------------------- the calibration runs

@functools.cache
def calibration() -> dict:
    """results/calibration/calibration.json: the 6-minute runs that chose the cpu preset."""
    return json.loads(CALIBRATION_FILE.read_text(encoding="utf-8"))


def calibration_run(run_id: str) -> dict:
    """One run of calibration.json by its id ("A" .. "F"): config, overrides, epochs, val60, scored."""
    runs = {run["id"]: run for run in calibration()["runs"]}
    if run_id not in runs:
        raise KeyError(f"{CALIBRATION_FILE}: no run {run_id!r}; the runs are {sorted(runs)}")
    return runs[run_id]


def calibration_lines() -> int:
    """How many validation lines the calibration runs were scored on (stated in the file's "about")."""
    match = re.search(r"first (\d+) validation lines", calibration()["about"]["what"])
    if match is None:
        raise ValueError(f"{CALIBRATION_FILE}: about.what no longer says 'first N validation lines'")
    return int(match.group(1))


def scored_step(run: dict) -> int:
    """The training step of the checkpoint a calibration run was scored with.

    "best.pt": the epoch with the lowest validation loss; "last.pt after N steps": N (a run
    whose budget ended inside its first epoch lists no epochs).
    """
    if run["scored"].startswith("best.pt"):
        return min(run["epochs"], key=lambda epoch: epoch["val_loss"])["step"]
    match = re.match(r"last\.pt after (\d+) steps", run["scored"])
    if match is None:
        raise ValueError(f"{CALIBRATION_FILE}, run {run['id']}: cannot tell the step from scored={run['scored']!r}")
    return int(match.group(1))


def first_epoch_loss(run_id: str) -> float:
    """Validation loss of a calibration run after its first epoch."""
    return calibration_run(run_id)["epochs"][0]["val_loss"]


def calibration_bits(run_id: str) -> float:
    """Bit accuracy of a calibration run on the validation lines (greedy decoding)."""
    return calibration_run(run_id)["val60"]["bit_accuracy"]


# --------------------------------------------------------------------------- the committed test records

@functools.cache
def run_records(folder: str) -> dict:
    """{"c1": record, ...} of a committed results folder (``cipherlab.analysis.ablation.load_run``)."""
    return load_run(folder)


def test_lines(folder: str, config: str = "c1") -> int:
    return run_records(folder)[config]["sets"]["test"]["lines"]


def percent(folder: str, config: str, key: str) -> float:
    """A test metric of one configuration, in percent (e.g. "sequence_accuracy", "bit_accuracy")."""
    return 100 * metric(run_records(folder)[config], key)


def exact_lines(folder: str, config: str) -> int:
    """How many test lines a configuration decoded exactly."""
    return round(metric(run_records(folder)[config], "sequence_accuracy") * test_lines(folder, config))


def points_over_c1(folder: str, config: str, key: str) -> float:
    """metric(config) - metric(C1) in percentage points (positive: config is better)."""
    return percent(folder, config, key) - percent(folder, "c1", key)


def exact_stderr(folder: str, config: str) -> float:
    """Binomial standard error of a configuration's exact-line rate, sqrt(p (1 - p) / n), in points."""
    p = metric(run_records(folder)[config], "sequence_accuracy")
    return 100 * math.sqrt(p * (1 - p) / test_lines(folder, config))


def exact_over_c1_stderr(folder: str, config: str) -> float:
    """One binomial standard error of the exact-line difference from C1, in points:
    sqrt(p1 (1 - p1) / n1 + p2 (1 - p2) / n2). Only the sampling of the test lines; a second
    training seed would move both rates too, and one seed per configuration cannot say by how much."""
    return math.hypot(exact_stderr(folder, "c1"), exact_stderr(folder, config))


# --------------------------------------------------------------------------- the reference ablation

@functools.cache
def reference_runs() -> dict[tuple[str, int], dict]:
    """results/reference, ``{(config, seed): record}``: the default recipe at the cpu preset, all five
    configurations, two seeds, every probe set scored line by line (``exact_by_line``)."""
    return load_learn_runs(REFERENCE_RUN)


def _shared(what: str, values: set):
    """The one value every reference run holds; an error naming ``what`` when the runs disagree."""
    if len(values) != 1:
        raise ValueError(f"results/reference: the runs differ in {what} ({sorted(values)}); a sentence quoting "
                         "one value for all of them would be wrong")
    return next(iter(values))


def reference_paired() -> tuple[dict, ...]:
    """McNemar's exact test of C2-C5 against C1 in the reference ablation, seed by seed, on every probe set."""
    return tuple(paired_rows(reference_runs()))


def reference_seeds() -> int:
    return len({seed for _, seed in reference_runs()})


def reference_sets() -> int:
    """How many probe sets each reference run was decoded on (:data:`cipherlab.analysis.ablation.REFERENCE_SETS`)."""
    return len(REFERENCE_SETS)


def reference_lines(name: str) -> int:
    """How many lines every reference run decoded in probe set ``name`` (e.g. "test_free")."""
    return _shared(f"the lines of {name}", {section(r, name)["lines"] for r in reference_runs().values()})


def reference_epochs() -> int:
    """The epochs every reference run trained (the same for all five configurations)."""
    return _shared("epochs", {r["epochs"] for r in reference_runs().values()})


def reference_params(config: str) -> int:
    """Parameters of ``config`` in the reference ablation: the cpu preset's model as ``make_config(config, "cpu")``
    and training build it (the default recipe), the same for every seed."""
    return _shared(f"{config}'s parameters", {r["params"] for (name, _), r in reference_runs().items() if name == config})


@functools.cache
def reference_against_c1(config: str) -> dict:
    """``config`` against C1 in the reference ablation, seed by seed, on every probe set, paired line by line:
    McNemar's exact test (:func:`cipherlab.analysis.ablation.paired_rows`). Summed over sets and seeds: "c1_missed",
    lines C1 got wrong; "lost", lines only C1 got right; "gained", lines only ``config`` got right. "tests":
    how many (seed, set) tests; "p": the lowest p-value, at "seed" on "set" (its label); "other_p": the same
    set's p-value with the other seed(s), the highest."""
    rows = [row for row in paired_rows(reference_runs()) if row["config"] == config]
    if not rows:
        raise ValueError(f"results/reference has no paired outcomes of {config} and c1")
    low = min(rows, key=lambda row: (row["p"], -row["only_base"]))
    others = [row["p"] for row in rows if row["set"] == low["set"] and row["seed"] != low["seed"]]
    return {"c1_missed": sum(row["lines"] - row["base_exact"] for row in rows),
            "lost": sum(row["only_base"] for row in rows), "gained": sum(row["only_config"] for row in rows),
            "tests": len(rows), "p": low["p"], "seed": low["seed"], "set": low["label"],
            "other_p": max(others) if others else None}


# --------------------------------------------------------------------------- without the key-phase embedding

NOPHASE_RUN = RECIPE_FOLDERS["phase_embedding"]  # results/nophase: the key-phase embedding off, nothing else changed


@functools.cache
def nophase_runs() -> dict[tuple[str, int], dict]:
    """results/nophase, ``{(config, seed): record}``: the reference ablation with the key-phase embedding off
    (the same five configurations, seeds, epochs and probe lines), each record with its learning curve."""
    return load_learn_runs(NOPHASE_RUN)


@functools.cache
def nophase_paired() -> tuple[dict, ...]:
    """McNemar's exact test of C2-C5 against C1 without the key-phase embedding, seed by seed, on every
    probe set (:func:`cipherlab.analysis.ablation.paired_rows`), as the results chapter tabulates it."""
    rows = tuple(paired_rows(nophase_runs()))
    if not rows:
        raise ValueError(f"results/{NOPHASE_RUN} has no paired outcomes of a configuration and c1")
    return rows


def nophase_tests() -> int:
    return len(nophase_paired())


def nophase_bonferroni() -> float:
    """0.05 over every test of :func:`nophase_paired`: the bar a p-value clears for the whole table."""
    return 0.05 / nophase_tests()


def favours(row: dict) -> str:
    """Which model a paired row favours: "c1", the configuration, or "neither" (as many lines each way)."""
    if row["only_base"] == row["only_config"]:
        return "neither"
    return "c1" if row["only_base"] > row["only_config"] else row["config"]


def nophase_pair(config: str, name: str) -> dict[int, dict]:
    """``config`` against C1 on probe set ``name`` without the key-phase embedding, ``{seed: paired row}``."""
    rows = {row["seed"]: row for row in nophase_paired() if (row["config"], row["set"]) == (config, name)}
    if not rows:
        raise ValueError(f"results/{NOPHASE_RUN} has no paired outcomes of {config} and c1 on {name}")
    return dict(sorted(rows.items()))


@functools.cache
def nophase_repeated() -> tuple[tuple[str, str, str], ...]:
    """(config, set, the model it favours) of every difference from C1 without the key-phase embedding that
    every seed shows with p below 0.05, in the same direction."""
    found = []
    for config, name in dict.fromkeys((row["config"], row["set"]) for row in nophase_paired()):
        rows = nophase_pair(config, name).values()
        sides = {favours(row) for row in rows}
        if all(row["p"] < 0.05 for row in rows) and len(sides) == 1:
            found.append((config, name, sides.pop()))
    return tuple(found)


def nophase_below(bar: float = 0.05) -> int:
    """How many tests of :func:`nophase_paired` have p below ``bar``."""
    return sum(row["p"] < bar for row in nophase_paired())


@functools.cache
def nophase_lowest(config: str) -> dict:
    """``config``'s lowest p-value against C1 without the key-phase embedding: its paired row, with "other",
    the same set's row with the other seed (the highest p-value if several)."""
    rows = [row for row in nophase_paired() if row["config"] == config]
    if not rows:
        raise ValueError(f"results/{NOPHASE_RUN} has no paired outcomes of {config} and c1")
    low = min(rows, key=lambda row: (row["p"], -abs(row["only_base"] - row["only_config"])))
    others = [row for seed, row in nophase_pair(config, low["set"]).items() if seed != low["seed"]]
    return {**low, "other": max(others, key=lambda row: row["p"]) if others else None}


def nophase_random_goal_misses() -> dict[tuple[str, int], int]:
    """How many random-string goals (:data:`cipherlab.analysis.ablation.REFERENCE_GOALS`) each run without the key-phase
    embedding misses."""
    goals = [g for g in REFERENCE_GOALS if g[0].startswith("random")]
    return {key: sum(section(r, name)[measure] < level for name, measure, level, _ in goals)
            for key, r in nophase_runs().items()}


def nophase_steps_to(level: float, key: str = "val_accuracy") -> list[int | None]:
    """The first validation step at which each run without the key-phase embedding reached ``level`` of
    ``key`` (:func:`cipherlab.analysis.ablation.first_step`; None: never)."""
    return [first_step(r["curve"], key, level) for r in nophase_runs().values()]


def nophase_steps_per_epoch(config: str = "c1") -> int:
    """Optimiser steps in ``config``'s first epoch without the key-phase embedding (the same for its seeds)."""
    return _shared(f"{config}'s steps per epoch", {r["log"][0]["step"] for (name, _), r in nophase_runs().items()
                                                   if name == config})


def nophase_lines(name: str) -> int:
    """How many lines every run without the key-phase embedding decoded in probe set ``name``."""
    return _shared(f"the lines of {name}", {section(r, name)["lines"] for r in nophase_runs().values()})


def nophase_seed_values(config: str, name: str, key: str) -> list:
    """One field of ``config``'s paired rows against C1 on ``name`` (:func:`nophase_pair`), seed by seed:
    "base_exact" (C1's exact lines), "exact" (the configuration's), "p" (McNemar's p-value)."""
    return [row[key] for row in nophase_pair(config, name).values()]


def seed_by_seed(values: list, spec: str = "") -> str:
    """Values of the seeds, in seed order, as a sentence says them: "97 and 82" ("a, b and c" for three)."""
    shown = [format(v, spec) for v in values]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def nophase_by_seed(config: str, name: str, key: str, spec: str = "") -> str:
    """:func:`nophase_seed_values` as a sentence says them (:func:`seed_by_seed`), e.g. "97 and 82"."""
    return seed_by_seed(nophase_seed_values(config, name, key), spec)


# --------------------------------------------------------------------------- results/aligned: the BPE with merges

ALIGNED_RUN = "aligned"  # results/aligned: C1-C4 with the assignment preset's aligned BPE, seeds 0 and 1


@functools.cache
def aligned_paired() -> tuple[dict, ...]:
    """McNemar's exact test of C2-C4 against C1 with the aligned BPE, seed by seed, on every probe set."""
    rows = tuple(paired_rows(load_learn_runs(ALIGNED_RUN)))
    if not rows:
        raise ValueError(f"results/{ALIGNED_RUN} has no paired outcomes of a configuration and c1")
    return rows


def aligned_by_seed(config: str, name: str, key: str, spec: str = "") -> str:
    """One field of ``config``'s paired rows against C1 on ``name`` with the aligned BPE, seed by seed, as a
    sentence says them: "base_exact" (C1's exact lines), "exact" (the configuration's), "p"."""
    rows = sorted((row for row in aligned_paired() if (row["config"], row["set"]) == (config, name)),
                  key=lambda row: row["seed"])
    if not rows:
        raise ValueError(f"results/{ALIGNED_RUN} has no paired outcomes of {config} and c1 on {name}")
    return seed_by_seed([row[key] for row in rows], spec)


def aligned_lines(config: str, name: str) -> int:
    """How many lines of probe set ``name`` each seed of ``config`` and C1 decoded with the aligned BPE: the
    one value they share (a sentence quoting one count for all seeds would otherwise be wrong)."""
    values = {row["seed"]: row["lines"] for row in aligned_paired() if (row["config"], row["set"]) == (config, name)}
    if len(set(values.values())) != 1:
        raise ValueError(f"results/{ALIGNED_RUN}: the seeds of {config} decoded different numbers of {name} "
                         f"lines ({values}); reword the sentence that quotes one count")
    return next(iter(values.values()))


def aligned_bonferroni() -> float:
    """0.05 over every test of :func:`aligned_paired`."""
    return 0.05 / len(aligned_paired())
