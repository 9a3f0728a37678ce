"""The one Markdown-table writer of the package (chapter 9: results and the ablation).

:func:`cipherlab.evaluate.write_table` (``results/<run>/table.md``), :mod:`cipherlab.results`
(chapter 9's tables) and the ``results/**/make_readme.py`` generators all lay their tables out
with :func:`markdown_table`. It imports nothing of the package, so every stage of the flow may use it.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["markdown_table"]


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence]) -> str:
    """A Markdown table from a header row and rows of cells (already formatted), without a final newline.

    >>> print(markdown_table(["config", "bit acc %"], [["C1", "99.96"]]))
    | config | bit acc % |
    |---|---|
    | C1 | 99.96 |
    """
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return "\n".join([*lines, *("| " + " | ".join(str(c) for c in row) + " |" for row in rows)])
