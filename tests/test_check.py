"""``cipherlab.student.check``: cipherlab's own parts pass every check; the broken variants of the broken-models chapter and the
slips students make are caught with a message that names the bug; ``python -m cipherlab check`` loads a
student's file and fails on it in one line when it cannot."""

import math

import re

import pytest
import torch

import student_mistakes as mistakes
from cipherbook import broken
from cipherlab.student import check
from cipherlab.__main__ import main
from cipherlab.models.attention import GroupedQueryAttention, MultiHeadAttention, ScaledDotProductAttention
from cipherlab.models.blt import BLTModel, ByteEntropyModel, PatchPooling, patch_causal_mask
from cipherlab.models.norm import LayerNorm, RMSNorm
from cipherlab.models.positional import RotaryPositionalEmbedding, SinusoidalPositionalEncoding
from cipherlab.models.transformer import ModelArgs, Seq2SeqTransformer
from cipherlab.data.tokenizers import BPETokenizer


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("CIPHERLAB_DEBUG", raising=False)  # the debug switch would show tracebacks


# --------------------------------------------------------------------------- cipherlab's own parts pass

def cipherlabs_patcher(entropies, threshold, max_patch):
    """ByteEntropyModel.patch_boundaries, cipherlab's patcher, on a given entropy curve."""
    model = ByteEntropyModel()
    model.entropy_curve = lambda seq: entropies
    return model.patch_boundaries(None, threshold, max_patch)


def c2_model():
    """cipherlab's RoPE configuration at the check's sizes: RoPE in self- and cross-attention, under the cache."""
    return Seq2SeqTransformer(ModelArgs(259, 259, pos_encoding="rope", **check.DECODING_SIZES))


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
    ("bpe", BPETokenizer),
    ("patcher", cipherlabs_patcher),
    ("pooling", PatchPooling),
    ("patch_mask", patch_causal_mask),
    ("decoding", Seq2SeqTransformer),
    ("decoding", c2_model),
    ("decoding", BLTModel),
]


@pytest.mark.parametrize("part, obj", OWN, ids=[f"{p}-{i}" for i, (p, _) in enumerate(OWN)])
def test_cipherlabs_own_parts_pass_every_check(part, obj):
    report = check.PARTS[part](obj)
    assert report.passed, str(report)
    assert len(report.findings) >= 3


def test_every_part_has_a_reference_that_passes():
    assert {part for part, _ in OWN} == set(check.PARTS)


def test_the_kv_cache_is_checked_when_the_layer_takes_one():
    message = check.PARTS["gqa"](GroupedQueryAttention)["kv cache"].message
    assert "equals the full causal pass, with RoPE too" in message
    # a layer without cache= (the multi-head attention chapter's exercise): SKIP, said, and no fault (train never
    # gives it a cache), not a silent "all pass"
    report = check.PARTS["mha"](rope_ignored_without_cache)
    skipped = report["kv cache"]
    assert skipped.message.startswith("SKIP: forward takes no cache=") and repr(skipped.passed) == "SKIP"
    assert skipped.passed and "\n  SKIP  kv cache: forward takes no cache=" in str(report)
    assert str(report).endswith(f"{sum(map(bool, (f.passed for f in report.findings)))} of {len(report.findings)} "
                                "checks pass, 1 SKIP")  # a SKIP that counts as passed is counted, and said
    with pytest.raises(KeyError):  # off on request: a layer checked without its cache
        check.multi_head(GroupedQueryAttention, "gqa", kv_cache=False)["kv cache"]


def test_a_students_own_right_bpe_passes_and_is_timed():
    report = check.bpe(mistakes.TextbookBPE)  # no specials, trained by its constructor
    assert report.passed, str(report)
    assert "x cipherlab's time (limit 50x)" in report["speed"].message

    class SubclassedTokenizer(BPETokenizer):
        pass

    timed = check.bpe(SubclassedTokenizer)  # cipherlab's encoder under another name: timed, about 1x
    assert timed.passed and "cipherlab's time" in timed["speed"].message, str(timed)


