"""``python -m cipherlab check`` on the user study's mistakes (tests/student_mistakes.py's STUDY_BUGS, STUDY_VALID and
FLOAT64_WARNED): each one-bug class fails its part without a wrong cause named, each valid one passes (a WARN or a
SKIP said where it applies), and tests/check_counts.py's counts over every set hold no miss, no misdiagnosis, no bare
exception and no false alarm."""

import pytest

import check_counts
import student_mistakes as mistakes
from cipherlab.student import check
from cipherlab.student.check.positions import LONG, longest_sequence
from cipherlab.data.corpus import PLAIN_FILE, read_lines, resolve_data_dir


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("CIPHERLAB_DEBUG", raising=False)


def _ids(cases):
    return [f"{case[0]}-{case[1].__name__}" for case in cases]


def _failing(part, obj):
    try:
        report = check.PARTS[part](obj)
    except check.InterfaceError as e:
        return [str(e)]
    return [f"{f.name}: {f.message}" for f in report.findings if not f.passed]


@pytest.mark.parametrize("part, obj, wrong", mistakes.STUDY_BUGS, ids=_ids(mistakes.STUDY_BUGS))
def test_each_study_mistake_fails_without_a_wrong_cause(part, obj, wrong):
    failing = _failing(part, obj)
    assert failing, f"{obj.__name__} passes every check"
    for line in failing:
        assert "\n" not in line and not line.split(": ", 1)[1].startswith("raised "), line
        assert not any(cause in line for cause in wrong), line


@pytest.mark.parametrize("part, obj", mistakes.STUDY_VALID + mistakes.FLOAT64_WARNED,
                         ids=_ids(mistakes.STUDY_VALID + mistakes.FLOAT64_WARNED))
def test_each_unusual_right_part_passes(part, obj):
    report = check.PARTS[part](obj)
    assert report.passed, str(report)


@pytest.mark.parametrize("part, obj", mistakes.FLOAT64_WARNED, ids=_ids(mistakes.FLOAT64_WARNED))
def test_a_float32_output_for_float64_is_a_warn_naming_the_upcast(part, obj):
    finding = check.PARTS[part](obj)["float64"]
    assert finding.passed and repr(finding.passed) == "WARN", finding
    assert "float64 inputs give a float32 output" in finding.message and "never trains" in finding.message


def test_a_complex_buffer_dropped_by_to_float64_is_a_warn_naming_it():
    finding = check.positional(mistakes.RoPEComplex, "rope")["float64"]
    assert repr(finding.passed) == "WARN" and "complex `turn` to real" in finding.message, finding


def test_the_mistakes_each_say_what_differs():
    said = {
        ("attention", mistakes.attention_scales_q_in_place, "inputs"): "changes its input q",
        ("attention", mistakes.attention_zeroes_partly_blocked_rows, "causal mask"): "those rows are all zeros",
        ("mha", mistakes.MHAMaskDroppedWithCache, "kv cache"): "the padding mask is not applied when a cache is given",
        ("mha", mistakes.MHACacheUpdatedTwice, "kv cache"): "the self-attention cache holds 2 positions after step 0",
        ("mha", mistakes.MHAStaticCacheAppends, "kv cache"): "the memory is appended again",
        ("mha", mistakes.MHARopeBeforeSplit, "rope"): "forward((2, 11, 32) float32",
        ("sinusoidal", mistakes.WrappingSinusoidal, "long positions"): "wrap around at 128",
        ("sinusoidal", mistakes.WrappingSinusoidal512, "long positions"): "wrap around at 512",
        ("sinusoidal", mistakes.SinusoidalSliceToLength, "offset"): "offset=7) raised RuntimeError",
        ("rope", mistakes.RoPEPositionsWrap32, "relative"): "the positions wrap around at 32",
        ("layernorm", mistakes.LayerNormBufferGainShift, "parameters"): "it holds buffers `g`, `b`, which get no",
        ("rmsnorm", mistakes.RMSNormWithBias, "parameters"): "RMSNorm has a gain and no shift (no bias): yours also "
                                                             "has `bias`",
        ("bpe", mistakes.DropLastIdBPE, "decode"): "decode([id]) gives '' for every one of the",
        ("pooling", mistakes.PoolingZeroedBeforeNorm, "empty patches"): "an empty patch gives values up to",
    }
    for (part, obj, name), words in said.items():
        finding = check.PARTS[part](obj)[name]
        assert not finding.passed and words in finding.message, (obj.__name__, finding)


def test_an_mha_built_without_dropout_is_refused_as_train_refuses_it():
    with pytest.raises(check.InterfaceError, match=r"MHAWithoutDropoutArgument\(32, 4, dropout=0.1\) raised TypeError"):
        check.multi_head(mistakes.MHAWithoutDropoutArgument, "mha")


