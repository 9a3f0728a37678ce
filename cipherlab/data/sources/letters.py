"""The embedded data in the official format: letters and spaces only, lines as long as the official ones.

``python -m cipherlab data build-letters`` rewrites ``data/brown_plain.txt`` (Brown paragraphs, with
digits and punctuation) into ``data/letters/brown_plain.txt``, deterministically:

1. every paragraph is reduced to letters and single spaces (:func:`reduce_to_letters`); a paragraph
   with no letters left is skipped;
2. a target length is drawn for each output line, log-normal around ``DRAW_MEDIAN`` (whole
   paragraphs overshoot, so the lines' median lands near the official ``OFFICIAL_MEDIAN``);
3. the paragraphs are joined, in file order, into the current line until it reaches its target,
   stopping before the last one when that is nearer; no paragraph is ever cut, no line passes ``MAX_CHARS``.
"""

from __future__ import annotations

import math
import random
import re
import statistics
from collections.abc import Iterable

OFFICIAL_MEDIAN = 549  # the median line length of the official test file, in characters
DRAW_MEDIAN = 430  # median of the drawn targets: lower, because whole paragraphs overshoot
SIGMA = 0.5  # spread of the log-normal target lengths (log scale)
MIN_CHARS = 20
MAX_CHARS = 2668  # the longest line of the official test file
SEED = 2026

_INNER_APOSTROPHE = re.compile(r"(?<=[A-Za-z])'(?=[A-Za-z])")
_NOT_LETTER = re.compile(r"[^A-Za-z]+")


def reduce_to_letters(text: str) -> str:
    """One paragraph in letters and single spaces.

    >>> reduce_to_letters('"Don\\'t," the well-known jury said in 1961 -- twice.')
    'Dont the well known jury said in twice'
    """
    return _NOT_LETTER.sub(" ", _INNER_APOSTROPHE.sub("", text)).strip()


def target_lengths(seed: int = SEED) -> Iterable[int]:
    """The endless, deterministic sequence of target line lengths."""
    rng = random.Random(seed)
    mu = math.log(DRAW_MEDIAN)
    while True:
        yield min(MAX_CHARS, max(MIN_CHARS, round(rng.lognormvariate(mu, SIGMA))))


def join_paragraphs(paragraphs: Iterable[str], seed: int = SEED) -> list[str]:
    """Steps 2 and 3 of the recipe: paragraphs (already reduced) joined into lines near their targets."""
    targets = target_lengths(seed)
    lines: list[str] = []
    current: list[str] = []
    length = 0
    target = next(targets)

    def close() -> None:
        nonlocal current, length, target
        lines.append(" ".join(current))
        current, length, target = [], 0, next(targets)

    for par in paragraphs:
        if len(par) > MAX_CHARS:
            raise ValueError(f"a paragraph of {len(par)} characters is longer than MAX_CHARS={MAX_CHARS}")
        grown = length + len(par) + (1 if current else 0)
        if current and grown > MAX_CHARS:
            close()
            grown = len(par)
        if grown < target:
            current.append(par)
            length = grown
            continue
        if current and target - length < grown - target:  # stopping short is nearer the target
            close()
            current, length = [par], len(par)
            if length >= target:
                close()
            continue
        current.append(par)
        length = grown
        close()
    if current:
        lines.append(" ".join(current))
    return lines


def build_letters(plain_lines: Iterable[str], seed: int = SEED, log=print) -> list[str]:
    """All of the recipe: Brown lines (one paragraph each) -> official-format lines."""
    plain_lines = list(plain_lines)
    paragraphs = [p for p in map(reduce_to_letters, plain_lines) if p]
    lines = join_paragraphs(paragraphs, seed)
    lengths = [len(line) for line in lines]
    log(
        f"{len(plain_lines)} paragraphs ({len(plain_lines) - len(paragraphs)} with no letters skipped) -> "
        f"{len(lines)} lines of {min(lengths)}-{max(lengths)} characters, median {statistics.median(lengths)}"
    )
    return lines
