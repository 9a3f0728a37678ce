"""The embedded data in the official format: letters and spaces only, lines as long as the official ones.

The assignment's own files hold English reduced to letters and single spaces, in lines of a median
of about 549 characters and at most 2668. ``data/brown_plain.txt`` keeps Brown's digits and
punctuation, and its paragraphs are shorter (median 285). This recipe rewrites it in the official
format, offline and deterministically, so a model can be rehearsed on what it is graded on::

    python -m cipherlab data build-letters      # writes data/letters/brown_plain.txt

1. every line (one Brown paragraph) is reduced to letters and single spaces: an apostrophe between
   two letters is dropped (``don't`` -> ``dont``, ``Fulton's`` -> ``Fultons``); every other run of
   characters that are not ASCII letters -- digits, punctuation, hyphens and dashes, quotes -- is a
   word boundary, one space (``well-known`` -> ``well known``, ``in 1961, the`` -> ``in the``); the
   line is stripped, and a paragraph with no letters left is skipped;
2. a target length is drawn for each output line, ``round(Random(SEED).lognormvariate(log(DRAW_MEDIAN),
   SIGMA))`` kept within ``MIN_CHARS``-``MAX_CHARS``;
3. the reduced paragraphs are joined with one space, in file order, into the current line while it
   is shorter than its target. The paragraph that reaches the target goes in, and closes the line,
   if that leaves the line at least as near the target as stopping before it; otherwise the line is
   closed without it and it starts the next line. A paragraph that would take the line past
   ``MAX_CHARS`` always starts the next line. No paragraph is ever cut.

Whole paragraphs overshoot their targets more often than they fall short, so the targets are drawn
around ``DRAW_MEDIAN`` = 430 characters, the value that puts the median of the lines made near the
official 549 (552; ``SIGMA`` = 0.5). The result: 2947 lines of 19-2646 characters.

``brown_plain.txt`` does not record where one Brown text ends and the next begins (its 5000
paragraphs are a sample, in corpus order, of the whole corpus), so a line may run from the end of one
text into the next one; consecutive paragraphs are mostly from the same text or genre.
"""

from __future__ import annotations

import math
import random
import re
import statistics
from collections.abc import Iterable

OFFICIAL_MEDIAN = 549
"""The median line length of the official test file, in characters (what the recipe aims at)."""
DRAW_MEDIAN = 430
"""Median of the drawn targets: lower than OFFICIAL_MEDIAN because whole paragraphs overshoot."""
SIGMA = 0.5
"""Spread of the log-normal target lengths (log scale)."""
MIN_CHARS = 20
MAX_CHARS = 2668
"""The longest line of the official test file."""
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
