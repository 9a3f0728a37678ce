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
