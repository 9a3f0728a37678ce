"""``cipherlab.check``: cipherlab's own parts pass every check; the broken variants of chapter 11 and the
slips students make are caught with a message that names the bug; ``python -m cipherlab check`` loads a
student's file and fails on it in one line when it cannot."""

import math

import pytest
import torch

from cipherlab import broken, check
from cipherlab.__main__ import main
from cipherlab.models.attention import GroupedQueryAttention, MultiHeadAttention, ScaledDotProductAttention
from cipherlab.models.norm import LayerNorm, RMSNorm
from cipherlab.models.positional import RotaryPositionalEmbedding, SinusoidalPositionalEncoding


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("CIPHERLAB_DEBUG", raising=False)  # the debug switch would show tracebacks


# --------------------------------------------------------------------------- cipherlab's own parts pass

OWN = [
    ("attention", ScaledDotProductAttention),
    ("attention", ScaledDotProductAttention(fused=True)),
    ("mha", MultiHeadAttention),
    ("gqa", GroupedQueryAttention),
    ("gqa", MultiHeadAttention),  # it takes n_kv_heads too
    ("layernorm", LayerNorm),
    ("rmsnorm", RMSNorm),
    ("sinusoidal", SinusoidalPositionalEncoding),
    ("rope", RotaryPositionalEmbedding),
]


@pytest.mark.parametrize("part, obj", OWN, ids=[f"{p}-{i}" for i, (p, _) in enumerate(OWN)])
def test_cipherlabs_own_parts_pass_every_check(part, obj):
    report = check.PARTS[part](obj)
    assert report.passed, str(report)
    assert len(report.findings) >= 3


def test_a_plain_function_is_checked_as_attention():
    def sdpa(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        weights = scores.softmax(-1)
        return (weights if mask is None else weights.masked_fill(mask.all(-1, keepdim=True), 0.0)) @ v

    assert check.attention(sdpa).passed


# --------------------------------------------------------------------------- chapter 11's broken variants are caught


def _failure(report: check.Report, name: str) -> str:
    finding = report[name]
    assert not finding.passed, str(report)
    return finding.message


def test_unscaled_attention_is_caught_at_large_d():
    report = check.attention(broken.Unscaled)
    message = _failure(report, "scaling")
    assert message.startswith("scores are not divided by sqrt(d_k): largest weight 0.9")
    assert f"at d = {check.SCALING_D} where the reference gives 0.1" in message
    assert "scores are not divided by sqrt(d_k)" in _failure(report, "reference")
    assert report["causality"].passed  # still causal: only the comparison sees it


def test_softmax_over_queries_is_caught():
    report = check.attention(broken.SoftmaxOverQueries)
    assert "softmax runs over the query axis (dim=-2)" in _failure(report, "weights")
    assert "the softmax runs over the queries (dim=-2)" in _failure(report, "reference")
    assert "a later position leaks backwards" in _failure(report, "causality")


def test_heads_split_without_transpose_is_caught():
    report = check.multi_head(broken.HeadsWithoutTranspose, "mha")
    assert ".view(B, L, H, d).transpose(1, 2), not .view(B, H, L, d)" in _failure(report, "permutation")
    assert "a later position leaks into earlier ones" in _failure(report, "causality")
    assert "differs from cipherlab's MultiHeadAttention" in _failure(report, "reference")
    assert "fix that first" in _failure(report, "rope")  # not blamed on RoPE


def rope_on_values(d_model, n_heads, rope=None):
    """broken.RopeOnValues built to the interface, where rope is optional: without a rope its bug
    cannot show, so that build is cipherlab's layer."""
    return MultiHeadAttention(d_model, n_heads) if rope is None else broken.RopeOnValues(d_model, n_heads, rope)


def test_rope_on_values_is_caught():
    report = check.multi_head(rope_on_values, "mha")
    assert [f.name for f in report.findings if not f.passed] == ["rope"], str(report)
    message = report["rope"].message
    assert "the same tokens 5 positions later give outputs different" in message
    assert "rotate q and k, never v" in message


def test_rope_without_its_offset_is_caught():
    """The RoPE inside broken.RopeCacheWithoutOffset: right without a cache, wrong at every cached step."""
    report = check.positional(broken._RopeWithoutOffset, "rope")
    assert [f.name for f in report.findings if not f.passed] == ["offset"], str(report)
    assert "the offset is ignored, every cached decoding step is rotated as position 0" in report["offset"].message


# --------------------------------------------------------------------------- slips students make


class MaskAfterSoftmax(ScaledDotProductAttention):
    """Blocked weights zeroed after the softmax: the rest no longer sum to 1."""

    def forward(self, q, k, v, mask=None):
        weights = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(-1)
        return (weights if mask is None else weights.masked_fill(mask, 0.0)) @ v


class MaskKeepsTrue(ScaledDotProductAttention):
    """F.scaled_dot_product_attention's convention (True = keep) used on cipherlab's masks."""

    def forward(self, q, k, v, mask=None):
        return super().forward(q, k, v, None if mask is None else ~mask)


class MinusInfinity(ScaledDotProductAttention):
    """Blocked scores filled with -inf: a query with every key blocked gets 0/0."""

    def forward(self, q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        return scores.softmax(-1) @ v


@pytest.mark.parametrize("cls, name, words", [
    (MaskAfterSoftmax, "causal mask", "the mask is applied after the softmax"),
    (MaskKeepsTrue, "padding mask", "the mask is read as True = keep"),
    (MinusInfinity, "all-blocked row", "outputs NaN"),
])
def test_attention_slips_are_named(cls, name, words):
    assert words in _failure(check.attention(cls), name)


class CentredRMSNorm(RMSNorm):
    """RMSNorm with the mean subtracted first."""

    def forward(self, x):
        return super().forward(x - x.mean(-1, keepdim=True))


class UnbiasedLayerNorm(LayerNorm):
    """LayerNorm with torch's default, unbiased, variance."""

    def forward(self, x):
        return (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True) + self.eps).sqrt() * self.gamma + self.beta


class Bf16LayerNorm(LayerNorm):
    """LayerNorm computed in the input's dtype: bf16 loses a small spread on a large mean."""

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, keepdim=True, unbiased=False)
        return (x - mean) / (var + self.eps).sqrt() * self.gamma.to(x.dtype) + self.beta.to(x.dtype)


