"""The task chapter's experiments: key phases of chunk sizes, bit costs of wrong characters."""

from __future__ import annotations

import functools
import itertools

from cipherlab.data.cipher import KEY, encrypt, key_phase
from cipherlab.data.corpus import load_corpus
from cipherlab.pipeline.metrics import bit_matches


def chunk_start_phases(chunk_chars: int, n_chunks: int = len(KEY)) -> list[int]:
    """Key phase at the first character of chunks 0..n_chunks-1: chunk k starts at character k*chunk_chars."""
    return [key_phase(k * chunk_chars) for k in range(n_chunks)]


def wrong_bits(predicted: str, true: str) -> int:
    """Bits that bit accuracy counts wrong when ``predicted`` stands where ``true`` should be."""
    matches, compared = bit_matches(predicted, encrypt(true))
    return compared - matches


@functools.lru_cache(maxsize=1)
def worst_character_swap() -> tuple[str, str, int]:
    """The pair of characters of the corpus alphabet whose swap costs the most bits (and that cost)."""
    alphabet = sorted(set("".join(load_corpus().plain)))
    return max(((a, b, wrong_bits(a, b)) for a, b in itertools.combinations(alphabet, 2)), key=lambda t: t[2])


def start_phases_text(chunk_chars: int) -> str:
    return ", ".join(map(str, chunk_start_phases(chunk_chars)))
