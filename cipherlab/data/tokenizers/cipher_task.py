"""The two BPE tokenizers of C1-C4, trained once per corpus and cached.

The source (cipher) side reads ``"bits"`` (merges may cross character boundaries), ``"bytes"``
(8-bit groups) or ``"phase"`` (8-bit groups tagged with their key phase). The target is a BPE of its
own, or with ``target="aligned"`` the plaintext of the source's tokens (:func:`aligned_target`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
from collections.abc import Iterable

from cipherlab.data.cipher import BITS_PER_CHAR
from cipherlab.data.tokenizers.bpe import FORMAT_VERSION, BPETokenizer, TokenizerFileError
from cipherlab.data.tokenizers.pretokenize import PHASE_TAGS as _PHASES, phase_symbols

SOURCE_MODES = {
    "bits": {"pretokenizer": "cipher", "unit": "char", "alphabet": "01"},
    "bytes": {"pretokenizer": "cipher", "unit": "byte8", "alphabet": None},
    "phase": {"pretokenizer": "cipher", "unit": "byte8-phase", "alphabet": None},
}
TARGET_SETTINGS = {"pretokenizer": "plaintext", "unit": "char", "alphabet": None}


def _cached_tokenizer(corpus, name: str, texts: list[str], vocab_size: int | None, settings: dict,
                      learned_on: str = "train") -> BPETokenizer:
    """Load the tokenizer cached for this request, or train and cache it."""
    description = {"corpus_sha256": corpus.sha256, "format_version": FORMAT_VERSION, "tokenizer": name,
                   "split": learned_on, "vocab_size": vocab_size, **settings}
    key = hashlib.sha256(json.dumps(description, sort_keys=True).encode()).hexdigest()[:16]
    size = "base" if vocab_size is None else vocab_size  # None: no merges
    path = corpus.cache_dir / f"bpe_{name}_{size}_{key}.json"
    if path.exists():
        tokenizer = BPETokenizer.load(path)
        if tokenizer.metadata != {"cache_key": key, **description}:
            raise TokenizerFileError(f"{path}: its stored settings do not match its name; delete the file to retrain")
        return tokenizer
    tokenizer = BPETokenizer.train(texts, vocab_size, **settings)
    tokenizer.metadata = {"cache_key": key, **description}
    try:
        corpus.cache_dir.mkdir(parents=True, exist_ok=True)
        tokenizer.save(path)
    except OSError as e:  # a read-only data folder: train on, uncached
        print(f"cipherlab: note: cannot cache the {name} tokenizer in {corpus.cache_dir} ({e.strerror or e})",
              file=sys.stderr)
    return tokenizer


def get_tokenizers(corpus, mode: str = "bits", src_vocab: int | None = 1024, tgt_vocab: int | None = 8000,
                   target: str = "bpe", texts: tuple[list[str], list[str], str] | None = None):
    """(source tokenizer, target tokenizer) for C1-C4, trained on the training split only.

    ``target="aligned"`` (``mode="phase"``, ``tgt_vocab`` None) makes the target the plaintext of the
    source's tokens. ``texts``, when given, is ``(plaintexts, ciphers, description)``: what both learn
    from instead of the training lines. A vocabulary size of None means no merges.

    Each tokenizer is cached under ``corpus.cache_dir``, its file named by a hash of the corpus, its
    settings and FORMAT_VERSION, so a different corpus or setting trains afresh.
    """
    plain, cipher, learned_on = texts if texts is not None else (*corpus.lines("train"), "train")
    with _naming_the_field("src_vocab", src_vocab):
        src = _cached_tokenizer(corpus, f"source-{mode}", cipher, src_vocab, SOURCE_MODES[mode], learned_on)
    if target == "aligned":
        return src, aligned_target(src, plain, cipher)
    with _naming_the_field("tgt_vocab", tgt_vocab):
        tgt = _cached_tokenizer(corpus, "target", plain, tgt_vocab, TARGET_SETTINGS, learned_on)
    return src, tgt


@contextlib.contextmanager
def _naming_the_field(field: str, value):
    """A vocabulary too small for its base symbols, said as the Config field (``--set src_vocab``) that set it:
    the tokenizer knows only its own ``vocab_size``."""
    try:
        yield
    except ValueError as e:
        text = str(e)
        if not text.startswith(f"vocab_size={value} is smaller"):
            raise
        need = text.rsplit(">= ", 1)[-1]
        said = text.removeprefix(f"vocab_size={value} is ").split("; use vocab_size")[0]
        raise ValueError(f"--set {field}={value}: {said}; pass "
                         f"--set {field}={need} or more, or --set {field}=null for no merges") from None


def aligned_target(src: BPETokenizer, plain_lines: Iterable[str], cipher_lines: Iterable[str]) -> BPETokenizer:
    """The target tokenizer whose token i is the plaintext of source token i's characters.

    A phase-tagged source symbol (byte, phase) stands for one plaintext character, read off the
    training pairs; so each source merge ``(L, R)`` gives the target merge ``(plain(L), plain(R))``,
    in the same order. No key is used, only the training pairs.
    """
    if src.unit != "byte8-phase":
        raise ValueError(f"aligned_target needs a phase-tagged source tokenizer (unit 'byte8-phase'), not {src.unit!r}")
    char_of: dict[tuple[int, int], str] = {}
    alphabet: set[str] = set()
    for line, (text, bits) in enumerate(zip(plain_lines, cipher_lines)):
        alphabet.update(text)
        for i, ch in enumerate(text):
            symbol = (i % len(_PHASES), int(bits[BITS_PER_CHAR * i : BITS_PER_CHAR * (i + 1)], 2))
            if char_of.setdefault(symbol, ch) != ch:
                raise ValueError(f"training line {line}, character {i}: cipher byte {symbol[1]} at key phase "
                                 f"{symbol[0]} stands for both {char_of[symbol]!r} and {ch!r}; the pairs are not "
                                 "one cipher")

    def plain_of(token: str) -> str:
        return "".join(char_of[symbol] for symbol in phase_symbols(token))

    merges = [(plain_of(left), plain_of(right)) for left, right in src.merges]
    tokenizer = BPETokenizer(merges, alphabet, pretokenizer="plaintext", unit="char", unk=True)
    tokenizer.metadata = {"target": "aligned", "source_tokenizer_sha256":
                          hashlib.sha256(src.to_text().encode()).hexdigest()}
    return tokenizer


def aligned_target_ids(src: BPETokenizer, tgt: BPETokenizer, source_ids: list[int], plain: str) -> list[int]:
    """Target ids of ``plain`` cut where the source ids cut its cipher: one target token per source token.

    A character outside the target's alphabet becomes ``<unk>``; a multi-character piece the target
    lacks (not this cipher) raises ValueError.
    """
    ids, start = [], 0
    for i in source_ids:
        n = len(src.token(i)) // (1 + BITS_PER_CHAR)
        piece = plain[start : start + n]
        start += n
        found = tgt.token_id(piece)
        if found is None:
            if n != 1:
                raise ValueError(f"source token {src.token(i)!r} covers {piece!r}, which the aligned target "
                                 "lacks: these lines are not the cipher the tokenizers were learned on")
            found = tgt.unk_id
        ids.append(found)
    if start != len(plain):
        raise ValueError(f"the source tokens cover {start} characters, the plaintext has {len(plain)}")
    return ids


def boundary_straddle_rate(tokenizer: BPETokenizer, cipher_lines: Iterable[str]) -> float:
    """Fraction of source tokens that cut through a plaintext character.

    A token covering bits [a, b) straddles when it holds bits of two characters and does not start
    and end on character boundaries (multiples of 8). The rate is 0.0 in "bytes" mode.
    """
    if tokenizer.pretokenizer != "cipher" or not set("".join(tokenizer.alphabet)) <= {"0", "1"}:
        raise ValueError("boundary_straddle_rate needs a cipher tokenizer (pretokenizer 'cipher' over bits); got "
                         f"pretokenizer={tokenizer.pretokenizer!r}, unit={tokenizer.unit!r}")
    straddling = total = 0
    for line in cipher_lines:
        start = 0
        for token in tokenizer.tokenize(line):
            end = start + len(token)
            crosses = start // BITS_PER_CHAR != (end - 1) // BITS_PER_CHAR
            aligned = start % BITS_PER_CHAR == 0 and end % BITS_PER_CHAR == 0
            straddling += crosses and not aligned
            total += 1
            start = end
    if total == 0:
        raise ValueError("boundary_straddle_rate got no tokens: cipher_lines is empty or holds only empty lines")
    return straddling / total
