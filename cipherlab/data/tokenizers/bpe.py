"""Byte-pair encoding from scratch: the merge learner, the tokenizer, and its file format.

Chapter 6 ("Tokenisation") teaches this module. BPE training in five lines (Sennrich et al., 2016):
start from the base symbols, count every adjacent pair weighted by how often its sequence occurs,
merge the most frequent pair into one new symbol, update the counts, repeat.

Two rules make the result a function of the data alone, so that two implementations can be
compared merge by merge:

- **Counting rule.** A pair is counted at *every* adjacent position, overlapping ones included:
  ``('a', 'a', 'a')`` holds ``('a', 'a')`` twice, although only one of them can be merged. This is
  what ``zip(symbols, symbols[1:])`` counts (Sennrich et al.'s reference code does the same).
- **Tie rule** (``TIE_RULE``). The merged pair is ``min(counts, key=lambda p: (-counts[p], p))``:
  the highest count, and among equal counts the lexicographically smallest ``(left, right)``
  pair, comparing strings by Unicode code point.

A merge replaces occurrences left to right, so ``('a', 'a', 'a', 'a')`` becomes ``('aa', 'aa')``
and ``('a', 'a', 'a')`` becomes ``('aa', 'a')``. Symbols are strings, and a symbol *is* its string:
when two different merges build the same string (``'0' + '01'`` and ``'00' + '1'``), the
results are one symbol, counted together, with one id.

``learn_merges(..., method="naive")`` recounts every pair after every merge: a dozen lines, the
definition. ``method="fast"`` keeps all sequences in one linked array, updates counts only around
each merge site and finds the best pair with a lazy heap; it returns exactly the same merges
(``tests/test_tokenizers.py`` checks this on hundreds of random corpora).
"""

from __future__ import annotations

import heapq
import json
import os
import random
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice
from pathlib import Path

from cipherlab.data.tokenizers.pretokenize import PRETOKENIZERS, UNITS

Pair = tuple[str, str]

FORMAT = "cipherlab-bpe"
FORMAT_VERSION = 1
TIE_RULE = "max (count); ties: min (left, right) by Unicode code point"

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>")  # ids 0, 1, 2 in every BPETokenizer
UNK_TOKEN = "<unk>"  # id 3, only when the alphabet was learned from the training text
UNK_TEXT = "\ufffd"  # what decode() writes for <unk>: the visible Unicode replacement character

# Pieces up to this many characters are memoised by BPETokenizer.encode. Words repeat constantly in
# natural text; a cipher line is one long, unique piece and caching it would only cost memory.
MAX_CACHED_PIECE_CHARS = 64


# --------------------------------------------------------------------------------------------
# The naive learner: the definition
# --------------------------------------------------------------------------------------------


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


def _naive_merges(sequences: Mapping[tuple[str, ...], int]) -> Iterator[tuple[Pair, int]]:
    """Recount every pair after every merge: O(corpus size) per merge."""
    vocab = Counter(sequences)
    while counts := pair_counts(vocab):
        pair = best_pair(counts)
        yield pair, counts[pair]
        merged: Counter[tuple[str, ...]] = Counter()
        for symbols, freq in vocab.items():
            merged[merge_symbols(symbols, pair)] += freq
        vocab = merged


# --------------------------------------------------------------------------------------------
# The fast learner: linked array, incremental counts, lazy heap
# --------------------------------------------------------------------------------------------

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
            if freq <= 0:
                raise ValueError(f"sequence {symbols!r} has frequency {freq}; frequencies must be positive")
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


def _fast_merges(sequences: Mapping[tuple[str, ...], int]) -> Iterator[tuple[Pair, int]]:
    corpus = _LinkedCorpus(sequences)
    while (best := corpus.pop_best()) is not None:
        yield best
        corpus.merge(best[0])


_METHODS = {"naive": _naive_merges, "fast": _fast_merges}


def iter_merges(sequences: Mapping[tuple[str, ...], int], *, method: str = "fast") -> Iterator[tuple[Pair, int]]:
    """Yield ``(pair, weighted count)`` for each merge in order, until no adjacent pair is left."""
    if method not in _METHODS:
        raise ValueError(f"method={method!r} is not a BPE learner; use one of {sorted(_METHODS)}")
    return _METHODS[method](sequences)


