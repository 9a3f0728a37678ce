"""``BPETokenizer``: a trained BPE (pre-tokenizer, base alphabet, merges, ids) and its versioned JSON file format."""

from __future__ import annotations

import heapq
import json
import os
import random
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

from cipherlab.base.files import write_atomic
from cipherlab.data.tokenizers.bpe.fast import _LOW, _SHIFT
from cipherlab.data.tokenizers.bpe.learn import iter_merges
from cipherlab.data.tokenizers.bpe.naive import Pair
from cipherlab.data.tokenizers.pretokenize import PRETOKENIZERS, UNITS

FORMAT = "cipherlab-bpe"
FORMAT_VERSION = 1
TIE_RULE = "max (count); ties: min (left, right) by Unicode code point"

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>")  # ids 0, 1, 2 in every BPETokenizer
UNK_TOKEN = "<unk>"  # id 3, only when the alphabet was learned from the training text
UNK_TEXT = "\ufffd"  # what decode() writes for <unk>: the visible Unicode replacement character

MAX_CACHED_PIECE_CHARS = 64  # encode memoises pieces up to this long (words repeat; a cipher line does not)


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

    def __init__(self, merges: Iterable[Pair], alphabet: Iterable[str], *, pretokenizer: str = "plaintext",
                 unit: str = "char", unk: bool = False, metadata: dict | None = None):
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
    def train(cls, texts: Iterable[str], vocab_size: int | None, *, pretokenizer: str = "plaintext", unit: str = "char",
              alphabet: Iterable[str] | None = None, method: str = "fast") -> BPETokenizer:
        """Learn merges from ``texts`` until the vocabulary has ``vocab_size`` tokens (None: no merges).

        The alphabet is the unit's full alphabet when it has one, else ``alphabet`` when given, else
        the characters seen in ``texts`` plus ``<unk>``.
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
            raise ValueError(f"vocab_size={vocab_size} is smaller than the {fixed} ids the specials and the base "
                             f"alphabet already need; use vocab_size >= {fixed}")

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
        place is skipped there with this probability, drawn from ``rng``.
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
                raise ValueError(f"symbol {symbol!r} at position {position} of {piece[:40]!r} is not in this "
                                 f"tokenizer's {len(self.alphabet)}-symbol alphabet and the tokenizer has no <unk>; "
                                 "remove it or train a tokenizer whose alphabet includes it")
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

        A heap holds one entry per adjacent pair, rank << 32 | position, ordered by the next rank at
        which that pair is merged and then left to right; the lowest is applied first. A pair created
        by merge r gets its next rank > r. An entry whose position has changed since it was pushed no
        longer matches ``_merge_key[rank]`` and is skipped.
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
        """The tokenizer as versioned JSON text, one merge per line."""
        header = {"format": FORMAT, "version": FORMAT_VERSION, "tie_rule": TIE_RULE, "pretokenizer": self.pretokenizer,
                  "unit": self.unit, "unk": self.unk_id is not None, "vocab_size": self.vocab_size,
                  "metadata": self.metadata, "alphabet": self.alphabet}
        fields = [f"  {json.dumps(key)}: {json.dumps(value)}" for key, value in header.items()]
        merges = ",\n".join(f"    {json.dumps(list(pair))}" for pair in self.merges)
        fields.append(f'  "merges": [\n{merges}\n  ]')
        return "{\n" + ",\n".join(fields) + "\n}\n"

    def save(self, path: str | os.PathLike) -> None:
        """Write :meth:`to_text` to ``path`` (atomically)."""
        write_atomic(path, self.to_text())

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
        """Read the text of :meth:`to_text`; raise TokenizerFileError naming ``path`` and the reason."""
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
            tokenizer = cls([(left, right) for left, right in data["merges"]], data["alphabet"],
                            pretokenizer=data["pretokenizer"], unit=data["unit"], unk=data["unk"],
                            metadata=data["metadata"])
        except (KeyError, TypeError, ValueError) as err:
            raise TokenizerFileError(f"{path}: damaged tokenizer file ({type(err).__name__}: {err})") from err
        if tokenizer.vocab_size != data.get("vocab_size"):
            raise TokenizerFileError(
                f"{path}: records vocab_size {data.get('vocab_size')!r} but its merges build {tokenizer.vocab_size}"
            )
        return tokenizer
