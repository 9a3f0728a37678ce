"""The one Markdown-table writer of the package.

:func:`cipherlab.runner.evaluate.write_table` (a run's ``table.md``), :mod:`cipherlab.analysis.ablation`
(the ablation tables) and any README generator lay their tables out with :func:`markdown_table`;
:func:`pct`, :func:`pct2` and :func:`num` format their cells. It imports nothing of the package, so
every stage of the flow may use it.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["markdown_table", "num", "pct", "pct2"]


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence]) -> str:
    """A Markdown table from a header row and rows of cells (already formatted), without a final newline.

    >>> print(markdown_table(["config", "bit acc %"], [["C1", "99.96"]]))
    | config | bit acc % |
    |---|---|
    | C1 | 99.96 |
    """
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return "\n".join([*lines, *("| " + " | ".join(str(c) for c in row) + " |" for row in rows)])


def pct(value: float | None) -> str:
    """A fraction as a percentage to one decimal, ``"–"`` for None.

    >>> pct(0.4567), pct(None)
    ('45.7', '–')
    """
    return "–" if value is None else f"{100 * value:.1f}"


def pct2(value: float | None) -> str:
    """A percentage to two decimals, for accuracies near 100 % (one target is 99.9 %)."""
    return "–" if value is None else f"{100 * value:.2f}"


def num(value, fmt: str, missing: str = "–") -> str:
    """``value`` in ``format``'s ``fmt``, or ``missing`` for None.

    >>> num(3.14159, ".2f"), num(None, ".2f", "n/c")
    ('3.14', 'n/c')
    """
    return missing if value is None else format(value, fmt)
