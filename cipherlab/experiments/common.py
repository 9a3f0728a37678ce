"""What several chapters' experiments share: the assignment's sizes, the sinusoidal table, a fresh C1,
the calibration runs and the committed test records.

The sizes are ``cipherlab.config.Config()``'s defaults (the assignment preset) and the key period
is ``cipherlab.cipher.PERIOD``: none is typed here by hand. ``results/calibration/calibration.json``
holds the short runs that chose the cpu preset (chapters 4 and 7 quote them); ``run_records``
reads a committed results folder through ``cipherlab.results`` (chapters 4 and 6), ``reference_runs`` results/reference.
"""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path

import torch

from cipherlab.cipher import PERIOD
from cipherlab.config import Config
from cipherlab.models.positional import SinusoidalPositionalEncoding
from cipherlab.models.transformer import Seq2SeqTransformer
from cipherlab.results import BITS_RUN, REFERENCE_SETS, load_reference_runs, load_run, metric, paired_rows, section

ASSIGNMENT_SIZES = Config()  # the assignment preset's sizes are Config's defaults
D_MODEL, N_HEADS, FFN_DIM = ASSIGNMENT_SIZES.d_model, ASSIGNMENT_SIZES.n_heads, ASSIGNMENT_SIZES.ffn_dim
SRC_VOCAB, TGT_VOCAB = ASSIGNMENT_SIZES.src_vocab, ASSIGNMENT_SIZES.tgt_vocab  # the assignment's BPE vocabularies
MAX_LEN = 4096  # the positions a sinusoidal table holds (SinusoidalPositionalEncoding's default max_len)
KEY_PERIOD = PERIOD  # the key repeats every PERIOD characters (len(cipherlab.cipher.KEY))
CALIBRATION_FILE = Path(__file__).resolve().parents[2] / "results" / "calibration" / "calibration.json"
BITS = BITS_RUN  # the cpu preset with the course notes' bits-mode BPE on the cipher side


def sinusoidal_table(d_model: int = D_MODEL, length: int = MAX_LEN) -> torch.Tensor:
    """(length, d_model): what SinusoidalPositionalEncoding adds at positions 0..length-1 (added to zeros)."""
    module = SinusoidalPositionalEncoding(d_model, max_len=length, dropout=0.0)
    with torch.no_grad():
        return module(torch.zeros(1, length, d_model))[0]


@functools.lru_cache(maxsize=1)
def baseline_model() -> Seq2SeqTransformer:
    """A freshly initialised C1 model with the assignment's sizes and vocabularies, seeded."""
    torch.manual_seed(0)
    return Seq2SeqTransformer(SRC_VOCAB, TGT_VOCAB, d_model=D_MODEL, n_heads=N_HEADS)


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
    """{"c1": record, ...} of a committed results folder (``cipherlab.results.load_run``)."""
    return load_run(folder)


def test_lines(folder: str, config: str = "c1") -> int:
    return run_records(folder)[config]["test"]["lines"]


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
    return load_reference_runs()


def _shared(what: str, values: set):
    """The one value every reference run holds; an error naming ``what`` when the runs disagree."""
    if len(values) != 1:
        raise ValueError(f"results/reference: the runs differ in {what} ({sorted(values)}); a sentence quoting "
                         "one value for all of them would be wrong")
    return next(iter(values))


def reference_seeds() -> int:
    return len({seed for _, seed in reference_runs()})


def reference_sets() -> int:
    """How many probe sets each reference run was decoded on (:data:`cipherlab.results.REFERENCE_SETS`)."""
    return len(REFERENCE_SETS)


def reference_lines(name: str) -> int:
    """How many lines every reference run decoded in probe set ``name`` (e.g. "brown_test_free")."""
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
    McNemar's exact test (:func:`cipherlab.results.paired_rows`). Summed over sets and seeds: "c1_missed",
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