def test_a_plain_function_is_checked_as_attention():
    def sdpa(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        weights = scores.softmax(-1)
        return (weights if mask is None else weights.masked_fill(mask.all(-1, keepdim=True), 0.0)) @ v

    assert check.attention(sdpa).passed


# --------------------------------------------------------------------------- the broken-models chapter's broken variants are caught


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


def rope_on_values(d_model, n_heads, dropout=0.1, rope=None):
    """broken.RopeOnValues built to the interface, where rope is optional: without a rope its bug
    cannot show, so that build is cipherlab's layer."""
    return MultiHeadAttention(d_model, n_heads, dropout) if rope is None else broken.RopeOnValues(d_model, n_heads,
                                                                                                   rope)


def test_rope_on_values_is_caught():
    report = check.multi_head(rope_on_values, "mha", kv_cache=True)
    assert [f.name for f in report.findings if not f.passed] == ["rope", "kv cache"], str(report)
    message = report["rope"].message
    assert "the same tokens 5 positions later give outputs different" in message
    assert "rotate q and k, never v" in message
    assert "wrong without a cache too (see 'rope'): fix that first" in report["kv cache"].message  # not the cache's


def test_rope_without_its_offset_is_caught():
    """The RoPE inside broken.RopeCacheWithoutOffset: right without a cache, wrong at every cached step."""
    report = check.positional(broken._RopeWithoutOffset, "rope")
    assert [f.name for f in report.findings if not f.passed] == ["offset", "cached steps"], str(report)
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
    with pytest.raises(check.InterfaceError, match=r"ScaledDotProductAttention\(32, 4, dropout=0.1\) raised "
                                                   r"TypeError.*cls\(d_model, n_heads, dropout=p"):
        check.multi_head(ScaledDotProductAttention, "mha")
    with pytest.raises(check.InterfaceError, match=r"LayerNorm\(32, 4, dropout=0.1\) raised TypeError"):
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
    assert out.startswith("check attention: Attention") and re.search(r"\n(\d+) of \1 checks pass", out), out
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
    _one_line(capsys.readouterr().err, f"{good}:Attention: Attention(32, 4, dropout=0.1) raised TypeError")


def test_a_reference_copy_passes_through_the_command(tmp_path, capsys):
    mine = _student(tmp_path, "mine.py", "from cipherlab.models.norm import RMSNorm as MyNorm\n")
    assert main(["check", "rmsnorm", f"{mine}:MyNorm"]) == 0
    assert re.search(r"\n(\d+) of \1 checks pass", capsys.readouterr().out)



class RopeIgnored(MultiHeadAttention):
    """Takes rope= and never uses it."""

    def __init__(self, d_model, n_heads, dropout=0.1, rope=None):
        super().__init__(d_model, n_heads, dropout=dropout)


class rope_ignored_without_cache(RopeIgnored):
    """The layer of a student who wrote no KV cache: forward takes no cache=."""

    def forward(self, query, key, value, mask=None):
        return super().forward(query, key, value, mask)


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


# --------------------------------------------------------------------------- the mistakes of tests/student_mistakes.py


@pytest.mark.parametrize("part, obj, name, words", [
    ("attention", mistakes.softmax_over_queries, "weights", "the softmax runs over the query axis (dim=-2)"),
    ("attention", mistakes.mask_after_softmax, "causal mask", "the mask is applied after the softmax"),
    ("rope", mistakes.MismatchedRoPE, "relative", "RoPE scores must depend on the offset n - m only"),
    ("rope", mistakes.MismatchedRoPE, "rotation", "each pair's two coordinates must turn by the same angle"),
    ("rmsnorm", mistakes.CentredRMSNorm, "reference", "the mean is subtracted: that is LayerNorm"),
    ("bpe", mistakes.CrossBoundaryBPE, "pre-token boundaries", "merges across pre-token boundaries: token 'e ' spans "
                                                               "a space"),
    ("bpe", mistakes.CrossBoundaryBPE, "merges", "merges across pre-token boundaries"),
    ("bpe", mistakes.LongestMatchBPE, "encode", "it takes the longest known token first (greedy longest match)"),
    ("bpe", mistakes.OneAtATimeBPE, "speed", "grossly slower (the limit is 50x)"),
    ("patcher", mistakes.patches_at_or_above, "reference", "where the entropy EQUALS the threshold too (>=)"),
    ("pooling", mistakes.MeanPatchPooling, "order", "it is the mean of its bytes' vectors, blind to their order"),
    ("patch_mask", mistakes.own_patch_mask, "no leak", "(the slot of its own patch), which pools positions"),
    ("patch_mask", mistakes.own_patch_mask, "in a model", "the answer leaks"),
    ("decoding", mistakes.PositionlessSteps, "cache", "the cache ignores the position offset: pos_enc is only ever "
                                                      "called with offset 0"),
])
def test_each_student_mistake_fails_with_its_bug_named(part, obj, name, words):
    assert words in _failure(check.PARTS[part](obj), name)


def test_the_mistakes_fail_no_check_they_do_not_break():
    """A check that fails on everything names nothing: each mistake passes the checks it leaves alone."""
    failing = {part: [f.name for f in check.PARTS[part](obj).findings if not f.passed] for part, obj in [
        ("bpe", mistakes.LongestMatchBPE), ("patcher", mistakes.patches_at_or_above),
        ("pooling", mistakes.MeanPatchPooling), ("patch_mask", mistakes.own_patch_mask),
        ("decoding", mistakes.PositionlessSteps)]}
    assert failing == {"bpe": ["encode", "runs and bit strings"], "patcher": ["reference"], "pooling": ["order", "reference"],
                       "patch_mask": ["no leak", "reference", "in a model"], "decoding": ["cache"]}


def test_a_bpe_that_breaks_ties_the_other_way_is_named():
    message = _failure(check.bpe(mistakes.LargestTieBPE), "merges")
    assert "both occur" in message and "ties must go to the smallest (left, right) by code point" in message


# --------------------------------------------------------------------------- the broken-models chapter's BLT and decoding variants


def test_mean_pooling_is_caught():
    report = check.pooling(broken.MeanPooling)
    assert "it is the mean of its bytes' vectors, blind to their order" in _failure(report, "order")
    assert "differs from cipherlab's PatchPooling" in _failure(report, "reference")
    assert report["own bytes"].passed  # each patch still reads its own bytes only


def test_the_own_patch_mask_is_caught_as_a_leak():
    report = check.patch_mask(broken.own_patch_mask)
    assert "(the slot of its own patch)" in _failure(report, "no leak")
    assert "under teacher forcing the answer leaks" in report["no leak"].message
    assert "the answer leaks" in _failure(report, "in a model")
    assert report["no over-blocking"].passed


def test_the_stricter_mask_and_the_inverted_one_are_named():
    strict = check.patch_mask(lambda lt, k, p: (torch.arange(k)[None, :] > torch.arange(lt)[:, None] // p)[None, None])
    assert "not i // patch" in _failure(strict, "no over-blocking") and strict["no leak"].passed
    inverted = check.patch_mask(lambda lt, k, p: ~patch_causal_mask(lt, k, p))
    assert "read as True = keep" in _failure(inverted, "reference")


def test_the_own_patch_blt_leaks_under_teacher_forcing():
    report = check.decoding(lambda: broken.tiny_blt(broken.OwnPatchBLT))
    assert "a later target position leaks backwards" in _failure(report, "causality")
    assert "the full pass is not causal (see 'causality')" in _failure(report, "cache")


def test_a_decoder_without_its_causal_mask_is_caught():
    report = check.decoding(lambda: broken.tiny(broken.NoCausalMask))
    assert "the teacher-forced logits at target position 0 change" in _failure(report, "causality")


def test_a_model_that_reads_source_padding_is_caught():
    report = check.decoding(lambda: broken.tiny(broken.UnmaskedPadding))
    assert "reads PAD as if it were text" in _failure(report, "source padding")
    assert [f.name for f in report.findings if not f.passed] == ["source padding"]


def test_the_rope_cache_without_its_offset_is_caught():
    report = check.decoding(lambda: broken.tiny(broken.RopeCacheWithoutOffset))
    assert [f.name for f in report.findings if not f.passed] == ["cache"], str(report)
    assert ("(position 0 agrees): the cache ignores the position offset: decoder.layers.0.self_attn.rope(..., "
            "offset=7) gives what offset=0 gives") in report["cache"].message


class RopeLayerWithoutOffset(MultiHeadAttention):
    """MultiHeadAttention whose rope is broken.RopeCacheWithoutOffset's: offsets ignored."""

    def __init__(self, d_model, n_heads, dropout=0.1, rope=None):
        rope = None if rope is None else broken._RopeWithoutOffset(rope.head_dim, rope.max_len)
        super().__init__(d_model, n_heads, dropout, rope)


def test_a_layers_cache_without_the_offset_is_caught():
    report = check.multi_head(RopeLayerWithoutOffset, "mha", kv_cache=True)
    assert [f.name for f in report.findings if not f.passed] == ["kv cache"], str(report)
    assert "the cache ignores the position offset, every step is rotated as position 0" in report["kv cache"].message


# --------------------------------------------------------------------------- the new parts from a student's file


STUB = {  # part: (NAME, FILE.py), a student's file before the exercise is written
    "bpe": ("MyBPE", "class MyBPE:\n    @classmethod\n    def train(cls, texts, vocab_size):\n"
                     "        raise NotImplementedError\n"),
    "patcher": ("my_patcher", "def my_patcher(entropies, threshold, max_patch):\n    raise NotImplementedError\n"),
    "patch_mask": ("my_mask", "def my_mask(Lt, K, patch):\n    raise NotImplementedError\n"),
    "pooling": ("MyPooling", "class MyPooling:\n    def __init__(self, d_model, n_heads):\n"
                             "        raise NotImplementedError\n"),
    "decoding": ("my_model", "def my_model():\n    raise NotImplementedError\n"),
}


@pytest.mark.parametrize("part", sorted(STUB))
def test_a_stub_of_each_new_part_is_not_written(tmp_path, part):
    name, text = STUB[part]
    obj = check.load_target(f"{_student(tmp_path, 'stub.py', text)}:{name}")
    with pytest.raises(check.NotWritten, match="NotImplementedError"):
        check.PARTS[part](obj)


def test_the_command_checks_the_new_parts(tmp_path, capsys):
    mine = _student(tmp_path, "mine.py", "from cipherlab.data.tokenizers import BPETokenizer as MyBPE\n"
                    "from cipherlab.models.blt import patch_causal_mask\n\n\n"
                    "def own_patch(Lt, K, patch):\n    import torch\n"
                    "    return (torch.arange(K)[None, :] > torch.arange(Lt)[:, None] // patch + 1)[None, None]\n")
    assert main(["check", "bpe", f"{mine}:MyBPE"]) == 0
    assert re.search(r"\n(\d+) of \1 checks pass", capsys.readouterr().out)
    assert main(["check", "patch_mask", f"{mine}:patch_causal_mask"]) == 0
    capsys.readouterr()
    assert main(["check", "patch_mask", f"{mine}:own_patch"]) == 1
    assert "FAIL  no leak: byte 0 may read slot 1 (the slot of its own patch)" in capsys.readouterr().out
    assert main(["check", "decoding", f"{mine}:patch_causal_mask"]) == 1  # a mask is no model factory
    _one_line(capsys.readouterr().err, f"{mine}:patch_causal_mask: patch_causal_mask() raised TypeError")
    assert main(["check", "bpe", f"{mine}:own_patch"]) == 1  # a function of the wrong part
    _one_line(capsys.readouterr().err, f"{mine}:own_patch: own_patch(texts, 60) raised TypeError")


class _NotesStyleModel(torch.nn.Module):
    """A whole model built the course notes' way, cls(src_vocab, tgt_vocab, d_model=..., ...)."""

    def __init__(self, src_vocab_size, tgt_vocab_size, **sizes):
        super().__init__()
        from cipherlab.models import ModelArgs, Seq2SeqTransformer

        self.inner = Seq2SeqTransformer(ModelArgs(src_vocab_size, tgt_vocab_size, **sizes))

    def forward(self, src, tgt_in):
        return self.inner(src, tgt_in)

    def begin_decoding(self, src):
        return self.inner.begin_decoding(src)

    def decode_step(self, state, tokens):
        return self.inner.decode_step(state, tokens)


@pytest.mark.parametrize("convention", ["one ModelArgs", "two vocabularies and keywords"])
def test_a_whole_model_class_is_built_in_either_convention(convention):
    from cipherlab.models import Seq2SeqTransformer

    cls = Seq2SeqTransformer if convention == "one ModelArgs" else _NotesStyleModel
    report = check.decoding(cls)
    assert all(f.passed for f in report.findings), str(report)
