"""Where the Byte Latent Transformer's patches begin and end (C5), decided before the network sees the data.

- ``ByteEntropyModel``: an order-2 byte n-gram model counted on the training split; a new source
  patch starts where the entropy of the next byte exceeds a threshold (Pagnoni et al., 2024).
- ``patch_membership`` and ``fixed_patch_membership``: which bytes belong to which patch, as a
  bool tensor ``member[b, k, i]`` (True: byte i of example b is in patch k).

The source is known before decoding starts, so it gets entropy patches; the decoder input gets
fixed patches of ``patch_tgt`` bytes, so which slots byte i may read is one formula
(``patch_causal_mask``) and decoding needs no patching logic.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import torch

N_BYTES = 256                  # byte values 0..255; the special ids (PAD/BOS/EOS) never reach the entropy model
DEFAULT_MIN_COUNT = 10         # a context seen fewer times backs off to a shorter one


def as_byte_array(seq, where: str = "sequence") -> np.ndarray:
    """``seq`` (bytes, list of ints or 1-D integer array) as an int64 array of values 0..255."""
    if isinstance(seq, (bytes, bytearray)):
        return np.frombuffer(bytes(seq), dtype=np.uint8).astype(np.int64)
    if isinstance(seq, str):
        raise TypeError(f"{where} is a str; the entropy model reads byte values: group the cipher bits first "
                        "(cipherlab.data.cipher.bits_to_bytes) or pass text.encode()")
    arr = np.asarray(seq)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{where} must be a 1-D sequence of integers, got dtype {arr.dtype} and shape {arr.shape}")
    bad = np.flatnonzero((arr < 0) | (arr >= N_BYTES))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{where} holds {int(arr[i])} at position {i}; byte values must lie in 0..255 "
                         "(strip the special ids PAD/BOS/EOS before patching)")
    return arr.astype(np.int64, copy=False)


def _conditional_entropy(keys: np.ndarray, n_contexts: int) -> tuple[np.ndarray, np.ndarray]:
    """Entropy in bits of the next byte per context (``keys``: ``context * 256 + next_byte``), and how
    often each context was seen: H = -sum (c/N) log2 (c/N) = log2 N - (sum c log2 c) / N."""
    pairs, counts = np.unique(keys, return_counts=True)
    context = pairs // N_BYTES
    counts = counts.astype(np.float64)
    total = np.bincount(context, weights=counts, minlength=n_contexts)
    c_log_c = np.bincount(context, weights=counts * np.log2(counts), minlength=n_contexts)
    seen = total > 0
    entropy = np.zeros(n_contexts)
    entropy[seen] = np.log2(total[seen]) - c_log_c[seen] / total[seen]
    return np.maximum(entropy, 0.0), total  # clip float rounding (-1e-16) of deterministic contexts


class ByteEntropyModel:
    """Order-2 byte n-gram model with back-off, used to place source patch boundaries.

    The entropy at position i uses the two preceding bytes when that context was seen at least
    ``min_count`` times, else the preceding byte alone (same rule), else the unigram distribution,
    folded into two lookup tables at fit time.

    >>> m = ByteEntropyModel(min_count=1).fit([b"abababab"])
    >>> m.entropy_curve(b"abab").round(3).tolist()      # after "a" always "b": 0 bits
    [1.0, 0.0, 0.0, 0.0]
    """

    def __init__(self, min_count: int = DEFAULT_MIN_COUNT):
        self.min_count = min_count
        self.unigram_entropy: float | None = None  # H(byte)
        self.bigram_table: np.ndarray | None = None    # (256,)  H(byte | prev), backed off
        self.trigram_table: np.ndarray | None = None   # (65536,) H(byte | prev2, prev), backed off
        self.train_entropies: np.ndarray | None = None  # every training position's entropy

    def fit(self, sequences: Iterable) -> "ByteEntropyModel":
        """Count the training byte sequences (never validation or test) and build the tables."""
        arrays = [as_byte_array(s, f"training sequence {n}") for n, s in enumerate(sequences)]
        if sum(a.size for a in arrays) == 0:
            raise ValueError("ByteEntropyModel.fit got no bytes; pass the training split's byte sequences")
        uni = np.concatenate(arrays)
        bi = np.concatenate([a[:-1] * N_BYTES + a[1:] for a in arrays])
        tri = np.concatenate([(a[:-2] * N_BYTES + a[1:-1]) * N_BYTES + a[2:] for a in arrays])

        h0, _ = _conditional_entropy(uni, 1)
        h1, n1 = _conditional_entropy(bi, N_BYTES)
        h2, n2 = _conditional_entropy(tri, N_BYTES ** 2)
        self.unigram_entropy = float(h0[0])
        self.bigram_table = np.where(n1 >= self.min_count, h1, self.unigram_entropy)
        last_byte = np.arange(N_BYTES ** 2) % N_BYTES
        self.trigram_table = np.where(n2 >= self.min_count, h2, self.bigram_table[last_byte])
        self.train_entropies = np.concatenate([self.entropy_curve(a) for a in arrays])
        return self

    def _check_fitted(self) -> None:
        if self.trigram_table is None:
            raise RuntimeError("ByteEntropyModel is not fitted; call .fit(training_byte_sequences) first")

    def entropy_curve(self, seq) -> np.ndarray:
        """(L,) float64: entropy in bits of byte i's distribution given bytes i-2, i-1.

        Position 0 has no context (unigram entropy); position 1 has one byte of context.
        The value at i depends only on bytes before i, never on byte i itself.
        """
        self._check_fitted()
        s = as_byte_array(seq)
        curve = np.empty(s.size)
        curve[:1] = self.unigram_entropy
        curve[1:2] = self.bigram_table[s[:1]]
        curve[2:] = self.trigram_table[s[:-2] * N_BYTES + s[1:-1]]
        return curve

    def threshold_at(self, percentile: float) -> float:
        """The given percentile (0..100) of the entropies at all training positions, in bits."""
        self._check_fitted()
        if not 0.0 <= percentile <= 100.0:
            raise ValueError(f"percentile={percentile}; it must lie in 0..100")
        return float(np.percentile(self.train_entropies, percentile))

    def patch_boundaries(self, seq, threshold: float, max_patch: int) -> list[int]:
        """Start index of every patch of ``seq``; the first is 0 (none for an empty sequence).

        A patch starts at i when ``entropy_curve(seq)[i] > threshold`` or when the running
        patch already holds ``max_patch`` bytes: a gap between entropy starts at s gets extra
        starts at s + max_patch, s + 2 * max_patch, ...
        """
        if max_patch < 1:
            raise ValueError(f"max_patch={max_patch}; a patch must be allowed at least 1 byte")
        if not math.isfinite(threshold):
            raise ValueError(f"threshold={threshold} is not a finite number of bits; use threshold_at(percentile)")
        curve = self.entropy_curve(seq)
        n = curve.size
        if n == 0:
            return []
        starts = np.flatnonzero(curve > threshold)
        starts = np.concatenate([[0], starts[starts > 0]])
        gaps = np.diff(np.append(starts, n))              # (E,) length of each entropy patch
        pieces = (gaps - 1) // max_patch + 1              # (E,) capped patches each one becomes
        origin = np.repeat(starts, pieces)                # (P,) entropy start of every final patch
        first_piece = np.repeat(np.cumsum(pieces) - pieces, pieces)
        rank = np.arange(origin.size) - first_piece       # (P,) 0, 1, 2, ... inside each entropy patch
        return (origin + rank * max_patch).tolist()


def patch_membership(starts: Sequence[Sequence[int]], lengths: Sequence[int], max_len: int) -> torch.Tensor:
    """(B, K, max_len) bool: True where byte i of example b lies in patch k.

    ``starts[b]`` are patch start indices of a sequence of ``lengths[b]`` bytes (first
    start 0); K is the largest patch count in the batch (at least 1).  Patches past an
    example's last one, and padding bytes, belong to no patch.
    """
    B = len(starts)
    K = max([len(s) for s in starts] + [1])
    member = torch.zeros(B, K, max_len, dtype=torch.bool)
    for b, (st, n) in enumerate(zip(starts, lengths)):
        if n == 0:
            continue
        is_start = torch.zeros(n, dtype=torch.long)
        is_start[list(st)] = 1
        patch_of_byte = is_start.cumsum(0) - 1                   # (n,) patch index of each byte
        member[b, patch_of_byte, torch.arange(n)] = True
    return member


def fixed_patch_membership(nonpad: torch.Tensor, patch: int) -> torch.Tensor:
    """(B, L // patch, L) bool membership of the *complete* fixed patches of ``patch`` positions.

    ``nonpad`` (B, L) bool marks real positions; patch k holds positions [k * patch, (k + 1) * patch).
    A trailing partial patch is left out: its summary would include bytes after its reader.
    """
    B, L = nonpad.shape
    K = L // patch
    patch_of_pos = torch.arange(L, device=nonpad.device) // patch                   # (L,)
    member = patch_of_pos[None, None, :] == torch.arange(K, device=nonpad.device)[None, :, None]  # (1, K, L)
    return member & nonpad[:, None, :]                                             # (B, K, L)