def learn_merges(
    sequences: Mapping[tuple[str, ...], int],
    num_merges: int,
    *,
    method: str = "fast",
    return_counts: bool = False,
) -> list[Pair] | list[tuple[Pair, int]]:
    """Learn up to ``num_merges`` merges from ``sequences`` (symbol tuple -> frequency).

    Stops early when no adjacent pair is left. With ``return_counts=True`` each entry is
    ``(pair, weighted count at the time it was merged)``.

    >>> learn_merges({("l", "o", "w"): 5, ("l", "o", "t"): 2}, 2, return_counts=True)
    [(('l', 'o'), 7), (('lo', 'w'), 5)]
    """
    trace = list(islice(iter_merges(sequences, method=method), num_merges))
    return trace if return_counts else [pair for pair, _ in trace]


# --------------------------------------------------------------------------------------------
# The tokenizer
# --------------------------------------------------------------------------------------------


def text_sequences(texts: Iterable[str], *, pretokenizer: str, unit: str) -> dict[tuple[str, ...], int]:
    """What the learner sees: each distinct piece of ``texts`` as base symbols -> its frequency.

    >>> text_sequences(["low low lower"], pretokenizer="plaintext", unit="char")
    {('l', 'o', 'w'): 1, (' ', 'l', 'o', 'w'): 1, (' ', 'l', 'o', 'w', 'e', 'r'): 1}
    """
    split_text, split_piece = PRETOKENIZERS[pretokenizer], UNITS[unit].split
    pieces = Counter(piece for text in texts for piece in split_text(text))
    return {tuple(split_piece(piece)): freq for piece, freq in pieces.items()}


def _check_choices(pretokenizer: str, unit: str) -> None:
    if pretokenizer not in PRETOKENIZERS:
        raise ValueError(f"pretokenizer={pretokenizer!r} is unknown; use one of {sorted(PRETOKENIZERS)}")
    if unit not in UNITS:
        raise ValueError(f"unit={unit!r} is unknown; use one of {sorted(UNITS)}")


class TokenizerFileError(ValueError):
    """A tokenizer file that cannot be trusted; the message names the file and the reason."""


