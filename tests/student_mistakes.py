"""Wrong implementations written the way students get them wrong, for ``tests/test_check.py``.

Each one is a small class or function a student could hand in for a part of ``python -m cipherlab
check``, written from scratch (not a subclass of cipherlab's module with a flag turned on), with
exactly one mistake; the test asserts that its part's check fails with a message naming that
mistake. Where a mistake needs a right implementation around it (a BPE trainer whose encoder is
wrong), the right one is here too, written the same way, and the mistake changes one thing of it.
Nothing in the package imports this file.

    mistake                          part        what is wrong
    softmax_over_queries             attention   softmax(dim=-2): each key's weights sum to 1
    mask_after_softmax               attention   blocked weights zeroed after the softmax
    MismatchedRoPE                   rope        interleaved pairs rotated with a half-split cos/sin table
    CentredRMSNorm                   rmsnorm     the mean subtracted first
    CrossBoundaryBPE                 bpe         no pre-tokenizer: merges across spaces
    LargestTieBPE                    bpe         ties between equal counts go to the largest pair
    LongestMatchBPE                  bpe         encodes by greedy longest match, not by the merges in order
    OneAtATimeBPE                    bpe         one pair occurrence merged per scan of the whole text: quadratic
    patches_at_or_above              patcher     a patch starts where entropy >= threshold
    MeanPatchPooling                 pooling     a patch's vector is the mean of its bytes
    own_patch_mask                   patch_mask  byte i reads the slot of its own patch
    PositionlessSteps                decoding    cached steps embedded at position 0

Further down: ONE_BUG and VALID (more slips, each with the check that must fail and its words); STUDY_BUGS,
STUDY_VALID and FLOAT64_WARNED (the user study's mistakes, each with the causes its message must not name, and the
unusual right parts that pass with a WARN or a note). tests/check_counts.py counts catches over all of them.
"""

from __future__ import annotations

import math
import re
from collections import Counter

import torch
import torch.nn.functional as F
from torch import nn

from cipherlab.models.transformer import Seq2SeqTransformer


# --------------------------------------------------------------------------- attention

def softmax_over_queries(q, k, v, mask=None):
    """Attention with the softmax over the wrong axis: dim=-2 runs over the queries."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    return scores.softmax(dim=-2) @ v


def mask_after_softmax(q, k, v, mask=None):
    """The mask multiplied in after the softmax: blocked weights are 0, the rest no longer sum to 1."""
    weights = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(dim=-1)
    if mask is not None:
        weights = weights * (~mask)
    return weights @ v


# --------------------------------------------------------------------------- RoPE

class MismatchedRoPE(nn.Module):
    """RoPE whose cos/sin cache is laid out for half-split pairs (cat(angles, angles): column j has
    angle theta_(j mod d/2)) but whose rotation pairs neighbours (x0, x1), (x2, x3), ...: the two
    coordinates of a pair turn by different angles."""

    def __init__(self, head_dim, max_len=4096):
        super().__init__()
        inv_freq = 1.0 / 10000 ** (torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.outer(torch.arange(max_len).float(), inv_freq)  # (max_len, d/2)
        table = torch.cat([angles, angles], dim=-1)  # (max_len, d): half-split layout
        self.register_buffer("cos", table.cos(), persistent=False)
        self.register_buffer("sin", table.sin(), persistent=False)

    def rotate(self, x, offset=0):
        L = x.size(-2)
        cos, sin = self.cos[offset:offset + L], self.sin[offset:offset + L]
        pairs = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)  # interleaved (-x1, x0, -x3, x2, ...)
        return (x * cos + pairs * sin).to(x.dtype)

    def forward(self, q, k, offset=0):
        return self.rotate(q, offset), self.rotate(k, offset)


# --------------------------------------------------------------------------- RMSNorm

class CentredRMSNorm(nn.Module):
    """RMSNorm that subtracts each token's mean first, as LayerNorm does."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        x32 = x.float()
        x32 = x32 - x32.mean(-1, keepdim=True)
        return (x32 / torch.sqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps) * self.gamma).to(x.dtype)


# --------------------------------------------------------------------------- BPE

def pre_tokens(text):
    """Whitespace glued to the front of the next word, as cipherlab's split_plaintext."""
    return re.findall(r"\s*\S+|\s+", text)


def merge_pair(symbols, pair):
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


class TextbookBPE:
    """A right BPE, the way the chapter describes it (no specials): the baseline the BPE mistakes
    below each change one thing of. ``TextbookBPE(texts, vocab_size)`` trains."""

    def __init__(self, texts, vocab_size):
        words = Counter(tuple(piece) for piece in self.split(texts))
        self.alphabet = sorted({c for text in texts for c in text})
        self.merges = []
        while len(self.alphabet) + len(self.merges) < vocab_size:
            counts = Counter()
            for symbols, n in words.items():
                for pair in zip(symbols, symbols[1:]):
                    counts[pair] += n
            if not counts:
                break
            best = self.best(counts)
            self.merges.append(best)
            merged = Counter()
            for symbols, n in words.items():
                merged[tuple(merge_pair(list(symbols), best))] += n
            words = merged
        self.tokens = self.alphabet + [left + right for left, right in self.merges]
        self.ids = {token: i for i, token in enumerate(self.tokens)}
        self.rank = {pair: r for r, pair in enumerate(self.merges)}
        self.vocab_size = len(self.tokens)

    def best(self, counts):
        """The most frequent pair; among equal counts the smallest (left, right)."""
        return min(counts, key=lambda p: (-counts[p], p))

    def split(self, texts):
        return [piece for text in texts for piece in pre_tokens(text)]

    def encode_piece(self, piece):
        symbols = list(piece)
        while len(symbols) > 1:
            rank, i = min((self.rank.get(pair, math.inf), i) for i, pair in enumerate(zip(symbols, symbols[1:])))
            if rank == math.inf:
                break
            symbols = merge_pair(symbols, self.merges[rank])
        return symbols

    def encode(self, text):
        return [self.ids[token] for piece in pre_tokens(text) for token in self.encode_piece(piece)]

    def decode(self, ids):
        return "".join(self.tokens[i] for i in ids)


class CrossBoundaryBPE(TextbookBPE):
    """No pre-tokenizer: every training text is one sequence, so 'e' + ' ' is a pair like any other."""

    def split(self, texts):
        return list(texts)

    def encode(self, text):
        return [self.ids[token] for token in self.encode_piece(text)]


