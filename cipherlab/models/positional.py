"""Positional information: sinusoidal, learned and rotary (RoPE) position encodings.

- SinusoidalPositionalEncoding (C1, C3, C4, C5): a fixed table added to the embeddings once.
- LearnedPositionalEncoding: the same, but trained.
- RotaryPositionalEmbedding (C2): q and k are rotated inside the attention layers, so q.k
  depends on positions only through their difference.

Sinusoidal and rotary encodings use the same frequencies theta_i = base^(-2i/d).
"""

import math

import torch
from torch import nn


def inverse_frequencies(dim: int, base: float = 10000.0) -> torch.Tensor:
    """(dim/2,) frequencies theta_i = base^(-2i/dim), from 1 down to almost 1/base."""
    return torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(base) / dim))


def _check_positions(where: str, offset: int, length: int, max_len: int) -> None:
    if offset < 0 or offset + length > max_len:
        raise ValueError(
            f"{where}: positions {offset}..{offset + length - 1} are outside the table of "
            f"max_len={max_len} positions; build the model with max_len >= {offset + length}")


class AbsolutePositionalEncoding(nn.Module):
    """x (B, L, D) -> dropout(x + table[offset : offset + L]) for a (max_len, D) table of positions
    (a fixed formula, or trained weights)."""

    def __init__(self, max_len: int, dropout: float):
        super().__init__()
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        L = x.size(1)
        _check_positions(type(self).__name__, offset, L, self.max_len)
        return self.dropout(x + self.table[offset:offset + L].to(x.dtype))  # (B, L, D)


class SinusoidalPositionalEncoding(AbsolutePositionalEncoding):
    """Fixed table: table[p, 2i] = sin(p * theta_i), table[p, 2i+1] = cos(p * theta_i); a buffer not
    saved in checkpoints, since d_model and max_len determine it."""

    def __init__(self, d_model: int, max_len: int = 4096, dropout: float = 0.1):
        super().__init__(max_len, dropout)
        if d_model % 2:
            raise ValueError(f"SinusoidalPositionalEncoding: d_model={d_model} must be even "
                             f"(columns come in sin/cos pairs); use d_model={d_model + 1}")
        angles = torch.outer(torch.arange(max_len, dtype=torch.float32), inverse_frequencies(d_model))
        table = torch.zeros(max_len, d_model)  # (max_len, D)
        table[:, 0::2] = angles.sin()
        table[:, 1::2] = angles.cos()
        self.register_buffer("table", table, persistent=False)


class LearnedPositionalEncoding(AbsolutePositionalEncoding):
    """Trained (max_len, D) table, one row per position, initialised with the per-entry RMS of the
    sinusoidal table (1/sqrt(2)) so that only "fixed" changes into "trained"."""

    def __init__(self, d_model: int, max_len: int = 4096, dropout: float = 0.1):
        super().__init__(max_len, dropout)
        self.table = nn.Parameter(torch.randn(max_len, d_model) * 2 ** -0.5)  # (max_len, D)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) on the two halves of the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def interleaved_to_half_split(head_dim: int) -> torch.Tensor:
    """Permutation putting even coordinates first, then odd ones: [0, 2, 4, ..., 1, 3, 5, ...].

    It maps the interleaved-pair RoPE convention onto the half-split one:
    rope.rotate(x[..., perm]) == rope.rotate_interleaved(x)[..., perm].
    """
    return torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))


class RotaryPositionalEmbedding(nn.Module):
    """Rotary position embedding (Su et al. 2021), half-split convention, on (B, H, L, head_dim).

    Coordinates i and i + head_dim/2 form a pair, rotated by the angle p * theta_i at
    position p. Because rotations compose, (R_m q).(R_n k) = q.(R_(n-m) k): scores see
    only the offset n - m. forward(q, k, offset) rotates positions offset, offset+1, ...
    along dim -2 of each, in float32.
    """

    def __init__(self, head_dim: int, max_len: int = 4096, base: float = 10000.0):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"RotaryPositionalEmbedding: head_dim={head_dim} is odd, but RoPE rotates "
                             f"coordinate pairs; choose d_model and n_heads so that d_model/n_heads is even")
        angles = torch.outer(torch.arange(max_len, dtype=torch.float32), inverse_frequencies(head_dim, base))
        angles = torch.cat((angles, angles), dim=-1)  # (max_len, head_dim): i and i + head_dim/2 share theta_i
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        self.head_dim, self.max_len = head_dim, max_len

    def _table(self, offset: int, length: int):
        _check_positions(type(self).__name__, offset, length, self.max_len)
        return self.cos[offset:offset + length], self.sin[offset:offset + length]  # (L, head_dim) each

    def rotate(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """(..., L, head_dim) -> the same, position offset + l rotated by (offset + l) * theta."""
        cos, sin = self._table(offset, x.size(-2))
        x32 = x.float()
        return (x32 * cos + rotate_half(x32) * sin).to(x.dtype)

    def forward(self, q: torch.Tensor, k: torch.Tensor, offset: int = 0):
        return self.rotate(q, offset), self.rotate(k, offset)

    def rotate_interleaved(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """The other convention: pairs (x0, x1), (x2, x3), ...; pair i rotated by p * theta_i.

        It agrees with `rotate` up to the permutation `interleaved_to_half_split`.
        """
        cos, sin = self._table(offset, x.size(-2))
        cos, sin = cos[:, : self.head_dim // 2], sin[:, : self.head_dim // 2]  # (L, head_dim/2)
        x32 = x.float()
        even, odd = x32[..., 0::2], x32[..., 1::2]  # (..., L, head_dim/2) each
        pairs = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # (..., L, head_dim/2, 2)
        return pairs.flatten(-2).to(x.dtype)  # (..., L, head_dim)
