"""Command line for the viva bank.

    python -m cipherbook.viva sync  [NOTEBOOK ...]   rewrite setup + viva cells and the facts in the prose (outputs kept)
    python -m cipherbook.viva check [NOTEBOOK ...]   exit 1 if any notebook is out of sync
    python -m cipherbook.viva drill [CHAPTER ...]    ask questions in the terminal, answers on Enter
    python -m cipherbook.viva outputs [NOTEBOOK ...] run each chapter in a fresh kernel, one thread, and store its outputs
    python -m cipherbook.viva view NOTEBOOK --out F  the notebook, outputs included, as Colab and GitHub render it
    python -m cipherbook.viva words [NOTEBOOK ...]   each chapter's teaching-body words against its budget

Without NOTEBOOK, every notebook under book/ is used. Any error is one line on stderr and exit
code 1 (:func:`cipherlab.runner.errors.run_command`), never a traceback.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cipherlab.runner.errors import require_file, run_command, why, writable_file
from cipherlab.cli.common import OneLineParser
from cipherbook.viva import (BOOK_PROSE_BUDGET, BOOK_TEACHING_BUDGET, REPO_ROOT, book_notebooks, fill_facts,
                            is_appendix, load_bank, notebook_in_sync, prose_words, sync_notebook, teaching_budget,
                            teaching_words)
from cipherbook.viva.flashcards import card_parts, terminal_text
from cipherbook.viva.view import notebook_html


_NOTEBOOK_FIX = "pass a chapter notebook, e.g. book/01_task.ipynb"


def _notebooks(given: list[str]) -> list[Path]:
    if given:
        return [require_file(p, "notebook", _NOTEBOOK_FIX) for p in given]
    return book_notebooks()


@contextmanager
def _reading(notebook: Path) -> Iterator[None]:
    """Name ``notebook`` in any error its reading raises: a file that is not a notebook fails in
    nbformat, JSON or jsonschema, each with its own exception."""
    try:
        yield
    except OSError as e:
        if e.errno is None:
            raise
        raise OSError(e.errno, e.strerror, e.filename or str(notebook)) from None  # run_command words it
    except Exception as e:
        raise ValueError(f"{notebook}: not a notebook this can read ({why(e)}); "
                         f"{_NOTEBOOK_FIX}") from None


def _in_sync(path: Path) -> bool:
    with _reading(path):
        return notebook_in_sync(path)


def _sync(args) -> int:
    for path in _notebooks(args.notebooks):
        with _reading(path):
            changed = sync_notebook(path)
        print(f"{'rewrote' if changed else 'unchanged'} {path}")
    return 0


def _outputs(args) -> int:
    import time

    from cipherbook.viva.outputs import write_outputs

    notebooks = _notebooks(args.notebooks)
    for path in notebooks:
        with _reading(path):
            if not notebook_in_sync(path):
                raise ValueError(f"{path} is out of sync with the bank and the facts; "
                                 f"run: python -m cipherbook.viva sync {path}, then outputs again")
    for path in notebooks:
        start = time.perf_counter()
        changed = write_outputs(path)
        print(f"{'stored new outputs in' if changed else 'same outputs in'} {path} "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
    return 0


def _words(args) -> int:
    notebooks = _notebooks(args.notebooks)
    total = prose = 0
    for path in notebooks:
        with _reading(path):
            words, all_words = teaching_words(path), prose_words(path)
        budget = teaching_budget(path)
        appendix = is_appendix(path)
        if not appendix:  # an appendix has its own budget and is not counted in the book's
            total += words
        prose += all_words
        print(f"{path.name:28} {words:6,} words of teaching body (budget {budget:,}{', an appendix' if appendix else ''})"
              f"{'  OVER' if words > budget else ''}; {all_words:,} with exercises, details and viva answers")
    if not args.notebooks:
        print(f"{'the chapters together':28} {total:6,} words (budget {BOOK_TEACHING_BUDGET:,})"
              f"{'  OVER' if total > BOOK_TEACHING_BUDGET else ''}")
        print(f"{'all prose, appendix included':28} {prose:6,} words (budget {BOOK_PROSE_BUDGET:,})"
              f"{'  OVER' if prose > BOOK_PROSE_BUDGET else ''}")
    return 0


def _check(args) -> int:
    stale = [p for p in _notebooks(args.notebooks) if not _in_sync(p)]
    for path in stale:
        print(f"out of sync: {path} (run: python -m cipherbook.viva sync {path})")
    return 1 if stale else 0


def _drill(args) -> int:
    banks = load_bank()
    chapters = args.chapters or list(banks)
    unknown = sorted(set(chapters) - set(banks))
    if unknown:
        print(f"unknown chapter(s) {unknown}; known: {list(banks)}", file=sys.stderr)
        return 2
    items = [q for c in chapters for q in banks[c].questions]
    random.Random(args.seed).shuffle(items)
    for n, q in enumerate(items[: args.count], start=1):
        print(f"\n[{n}/{min(args.count, len(items))}] {q.source} ({q.id})\n"
              f"{terminal_text(fill_facts(q.question, q.chapter))}")
        _wait("  ... answer out loud, then press Enter ")
        lead, rest = card_parts(q)
        print(terminal_text(lead))
        if rest:
            _wait("  ... press Enter for what to add if the examiner presses ")
            print(terminal_text(rest))
    return 0


def _wait(prompt: str) -> None:
    try:
        input(prompt)
    except EOFError:
        raise OSError("drill: no more input (stdin is closed); run the drill in a terminal") from None


def _view(args) -> int:
    notebook = require_file(args.notebook, "notebook", _NOTEBOOK_FIX)
    out = writable_file(args.out, "--out")  # before the work
    mathjax = (REPO_ROOT / "_vendor" / "mathjax" / "tex-mml-chtml.js").as_uri()
    with _reading(notebook):
        page = notebook_html(notebook, mathjax)
    out.write_text(page, encoding="utf-8")
    print(f"wrote {args.out}: {args.notebook} with its stored outputs, as GitHub and a Colab without a kernel show it")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m cipherbook.viva", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("sync", help="rewrite each chapter notebook's setup and viva cells from the bank")
    p.add_argument("notebooks", nargs="*", metavar="NOTEBOOK")
    p.set_defaults(run=_sync)
    p = sub.add_parser("words", help="each chapter's teaching-body words (markdown before the exercises, "
                                     "outside <details>) against its budget")
    p.add_argument("notebooks", nargs="*", metavar="NOTEBOOK")
    p.set_defaults(run=_words)
    p = sub.add_parser("check", help="exit 1 if a notebook differs from what sync would write")
    p.add_argument("notebooks", nargs="*", metavar="NOTEBOOK")
    p.set_defaults(run=_check)
    p = sub.add_parser("outputs", help="execute each chapter in a fresh kernel on one thread and store its outputs")
    p.add_argument("notebooks", nargs="*", metavar="NOTEBOOK")
    p.set_defaults(run=_outputs)
    p = sub.add_parser("view", help="write a notebook, stored outputs included, as an HTML page: what GitHub and Colab show")
    p.add_argument("notebook", metavar="NOTEBOOK")
    p.add_argument("--out", default="commonmark_view.html")
    p.set_defaults(run=_view)
    p = sub.add_parser("drill", help="random questions in the terminal; the answer appears on Enter")
    p.add_argument("chapters", nargs="*", metavar="CHAPTER")
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--seed", type=int, default=None)
    p.set_defaults(run=_drill)
    args = parser.parse_args(argv)
    return run_command("cipherbook.viva", args.run, args)


if __name__ == "__main__":
    sys.exit(main())