class LargestTieBPE(TextbookBPE):
    """max over (count, pair): the most frequent pair, but ties go to the LARGEST pair."""

    def best(self, counts):
        return max(counts, key=lambda p: (counts[p], p))


class LongestMatchBPE(TextbookBPE):
    """Encodes each pre-token by taking the longest known token first, not by replaying the merges."""

    def encode_piece(self, piece):
        out, i = [], 0
        while i < len(piece):
            n = next(n for n in range(len(piece) - i, 0, -1) if piece[i:i + n] in self.ids)
            out.append(piece[i:i + n])
            i += n
        return out


class OneAtATimeBPE(TextbookBPE):
    """Right tokens, merged one occurrence per scan of the whole text: quadratic in the text's length."""

    def encode(self, text):
        symbols = list(text)
        while True:
            candidates = [(self.rank[pair], i) for i, pair in enumerate(zip(symbols, symbols[1:]))
                          if pair in self.rank and not re.search(r"\S\s", pair[0] + pair[1])]
            if not candidates:
                return [self.ids[s] for s in symbols]
            _, i = min(candidates)
            symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]


# --------------------------------------------------------------------------- BLT

def patches_at_or_above(entropies, threshold, max_patch):
    """Entropy patches that also start where the entropy equals the threshold."""
    starts, run = [], 0
    for i, h in enumerate(entropies):
        if i == 0 or h >= threshold or run == max_patch:
            starts.append(i)
            run = 0
        run += 1
    return starts


