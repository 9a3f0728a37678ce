"""A second source of English, which no Brown model has seen: the Python standard library's docstrings.

``python -m cipherlab data build-docstrings --out data/stdlib/brown_plain.txt``: every docstring of the
standard library's ``.py`` files (tests excluded), split into paragraphs at blank lines and reduced to
letters and single spaces; lines of ``MIN_CHARS``-``MAX_CHARS`` characters are de-duplicated and
``N_LINES`` of them chosen with ``random.Random(SEED)``.
"""

from __future__ import annotations

import ast
import random
import re
import sysconfig
from pathlib import Path

from cipherlab.data.sources.brown import MAX_CHARS, MIN_CHARS

N_LINES = 500
SEED = 2026
_NOT_LETTER = re.compile(r"[^A-Za-z]+")


def letters_and_spaces(text: str) -> str:
    """'Return the (x, y) pair.' -> 'Return the x y pair'."""
    return _NOT_LETTER.sub(" ", text).strip()


def docstring_paragraphs(path: Path) -> list[str]:
    """The docstring paragraphs of one source file (empty if it does not parse)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return []
    nodes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    paragraphs = []
    for node in nodes:
        doc = ast.get_docstring(node)
        if doc:
            paragraphs.extend(p for p in re.split(r"\n\s*\n", doc) if p.strip())
    return paragraphs


def build_docstrings(stdlib: Path | None = None, n_lines: int = N_LINES, seed: int = SEED, log=print) -> list[str]:
    """All of the recipe: the chosen lines, sorted."""
    root = Path(stdlib or sysconfig.get_paths()["stdlib"])
    files = sorted(
        p for p in root.rglob("*.py") if not {"test", "tests", "site-packages", "idle_test"} & set(p.relative_to(root).parts)
    )
    lines = {
        line
        for f in files
        for par in docstring_paragraphs(f)
        if MIN_CHARS <= len(line := letters_and_spaces(par)) <= MAX_CHARS
    }
    pool = sorted(lines)
    log(f"{len(files)} files under {root}, {len(pool)} distinct lines of {MIN_CHARS}-{MAX_CHARS} characters")
    if len(pool) < n_lines:
        raise ValueError(f"{root}: only {len(pool)} usable docstring paragraphs, {n_lines} requested")
    return sorted(random.Random(seed).sample(pool, n_lines))