def test_norm_slips_are_named():
    centred = check.norm(CentredRMSNorm, "rmsnorm")
    assert "the mean is subtracted" in _failure(centred, "reference")
    assert "RMSNorm does not centre" in _failure(centred, "invariance")
    assert "x.var(dim=-1, unbiased=False)" in _failure(check.norm(UnbiasedLayerNorm, "layernorm"), "reference")
    low = check.norm(Bf16LayerNorm, "layernorm")
    assert low["reference"].passed and "compute the statistics in float32" in _failure(low, "bfloat16")
    assert "must subtract each token's mean" in _failure(check.norm(RMSNorm, "layernorm"), "invariance")


class SwappedSinusoidal(SinusoidalPositionalEncoding):
    """cos in the even columns, sin in the odd ones."""

    def __init__(self, d_model, max_len=4096, dropout=0.1):
        super().__init__(d_model, max_len, dropout)
        self.table = self.table.view(max_len, -1, 2).flip(-1).reshape(max_len, d_model)


class InterleavedRopeOnHalfSplitTable(RotaryPositionalEmbedding):
    """Pairs (x0, x1), (x2, x3) rotated with the table laid out for half-split pairs (cat(angles, angles))."""

    def forward(self, q, k, offset=0):
        return tuple(self._rotate_pairs(t, offset) for t in (q, k))

    def _rotate_pairs(self, x, offset):
        cos, sin = self._table(offset, x.size(-2))  # (L, head_dim): angle of column j is theta_(j mod d/2)
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack((even * cos[:, 0::2] - odd * sin[:, 1::2], even * sin[:, 0::2] + odd * cos[:, 1::2]),
                           dim=-1).flatten(-2).to(x.dtype)


class InterleavedRope(RotaryPositionalEmbedding):
    def forward(self, q, k, offset=0):
        return self.rotate_interleaved(q, offset), self.rotate_interleaved(k, offset)


def test_position_slips_are_named():
    assert "sin and cos are swapped" in _failure(check.positional(SwappedSinusoidal, "sinusoidal"), "table")
    mismatched = check.positional(InterleavedRopeOnHalfSplitTable, "rope")
    assert "must depend on the offset n - m only" in _failure(mismatched, "relative")
    interleaved = check.positional(InterleavedRope, "rope")  # a valid RoPE, with a note
    assert interleaved.passed and "rotate_interleaved" in interleaved["reference"].message