class MeanPatchPooling(nn.Module):
    """A patch's vector is the mean of its bytes' vectors, then a LayerNorm."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x, member):
        weights = member.float()  # (B, K, L)
        sizes = weights.sum(-1, keepdim=True)
        empty = sizes[..., 0] == 0
        return self.norm(weights @ x / sizes.clamp(min=1)).masked_fill(empty[..., None], 0.0), empty


def own_patch_mask(Lt, K, patch):
    """Byte i may read every slot up to the one holding its own patch: j <= i // patch + 1."""
    i = torch.arange(Lt)[:, None]
    j = torch.arange(K)[None, :]
    return (j > i // patch + 1)[None, None]


# --------------------------------------------------------------------------- incremental decoding

class PositionlessSteps(Seq2SeqTransformer):
    """decode_step with the cache, but each new token's position code is forgotten: embedded at position 0."""

    def decode_step(self, state, tokens):
        cache = state.cache
        x = self.pos_enc(self.tgt_embed(tokens[:, None]) * math.sqrt(self.d_model))  # offset forgotten
        h = self.decoder(x, state.memory, None, state.memory_mask, cache)
        return F.linear(h, self.tgt_embed.weight)[:, -1]


# =========================================================================== more slips, each with one bug
# Written as a student would, from scratch: a right version of each part first (RIGHT_*), then one-bug
# variants of it. ``ONE_BUG`` lists (part, variant, the check that must fail, words its message must hold);
# ``VALID`` lists conventions the book allows, which must pass. tests/test_check_stress.py runs both.


def _inv_freq(dim, base=10000.0):
    return 1.0 / base ** (torch.arange(0, dim, 2).float() / dim)


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class MyRoPE(nn.Module):
    """A right RoPE (half-split pairs), the baseline of the RoPE slips below."""

    def __init__(self, head_dim, max_len=4096):
        super().__init__()
        self.head_dim = head_dim
        angles = self.angles(max_len, head_dim)
        self.register_buffer("cos", torch.cat([angles, angles], -1).cos(), persistent=False)
        self.register_buffer("sin", torch.cat([angles, angles], -1).sin(), persistent=False)

    def angles(self, max_len, head_dim):
        return torch.outer(torch.arange(max_len).float(), _inv_freq(head_dim))

    def rot(self, x, start):
        cos, sin = self.cos[start:start + x.size(-2)], self.sin[start:start + x.size(-2)]
        return (x.float() * cos + _rotate_half(x.float()) * sin).to(x.dtype)

    def forward(self, q, k, offset=0):
        return self.rot(q, offset), self.rot(k, offset)


class RoPEKeysFromOne(MyRoPE):
    """Keys rotated at positions 1..L: an off-by-one on k only."""

    def forward(self, q, k, offset=0):
        return self.rot(q, offset), self.rot(k, offset + 1)


class RoPEOffsetOnQueries(MyRoPE):
    """The cache offset applied to the queries only: keys always rotated from position 0."""

    def forward(self, q, k, offset=0):
        return self.rot(q, offset), self.rot(k, 0)


class RoPEKeysUnrotated(MyRoPE):
    """Only q is rotated ("keys are rotated when they are cached")."""

    def forward(self, q, k, offset=0):
        return self.rot(q, offset), k


class RoPEGQAKeysSkipped(MyRoPE):
    """Keys rotated only when they have as many heads as the queries: GQA's keys stay unrotated."""

    def forward(self, q, k, offset=0):
        if k.size(1) != q.size(1):
            return self.rot(q, offset), k
        return self.rot(q, offset), self.rot(k, offset)


class RoPEBf16Angles(MyRoPE):
    """Angles rounded to bfloat16 ("to save memory"): far off at long positions."""

    def angles(self, max_len, head_dim):
        return super().angles(max_len, head_dim).to(torch.bfloat16).float()


class RoPEBf16Product(MyRoPE):
    """Positions and frequencies multiplied in bfloat16."""

    def angles(self, max_len, head_dim):
        return torch.outer(torch.arange(max_len).to(torch.bfloat16), _inv_freq(head_dim).to(torch.bfloat16)).float()


class RoPEKeysOtherWay(MyRoPE):
    """Keys rotated by minus the angle."""

    def forward(self, q, k, offset=0):
        cos, sin = self.cos[offset:offset + k.size(-2)], self.sin[offset:offset + k.size(-2)]
        return self.rot(q, offset), k * cos - _rotate_half(k) * sin


class RoPEFloat32Out(MyRoPE):
    """Always returns float32 (.float() without casting back)."""

    def rot(self, x, start):
        cos, sin = self.cos[start:start + x.size(-2)], self.sin[start:start + x.size(-2)]
        out = (x.float() * cos + _rotate_half(x.float()) * sin).to(torch.float32)
        return out.to(torch.bfloat16) if x.dtype == torch.bfloat16 else out


class RoPEWithApply(MyRoPE):
    """A helper method named _apply: it overrides nn.Module._apply, which .to() and .cuda() call."""

    def _apply(self, x, start=0):
        return self.rot(x, start)

    def forward(self, q, k, offset=0):
        return self._apply(q, offset), self._apply(k, offset)


# --------------------------------------------------------------------------- sinusoidal positions

class MySinusoidal(nn.Module):
    """Right sinusoidal positions (interleaved sin/cos), the baseline of the slips below."""

    def __init__(self, d_model, max_len=4096, dropout=0.1):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.register_buffer("table", self.make(d_model, max_len), persistent=False)

    def make(self, d_model, max_len):
        angles = torch.outer(torch.arange(max_len).float(), _inv_freq(d_model))
        table = torch.zeros(max_len, d_model)
        table[:, 0::2], table[:, 1::2] = angles.sin(), angles.cos()
        return table

    def forward(self, x, offset=0):
        return self.drop(x + self.table[offset:offset + x.size(1)].to(x.dtype))


class ConcatSinusoidal(MySinusoidal):
    """[sin | cos] side by side: a valid layout (a fixed permutation of the columns)."""

    def make(self, d_model, max_len):
        angles = torch.outer(torch.arange(max_len).float(), _inv_freq(d_model))
        return torch.cat([angles.sin(), angles.cos()], dim=-1)


class SinusoidalDropoutAlwaysOn(MySinusoidal):
    """F.dropout with its default training=True: dropout stays on in eval mode."""

    def forward(self, x, offset=0):
        return F.dropout(x + self.table[offset:offset + x.size(1)].to(x.dtype), 0.1)


class SinusoidalBf16Angles(MySinusoidal):
    """Angles rounded to bfloat16 before sin/cos."""

    def make(self, d_model, max_len):
        angles = torch.outer(torch.arange(max_len).float(), _inv_freq(d_model)).to(torch.bfloat16).float()
        table = torch.zeros(max_len, d_model)
        table[:, 0::2], table[:, 1::2] = angles.sin(), angles.cos()
        return table


class SinusoidalFloat32Out(MySinusoidal):
    """Adds the table without casting it: float64 (and bfloat16) inputs come back float32 ... or raise."""

    def forward(self, x, offset=0):
        return self.drop(x.float() + self.table[offset:offset + x.size(1)]).to(
            torch.bfloat16 if x.dtype == torch.bfloat16 else torch.float32)


# --------------------------------------------------------------------------- norms

class MyRMSNorm(nn.Module):
    """A right RMSNorm, the baseline."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        rms = x.float().square().mean(dim=-1, keepdim=True).add(self.eps).rsqrt()
        return (x.float() * rms * self.gamma).to(x.dtype)


class MyLayerNorm(nn.Module):
    """A right LayerNorm, the baseline."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return self.normalise(x, self.gamma, self.beta)

    def normalise(self, x, gain, shift):
        x32 = x.float()
        mean = x32.mean(-1, keepdim=True)
        var = ((x32 - mean) ** 2).mean(-1, keepdim=True)
        return ((x32 - mean) / torch.sqrt(var + self.eps) * gain + shift).to(x.dtype)


class RMSNormNoEps(MyRMSNorm):
    """No eps: an all-zero token is 0 / 0."""

    def forward(self, x):
        x32 = x.float()
        return (x32 / x32.pow(2).mean(-1, keepdim=True).sqrt() * self.gamma).to(x.dtype)


class LayerNormNoEps(MyLayerNorm):
    """No eps: a constant token has variance 0."""

    def forward(self, x):
        x32 = x.float()
        mean = x32.mean(-1, keepdim=True)
        var = ((x32 - mean) ** 2).mean(-1, keepdim=True)
        return ((x32 - mean) / var.sqrt() * self.gamma + self.beta).to(x.dtype)


class RMSNormZeroGain(MyRMSNorm):
    """The gain starts at zero ("it is learned anyway")."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model, eps)
        self.gamma = nn.Parameter(torch.zeros(d_model))


class LayerNormRandomGain(MyLayerNorm):
    """The gain starts random, as a Linear's weights do."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model, eps)
        self.gamma = nn.Parameter(torch.randn(d_model))


class LayerNormBetaOnes(MyLayerNorm):
    """The shift starts at ones (copied from the gain's line)."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model, eps)
        self.beta = nn.Parameter(torch.ones(d_model))


class RMSNormEpsOutside(MyRMSNorm):
    """eps added outside the square root: a convention some libraries use."""

    def forward(self, x):
        x32 = x.float()
        return (x32 / (x32.pow(2).mean(-1, keepdim=True).sqrt() + self.eps) * self.gamma).to(x.dtype)


class LayerNormEpsOutside(MyLayerNorm):
    """eps added outside the square root, on the standard deviation."""

    def forward(self, x):
        x32 = x.float()
        mean = x32.mean(-1, keepdim=True)
        std = ((x32 - mean) ** 2).mean(-1, keepdim=True).sqrt()
        return ((x32 - mean) / (std + self.eps) * self.gamma + self.beta).to(x.dtype)


class RMSNormFloat32Out(MyRMSNorm):
    """Returns float32 whatever comes in, except the bfloat16 the chapter tests."""

    def forward(self, x):
        out = super().forward(x.float())
        return out.to(torch.bfloat16) if x.dtype == torch.bfloat16 else out


class RMSNormDropout(MyRMSNorm):
    """A dropout on the output through F.dropout, on in eval mode too."""

    def forward(self, x):
        return F.dropout(super().forward(x), 0.1)


class LayerNormWithApply(MyLayerNorm):
    """A method named _apply holding the maths: it overrides nn.Module._apply."""

    def _apply(self, x):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + self.eps) * self.gamma + self.beta

    def forward(self, x):
        return self._apply(x.float()).to(x.dtype)


class LayerNormStatsWithoutGrad(MyLayerNorm):
    """Mean and variance computed under torch.no_grad() ("they are only statistics"): the right output, but
    the gradient of x misses the terms through them."""

    def forward(self, x):
        x32 = x.float()
        with torch.no_grad():
            mean = x32.mean(-1, keepdim=True)
            var = ((x32 - mean) ** 2).mean(-1, keepdim=True)
        return ((x32 - mean) / torch.sqrt(var + self.eps) * self.gamma + self.beta).to(x.dtype)


class LayerNormInPlaceDivide(MyLayerNorm):
    """Divides the centred tokens in place (/=) after squaring them for the variance: the forward is right,
    the backward raises, because the square saved the tensor the /= then changes."""

    def forward(self, x):
        centred = x.float() - x.float().mean(-1, keepdim=True)
        var = (centred ** 2).mean(-1, keepdim=True)
        centred /= torch.sqrt(var + self.eps)
        return (centred * self.gamma + self.beta).to(x.dtype)


class LayerNormBufferWeights(nn.Module):
    """Gain and shift named weight and bias as nn.LayerNorm's, but registered as buffers (they move with
    .to() and are saved, so it looked right): they never train."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", torch.ones(d_model))
        self.register_buffer("bias", torch.zeros(d_model))

    def forward(self, x):
        x32 = x.float()
        mean = x32.mean(-1, keepdim=True)
        var = x32.var(-1, keepdim=True, unbiased=False)
        return ((x32 - mean) * torch.rsqrt(var + self.eps) * self.weight + self.bias).to(x.dtype)


