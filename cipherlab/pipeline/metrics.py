"""How good is a decryption? The metrics of the ablation table.

Every metric is computed on whole original lines of the test split (chunks are decoded and
re-assembled first), from two lists of strings: the predicted plaintext lines and the
reference plaintext lines (plus the reference cipher lines for bit accuracy).

- **bit accuracy**: re-encrypt each prediction with :func:`cipherlab.data.cipher.encrypt` and
  compare it bit by bit with the reference cipher. When the lengths differ, every missing
  or extra bit counts as wrong: a line contributes ``max(len(pred_bits), len(ref_bits))``
  bits to the denominator. The score is pooled over all bits of all lines.
- **sequence accuracy**: the fraction of lines predicted exactly.
- **Levenshtein**: the mean character edit distance per line, and the character error rate
  (total edits / total reference characters). :func:`levenshtein` is the plain dynamic
  programme, kept as the reference; the metrics use :func:`edit_distance`, the same numbers
  from rapidfuzz's bit-parallel algorithm, so 2,600-character lines score in microseconds.
- **BLEU** and **chrF** (0-100, sacrebleu's scale) and **ROUGE-1/2/L** (F1, 0-1, rouge-score).

Bit accuracy, sequence accuracy, Levenshtein and chrF look only at characters, so they
compare all five configurations. The assignment reports BLEU and ROUGE for the tokenised
configurations C1-C4 only; for C5 they are ``None`` with the reason in ``not_comparable``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sacrebleu
from rapidfuzz.distance import Levenshtein as _RapidLevenshtein
from rouge_score import rouge_scorer

from cipherlab.data.cipher import encrypt

__all__ = [
    "NOT_COMPARABLE_REASON",
    "bit_accuracy",
    "bit_matches",
    "compute_metrics",
    "edit_distance",
    "levenshtein",
    "reencrypt",
    "rouge_f1",
    "sequence_accuracy",
]

NOT_COMPARABLE_REASON = (
    "the assignment reports BLEU and ROUGE for the tokenised configurations (C1-C4) only; "
    "compare C5 by bit accuracy, sequence accuracy, Levenshtein and chrF"
)
_UNENCODABLE = "?" * 8  # stands for a predicted character the 8-bit cipher cannot carry


def reencrypt(prediction: str) -> str:
    """The cipher bits of a predicted line, for comparison with the reference cipher.

    A predicted character with a code >= 256 has no 8-bit encryption; it becomes ``'????????'``,
    which matches no reference bit, so it counts as 8 wrong bits.

    >>> reencrypt("Hi")
    '0000100100100111'
    """
    if all(ord(ch) < 256 for ch in prediction):
        return encrypt(prediction)
    bits = encrypt("".join(ch if ord(ch) < 256 else "\0" for ch in prediction))
    return "".join(
        _UNENCODABLE if ord(ch) >= 256 else bits[8 * i : 8 * i + 8] for i, ch in enumerate(prediction)
    )


def bit_matches(prediction: str, reference_bits: str) -> tuple[int, int]:
    """(matching bits, compared bits) for one line; compared = max of the two lengths.

    >>> bit_matches("Hi", "0000100100100111")  # exact
    (16, 16)
    >>> bit_matches("H", "0000100100100111")   # the 8 missing bits are wrong
    (8, 16)
    """
    predicted_bits = reencrypt(prediction)
    matches = sum(a == b for a, b in zip(predicted_bits, reference_bits))
    return matches, max(len(predicted_bits), len(reference_bits))


def bit_accuracy(predictions: Sequence[str], reference_ciphers: Sequence[str]) -> float:
    """Matching bits / compared bits, pooled over all lines (see :func:`bit_matches`)."""
    _check_parallel(predictions, reference_ciphers)
    matched = compared = 0
    for prediction, bits in zip(predictions, reference_ciphers):
        m, n = bit_matches(prediction, bits)
        matched, compared = matched + m, compared + n
    return matched / compared if compared else 1.0


def sequence_accuracy(predictions: Sequence[str], references: Sequence[str]) -> float:
    """Fraction of lines predicted exactly (all or nothing per line)."""
    _check_parallel(predictions, references)
    if not references:
        return 1.0
    return sum(p == r for p, r in zip(predictions, references)) / len(references)


def levenshtein(a: str, b: str) -> int:
    """Character edit distance (insertions, deletions, substitutions all cost 1): the reference.

    The dynamic programme in plain Python; :func:`edit_distance` gives the
    same number at library speed, and is what the metrics use. Only two rows of the (len(a)+1) x (len(b)+1) dynamic-programming table are alive at a time:
    row i needs only row i-1. Swapping so that ``b`` is the shorter string makes the memory
    O(min(len(a), len(b))); the time stays O(len(a) * len(b)).

    >>> levenshtein("kitten", "sitting")
    3
    """
    if a == b:  # most lines of a model that learned the cipher: no table to fill
        return 0
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))  # distances from a[:0] to each prefix of b
    for i, ca in enumerate(a, start=1):
        current = [i]  # distance from a[:i] to the empty prefix of b
        for j, cb in enumerate(b, start=1):
            current.append(
                min(
                    previous[j] + 1,  # delete ca
                    current[j - 1] + 1,  # insert cb
                    previous[j - 1] + (ca != cb),  # substitute (free when equal)
                )
            )
        previous = current
    return previous[-1]


def edit_distance(a: str, b: str) -> int:
    """:func:`levenshtein`'s number, from rapidfuzz (bit-parallel, about len(a) * len(b) / 64 word
    operations instead of len(a) * len(b) Python steps): what :func:`compute_metrics` uses.

    >>> edit_distance("kitten", "sitting")
    3
    """
    return _RapidLevenshtein.distance(a, b)


def rouge_f1(predictions: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """Mean ROUGE-1, ROUGE-2 and ROUGE-L F1 over lines (rouge-score's tokenizer)."""
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"])
    totals = {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0}
    for prediction, reference in zip(predictions, references):
        for key, score in scorer.score(reference, prediction).items():
            totals[key] += score.fmeasure
    n = max(len(references), 1)
    return {key: total / n for key, total in totals.items()}


def compute_metrics(
    predictions: Sequence[str],
    references: Sequence[str],
    reference_ciphers: Sequence[str],
    *,
    tokenised: bool = True,
) -> dict:
    """All the metrics of the results table for one configuration.

    ``tokenised`` is False for the token-free C5: BLEU and ROUGE are then ``None`` and
    ``not_comparable`` says why.
    """
    _check_parallel(predictions, references)
    distances = [edit_distance(p, r) for p, r in zip(predictions, references)]
    n_lines = max(len(references), 1)
    metrics = {
        "lines": len(references),
        "bit_accuracy": bit_accuracy(predictions, reference_ciphers),
        "sequence_accuracy": sequence_accuracy(predictions, references),
        "levenshtein": sum(distances) / n_lines,
        "char_error_rate": sum(distances) / max(sum(map(len, references)), 1),
        "chrf": sacrebleu.corpus_chrf(list(predictions), [list(references)]).score,
    }
    if tokenised:
        metrics["bleu"] = sacrebleu.corpus_bleu(list(predictions), [list(references)]).score
        metrics.update(rouge_f1(predictions, references))
    else:
        metrics.update(bleu=None, rouge1=None, rouge2=None, rougeL=None)
        metrics["not_comparable"] = {
            key: NOT_COMPARABLE_REASON for key in ("bleu", "rouge1", "rouge2", "rougeL")
        }
    return metrics


def _check_parallel(predictions: Sequence[str], references: Sequence) -> None:
    if len(predictions) != len(references):
        raise ValueError(
            f"{len(predictions)} predictions for {len(references)} reference lines; "
            "pass one prediction per reference line, in the same order"
        )
