"""Attention: scaled dot-product attention, multi-head and grouped-query attention, and the KV cache.

The mask convention used everywhere in cipherlab:

    masks are bool, True = BLOCKED, and broadcast against the scores (B, H, Lq, Lk).
    padding_mask(ids, pad_id) -> (B, 1, 1, Lk)      blocks PAD keys
    causal_mask(L)            -> (1, 1, L, L)        blocks keys after the query
    padding_mask(...) | causal_mask(...)             blocks what either blocks

(`F.scaled_dot_product_attention` uses the opposite convention, True = keep; the fused
path below inverts the mask before calling it.)
"""

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


def padding_mask(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """(B, L) token ids -> (B, 1, 1, L) bool, True where the key is PAD."""
    return (ids == pad_id)[:, None, None, :]


def causal_mask(L: int, device=None, *, offset: int = 0) -> torch.Tensor:
    """(1, 1, L, offset + L) bool, True above the diagonal: query i may read keys 0..offset+i.

    offset > 0 is incremental decoding: the L new queries sit at positions offset..offset+L-1
    and the keys include the offset positions already in the KV cache.
    """
    ones = torch.ones(L, offset + L, dtype=torch.bool, device=device)
    return ones.triu(offset + 1)[None, None]  # (1, 1, L, offset + L)


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, Hkv, L, d) -> (B, Hkv * n_rep, L, d): K/V head j serves query heads j*n_rep .. j*n_rep+n_rep-1.

    Equal to `x.repeat_interleave(n_rep, dim=1)`: a free `expand` view along a new axis, then a reshape.
    """
    if n_rep == 1:
        return x
    B, n_kv, L, d = x.shape
    x = x[:, :, None].expand(B, n_kv, n_rep, L, d)  # (B, Hkv, n_rep, L, d), a view
    return x.reshape(B, n_kv * n_rep, L, d)  # (B, H, L, d)


class ScaledDotProductAttention(nn.Module):
    """softmax(q k^T / sqrt(d) + mask) v, on (B, H, L, d) tensors.

    A query row whose keys are ALL blocked (a BLT window or patch slot of padding only) outputs
    zeros: blocked scores are filled with the dtype minimum (finite, so no NaN: -inf would give
    0/0), then rows that can see no key are zeroed (else they would average the blocked values).

    fused=True runs F.scaled_dot_product_attention instead, equal up to float rounding.
    capture=True stores the weights (B, H, Lq, Lk) in `.last_attn` (it forces the scratch path).
    """

    def __init__(self, dropout: float = 0.0, fused: bool = False):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.fused = fused
        self.capture = False
        self.last_attn = None

    def forward(self, q, k, v, mask=None):
        """q (B, H, Lq, d), k (B, H, Lk, d), v (B, H, Lk, dv), mask bool -> (B, H, Lq, dv)."""
        blind = None if mask is None else mask.all(dim=-1, keepdim=True)  # (.., Lq, 1) rows seeing no key
        if self.fused and not self.capture:
            keep = None if mask is None else ~mask  # F.sdpa: True = keep
            p = self.dropout.p if self.training else 0.0
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=p)
            return out if blind is None else out.masked_fill(blind, 0.0)  # same policy as below
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Lq, Lk)
        if mask is not None:
            scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(v.dtype)  # (B, H, Lq, Lk)
        if blind is not None:
            weights = weights.masked_fill(blind, 0.0)
        if self.capture:
            self.last_attn = weights.detach()
        return self.dropout(weights) @ v  # (B, H, Lq, dv)


@dataclass
class KVCache:
    """Keys and values one attention module keeps between incremental decoding steps.

    static=False (self-attention): every step appends its new positions' keys/values, keys
    already rotated by RoPE. static=True (cross-attention): the first step stores the projected
    encoder memory; later steps reuse it.
    """

    static: bool = False
    k: torch.Tensor | None = None  # (B, Hkv, L, d)
    v: torch.Tensor | None = None  # (B, Hkv, L, d)

    @property
    def length(self) -> int:
        return 0 if self.k is None else self.k.size(2)

    @property
    def nbytes(self) -> int:
        return 0 if self.k is None else self.k.nbytes + self.v.nbytes

    def update(self, k: torch.Tensor, v: torch.Tensor):
        """Store the new (B, Hkv, Lnew, d) keys/values; return everything cached."""
        if self.k is not None:
            k = torch.cat((self.k, k), dim=2)  # (B, Hkv, L + Lnew, d)
            v = torch.cat((self.v, v), dim=2)
        self.k, self.v = k, v
        return k, v


def select_rows(value, index: torch.Tensor):
    """``value`` with the batch rows ``index`` (1-D long) of every tensor inside it (lists, tuples, dicts,
    dataclasses), in that order: beam search continues the rows that won."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.Tensor):
        return value.index_select(0, index)
    if isinstance(value, list):
        return [select_rows(v, index) for v in value]
    if isinstance(value, tuple):
        return tuple(select_rows(v, index) for v in value)
    if isinstance(value, dict):
        return {key: select_rows(v, index) for key, v in value.items()}
    if dataclasses.is_dataclass(value):
        return dataclasses.replace(
            value, **{f.name: select_rows(getattr(value, f.name), index) for f in dataclasses.fields(value)})
    raise TypeError(f"select_rows: cannot select batch rows of a {type(value).__name__}")


def _divisors(n: int) -> list[int]:
    return [i for i in range(1, n + 1) if n % i == 0]