class BPETokenizer:
    """A trained BPE: pre-tokenizer, base alphabet, merges, and the ids that go with them.

    Ids: 0 ``<pad>``, 1 ``<bos>``, 2 ``<eos>``, then 3 ``<unk>`` when the alphabet was learned from
    the training text (an unseen character becomes ``<unk>``, decoded as U+FFFD '\ufffd'), then the
    base alphabet in sorted order, then each new token string in the order merges first built it.
    A fixed alphabet (``unit="byte8"``, ``"utf8-byte"``, or an explicit ``alphabet=``) has no
    ``<unk>``: a symbol outside it is an error.
    """

    pad_id, bos_id, eos_id = 0, 1, 2

    def __init__(
        self,
        merges: Iterable[Pair],
        alphabet: Iterable[str],
        *,
        pretokenizer: str = "plaintext",
        unit: str = "char",
        unk: bool = False,
        metadata: dict | None = None,
    ):
        _check_choices(pretokenizer, unit)
        self.merges: list[Pair] = [tuple(pair) for pair in merges]
        self.alphabet: list[str] = sorted(set(alphabet))
        self.pretokenizer, self.unit = pretokenizer, unit
        self.metadata = dict(metadata or {})
        self._split_text, self._unit = PRETOKENIZERS[pretokenizer], UNITS[unit]
        self._alphabet = set(self.alphabet)

        specials = [*SPECIAL_TOKENS, UNK_TOKEN] if unk else list(SPECIAL_TOKENS)
        self.unk_id = len(SPECIAL_TOKENS) if unk else None
        self._first_symbol_id = len(specials)
        self._id_to_token: list[str] = specials + self.alphabet
        self._token_to_id = {token: self._first_symbol_id + k for k, token in enumerate(self.alphabet)}
        # The encoder works on ids: merge `rank` turns the adjacent ids packed as _merge_key[rank]
        # (left << 32 | right) into _merge_id[rank]. A pair learned twice has several ranks.
        self._merge_key: list[int] = []
        self._merge_id: list[int] = []
        self._ranks: dict[int, list[int]] = defaultdict(list)
        for rank, (left, right) in enumerate(self.merges):
            for symbol in (left, right):
                if symbol not in self._token_to_id:
                    raise ValueError(
                        f"merge {rank} {(left, right)!r} uses {symbol!r}, which is neither in the alphabet "
                        "nor built by an earlier merge"
                    )
            if left + right not in self._token_to_id:
                self._token_to_id[left + right] = len(self._id_to_token)
                self._id_to_token.append(left + right)
            key = self._token_to_id[left] << _SHIFT | self._token_to_id[right]
            self._merge_key.append(key)
            self._merge_id.append(self._token_to_id[left + right])
            self._ranks[key].append(rank)
        self._first_rank = {key: ranks[0] for key, ranks in self._ranks.items()}
        self._piece_cache: dict[str, tuple[int, ...]] = {}

    # ---- training ----------------------------------------------------------------------------

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        vocab_size: int | None,
        *,
        pretokenizer: str = "plaintext",
        unit: str = "char",
        alphabet: Iterable[str] | None = None,
        method: str = "fast",
    ) -> BPETokenizer:
        """Learn merges from ``texts`` until the vocabulary has ``vocab_size`` entries.

        The alphabet is the unit's full alphabet when it has one (``byte8``: all 256 bit groups,
        ``utf8-byte``: all 256 bytes), else ``alphabet`` when given, else the characters seen in
        ``texts`` plus ``<unk>``. Merges continue until there are ``vocab_size`` distinct tokens
        (specials included); the vocabulary is smaller only if the corpus runs out of pairs.
        ``vocab_size=None`` learns no merges at all: the tokens are the base symbols (characters,
        or whole 8-bit groups), which is what the ``cpu`` preset uses (chapter 9 says why).
        """
        _check_choices(pretokenizer, unit)
        if alphabet is not None and UNITS[unit].full_alphabet is not None:
            raise ValueError(f"alphabet= only applies to unit='char'; unit={unit!r} always uses all 256 symbols")
        sequences = text_sequences(texts, pretokenizer=pretokenizer, unit=unit)
        seen = set().union(*sequences)

        if UNITS[unit].full_alphabet is not None:
            base, unk = set(UNITS[unit].full_alphabet), False
        elif alphabet is not None:
            base, unk = set(alphabet), False
            if seen - base:
                raise ValueError(
                    f"the training text contains {sorted(seen - base)[:5]!r}, outside alphabet={sorted(base)!r}; "
                    "widen the alphabet or leave it out to learn it from the text"
                )
        else:
            base, unk = seen, True
        fixed = len(SPECIAL_TOKENS) + unk + len(base)
        if vocab_size is None:
            vocab_size = fixed
        if vocab_size < fixed:
            raise ValueError(
                f"vocab_size={vocab_size} is smaller than the {fixed} ids the specials and the base "
                f"alphabet already need; use vocab_size >= {fixed}"
            )

        merges, built = [], set()
        if vocab_size > fixed:
            for pair, _ in iter_merges(sequences, method=method):
                merges.append(pair)
                built.add(pair[0] + pair[1])  # a string built twice is still one token
                if len(built) == vocab_size - fixed:
                    break
        return cls(merges, base, pretokenizer=pretokenizer, unit=unit, unk=unk)

    # ---- encoding ----------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return len(self._id_to_token)

    def token(self, i: int) -> str:
        """The string of token id ``i`` as the vocabulary holds it (a special's is its name, e.g. ``<pad>``)."""
        return self._id_to_token[i]

    def token_id(self, token: str) -> int | None:
        """The id of the token string ``token`` (a base symbol or one built by merges), None if absent."""
        return self._token_to_id.get(token)

    def encode(self, text: str, dropout: float = 0.0, rng: random.Random | None = None) -> list[int]:
        """Token ids of ``text`` (no BOS/EOS): the merges replayed in order within each piece.

        ``dropout`` > 0 is BPE-dropout (Provilkov et al., 2020): each merge that would apply at a
        place is skipped there with this probability, drawn from ``rng``, so the same text is cut
        into smaller pieces now and then and every base symbol is also seen on its own. For training
        only; ``decode`` of the ids still gives ``text`` back.
        """
        if dropout > 0:
            rng = rng or random.Random(0)
            return [i for piece in self._split_text(text) for i in self._encode_piece(piece, dropout, rng)]
        ids: list[int] = []
        for piece in self._split_text(text):
            if len(piece) > MAX_CACHED_PIECE_CHARS:
                ids.extend(self._encode_piece(piece))
                continue
            cached = self._piece_cache.get(piece)
            if cached is None:
                cached = self._piece_cache[piece] = self._encode_piece(piece)
            ids.extend(cached)
        return ids

    def _encode_piece(self, piece: str, dropout: float = 0.0, rng: random.Random | None = None) -> tuple[int, ...]:
        """Ids of one piece; an unknown symbol becomes <unk> and splits the piece around it."""
        ids: list[int] = []
        run: list[str] = []  # consecutive known symbols, merged together
        for position, symbol in enumerate(self._unit.split(piece)):
            if symbol in self._alphabet:
                run.append(symbol)
                continue
            if self.unk_id is None:
                raise ValueError(
                    f"symbol {symbol!r} at position {position} of {piece[:40]!r} is not in this "
                    f"tokenizer's {len(self.alphabet)}-symbol alphabet and the tokenizer has no <unk>; "
                    "remove it or train a tokenizer whose alphabet includes it"
                )
            ids.extend(self._merge_run([self._token_to_id[s] for s in run], dropout, rng))
            ids.append(self.unk_id)
            run = []
        ids.extend(self._merge_run([self._token_to_id[s] for s in run], dropout, rng))
        return tuple(ids)

    def _next_rank(self, key: int, after: int) -> int | None:
        """The first rank > ``after`` at which the packed pair ``key`` is merged, if any."""
        rank = self._first_rank.get(key)
        if rank is None or rank > after:
            return rank
        return next((r for r in self._ranks[key] if r > after), None)  # only for a pair learned twice

    def _merge_run(self, ids: list[int], dropout: float = 0.0, rng: random.Random | None = None) -> list[int]:
        """Apply the merges to a run of base-symbol ids, exactly as ``apply_merges`` would.

        Replaying merges in order wastes time on merges whose pair is absent. Instead a heap holds
        one entry per adjacent pair, ordered by (the next rank at which that pair is merged,
        position), and the lowest entry is applied first. Equal ranks pop in ascending position,
        which is left to right, as in ``merge_symbols``. A pair created by merge r gets its next
        rank > r, because replay never goes back to an earlier merge. An entry whose position has
        changed since it was pushed no longer matches ``_merge_key[rank]`` and is skipped. Each
        entry is one int, rank << 32 | position, which makes the heap cheap.
        """
        n = len(ids)
        if n < 2:
            return ids
        sym = list(ids)  # -1 once merged into the left neighbour
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        prev = list(range(-1, n - 1))
        first_rank, merge_key, merge_id = self._first_rank, self._merge_key, self._merge_id
        heap = []
        for i in range(n - 1):
            rank = first_rank.get(sym[i] << _SHIFT | sym[i + 1])
            if rank is not None:
                heap.append(rank << _SHIFT | i)
        heapq.heapify(heap)
        while heap:
            entry = heapq.heappop(heap)
            rank, i = entry >> _SHIFT, entry & _LOW
            j = nxt[i]
            if j < 0 or sym[i] < 0 or sym[i] << _SHIFT | sym[j] != merge_key[rank]:
                continue
            if dropout and rng.random() < dropout:  # BPE-dropout: this merge is skipped here
                continue
            merged = sym[i] = merge_id[rank]
            sym[j] = -1
            n_after = nxt[i] = nxt[j]
            if n_after >= 0:
                prev[n_after] = i
                next_rank = self._next_rank(merged << _SHIFT | sym[n_after], rank)
                if next_rank is not None:
                    heapq.heappush(heap, next_rank << _SHIFT | i)
            p = prev[i]
            if p >= 0:
                next_rank = self._next_rank(sym[p] << _SHIFT | merged, rank)
                if next_rank is not None:
                    heapq.heappush(heap, next_rank << _SHIFT | p)
        return [s for s in sym if s >= 0]

    def tokenize(self, text: str) -> list[str]:
        """The token strings of ``text``, for inspection: ``decode`` of their ids gives ``text`` back."""
        return [self._id_to_token[i] for i in self.encode(text)]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``, skipping <pad>/<bos>/<eos>; <unk> is written as U+FFFD '\ufffd'."""
        tokens = []
        for i in map(int, ids):
            if not 0 <= i < len(self._id_to_token):
                raise ValueError(f"id {i} is outside this tokenizer's vocabulary 0..{len(self._id_to_token) - 1}")
            if i == self.unk_id:
                tokens.append(UNK_TEXT)
            elif i >= self._first_symbol_id:
                tokens.append(self._id_to_token[i])
        return self._unit.join(tokens)

    # ---- the file format ---------------------------------------------------------------------

    def to_text(self) -> str:
        """The tokenizer as versioned JSON text, one merge per line so people can read it: what
        ``save`` writes and ``from_text`` reads (a checkpoint carries it too)."""
        header = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "tie_rule": TIE_RULE,
            "pretokenizer": self.pretokenizer,
            "unit": self.unit,
            "unk": self.unk_id is not None,
            "vocab_size": self.vocab_size,
            "metadata": self.metadata,
            "alphabet": self.alphabet,
        }
        fields = [f"  {json.dumps(key)}: {json.dumps(value)}" for key, value in header.items()]
        merges = ",\n".join(f"    {json.dumps(list(pair))}" for pair in self.merges)
        fields.append(f'  "merges": [\n{merges}\n  ]')
        return "{\n" + ",\n".join(fields) + "\n}\n"

    def save(self, path: str | os.PathLike) -> None:
        """Write :meth:`to_text` to ``path``.

        The file is written next to ``path`` first and then renamed, so a reader never sees half
        a file.
        """
        path = Path(path)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(self.to_text(), encoding="utf-8")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> BPETokenizer:
        """Read a file written by ``save``; raise TokenizerFileError naming the file and the reason."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise TokenizerFileError(f"{path}: cannot read a tokenizer from it ({err}); delete it and retrain") from err
        return cls.from_text(text, path)

    @classmethod
    def from_text(cls, text: str, path: str | os.PathLike = "<text>") -> BPETokenizer:
        """Read the text of :meth:`to_text`; raise TokenizerFileError naming ``path`` (where the text
        came from) and the reason."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise TokenizerFileError(f"{path}: cannot read a tokenizer from it ({err}); delete it and retrain") from err
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise TokenizerFileError(f"{path}: not a {FORMAT} file (no \"format\": \"{FORMAT}\" field)")
        if data.get("version") != FORMAT_VERSION:
            raise TokenizerFileError(
                f"{path}: format version {data.get('version')!r} is unknown; this code reads version "
                f"{FORMAT_VERSION}. Retrain the tokenizer with this version of cipherlab"
            )
        if data.get("tie_rule") != TIE_RULE:
            raise TokenizerFileError(f"{path}: tie rule {data.get('tie_rule')!r} differs from this code's {TIE_RULE!r}")
        try:
            tokenizer = cls(
                [(left, right) for left, right in data["merges"]],
                data["alphabet"],
                pretokenizer=data["pretokenizer"],
                unit=data["unit"],
                unk=data["unk"],
                metadata=data["metadata"],
            )
        except (KeyError, TypeError, ValueError) as err:
            raise TokenizerFileError(f"{path}: damaged tokenizer file ({type(err).__name__}: {err})") from err
        if tokenizer.vocab_size != data.get("vocab_size"):
            raise TokenizerFileError(
                f"{path}: records vocab_size {data.get('vocab_size')!r} but its merges build {tokenizer.vocab_size}"
            )
        return tokenizer