class RMSNormGainData(MyRMSNorm):
    """The gain applied through .data ("to keep the graph small"): gamma never gets a gradient."""

    def forward(self, x):
        rms = x.float().square().mean(dim=-1, keepdim=True).add(self.eps).rsqrt()
        return (x.float() * rms * self.gamma.data).to(x.dtype)


# --------------------------------------------------------------------------- scaled dot-product attention

def my_attention(q, k, v, mask=None):
    """A right attention function, the baseline."""
    return my_attention_weights(q, k, mask) @ v


def attention_naive_softmax(q, k, v, mask=None):
    """Softmax written out as exp / sum, without subtracting the row's max: large scores overflow."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask, -1e9)
    e = scores.exp()
    weights = e / e.sum(-1, keepdim=True).clamp(min=1e-30)
    return weights @ v


def attention_dropout_on(q, k, v, mask=None):
    """F.dropout(weights, 0.1) with its default training=True: on in eval mode."""
    return F.dropout(my_attention_weights(q, k, mask), 0.1) @ v


def my_attention_weights(q, k, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(-1)
    return weights if mask is None else weights.masked_fill(mask.all(-1, keepdim=True), 0.0)


def attention_with_weights(q, k, v, mask=None):
    """Returns (output, weights) for plotting: a valid convention."""
    weights = my_attention_weights(q, k, mask)
    return weights @ v, weights


def attention_fused(q, k, v, mask=None):
    """PyTorch's fused kernel, mask inverted (True = keep there): valid."""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask)
    return out if mask is None else out.masked_fill(mask.all(-1, keepdim=True), 0.0)


def attention_weights_detached(q, k, v, mask=None):
    """The weights detached before the values are mixed ("they are only probabilities"): q and k get no
    gradient, so the queries' and keys' projections never learn."""
    return my_attention_weights(q, k, mask).detach() @ v


def attention_float32(q, k, v, mask=None):
    """Computes in float32 and returns float32 whatever comes in (bfloat16 aside)."""
    out = my_attention(q.float(), k.float(), v.float(), mask)
    return out.to(torch.bfloat16) if q.dtype == torch.bfloat16 else out


# --------------------------------------------------------------------------- multi-head and grouped-query attention