def test_an_unusable_object_raises_one_clear_interface_error():
    with pytest.raises(check.InterfaceError, match=r"ScaledDotProductAttention\(32, 4\) raised ValueError.*"
                                                   r"cls\(d_model, n_heads"):
        check.multi_head(ScaledDotProductAttention, "mha")
    with pytest.raises(check.InterfaceError, match=r"LayerNorm\(32, 4\)\(x, x, x, mask=None\) raised TypeError"):
        check.multi_head(LayerNorm, "mha")
    with pytest.raises(check.InterfaceError, match=r"returned int, not a tensor"):
        check.attention(lambda q, k, v, mask=None: 0)


# --------------------------------------------------------------------------- the command line on a student's file

STUDENT = '''
import math
import torch
from torch import nn


class Attention(nn.Module):
    def forward(self, q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1){scale}
        if mask is not None:
            scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        weights = scores.softmax(-1)
        if mask is not None:
            weights = weights.masked_fill(mask.all(-1, keepdim=True), 0.0)
        return weights @ v
'''


def _student(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def _one_line(err: str, names: str) -> None:
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("cipherlab: error: ") and names in err, err


def test_the_command_passes_a_correct_file_and_fails_a_planted_bug(tmp_path, capsys):
    good = _student(tmp_path, "good.py", STUDENT.format(scale=" / math.sqrt(q.size(-1))"))
    assert main(["check", "attention", f"{good}:Attention"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("check attention: Attention") and "9 of 9 checks pass" in out
    bad = _student(tmp_path, "bad.py", STUDENT.format(scale=""))
    assert main(["check", "attention", f"{bad}:Attention"]) == 1
    assert "FAIL  scaling: scores are not divided by sqrt(d_k)" in capsys.readouterr().out


def test_the_command_names_each_unusable_file_in_one_line(tmp_path, capsys):
    broken_syntax = _student(tmp_path, "syntax.py", "class Attention(nn.Module)\n    pass\n")
    raising = _student(tmp_path, "raising.py", "import not_a_module_anywhere\n")
    good = _student(tmp_path, "good.py", STUDENT.format(scale=" / math.sqrt(q.size(-1))"))
    cases = [
        ([f"{broken_syntax}:Attention"], f"{broken_syntax}:1: syntax error"),
        ([f"{raising}:Attention"], f"{raising}: importing it raised ModuleNotFoundError"),
        ([f"{tmp_path / 'missing.py'}:Attention"], f"{tmp_path / 'missing.py'}: no such Python file"),
        ([f"{good}:Atention"], f"{good}: defines no 'Atention'; it defines Attention"),
        ([str(good)], f"{good}: expected FILE.py:NAME"),
    ]
    for target, words in cases:
        assert main(["check", "attention", *target]) == 1
        _one_line(capsys.readouterr().err, words)
    nan = _student(tmp_path, "nan.py", "import torch\ndef attention(q, k, v, mask=None):\n"
                   "    return torch.full((*q.shape[:-1], v.size(-1)), float('nan'))\n")
    assert main(["check", "attention", f"{nan}:attention"]) == 1
    assert "FAIL  shape: the output holds NaN" in capsys.readouterr().out
    assert main(["check", "mha", f"{good}:Attention"]) == 1  # an attention function is no multi-head layer
    _one_line(capsys.readouterr().err, f"{good}:Attention: Attention(32, 4) raised TypeError")


def test_a_reference_copy_passes_through_the_command(tmp_path, capsys):
    mine = _student(tmp_path, "mine.py", "from cipherlab.models.norm import RMSNorm as MyNorm\n")
    assert main(["check", "rmsnorm", f"{mine}:MyNorm"]) == 0
    assert "5 of 5 checks pass" in capsys.readouterr().out



class RopeIgnored(MultiHeadAttention):
    """Takes rope= and never uses it."""

    def __init__(self, d_model, n_heads, rope=None):
        super().__init__(d_model, n_heads, dropout=0.0)


def test_a_rope_accepted_but_never_applied_is_named():
    assert "rope= is accepted but never applied" in _failure(check.multi_head(RopeIgnored, "mha"), "rope")


def test_a_stub_is_not_written_and_any_other_failure_is_an_interface_error():
    """The chapters' exercises catch NotWritten alone and check cipherlab's own module instead."""
    def stub(q, k, v, mask=None):
        raise NotImplementedError("write me")

    def wrong(q, k, v, mask=None):
        raise TypeError("bad call")

    with pytest.raises(check.NotWritten, match="NotImplementedError"):
        check.attention(stub)
    with pytest.raises(check.InterfaceError, match="TypeError") as e:
        check.attention(wrong)
    assert not isinstance(e.value, check.NotWritten)
