"""Tests for cipherlab.pipeline.metrics: hand-computed cases and the reference libraries."""

import random

import pytest
import sacrebleu
from hypothesis import given
from hypothesis import strategies as st
from rapidfuzz.distance import Levenshtein as RapidLevenshtein

from cipherlab.data.cipher import encrypt
from cipherlab.pipeline.metrics import (
    NOT_COMPARABLE_REASON,
    bit_accuracy,
    bit_matches,
    compute_metrics,
    edit_distance,
    levenshtein,
    reencrypt,
    sequence_accuracy,
)


def test_bit_accuracy_is_one_for_exact_predictions():
    lines = ["Hello, world.", "The jury said."]
    assert bit_accuracy(lines, [encrypt(x) for x in lines]) == 1.0


def test_one_wrong_character_costs_only_its_differing_bits():
    # 'a' (0x61) and 'c' (0x63) differ in one bit, so 1 of 24 bits is wrong.
    assert bit_matches("abc", encrypt("cbc")) == (23, 24)


def test_missing_and_extra_characters_count_as_wrong_bits():
    reference = encrypt("abcd")  # 32 bits
    assert bit_matches("ab", reference) == (16, 32)  # 16 missing bits wrong
    assert bit_matches("abcdef", reference) == (32, 48)  # 16 extra bits wrong; denominator max(len)
    assert bit_matches("", reference) == (0, 32)


def test_bit_accuracy_pools_bits_over_lines():
    # line 1: 8 of 8 right; line 2: 0 of 16 (empty prediction) -> 8 / 24
    assert bit_accuracy(["a", ""], [encrypt("a"), encrypt("bc")]) == pytest.approx(8 / 24)


def test_a_character_outside_one_byte_counts_as_eight_wrong_bits():
    assert reencrypt("a\u20acb")[8:16] == "????????"
    assert bit_matches("a\u20acb", encrypt("axb")) == (16, 24)


def test_sequence_accuracy_is_all_or_nothing_per_line():
    assert sequence_accuracy(["abc", "abd", "x"], ["abc", "abc", "x"]) == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    "a, b, distance",
    [("", "", 0), ("abc", "", 3), ("", "ab", 2), ("kitten", "sitting", 3), ("flaw", "lawn", 2), ("abc", "abc", 0)],
)
def test_levenshtein_hand_computed_cases(a, b, distance):
    assert levenshtein(a, b) == distance
    assert levenshtein(b, a) == distance


def test_levenshtein_matches_rapidfuzz_on_random_strings():
    rng = random.Random(0)
    for _ in range(200):
        a = "".join(rng.choice("abc ") for _ in range(rng.randint(0, 30)))
        b = "".join(rng.choice("abc ") for _ in range(rng.randint(0, 30)))
        assert levenshtein(a, b) == RapidLevenshtein.distance(a, b)


@given(st.text(alphabet="ab c", max_size=40), st.text(alphabet="ab c", max_size=40))
def test_the_fast_edit_distance_is_the_taught_levenshtein_on_near_strings(a, b):
    assert edit_distance(a, b) == levenshtein(a, b) == edit_distance(b, a)


@given(st.text(max_size=30), st.text(max_size=30))
def test_the_fast_edit_distance_is_the_taught_levenshtein_on_any_text(a, b):
    assert edit_distance(a, b) == levenshtein(a, b)  # any code point, astral ones too: one character each


def test_a_50000_character_line_with_one_wrong_character_is_scored_on_the_fast_path(monkeypatch):
    """The metrics call rapidfuzz, never the pure-Python table (50,000 x 50,000 cells would take hours)."""
    import cipherlab.pipeline.metrics

    def taught(a, b):
        raise AssertionError("compute_metrics used the pure-Python levenshtein")

    monkeypatch.setattr(cipherlab.pipeline.metrics, "levenshtein", taught)
    rng = random.Random(0)
    reference = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(50_000))  # one ROUGE/BLEU word
    prediction = reference[:25_000] + ("a" if reference[25_000] != "a" else "b") + reference[25_001:]
    assert edit_distance(prediction, reference) == 1
    m = compute_metrics([prediction], [reference], [encrypt(reference)])
    assert m["levenshtein"] == 1 and m["char_error_rate"] == pytest.approx(1 / 50_000)
    assert m["sequence_accuracy"] == 0.0 and m["bit_accuracy"] > 0.9999


def test_compute_metrics_agrees_with_sacrebleu_and_hand_values():
    refs = ["the cat sat on the mat", "a dog barked"]
    preds = ["the cat sat on a mat", "a dog barked"]
    m = compute_metrics(preds, refs, [encrypt(r) for r in refs])
    assert m["sequence_accuracy"] == 0.5
    assert m["levenshtein"] == pytest.approx(3 / 2)  # "the" -> "a" is 3 edits
    assert m["char_error_rate"] == pytest.approx(3 / (22 + 12))
    assert m["bleu"] == pytest.approx(sacrebleu.corpus_bleu(preds, [refs]).score)
    assert m["chrf"] == pytest.approx(sacrebleu.corpus_chrf(preds, [refs]).score)
    # ROUGE-1 F1: line 1 has 5 of 6 unigrams in common both ways -> 5/6; line 2 is exact -> 1.
    assert m["rouge1"] == pytest.approx((5 / 6 + 1) / 2)


def test_perfect_predictions_score_perfectly():
    refs = ["the cat sat on the mat today", "a dog barked at the postman"]
    m = compute_metrics(refs, refs, [encrypt(r) for r in refs])
    assert m["bit_accuracy"] == m["sequence_accuracy"] == m["rougeL"] == 1.0
    assert m["levenshtein"] == 0
    assert m["bleu"] == pytest.approx(100.0)


def test_token_free_configuration_reports_bleu_and_rouge_as_not_comparable():
    refs = ["the cat sat"]
    m = compute_metrics(refs, refs, [encrypt(refs[0])], tokenised=False)
    assert m["bleu"] is None and m["rougeL"] is None
    assert m["not_comparable"]["bleu"] == NOT_COMPARABLE_REASON
    assert m["chrf"] == pytest.approx(100.0)  # character-level: reported for every configuration


def test_mismatched_prediction_count_is_refused():
    with pytest.raises(ValueError, match="2 predictions for 1 reference"):
        sequence_accuracy(["a", "b"], ["a"])