class MultiHeadAttention(nn.Module):
    """Multi-head attention: (B, Lq, D) queries read (B, Lk, D) keys/values -> (B, Lq, D).

    n_heads query heads of width head_dim = d_model / n_heads; the K/V projections make
    n_kv_heads heads: n_kv_heads = n_heads (the default) is standard MHA, fewer is
    grouped-query attention, 1 is multi-query attention.

    rope: a RotaryPositionalEmbedding applied to q and k after the head split (None with absolute
    positions); in cross-attention (``q_offset``) keys sit at source positions 0 .. Lk - 1.
    """

    def __init__(self, d_model, n_heads, dropout=0.1, rope=None, *, n_kv_heads=None,
                 bias=True, fused=False):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if d_model % n_heads:
            raise ValueError(
                f"{type(self).__name__}: d_model={d_model} is not divisible by n_heads={n_heads}; "
                f"choose n_heads from the divisors of d_model {_divisors(d_model)}")
        if n_kv_heads < 1 or n_heads % n_kv_heads:
            raise ValueError(
                f"{type(self).__name__}: n_heads={n_heads} is not a multiple of n_kv_heads={n_kv_heads}; "
                f"each K/V head must serve the same number of query heads, so choose n_kv_heads "
                f"from the divisors of n_heads {_divisors(n_heads)}")
        head_dim = d_model // n_heads
        if rope is not None and rope.head_dim != head_dim:
            raise ValueError(
                f"{type(self).__name__}: rope.head_dim={rope.head_dim} but d_model/n_heads = "
                f"{d_model}/{n_heads} = {head_dim}; build RotaryPositionalEmbedding(head_dim={head_dim})")
        self.d_model, self.n_heads, self.n_kv_heads, self.head_dim = d_model, n_heads, n_kv_heads, head_dim
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, n_kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(d_model, n_kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(d_model, d_model, bias=bias)
        self.attention = ScaledDotProductAttention(dropout, fused=fused)
        self.rope = rope

    def _split_heads(self, x, n_heads):
        B, L, _ = x.shape
        return x.view(B, L, n_heads, self.head_dim).transpose(1, 2)  # (B, heads, L, head_dim)

    def forward(self, query, key, value, mask=None, cache: KVCache | None = None, q_offset: int | None = None):
        """query (B, Lq, D), key/value (B, Lk, D), mask bool broadcast to (B, H, Lq, Lk) -> (B, Lq, D).

        cache: see KVCache; with a self-attention cache, the inputs hold only the new positions.
        q_offset: cross-attention with RoPE: the target position of the first query.
        """
        static = cache is not None and cache.static
        if static and self.rope is not None and q_offset is None:
            raise ValueError("MultiHeadAttention: a static (cross-attention) KVCache with RoPE needs q_offset, "
                             "the target position of the first query")
        B, Lq, _ = query.shape
        q = self._split_heads(self.q_proj(query), self.n_heads)  # (B, H, Lq, d)
        if static and cache.k is not None:
            k, v = cache.k, cache.v  # (B, Hkv, Lk, d): memory projected (and rotated) on the first step
        else:
            k = self._split_heads(self.k_proj(key), self.n_kv_heads)  # (B, Hkv, Lk, d)
            v = self._split_heads(self.v_proj(value), self.n_kv_heads)  # (B, Hkv, Lk, d)
            if self.rope is not None and q_offset is None:  # self-attention: both at the same positions
                q, k = self.rope(q, k, offset=0 if cache is None else cache.length)
            elif self.rope is not None:  # cross-attention: keys at source positions 0 .. Lk - 1
                k = self.rope.rotate(k, 0)
            if cache is not None:
                k, v = cache.update(k, v)
        if self.rope is not None and q_offset is not None:
            q = self.rope.rotate(q, q_offset)
        group = self.n_heads // self.n_kv_heads
        k, v = repeat_kv(k, group), repeat_kv(v, group)  # (B, H, Lk, d)
        out = self.attention(q, k, v, mask)  # (B, H, Lq, d)
        out = out.transpose(1, 2).contiguous().view(B, Lq, self.d_model)  # (B, Lq, D): heads concatenated
        return self.o_proj(out)


class GroupedQueryAttention(MultiHeadAttention):
    """Grouped-query attention (Ainslie et al. 2023): n_heads query heads share n_kv_heads K/V heads.

    Query heads g*r .. g*r + r - 1 (r = n_heads / n_kv_heads) read K/V head g, so the KV cache
    shrinks by r.
    """

    def __init__(self, d_model, n_heads, n_kv_heads, dropout=0.1, rope=None, *, bias=True, fused=False):
        super().__init__(d_model, n_heads, dropout, rope, n_kv_heads=n_kv_heads, bias=bias, fused=fused)


ATTENTION_TYPES = ("mha", "gqa")


def make_attention(kind, d_model, n_heads, *, n_kv_heads=None, dropout=0.1, rope=None, fused=False):
    """The self-attention a configuration asks for: "mha" (C1, C2, C4) or "gqa" (C3)."""
    if kind == "mha":
        if n_kv_heads not in (None, n_heads):
            raise ValueError(f"make_attention: n_kv_heads={n_kv_heads} only applies to attn_type='gqa'; "
                             f"use attn_type='gqa' or leave n_kv_heads=None for MHA")
        return MultiHeadAttention(d_model, n_heads, dropout, rope, fused=fused)
    if kind == "gqa":
        if n_kv_heads is None:
            raise ValueError(f"make_attention: attn_type='gqa' needs n_kv_heads, one of the divisors "
                             f"of n_heads={n_heads}: {_divisors(n_heads)}")
        return GroupedQueryAttention(d_model, n_heads, n_kv_heads, dropout, rope, fused=fused)
    raise ValueError(f"make_attention: unknown attn_type {kind!r}; expected one of {ATTENTION_TYPES}")
