"""Facts for chapter 1 (the task and the data): key phases of chunk sizes, bit costs of wrong characters."""

from __future__ import annotations

import functools
import itertools

from cipherlab.cipher import BITS_PER_CHAR, KEY, encrypt, key_phase
from cipherlab.config import make_config
from cipherlab.data import CHUNK_CHARS, load_corpus
from cipherlab.metrics import bit_matches


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


def _phases(chunk_chars: int) -> str:
    return ", ".join(map(str, chunk_start_phases(chunk_chars)))


FACTS = {
    "task_key_len": lambda: len(KEY),
    "task_chunk_chars": lambda: CHUNK_CHARS,
    "task_cpu_chunk_chars": lambda: make_config("c1", "cpu").chunk_chars,
    "task_phases_256": lambda: _phases(256),
    "task_phases_250": lambda: _phases(250),
    "task_distinct_250": lambda: len(set(chunk_start_phases(250))),
    "task_distinct_253": lambda: len(set(chunk_start_phases(253))),
    "task_chunk1_phase_250": lambda: key_phase(250),
    "task_chunk1_bit_offset_250": lambda: 250 * BITS_PER_CHAR,
    "task_wrong_bits_e_for_a": lambda: wrong_bits("e", "a"),
    "task_wrong_bits_space_for_e": lambda: wrong_bits(" ", "e"),
    "task_worst_swap_codes": lambda: "{} and {}".format(*map(ord, worst_character_swap()[:2])),
    "task_worst_swap_bits": lambda: worst_character_swap()[2],
    "task_prefix_bits_right": lambda: bit_matches("H", encrypt("Hi"))[0],
    "task_prefix_bits_compared": lambda: bit_matches("H", encrypt("Hi"))[1],
}
