"""Bit-factored embeddings: a token's vector is a learned linear map of its byte's 8 bits.

The cipher is XOR with a key byte, so flipping one bit of a cipher byte flips the same bit of its
plaintext character. A row that is a linear function of the byte's bits (as ±1) lets what is
learned from one byte carry over to every byte that shares bits with it. Tokens that are not one
byte or one character (specials, merged tokens) keep a free row of their own.

This table and :class:`KeyPhaseEmbedding` (a learned vector per key phase) are the recipe's
(``Config.bit_embeddings``, ``Config.phase_embedding``), not the model's: C1-C4's generic Seq2SeqTransformer
is given them by :func:`cipherlab.pipeline.codec.model_embeddings`; the BLT (C5) builds its own from BLTArgs.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["BitFactoredEmbedding", "KeyPhaseEmbedding", "bit_features"]

BITS = 8


def _parts(code) -> tuple[list[int], int | None]:
    """A code as (its bytes, its key phase or None): ``65``, ``(65, 1)`` or ``((116, 104, 101), None)``."""
    if isinstance(code, int):
        return [code], None
    first, phase = code
    return (list(first) if isinstance(first, tuple) else [first]), phase


def bit_features(codes: Sequence) -> torch.Tensor:
    """(V, F) features of V tokens, from ``codes[i]``, token i's code:

    - an int 0..255: a one-unit token's byte or character code: its 8 bits as ±1;
    - ``(byte, phase)``: a phase-tagged source symbol: the bits, and one of P phase columns set;
    - ``((b1, ..., bk), phase)``: a merged token of k units, unit j's bits in slot j of L slots
      (L the longest token), then the phase columns, L length columns and a free column of its own;
    - None: a special token, with a free column of its own.

    >>> bit_features([65, None]).tolist()
    [[-1.0, 1.0, -1.0, -1.0, -1.0, -1.0, -1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]]
    >>> bit_features([(65, 1)]).tolist()
    [[-1.0, 1.0, -1.0, -1.0, -1.0, -1.0, -1.0, 1.0, 0.0, 1.0]]
    >>> bit_features([((1, 2), None), 3]).shape  # 2 slots x 8 bits, 2 lengths, 1 own column
    torch.Size([2, 19])
    """
    parts = [None if code is None else _parts(code) for code in codes]
    slots = max((len(p[0]) for p in parts if p is not None), default=1)
    phases = [p[1] for p in parts if p is not None and p[1] is not None]
    n_phases = 1 + max(phases) if phases else 0
    own = [i for i, p in enumerate(parts) if p is None or len(p[0]) > 1]
    lengths = slots if slots > 1 else 0
    features = torch.zeros(len(codes), BITS * slots + n_phases + lengths + len(own))
    for i, p in enumerate(parts):
        if p is None:
            continue
        units, phase = p
        for j, byte in enumerate(units):
            if not 0 <= byte < 256:
                raise ValueError(f"token {i}: code {codes[i]} holds {byte}, not a byte (0..255); give None for a free row")
            features[i, BITS * j : BITS * (j + 1)] = torch.tensor(
                [1.0 if byte >> (BITS - 1 - b) & 1 else -1.0 for b in range(BITS)])
        if phase is not None:
            features[i, BITS * slots + phase] = 1.0
        if lengths:
            features[i, BITS * slots + n_phases + len(units) - 1] = 1.0
    for column, i in enumerate(own):
        features[i, BITS * slots + n_phases + lengths + column] = 1.0
    return features


class BitFactoredEmbedding(nn.Module):
    """An embedding whose table is ``features @ proj``: (V, F) fixed features, (F, D) learned.
    Drop-in for ``nn.Embedding``, ``weight`` included (for a tied output head)."""

    def __init__(self, codes: Sequence, embedding_dim: int):
        super().__init__()
        features = bit_features(codes)
        bit_columns = BITS * max((len(_parts(c)[0]) for c in codes if c is not None), default=1)
        self.num_embeddings, self.embedding_dim = features.size(0), embedding_dim
        self.register_buffer("features", features, persistent=False)  # rebuilt from the codes
        self.proj = nn.Parameter(torch.empty(features.size(1), embedding_dim))
        with torch.no_grad():
            self.proj[:bit_columns].normal_(0.0, (BITS * embedding_dim) ** -0.5)  # 8 terms of ±1 add up per unit
            self.proj[bit_columns:].normal_(0.0, embedding_dim ** -0.5)

    @property
    def weight(self) -> torch.Tensor:
        return self.features @ self.proj  # (V, D)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.weight)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, features={self.features.size(1)}"


class KeyPhaseEmbedding(nn.Module):
    """A learned vector per key phase (position mod ``period``), added to every token's embedding.

    The XOR mask of position i depends on i mod ``period`` alone. Rows start at N(0, 1/D) and are
    scaled by sqrt(D) like the token embeddings they are added to.
    """

    def __init__(self, embedding_dim: int, period: int):
        super().__init__()
        self.period = period
        self.table = nn.Embedding(period, embedding_dim)
        nn.init.normal_(self.table.weight, 0.0, embedding_dim ** -0.5)

    def forward(self, length: int, offset: int = 0, device=None) -> torch.Tensor:
        """(length, D): the phase vectors of positions offset .. offset + length - 1."""
        positions = torch.arange(offset, offset + length, device=device)
        return self.of(positions % self.period)

    def of(self, phases: torch.Tensor) -> torch.Tensor:
        """(..., D): the vectors of the given key phases (0 .. period - 1), e.g. each token's first
        character's phase when tokens cover several characters."""
        return self.table(phases) * self.table.embedding_dim ** 0.5


def key_phase_embedding(embedding_dim: int, phase_embedding: bool, key_period: int | None) -> KeyPhaseEmbedding | None:
    """A :class:`KeyPhaseEmbedding` of ``key_period`` phases when ``phase_embedding``, else None."""
    if not phase_embedding:
        return None
    if key_period is None:
        raise ValueError("phase_embedding=True needs key_period, the cipher's period (cipherlab.data.cipher.PERIOD)")
    return KeyPhaseEmbedding(embedding_dim, key_period)
