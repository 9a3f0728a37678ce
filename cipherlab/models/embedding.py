"""Bit-factored embeddings: a token's vector is a learned linear map of its byte's 8 bits.

An ordinary embedding table gives every token a free row, so what the model learns about the
cipher byte 0x41 says nothing about 0x43. But the cipher is XOR with a key byte: flipping one
bit of the cipher byte flips the same bit of the plaintext character, whatever the other bits
are. A row that is a linear function of the byte's bits (written as ±1) lets what is learned
from one byte carry over to every byte that shares bits with it, including (byte, key phase)
combinations that English never produces — which is what a model must decode to read text
that is not English, random strings for instance. With the tied output head, a character's
logit is then linear in its bits.

Tokens that are not one byte or one character (PAD, BOS, EOS, UNK, a merged BPE token, a
bits-mode piece) keep a free row of their own: a one-hot feature each.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["BitFactoredEmbedding", "KeyPhaseEmbedding", "bit_features"]

BITS = 8


def bit_features(codes: Sequence[int | None]) -> torch.Tensor:
    """(V, 8 + n_free) features of V tokens: ``codes[i]`` is token i's byte or character code
    (0..255), or None for a token with a free row of its own (a one-hot feature).

    >>> bit_features([65, None]).tolist()
    [[-1.0, 1.0, -1.0, -1.0, -1.0, -1.0, -1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]]
    """
    free = [i for i, code in enumerate(codes) if code is None]
    features = torch.zeros(len(codes), BITS + len(free))
    for i, code in enumerate(codes):
        if code is not None:
            if not 0 <= code < 256:
                raise ValueError(f"token {i}: code {code} is not a byte (0..255); give None for a free row")
            features[i, :BITS] = torch.tensor([1.0 if code >> (BITS - 1 - b) & 1 else -1.0 for b in range(BITS)])
    for column, i in enumerate(free):
        features[i, BITS + column] = 1.0
    return features


class BitFactoredEmbedding(nn.Module):
    """An embedding whose table is ``features @ proj``: (V, F) fixed features, (F, D) learned.

    Drop-in for ``nn.Embedding``: ``forward(ids)`` looks rows up and ``weight`` is the (V, D)
    table, so a tied output head (``F.linear(h, embed.weight)``) works unchanged. Initialised so
    a row has standard deviation about D^-1/2, as cipherlab's ordinary embeddings.
    """

    def __init__(self, codes: Sequence[int | None], embedding_dim: int):
        super().__init__()
        features = bit_features(codes)
        self.num_embeddings, self.embedding_dim = features.size(0), embedding_dim
        self.register_buffer("features", features, persistent=False)  # rebuilt from the codes
        self.proj = nn.Parameter(torch.empty(features.size(1), embedding_dim))
        with torch.no_grad():
            self.proj[:BITS].normal_(0.0, (BITS * embedding_dim) ** -0.5)  # 8 terms of ±1 add up
            self.proj[BITS:].normal_(0.0, embedding_dim ** -0.5)

    @property
    def weight(self) -> torch.Tensor:
        return self.features @ self.proj  # (V, D)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.weight)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, features={self.features.size(1)}"


class KeyPhaseEmbedding(nn.Module):
    """A learned vector per key phase (position mod ``period``), added to every token's embedding.

    The cipher's period is part of the task statement (``cipherlab.cipher.PERIOD``, 8, which
    ``cipherlab.codec.build_model`` passes as the models' ``key_period``), and the XOR mask of
    position i depends on i mod 8 alone. Sinusoidal or learned absolute positions carry that phase; RoPE's scores
    see only offsets, so on text without a language to lean on (random strings) C2 must rebuild
    the absolute phase from the sequence start. Adding the phase to the input embeddings of
    every configuration alike (``Config.phase_embedding``) hands it to all five. Rows start at
    N(0, 1/D) and are scaled by sqrt(D) like the token embeddings they are added to.
    """

    def __init__(self, embedding_dim: int, period: int):
        super().__init__()
        self.period = period
        self.table = nn.Embedding(period, embedding_dim)
        nn.init.normal_(self.table.weight, 0.0, embedding_dim ** -0.5)

    def forward(self, length: int, offset: int = 0, device=None) -> torch.Tensor:
        """(length, D): the phase vectors of positions offset .. offset + length - 1."""
        positions = torch.arange(offset, offset + length, device=device)
        return self.table(positions % self.period) * self.table.embedding_dim ** 0.5


def key_phase_embedding(embedding_dim: int, phase_embedding: bool, key_period: int | None) -> KeyPhaseEmbedding | None:
    """A :class:`KeyPhaseEmbedding` of ``key_period`` phases when ``phase_embedding``, else None."""
    if not phase_embedding:
        return None
    if key_period is None:
        raise ValueError("phase_embedding=True needs key_period, the cipher's period (cipherlab.cipher.PERIOD)")
    return KeyPhaseEmbedding(embedding_dim, key_period)