def test_the_valid_unusual_parts_say_so():
    strided = check.multi_head(mistakes.MHAHeadsStrided, "gqa")
    assert "head f % H" in strided["reference"].message
    never_filled = check.multi_head(mistakes.MHAStaticCacheNeverFilled, "mha")["kv cache"]
    assert repr(never_filled.passed) == "WARN" and "never filled" in never_filled.message
    assert "multiply-adds per step" in never_filled.message
    skipped = check.multi_head(mistakes.MHANoCacheArgument, "mha")["kv cache"]
    assert repr(skipped.passed) == "SKIP" and "no cache=" in skipped.message
    without_rope = check.multi_head(mistakes.MHAWithoutRope, "gqa")["rope"]
    assert repr(without_rope.passed) == "SKIP" and "train passes rope= only in C2" in without_rope.message


def test_positions_reach_the_longest_line_of_the_corpus():
    longest = max(map(len, read_lines(resolve_data_dir() / PLAIN_FILE)))
    assert LONG == longest_sequence() == longest + 2  # BOS and EOS
    assert f"positions 0..{LONG - 1}" in check.positional(mistakes.MyRoPE, "rope")["long positions"].message


def test_a_table_past_max_len_grows_or_refuses():
    assert check.positional(mistakes.MySinusoidal, "sinusoidal")["past max_len"].passed  # refuses: raises
    wrapped = check.positional(mistakes.RoPEPositionsWrap32, "rope")["past max_len"]
    assert not wrapped.passed and "raises nothing but gives other values" in wrapped.message


def test_a_functional_norm_that_upcasts_is_a_float64_warn_with_its_likely_cause():
    finding = check.norm(mistakes.LayerNormFunctionalUpcast, "layernorm")["float64"]
    assert repr(finding.passed) == "WARN", finding
    assert "float64 inputs raise RuntimeError" in finding.message and "never trains" in finding.message
    assert "with its parameters left in float32 the same float64 inputs run and agree" in finding.message


def test_rope_in_bfloat16_at_long_positions():
    from cipherlab.models.positional import RotaryPositionalEmbedding
    for cls in (RotaryPositionalEmbedding, mistakes.MyRoPE, mistakes.RoPEComplex):
        finding = check.positional(cls, "rope")["long bfloat16"]
        assert finding.passed and f"positions 0..{LONG - 1} in bfloat16 agree" in finding.message, finding
    report = check.positional(mistakes.RoPEAnglesInInputDtype, "rope")
    assert [f.name for f in report.findings if not f.passed] == ["long bfloat16"], str(report)


def test_a_layer_that_raises_gets_no_mistake_named():
    """K/V projected from the query: cross-attention raises, and with one query head per K/V head .repeat gives
    what repeat_interleave gives, so no test of a mistake passes: the line names the call that raised."""
    message = check.multi_head(mistakes.MHAKeysFromQuery, "mha")["reference"].message
    assert message.startswith("forward((2, 6, 32) float32, (2, 7, 32) float32") and "raised RuntimeError" in message


def test_queries_and_keys_shifted_together_are_said_to_be():
    message = check.positional(mistakes.RoPEBothFromOne, "rope")["keys"].message
    assert "queries and keys are both rotated at positions 1.., the reference at 0.." in message, message


def test_the_order_check_names_mean_pooling_only_when_the_mean_reproduces_it():
    assert "'bag of bits'" in check.pooling(mistakes.MeanPatchPooling)["order"].message
    outside = check.pooling(mistakes.PoolingBytesOutside)["order"].message
    assert "bag of bits" not in outside and "does not depend on its own bytes" in outside, outside


def test_mha_dropout_left_on_is_reported_under_eval_mode():
    report = check.multi_head(mistakes.MHADropoutOn, "mha")
    assert [f.name for f in report.findings if not f.passed] == ["eval mode"], str(report)
    assert report.findings[-1].name == "eval mode"  # a stopper: nothing after it ran


def test_the_counts_over_every_set():
    counts = check_counts.counts()
    assert counts.caught == counts.bugs and not counts.missed, counts.missed
    assert not counts.misdiagnosed, counts.misdiagnosed
    assert not counts.false_alarms, counts.false_alarms
    assert not counts.bare, counts.bare


def test_cipherlabs_own_parts_are_still_recognised_through_the_guarded_calls():
    from cipherlab.data.tokenizers import BPETokenizer
    assert "this is cipherlab's own BPETokenizer, the yardstick" in check.bpe(BPETokenizer)["speed"].message