class MyGQA(nn.Module):
    """A right grouped-query attention (MHA when n_kv_heads = n_heads), the baseline of the slips below."""

    def __init__(self, d_model, n_heads, n_kv_heads=None, rope=None, dropout=0.0):
        super().__init__()
        self.h, self.kv = n_heads, n_kv_heads or n_heads
        self.d = d_model // n_heads
        self.rope = rope
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, self.kv * self.d)
        self.v_proj = nn.Linear(d_model, self.kv * self.d)
        self.o_proj = nn.Linear(d_model, d_model)

    def heads(self, x, n):
        return x.view(x.size(0), x.size(1), n, self.d).transpose(1, 2)

    def share(self, t):
        return t.repeat_interleave(self.h // self.kv, dim=1)

    def scale(self):
        return math.sqrt(self.d)

    def keys(self, key):
        return self.k_proj(key)

    def values(self, value):
        return self.v_proj(value)

    def scores_mask(self, mask):
        return mask

    def merge(self, out):
        B, H, L, d = out.shape
        return out.transpose(1, 2).reshape(B, L, H * d)

    def out(self, x):
        return self.o_proj(x)

    def forward(self, query, key, value, mask=None):
        q = self.heads(self.q_proj(query), self.h)
        k = self.heads(self.keys(key), self.kv)
        v = self.heads(self.values(value), self.kv)
        if self.rope is not None:
            q, k = self.rope(q, k)
        k, v = self.share(k), self.share(v)
        scores = q @ k.transpose(-2, -1) / self.scale()
        if mask is not None:
            scores = scores.masked_fill(self.scores_mask(mask), torch.finfo(scores.dtype).min)
        return self.out(self.merge(scores.softmax(-1) @ v))


class MHAKeysDetached(MyGQA):
    """The projected keys detached (copied from a cached-decoding snippet): k_proj never trains."""

    def keys(self, key):
        return self.k_proj(key).detach()


class GQARepeat(MyGQA):
    """.repeat for the K/V heads: [kv0, kv1, kv0, kv1] where query heads 0, 1 share kv0."""

    def share(self, t):
        return t.repeat(1, self.h // self.kv, 1, 1)


class GQAExpandWrongAxis(MyGQA):
    """expand with the new axis before the head axis: the same wrong order as .repeat."""

    def share(self, t):
        B, n, L, d = t.shape
        return t[:, None].expand(B, self.h // n, n, L, d).reshape(B, self.h, L, d)


class MHAScaledByDModel(MyGQA):
    """Scores divided by sqrt(d_model) instead of sqrt(head_dim)."""

    def scale(self):
        return math.sqrt(self.d * self.h)


class MHAMergeWithoutTranspose(MyGQA):
    """Heads merged back with a reshape alone, no transpose."""

    def merge(self, out):
        B, H, L, d = out.shape
        return out.reshape(B, L, H * d)


class MHAValuesFromKeys(MyGQA):
    """Values projected with k_proj (a copy-paste slip)."""

    def values(self, value):
        return self.k_proj(value)


class MHANoOutputProjection(MyGQA):
    """o_proj built but never applied."""

    def out(self, x):
        return x


class MHAPaddingOnQueries(MyGQA):
    """A padding mask (B, 1, 1, L) turned to block query rows: transposed."""

    def scores_mask(self, mask):
        return mask.transpose(-2, -1) if mask.size(-2) == 1 else mask


class MHANoScale(MyGQA):
    """No 1/sqrt(d) at all."""

    def scale(self):
        return 1.0


class MHAMaskKeep(MyGQA):
    """The mask read as True = keep, F.scaled_dot_product_attention's convention."""

    def scores_mask(self, mask):
        return ~mask


class MHADropoutOn(MyGQA):
    """F.dropout on the weights with its default training=True."""

    def merge(self, out):
        return super().merge(F.dropout(out, 0.1))


class MHAWithApply(MyGQA):
    """A method named _apply: it overrides nn.Module._apply, and .to() breaks."""

    def _apply(self, x):
        return self.o_proj(x)

    def out(self, x):
        return self._apply(x)


class MHAWithTrainMethod(MyGQA):
    """A method named train (the student's own training step) overriding nn.Module.train: .eval() breaks."""

    def train(self, batch):
        return self(batch, batch, batch)


# --------------------------------------------------------------------------- BPE, on runs of one symbol and bit strings

class ReplayBPE:
    """A right BPE written another way (no specials): merges replayed in order at encoding, each piece
    memoised. ``pairs`` and ``merge`` are the two steps the BPE slips below each change."""

    def __init__(self, texts, vocab_size):
        self.alphabet = sorted({c for text in texts for c in text})
        words = Counter(tuple(p) for text in texts for p in pre_tokens(text))
        self.merges = []
        while len(self.alphabet) + len(self.merges) < vocab_size:
            counts = Counter()
            for symbols, n in words.items():
                for pair in self.pairs(list(symbols)):
                    counts[pair] += n
            if not counts:
                break
            best = min(counts, key=lambda p: (-counts[p], p))
            self.merges.append(best)
            words = Counter({tuple(self.merge(list(s), best)): n for s, n in words.items()})
        self.tokens = self.alphabet + [a + b for a, b in self.merges]
        self.ids = {t: i for i, t in enumerate(self.tokens)}
        self.vocab_size = len(self.tokens)
        self.memo = {}

    def pairs(self, symbols):
        return list(zip(symbols, symbols[1:]))

    def merge(self, symbols, pair):
        return merge_pair(symbols, pair)

    def encode_merge(self, symbols, pair):
        return self.merge(symbols, pair)

    def encode_piece(self, piece):
        if piece not in self.memo:
            symbols = list(piece)
            for pair in self.merges:
                symbols = self.encode_merge(symbols, pair)
            self.memo[piece] = symbols
        return self.memo[piece]

    def encode(self, text):
        return [self.ids[t] for p in pre_tokens(text) for t in self.encode_piece(p)]

    def decode(self, ids):
        return "".join(self.tokens[i] for i in ids)


class NonOverlappingCountBPE(ReplayBPE):
    """Counts pairs like str.count: after a match of two equal symbols it skips both, so ('a', 'a') in
    'aaa' counts once."""

    def pairs(self, symbols):
        out, i = [], 0
        while i + 1 < len(symbols):
            out.append((symbols[i], symbols[i + 1]))
            i += 2 if symbols[i] == symbols[i + 1] else 1
        return out


class PairsAsSetBPE(ReplayBPE):
    """Counts each distinct pair once per word: set(zip(...))."""

    def pairs(self, symbols):
        return list(set(zip(symbols, symbols[1:])))


class RightToLeftBPE(ReplayBPE):
    """Merges scanning from the right: 'aaa' with ('a', 'a') gives ['a', 'aa']."""

    def merge(self, symbols, pair):
        out, i = [], len(symbols) - 1
        while i >= 0:
            if i > 0 and (symbols[i - 1], symbols[i]) == pair:
                out.append(symbols[i - 1] + symbols[i])
                i -= 2
            else:
                out.append(symbols[i])
                i -= 1
        return out[::-1]


class FirstOccurrenceBPE(ReplayBPE):
    """Merges only the first occurrence of the pair in each word (a `return` inside the loop)."""

    def merge(self, symbols, pair):
        for i in range(len(symbols) - 1):
            if (symbols[i], symbols[i + 1]) == pair:
                return symbols[:i] + [symbols[i] + symbols[i + 1]] + symbols[i + 2:]
        return list(symbols)


class FirstOccurrenceEncodeBPE(ReplayBPE):
    """Trains right, but encodes merging only the first occurrence of each pair."""

    def encode_merge(self, symbols, pair):
        return FirstOccurrenceBPE.merge(self, symbols, pair)


class RightToLeftEncodeBPE(ReplayBPE):
    """Trains right, but encodes merging from the right."""

    def encode_merge(self, symbols, pair):
        return RightToLeftBPE.merge(self, symbols, pair)


class RoPEAnglesInInputDtype(nn.Module):
    """RoPE with no table: positions and frequencies made with dtype=q.dtype on each call, so a bfloat16 q gets
    angles rounded to bfloat16 (exact in float32, and at the few positions of a short bfloat16 call)."""

    def __init__(self, head_dim, max_len=4096):
        super().__init__()
        self.pairs = head_dim // 2

    def forward(self, q, k, offset=0):
        steps = torch.arange(self.pairs, dtype=q.dtype)
        freq = 10000.0 ** (-steps / self.pairs)
        where = offset + torch.arange(q.size(-2), dtype=q.dtype)
        turn = torch.cat([where[:, None] * freq] * 2, -1).float()  # (L, head_dim)
        return tuple((x.float() * turn.cos() + _rotate_half(x.float()) * turn.sin()).to(x.dtype) for x in (q, k))


class RoPEBothFromOne(MyRoPE):
    """Queries and keys both rotated from position 1 (positions counted from one, not zero)."""

    def forward(self, q, k, offset=0):
        return self.rot(q, offset + 1), self.rot(k, offset + 1)


class MHAKeysFromQuery(MyGQA):
    """Keys and values projected from the query's tokens: self-attention is right, cross-attention (another
    length) raises."""

    def forward(self, query, key, value, mask=None):
        return super().forward(query, query, query, mask)


class LayerNormFunctionalUpcast(nn.Module):
    """A valid LayerNorm: F.layer_norm on x.float() with its own weight and bias, cast back to x's dtype. Moved
    with .to(torch.float64) it raises (float32 input, float64 parameters): a WARN, as the assignment never trains
    in float64."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.size, self.eps = d_model, eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return F.layer_norm(x.float(), (self.size,), self.weight, self.bias, self.eps).to(x.dtype)


ONE_BUG = [  # (part, the variant, the check that must fail, words its message must hold)
    ("rope", RoPEKeysFromOne, "keys", "keys are rotated at positions 1.."),
    ("rope", RoPEOffsetOnQueries, "keys", "the offset is applied to the queries only"),
    ("rope", RoPEKeysUnrotated, "keys", "the keys are returned unrotated"),
    ("rope", RoPEGQAKeysSkipped, "keys", "keys with fewer heads than the queries (GQA) are returned unrotated"),
    ("rope", RoPEBf16Angles, "long positions", "angles rounded to bfloat16"),
    ("rope", RoPEBf16Product, "long positions", "angles rounded to bfloat16"),
    ("rope", RoPEKeysOtherWay, "keys", "keys are rotated the other way"),
    ("rope", RoPEWithApply, "module names", "_apply"),
    ("rope", RoPEAnglesInInputDtype, "long bfloat16", "angles rounded to bfloat16"),
    ("rope", RoPEBothFromOne, "keys", "queries and keys are both rotated at positions 1.."),
    ("sinusoidal", SinusoidalDropoutAlwaysOn, "eval mode", "dropout active in eval mode"),
    ("sinusoidal", SinusoidalBf16Angles, "long positions", "angles rounded to bfloat16"),
    ("rmsnorm", RMSNormNoEps, "zero and constant tokens", "no eps"),
    ("layernorm", LayerNormNoEps, "zero and constant tokens", "no eps"),
    ("rmsnorm", RMSNormZeroGain, "at construction", "the gain gamma starts at 0"),
    ("layernorm", LayerNormRandomGain, "at construction", "the gain gamma starts at random values"),
    ("layernorm", LayerNormBetaOnes, "at construction", "the shift beta starts at 1"),
    ("rmsnorm", RMSNormDropout, "eval mode", "dropout active in eval mode"),
    ("layernorm", LayerNormStatsWithoutGrad, "gradients", "the gradient of x differs from the reference's"),
    ("layernorm", LayerNormInPlaceDivide, "gradients", "modified by an in-place operation (/=, *=, +="),
    ("layernorm", LayerNormBufferWeights, "gradients", "`weight` gets no gradient: it is a buffer"),
    ("rmsnorm", RMSNormGainData, "gradients", "`gamma` gets no gradient, though the output depends on it"),
    ("layernorm", LayerNormWithApply, "module names", "_apply"),
    ("attention", attention_naive_softmax, "large scores", "subtract each row's max"),
    ("attention", attention_dropout_on, "eval mode", "dropout active in eval mode"),
    ("attention", attention_weights_detached, "gradients", "the gradients of q, k differ from the reference's"),
    ("gqa", GQARepeat, "reference", "use repeat_interleave"),
    ("gqa", GQAExpandWrongAxis, "reference", "use repeat_interleave"),
    ("mha", MHAScaledByDModel, "reference", "sqrt(d_model)"),
    ("gqa", MHAScaledByDModel, "reference", "sqrt(d_model)"),
    ("mha", MHAMergeWithoutTranspose, "reference", "heads are merged without the transpose"),
    ("mha", MHAValuesFromKeys, "reference", "values are projected with k_proj"),
    ("gqa", MHAValuesFromKeys, "reference", "values are projected with k_proj"),
    ("mha", MHANoOutputProjection, "reference", "o_proj is never applied"),
    ("mha", MHAPaddingOnQueries, "reference", "the padding mask blocks queries"),
    ("mha", MHANoScale, "reference", "scores are not divided by sqrt(head_dim)"),
    ("mha", MHAMaskKeep, "reference", "the mask is read as True = keep"),
    ("mha", MHAKeysDetached, "gradients", "`k_proj.weight` gets no gradient, though the output depends on it"),
    ("gqa", MHAKeysDetached, "gradients", "`k_proj.weight` gets no gradient, though the output depends on it"),
    ("mha", MHADropoutOn, "eval mode", "dropout active in eval mode"),
    ("mha", MHAWithApply, "module names", "_apply"),
    ("mha", MHAWithTrainMethod, "module names", "train"),
    ("bpe", NonOverlappingCountBPE, "runs and bit strings", "overlapping pairs"),
    ("bpe", PairsAsSetBPE, "runs and bit strings", "once per pre-token"),
    ("bpe", RightToLeftBPE, "runs and bit strings", "right to left"),
    ("bpe", FirstOccurrenceBPE, "runs and bit strings", "only the first occurrence"),
    ("bpe", FirstOccurrenceEncodeBPE, "runs and bit strings", "only the first occurrence"),
    ("bpe", RightToLeftEncodeBPE, "runs and bit strings", "right to left"),
]

VALID = [  # (part, a right implementation or a convention the book allows)
    ("rope", MyRoPE),
    ("sinusoidal", MySinusoidal),
    ("sinusoidal", ConcatSinusoidal),
    ("rmsnorm", MyRMSNorm),
    ("layernorm", MyLayerNorm),
    ("rmsnorm", RMSNormEpsOutside),
    ("layernorm", LayerNormEpsOutside),
    ("attention", my_attention),
    ("attention", attention_with_weights),
    ("attention", attention_fused),
    ("mha", MyGQA),
    ("gqa", MyGQA),
    ("bpe", ReplayBPE),
]


# =========================================================================== the user study's mistakes
# A student wrote each part from scratch; these are the one-bug classes whose failure message used to name a
# cause the code does not have, or that passed although training would break on them, each rewritten here in
# our own words with one mistake. ``STUDY_BUGS`` lists (part, variant, the causes its message must NOT name);
# ``STUDY_VALID`` the unusual but right implementations, which must pass (a WARN or a note is fine).
# tests/check_counts.py counts, over ONE_BUG + STUDY_BUGS and VALID + STUDY_VALID, the mistakes caught, the false
# alarms and the misdiagnoses; tests/test_check_study.py asserts them one by one.


def attention_scales_q_in_place(q, k, v, mask=None):
    """Right maths, but q is scaled in place: the caller's q is divided by sqrt(d) at every call."""
    q.mul_(1 / math.sqrt(q.size(-1)))
    scores = q @ k.transpose(-2, -1)
    if mask is None:
        return scores.softmax(-1) @ v
    out = scores.masked_fill(mask, torch.finfo(scores.dtype).min).softmax(-1) @ v
    return out.masked_fill(mask.expand(scores.shape).all(-1, keepdim=True), 0.0)


def attention_zeroes_partly_blocked_rows(q, k, v, mask=None):
    """Rows that see no key are meant to be zeroed, but the test is mask.any: every row with one blocked key is."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is None:
        return scores.softmax(-1) @ v
    out = scores.masked_fill(mask, torch.finfo(scores.dtype).min).softmax(-1) @ v
    return out.masked_fill(mask.expand(scores.shape).any(-1, keepdim=True), 0.0)


class StudyMHA(MyGQA):
    """A right multi-head (grouped-query) attention with a KV cache and dropout, built as train builds it: the
    baseline of the study's attention mistakes (MyGQA's projections, head split and merge)."""

    def __init__(self, d_model, n_heads, n_kv_heads=None, rope=None, dropout=0.0):
        super().__init__(d_model, n_heads, n_kv_heads, rope)
        self.drop = nn.Dropout(dropout)

    def project(self, query, key, value, cache):
        q = self.heads(self.q_proj(query), self.h)
        if self.reuses(cache):
            return q, cache.k, cache.v, 0
        k, v = self.heads(self.k_proj(key), self.kv), self.heads(self.v_proj(value), self.kv)
        offset = cache.length if cache is not None and not cache.static else 0
        if self.rope is not None:
            q, k = self.rope(q, k, offset=offset)
        if cache is not None:
            k, v = cache.update(k, v)
        return q, k, v, offset

    def reuses(self, cache):
        """Whether the keys and values are the static cache's, filled at the first step."""
        return cache is not None and cache.static and cache.k is not None

    def attend(self, q, k, v, mask):
        g = self.h // self.kv
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d)
        if mask is not None:
            scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        return self.drop(scores.softmax(-1)) @ v

    def forward(self, query, key, value, mask=None, cache=None):
        q, k, v, _ = self.project(query, key, value, cache)
        return self.o_proj(self.merge(self.attend(q, k, v, mask)))


class MHAWithoutDropoutArgument(StudyMHA):
    """No dropout= in the constructor: check built it without one, train passes dropout=p and refuses it."""

    def __init__(self, d_model, n_heads, n_kv_heads=None, rope=None):
        super().__init__(d_model, n_heads, n_kv_heads, rope)


class MHAMaskDroppedWithCache(StudyMHA):
    """The mask is left out whenever a cache is given ("the cache only ever holds the past")."""

    def forward(self, query, key, value, mask=None, cache=None):
        return super().forward(query, key, value, None if cache is not None else mask, cache)


class MHACacheUpdatedTwice(StudyMHA):
    """The new keys are appended twice: once to read them, once more "to store them"."""

    def forward(self, query, key, value, mask=None, cache=None):
        q, k, v, _ = self.project(query, key, value, cache)
        if cache is not None and not cache.static:
            cache.update(k[:, :, -query.size(1):], v[:, :, -query.size(1):])
        return self.o_proj(self.merge(self.attend(q, k, v, mask)))


class MHAStaticCacheAppends(StudyMHA):
    """A static cache treated like a growing one: the memory is projected and appended at every step."""

    def reuses(self, cache):
        return False


class MHARopeBeforeSplit(StudyMHA):
    """RoPE applied to the projections (B, L, D) before the head split."""

    def project(self, query, key, value, cache):
        if self.reuses(cache):
            return self.heads(self.q_proj(query), self.h), cache.k, cache.v, 0
        qp, kp = self.q_proj(query), self.k_proj(key)
        offset = cache.length if cache is not None and not cache.static else 0
        if self.rope is not None:
            qp, kp = self.rope(qp[:, None], kp[:, None], offset=offset)
            qp, kp = qp[:, 0], kp[:, 0]
        q, k, v = self.heads(qp, self.h), self.heads(kp, self.kv), self.heads(self.v_proj(value), self.kv)
        if cache is not None:
            k, v = cache.update(k, v)
        return q, k, v, offset


class MHAStaticCacheNeverFilled(StudyMHA):
    """Right outputs, but a static cache is never filled: the memory is projected again at every step."""

    def project(self, query, key, value, cache):
        if cache is not None and cache.static:
            cache = None
        return super().project(query, key, value, cache)


class MHAHeadsStrided(StudyMHA):
    """A valid head layout of its own: feature f goes to head f % H (a fixed permutation of the projections)."""

    def heads(self, x, n):
        return x.view(x.size(0), x.size(1), self.d, n).permute(0, 3, 1, 2)

    def merge(self, out):
        return out.permute(0, 2, 3, 1).reshape(out.size(0), out.size(2), -1)


class MHAWithoutRope(StudyMHA):
    """Right for C1, C3 and C4, which build their attention without rope=: it takes none (C2 could not use it)."""

    def __init__(self, d_model, n_heads, n_kv_heads=None, dropout=0.0):
        super().__init__(d_model, n_heads, n_kv_heads, None, dropout)


class MHANoCacheArgument(StudyMHA):
    """Right, without a cache= argument: cached decoding cannot be checked (train never needs it)."""

    def forward(self, query, key, value, mask=None):
        return super().forward(query, key, value, mask)


class WrappingSinusoidal(MySinusoidal):
    """A table of ROWS rows whatever max_len says, indexed modulo its length ("positions repeat anyway")."""

    ROWS = 128

    def __init__(self, d_model, max_len=4096, dropout=0.0):
        super().__init__(d_model, self.ROWS, dropout)

    def forward(self, x, offset=0):
        rows = torch.arange(offset, offset + x.size(1)) % self.table.size(0)
        return self.drop(x + self.table[rows].to(x.dtype))


class WrappingSinusoidal512(WrappingSinusoidal):
    """The same, at 512 rows: right for every sentence, wrong past 512 positions."""

    ROWS = 512


class SinusoidalSliceToLength(MySinusoidal):
    """table[offset:L] where table[offset:offset + L] is meant: at an offset, too few rows."""

    def forward(self, x, offset=0):
        return self.drop(x + self.table[offset:x.size(1)].to(x.dtype))


class SinusoidalTableOfFirstCall(nn.Module):
    """Builds its table at the first call, as long as that call's input, and keeps it."""

    def __init__(self, d_model, max_len=4096, dropout=0.0):
        super().__init__()
        self.d, self.table, self.drop = d_model, None, nn.Dropout(dropout)

    def forward(self, x, offset=0):
        if self.table is None:
            self.table = MySinusoidal.make(self, self.d, offset + x.size(1))
        return self.drop(x + self.table[offset:offset + x.size(1)].to(x.dtype))


class RoPEPositionsWrap32(MyRoPE):
    """Positions taken modulo 32 ("the table only needs 32 rows")."""

    def rot(self, x, start):
        rows = torch.arange(start, start + x.size(-2)) % 32
        cos, sin = self.cos[rows], self.sin[rows]
        return (x.float() * cos + _rotate_half(x.float()) * sin).to(x.dtype)


class RoPEComplex(MyRoPE):
    """A valid RoPE with complex numbers (pairs (x0, x1), (x2, x3), ...): the angles are a complex buffer,
    which .to(torch.float64) casts to real, dropping the imaginary part (hence a WARN, not a FAIL)."""

    def __init__(self, head_dim, max_len=4096):
        nn.Module.__init__(self)
        turns = torch.polar(torch.ones(max_len, head_dim // 2), self.angles(max_len, head_dim))
        self.register_buffer("turn", turns, persistent=False)

    def rot(self, x, start):
        pairs = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)).contiguous())
        return torch.view_as_real(pairs * self.turn[start:start + x.size(-2)]).flatten(-2).to(x.dtype)


