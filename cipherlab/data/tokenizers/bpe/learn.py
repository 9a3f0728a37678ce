"""One call for both BPE learners: ``method="naive"`` (the definition) or ``"fast"`` (the same merges)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import islice

from cipherlab.data.tokenizers.bpe.fast import fast_merges
from cipherlab.data.tokenizers.bpe.naive import Pair, naive_merges

_METHODS = {"naive": naive_merges, "fast": fast_merges}


def iter_merges(sequences: Mapping[tuple[str, ...], int], *, method: str = "fast") -> Iterator[tuple[Pair, int]]:
    """Yield ``(pair, weighted count)`` for each merge in order, until no adjacent pair is left."""
    if method not in _METHODS:
        raise ValueError(f"method={method!r} is not a BPE learner; use one of {sorted(_METHODS)}")
    return _METHODS[method](sequences)


def learn_merges(sequences: Mapping[tuple[str, ...], int], num_merges: int, *, method: str = "fast",
                 return_counts: bool = False) -> list[Pair] | list[tuple[Pair, int]]:
    """Learn up to ``num_merges`` merges from ``sequences`` (symbol tuple -> frequency), with
    ``return_counts`` as ``(pair, weighted count when merged)``.

    >>> learn_merges({("l", "o", "w"): 5, ("l", "o", "t"): 2}, 2, return_counts=True)
    [(('l', 'o'), 7), (('lo', 'w'), 5)]
    """
    trace = list(islice(iter_merges(sequences, method=method), num_merges))
    return trace if return_counts else [pair for pair, _ in trace]
