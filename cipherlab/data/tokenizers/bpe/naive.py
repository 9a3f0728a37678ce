"""The naive BPE learner, the definition: recount every pair after every merge, O(corpus size) per merge.

:func:`apply_merges` replays learned merges on one sequence: the definition every encoder must meet.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence

Pair = tuple[str, str]


def pair_counts(sequences: Mapping[tuple[str, ...], int]) -> Counter[Pair]:
    """Frequency-weighted count of every adjacent pair, overlapping positions included.

    >>> pair_counts({("a", "a", "a"): 2, ("a", "b"): 1})
    Counter({('a', 'a'): 4, ('a', 'b'): 1})
    """
    counts: Counter[Pair] = Counter()
    for symbols, freq in sequences.items():
        for pair in zip(symbols, symbols[1:]):
            counts[pair] += freq
    return counts


def merge_symbols(symbols: Sequence[str], pair: Pair) -> tuple[str, ...]:
    """Replace each occurrence of ``pair``, scanning left to right, by the joined symbol.

    >>> merge_symbols(("ab", "c", "a", "b"), ("a", "b"))
    ('ab', 'c', 'ab')
    >>> merge_symbols(("a", "a", "a"), ("a", "a"))
    ('aa', 'a')
    """
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return tuple(out)


def best_pair(counts: Mapping[Pair, int]) -> Pair:
    """The tie rule: the highest count, then the lexicographically smallest pair."""
    return min(counts, key=lambda pair: (-counts[pair], pair))


def apply_merges(symbols: Sequence[str], merges: Iterable[Pair]) -> tuple[str, ...]:
    """Replay ``merges`` in order on one sequence: the definition BPETokenizer.encode must meet.

    >>> apply_merges(list("lower"), [("l", "o"), ("lo", "w"), ("e", "r")])
    ('low', 'er')
    """
    symbols = tuple(symbols)
    for pair in merges:
        symbols = merge_symbols(symbols, pair)
    return symbols


def naive_merges(sequences: Mapping[tuple[str, ...], int]) -> Iterator[tuple[Pair, int]]:
    """Recount every pair after every merge: O(corpus size) per merge."""
    vocab = Counter(sequences)
    while counts := pair_counts(vocab):
        pair = best_pair(counts)
        yield pair, counts[pair]
        merged: Counter[tuple[str, ...]] = Counter()
        for symbols, freq in vocab.items():
            merged[merge_symbols(symbols, pair)] += freq
        vocab = merged