class LayerNormBufferGainShift(nn.Module):
    """The gain and shift as buffers named g and b: they never train."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.register_buffer("g", torch.ones(d_model))
        self.register_buffer("b", torch.zeros(d_model))

    def forward(self, x):
        return MyLayerNorm.normalise(self, x, self.g, self.b)


class RMSNormWithBias(MyRMSNorm):
    """RMSNorm with a shift added, as LayerNorm has: RMSNorm has none."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model, eps)
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return super().forward(x) + self.bias.to(x.dtype)


class LayerNormUpcast(MyLayerNorm):
    """A valid LayerNorm computing in float32 with x.float() and returning float32 even for float64 inputs
    (the assignment never trains in float64: a WARN, not a FAIL)."""

    def forward(self, x):
        out = super().forward(x.float())
        return out if x.dtype == torch.float64 else out.to(x.dtype)


class DropLastIdBPE(TextbookBPE):
    """decode skips the last id (ids[:-1], from a loop that stopped one early)."""

    def decode(self, ids):
        return "".join(self.tokens[i] for i in ids[:-1])


class PoolingZeroedBeforeNorm(nn.Module):
    """Patch pooling as the BLT's, but empty patches are zeroed BEFORE the LayerNorm, which then adds beta."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        from cipherlab.models.attention import MultiHeadAttention
        from cipherlab.models.norm import LayerNorm
        self.query = nn.Parameter(torch.randn(d_model) * 0.02)
        self.attn = MultiHeadAttention(d_model, n_heads, 0.0)
        self.norm = LayerNorm(d_model)

    def forward(self, x, member):
        B, L, D = x.shape
        K = member.size(1)
        empty = member.sum(-1) == 0
        q = self.query.expand(B, K, D)
        pooled = self.attn(q, x, x, ~member[:, None])  # (B, K, D), each patch reads its own bytes
        return self.norm(pooled.masked_fill(empty[..., None], 0.0)), empty


class PoolingBytesOutside(PoolingZeroedBeforeNorm):
    """Patch pooling as the BLT's, but `member` used as the blocked mask: each patch attends to the bytes
    outside it."""

    def forward(self, x, member):
        B, L, D = x.shape
        empty = member.sum(-1) == 0
        pooled = self.attn(self.query.expand(B, member.size(1), D), x, x, member[:, None])
        return self.norm(pooled).masked_fill(empty[..., None], 0.0), empty


STUDY_BUGS = [  # (part, the variant, the causes its message must not name)
    ("mha", MHAKeysFromQuery, ("repeat_interleave", "interleaves the groups")),
    ("gqa", MHAKeysFromQuery, ("interleaves the groups", "padding mask blocks queries")),
    ("rope", RoPEBothFromOne, ("and queries at",)),
    ("pooling", PoolingBytesOutside, ("bag of bits", "mean of its bytes")),
    ("attention", attention_scales_q_in_place, ("not divided by sqrt", "shrunk by more")),
    ("attention", attention_zeroes_partly_blocked_rows, ("after the softmax", "True = keep", "not applied")),
    ("mha", MHAWithoutDropoutArgument, ()),
    ("mha", MHAMaskDroppedWithCache, ("never append",)),
    ("mha", MHACacheUpdatedTwice, ()),
    ("mha", MHAStaticCacheAppends, ()),
    ("mha", MHARopeBeforeSplit, ()),
    ("sinusoidal", WrappingSinusoidal, ("in float32", "bfloat16")),
    ("sinusoidal", WrappingSinusoidal512, ("in float32", "bfloat16")),
    ("sinusoidal", SinusoidalSliceToLength, ()),
    ("sinusoidal", SinusoidalTableOfFirstCall, ()),
    ("rope", RoPEPositionsWrap32, ("layout must match", "in float32", "rounded to bfloat16", "only bfloat16 inputs")),
    ("layernorm", LayerNormBufferGainShift, ("name it gamma",)),
    ("rmsnorm", RMSNormWithBias, ()),
    ("bpe", DropLastIdBPE, ("encoding ", "replaying your merges", "longest known token")),
    ("pooling", PoolingZeroedBeforeNorm, ()),
]

FLOAT64_WARNED = [  # (part, a part right in float32 and bfloat16 that returns float32 for float64 inputs): a WARN
    ("rope", RoPEFloat32Out),
    ("sinusoidal", SinusoidalFloat32Out),
    ("rmsnorm", RMSNormFloat32Out),
    ("attention", attention_float32),
    ("layernorm", LayerNormUpcast),
]

STUDY_VALID = [  # (part, a right but unusual implementation): passes, perhaps with a WARN or a note
    ("mha", StudyMHA),
    ("gqa", StudyMHA),
    ("mha", MHAHeadsStrided),
    ("gqa", MHAHeadsStrided),
    ("mha", MHAStaticCacheNeverFilled),
    ("mha", MHANoCacheArgument),
    ("gqa", MHAWithoutRope),
    ("rope", RoPEComplex),
    ("layernorm", LayerNormFunctionalUpcast),
]
