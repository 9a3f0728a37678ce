"""Facts: the numbers viva answers quote, computed from the package (one module per chapter).

Each ``cipherlab/viva/facts/<chapter>.py`` defines ``FACTS = {"key": zero-argument callable}``;
the callable returns an int, float or short str computed from cipherlab (a parameter count
of a real model, cache bytes from ``kv_cache_bytes``, ...). An answer cites a fact as
``{fact}`key``` or with a format, ``{fact}`key:,d```; a chapter's prose quotes one as
``<span data-fact="key:,d">...</span>``. ``python -m cipherlab.viva sync`` writes the numbers
in, and the book's tests fail when a notebook and its facts disagree.

The functions behind the facts are the chapters' experiments: chapter N's cells import this
module (``import cipherlab.viva.facts.norm as nrm``), call the same functions and print what they
return, so the number in a sentence is the one the cell above it shows.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path


def load_facts(chapter: str) -> dict[str, Callable[[], object]]:
    """The FACTS registry of one chapter (its module must exist, even if FACTS is empty)."""
    try:
        module = importlib.import_module(f"{__name__}.{chapter}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{chapter}":
            raise
        path = Path(__file__).parent / f"{chapter}.py"
        raise ModuleNotFoundError(f"no facts for chapter {chapter!r}: create {path} defining FACTS = {{}}") from exc
    facts = getattr(module, "FACTS", None)
    if not isinstance(facts, dict) or not all(callable(f) for f in facts.values()):
        raise TypeError(f"{module.__file__}: FACTS must be a dict of zero-argument callables")
    return facts
