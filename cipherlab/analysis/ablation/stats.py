"""The numbers behind the comparisons: differences, their standard errors, paired tests.

Each change is judged against C1 by exact lines: :func:`difference` and :func:`single_change_rows` with
the binomial standard errors of :func:`exact_lines_stderr`, :func:`rate_difference_stderr` and
:func:`exact_difference_stderr`; where records keep per-line outcomes, :func:`mcnemar` and
:func:`paired_rows` use the pairing. Also the gains of one decoding or source mode over another, and
what the training logs say about epochs. Everything returns numbers or rows; :mod:`cipherlab.analysis.ablation.tables`
and :mod:`cipherlab.analysis.ablation.probe_tables` lay them out.
"""

from __future__ import annotations

import math

from cipherlab.analysis.ablation.records import REFERENCE_SETS, change_from_c1, entry_label, metric, section

__all__ = [
    "NOISE_SE",
    "beam_gains",
    "common_epoch",
    "decoding_gains",
    "decoding_rows",
    "difference",
    "epoch_seconds",
    "exact_difference_stderr",
    "exact_lines_stderr",
    "loss_at_epoch",
    "mcnemar",
    "mode_gains",
    "paired_rows",
    "rate_difference_stderr",
    "single_change_rows",
]

# A difference of exact-line rates counts as one when it exceeds NOISE_SE binomial standard errors of the difference.
NOISE_SE = 2.0


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
    test = record["sets"]["test"] if "sets" in record else record
    p, n = metric(test, "sequence_accuracy"), test["lines"]
    return math.sqrt(p * (1 - p) / n) if n else math.nan


def rate_difference_stderr(a: dict, b: dict) -> float:
    """Binomial standard error of the difference of two exact-line rates (records or metrics dicts),
    taken as independent samples: sqrt(se_a^2 + se_b^2)."""
    return math.hypot(exact_lines_stderr(a), exact_lines_stderr(b))


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


# --------------------------------------------------------------------------- paired outcomes of the same lines


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
            if name not in record["sets"] or name not in base["sets"] or "exact_by_line" not in record["sets"][name]:
                continue
            x, y = section(base, name), section(record, name)
            only_base, only_config, p = mcnemar(x["exact_by_line"], y["exact_by_line"])
            rows.append({"config": config, "seed": seed, "set": name, "label": labels.get(name, name),
                         "lines": x["lines"], "base_exact": x["exact_lines"], "exact": y["exact_lines"],
                         "only_base": only_base, "only_config": only_config, "p": p})
    return rows


# --------------------------------------------------------------------------- one decoding or mode against another


def mode_gains(records: dict[str, dict], bits_records: dict[str, dict], key: str = "bit_accuracy") -> dict[str, float]:
    """Per configuration of the bits run: ``metric(primary) - metric(bits run)`` (bytes minus bits)."""
    return {name: metric(records[name], key) - metric(b, key) for name, b in bits_records.items() if name in records}


def beam_gains(beam: dict, key: str = "sequence_accuracy") -> dict[str, float | None]:
    """Per configuration of ``beam.json``: beam minus greedy; None where there is no beam row."""
    gains = {}
    for name, entry in beam.items():
        widths = [k for k in entry if k.startswith("beam")]
        gains[name] = (metric(entry[widths[0]], key) - metric(entry["greedy"], key)
                       if widths and "greedy" in entry else None)
    return gains


def decoding_rows(errors: dict, *, names: dict[str, str] | None = None) -> list[dict]:
    """Per ``errors.json`` entry: its label (:func:`~cipherlab.analysis.ablation.records.entry_label` with
    ``names``), free and length-aware metrics, and the free lines of the wrong length."""
    return [{"key": key, "label": entry_label(key, names=names), "free": e["test_free"],
             "aware": e["test_length_aware"], "lines": e["lines"], "wrong_length": e["lines_with_wrong_length"]}
            for key, e in errors.items()]


def decoding_gains(errors: dict, key: str = "bit_accuracy") -> dict[str, float]:
    """Per ``errors.json`` entry: length-aware minus free."""
    return {r["key"]: metric(r["aware"], key) - metric(r["free"], key) for r in decoding_rows(errors)}


# --------------------------------------------------------------------------- the training logs


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
