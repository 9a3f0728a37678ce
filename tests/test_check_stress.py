"""``cipherlab.student.check`` on issue 37's cases: RoPE's keys and offsets, stress inputs (large scores, all-zero and
constant tokens, long positions, float64, eval mode), the state at construction, BPE on runs of one symbol and
bit strings, the MHA mistakes the book names, nn.Module names a part must not override; and the conventions the
book allows pass. The one-bug variants are tests/student_mistakes.py's ONE_BUG, written in a student's style."""

import pytest

import student_mistakes as mistakes
from cipherlab.student import check
from cipherlab.models.norm import LayerNorm


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("CIPHERLAB_DEBUG", raising=False)


def _ids(cases):
    return [f"{case[0]}-{case[1].__name__}" for case in cases]


@pytest.mark.parametrize("part, obj, name, words", mistakes.ONE_BUG, ids=_ids(mistakes.ONE_BUG))
def test_each_one_bug_variant_fails_with_its_mistake_named(part, obj, name, words):
    try:
        report = check.PARTS[part](obj)
    except check.InterfaceError as e:  # refused before any check: a name nn.Module already has
        assert name == "module names" and words in str(e) and len(str(e).splitlines()) == 1, str(e)
        return
    finding = report[name]
    assert not finding.passed and words in finding.message, str(report)
    assert "\n" not in finding.message


@pytest.mark.parametrize("part, obj", mistakes.VALID, ids=_ids(mistakes.VALID))
def test_each_valid_convention_passes(part, obj):
    report = check.PARTS[part](obj)
    assert report.passed, str(report)


def test_the_conventions_pass_with_a_note():
    concat = check.positional(mistakes.ConcatSinusoidal, "sinusoidal")
    assert "a valid layout" in concat["table"].message and concat["long positions"].passed
    for cls, kind in ((mistakes.RMSNormEpsOutside, "rmsnorm"), (mistakes.LayerNormEpsOutside, "layernorm")):
        message = check.norm(cls, kind)["reference"].message
        assert "eps is added outside the square root" in message and "differ by 2." in message  # the size, named
    assert "(output, weights?)" in check.attention(mistakes.attention_with_weights)["shape"].message


def test_dropout_left_on_stops_the_checks_that_would_blame_something_else():
    """Dropout in attention used to read as a softmax bug, in sinusoidal positions as a table bug."""
    for report in (check.attention(mistakes.attention_dropout_on),
                   check.positional(mistakes.SinusoidalDropoutAlwaysOn, "sinusoidal")):
        assert [f.name for f in report.findings if not f.passed] == ["eval mode"], str(report)
        assert report.findings[-1].name == "eval mode"  # nothing after it ran


def test_the_rope_slips_fail_only_where_they_are():
    assert [f.name for f in check.positional(mistakes.RoPEOffsetOnQueries, "rope").findings if not f.passed] == [
        "keys", "cached steps"]
    gqa = check.positional(mistakes.RoPEGQAKeysSkipped, "rope")
    assert gqa["relative"].passed and gqa["reference"].passed and not gqa["keys"].passed


def test_a_zero_gain_is_named_at_construction_only():
    report = check.norm(mistakes.RMSNormZeroGain, "rmsnorm")
    assert [f.name for f in report.findings if not f.passed] == ["at construction"], str(report)
    assert "every output is 0 at first" in report["at construction"].message


def test_a_pass_line_never_contradicts_its_tolerance():
    """bfloat16's tolerance is atol + rtol |reference|: the line says so, and the share of it used."""
    message = check.norm(LayerNorm, "layernorm")["bfloat16"].message
    assert "of the tolerance there (0.03 + 0.03 x |reference|" in message and "within 0.03" not in message


def test_an_attribute_shadowing_a_module_method_is_refused():
    from torch import nn

    class ShadowingNorm(mistakes.MyRMSNorm):
        def __init__(self, d_model, eps=1e-5):
            super().__init__(d_model, eps)
            self.apply = nn.Identity()  # self.apply(...) would still call nn.Module.apply

    with pytest.raises(check.InterfaceError, match=r"ShadowingNorm defines apply, which nn.Module already has"):
        check.norm(ShadowingNorm, "rmsnorm")


def test_a_mistake_that_raises_is_named_before_the_error_text():
    """A padding mask turned onto the queries raises in cross-attention (Lq != Lk): the line starts with the mistake."""
    message = check.multi_head(mistakes.MHAPaddingOnQueries, "mha")["reference"].message
    assert message.startswith("the padding mask blocks queries"), message
    assert message.index("RuntimeError") > message.index("use it as it is")
