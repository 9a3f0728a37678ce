"""The fast BPE learner: one linked array of every sequence, counts updated around each merge, a lazy heap.
:func:`fast_merges` yields exactly the merges of :func:`.naive.naive_merges`, with the same counts."""

from __future__ import annotations

import heapq
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping

from cipherlab.data.tokenizers.bpe.naive import Pair

_SHIFT = 32  # a pair of symbol ids (left, right) is stored as the single int left << 32 | right
_LOW = (1 << _SHIFT) - 1


class _LinkedCorpus:
    """Every sequence laid end to end in one flat array of symbol ids, threaded by links.

    Position i of the flat array holds:
      sym[i]     the symbol id there (-1 once it has been merged into its left neighbour)
      prev[i]    the previous live position of the same sequence (-1 at its start)
      nxt[i]     the next live position of the same sequence (-1 at its end)
      weight[i]  the frequency of the sequence that position i belongs to
    and for each pair key:
      counts[key]  frequency-weighted count of live positions i with (sym[i], sym[nxt[i]]) == key
      where[key]   positions that held the pair when it was recorded; may be stale, merge() rechecks
    The heap holds (-count, left, right) entries, some stale; for every live pair it holds at least
    one entry whose count is >= the true count, which is all pop_best needs.
    """

    def __init__(self, sequences: Mapping[tuple[str, ...], int]):
        self.names: list[str] = sorted(set().union(*sequences))  # symbol id -> string
        self.ids: dict[str, int] = {name: k for k, name in enumerate(self.names)}  # string -> id
        self.sym, self.prev, self.nxt, self.weight = (array("i") for _ in range(4))
        self.counts: defaultdict[int, int] = defaultdict(int)
        self.where: defaultdict[int, array] = defaultdict(lambda: array("i"))
        for symbols, freq in sequences.items():
            start, n = len(self.sym), len(symbols)
            if n == 0:
                continue
            seq = list(map(self.ids.__getitem__, symbols))
            self.sym.extend(seq)
            self.prev.extend(range(start - 1, start + n - 1))
            self.nxt.extend(range(start + 1, start + n + 1))
            self.weight.extend(array("i", [freq]) * n)
            self.prev[start] = -1
            self.nxt[start + n - 1] = -1
            keys = [left << _SHIFT | right for left, right in zip(seq, seq[1:])]
            for key, k in Counter(keys).items():
                self.counts[key] += k * freq
            for position, key in enumerate(keys, start):
                self.where[key].append(position)
        self.heap = [(-count, *self._pair(key)) for key, count in self.counts.items()]
        heapq.heapify(self.heap)

    def _id(self, name: str) -> int:
        symbol_id = self.ids.get(name)
        if symbol_id is None:
            symbol_id = self.ids[name] = len(self.names)
            self.names.append(name)
        return symbol_id

    def _pair(self, key: int) -> Pair:
        return self.names[key >> _SHIFT], self.names[key & _LOW]

    def pop_best(self) -> tuple[Pair, int] | None:
        """The pair chosen by the tie rule and its count, or None when no pair is left.

        A popped entry whose count is out of date is pushed back with the true count; an entry is
        only trusted when it is exact, and then no other live pair can beat it.
        """
        while self.heap:
            neg_count, left, right = heapq.heappop(self.heap)
            count = self.counts.get(self.ids[left] << _SHIFT | self.ids[right], 0)
            if count == -neg_count:
                return (left, right), count
            if count:
                heapq.heappush(self.heap, (-count, left, right))
        return None

    def merge(self, pair: Pair) -> None:
        """Merge every occurrence of ``pair`` left to right, updating only the counts around it."""
        a, b = self.ids[pair[0]], self.ids[pair[1]]
        c = self._id(pair[0] + pair[1])
        merged_key = a << _SHIFT | b
        sym, prev, nxt, weight, counts, where = self.sym, self.prev, self.nxt, self.weight, self.counts, self.where
        del counts[merged_key]  # every occurrence disappears below: a merge never re-creates its pair
        grown = set()
        # Ascending positions = left to right within each sequence, which decides runs ('a a a').
        for i in sorted(where.pop(merged_key)):
            j = nxt[i]
            if sym[i] != a or j < 0 or sym[j] != b:
                continue  # a stale record, or its left symbol was just consumed in a run like 'a a a'
            w, p, n = weight[i], prev[i], nxt[j]
            if p >= 0:  # (x, a) becomes (x, ab)
                self._discount(sym[p] << _SHIFT | a, w, merged_key)
                key = sym[p] << _SHIFT | c
                counts[key] += w
                where[key].append(p)
                grown.add(key)
            if n >= 0:  # (b, y) becomes (ab, y)
                self._discount(b << _SHIFT | sym[n], w, merged_key)
                key = c << _SHIFT | sym[n]
                counts[key] += w
                where[key].append(i)
                grown.add(key)
            sym[i], sym[j], nxt[i] = c, -1, n
            if n >= 0:
                prev[n] = i
        for key in grown:  # decreases need no entry (the old one is an upper bound); increases do
            if key in counts:
                heapq.heappush(self.heap, (-counts[key], *self._pair(key)))

    def _discount(self, key: int, w: int, merged_key: int) -> None:
        if key == merged_key:  # e.g. the second ('a', 'a') of 'a a a': already deleted as a whole
            return
        remaining = self.counts[key] - w
        if remaining:
            self.counts[key] = remaining
        else:
            del self.counts[key], self.where[key]


def fast_merges(sequences: Mapping[tuple[str, ...], int]) -> Iterator[tuple[Pair, int]]:
    corpus = _LinkedCorpus(sequences)
    while (best := corpus.pop_best()) is not None:
        yield best
        corpus.merge(best[0])
