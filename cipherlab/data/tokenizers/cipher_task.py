"""The two BPE tokenizers of C1-C4, trained once per corpus and cached, and how they cut the cipher.

The source (cipher) side has three modes:

- ``"bits"``: the alphabet is {'0', '1'} and merges may run across the 8-bit character
  boundaries of the cipher, so a token can hold parts of two characters;
- ``"bytes"``: the base symbols are the 8-bit groups, so every token covers whole characters;
- ``"phase"``: the base symbols are the 8-bit groups tagged with their key phase (position mod 8),
  2,048 of them, so a token stands for one plaintext string wherever it occurs.

``boundary_straddle_rate`` measures the difference. The target (plaintext) tokenizer is a BPE
of its own, the same in every mode; or, with ``target="aligned"`` (phase mode only), the plaintext of
the source's tokens (:func:`aligned_target`), so that target token i is the plaintext of source
token i.
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
TARGETS = ("bpe", "aligned")
TARGET_SETTINGS = {"pretokenizer": "plaintext", "unit": "char", "alphabet": None}


def _cached_tokenizer(corpus, name: str, texts: list[str], vocab_size: int | None, settings: dict,
                      learned_on: str = "train") -> BPETokenizer:
    """Load the tokenizer cached for this request, or train and cache it."""
    description = {
        "corpus_sha256": corpus.sha256,
        "format_version": FORMAT_VERSION,
        "tokenizer": name,
        "split": learned_on,
        "vocab_size": vocab_size,
        **settings,
    }
    key = hashlib.sha256(json.dumps(description, sort_keys=True).encode()).hexdigest()[:16]
    size = "base" if vocab_size is None else vocab_size  # None: no merges
    path = corpus.cache_dir / f"bpe_{name}_{size}_{key}.json"
    if path.exists():
        tokenizer = BPETokenizer.load(path)
        if tokenizer.metadata != {"cache_key": key, **description}:
            raise TokenizerFileError(
                f"{path}: its stored cache key/settings {tokenizer.metadata!r} do not match the request "
                f"{description!r} (key {key}); delete the file and the tokenizer will be retrained"
            )
        return tokenizer
    tokenizer = BPETokenizer.train(texts, vocab_size, **settings)
    tokenizer.metadata = {"cache_key": key, **description}
    try:
        corpus.cache_dir.mkdir(parents=True, exist_ok=True)
        tokenizer.save(path)
    except OSError as e:  # a read-only checkout or a shared course folder: train on, uncached
        reason = e.strerror or str(e)
        print(f"cipherlab: note: cannot cache the {name} tokenizer in {corpus.cache_dir} ({reason}); it was learned "
              "for this run only, and is learned again next time: to keep it, copy the data folder somewhere you can "
              "write and pass that with --data-dir", file=sys.stderr)
    return tokenizer


def get_tokenizers(corpus, mode: str = "bits", src_vocab: int | None = 1024, tgt_vocab: int | None = 8000,
                   target: str = "bpe", texts: tuple[list[str], list[str], str] | None = None):
    """(source tokenizer, target tokenizer) for C1-C4, trained on the training split only.

    ``target="bpe"`` learns the target's own BPE of ``tgt_vocab`` tokens on the plaintext;
    ``target="aligned"`` (``mode="phase"`` only, ``tgt_vocab`` None) makes the target the plaintext
    of the source's tokens (:func:`aligned_target`).

    ``texts``, when given, is ``(plaintexts, ciphers, description)``: what both learn from instead of
    the training lines (e.g. the training chunks as a recipe shows them to the model); the
    description names it in the cache key and the tokenizers' metadata.

    A vocabulary size of None means no merges: the base symbols only (whole 8-bit groups in
    "bytes" mode, characters for the target).

    Each tokenizer is cached under ``corpus.cache_dir`` as JSON. Its file name ends in a key, a
    hash of (corpus.sha256, the tokenizer's settings and vocabulary size, FORMAT_VERSION), and the
    file stores that key and those settings. A different corpus or setting means a different file
    name, so the tokenizer is trained afresh; the old file is left alone. A file with the right
    name whose stored key or settings differ (copied by hand, or edited) is never used: it raises
    TokenizerFileError telling you to delete it, as does a damaged file. The target tokenizer does
    not depend on ``mode`` and is shared by both modes.
    """
    if mode not in SOURCE_MODES:
        raise ValueError(f"mode={mode!r} is not a source tokenization mode; use one of {sorted(SOURCE_MODES)}")
    if target not in TARGETS:
        raise ValueError(f"target={target!r} is not a target tokenization; use one of {TARGETS}")
    if target == "aligned" and (mode != "phase" or tgt_vocab is not None):
        raise ValueError(f"target='aligned' needs mode='phase' and tgt_vocab=None (got mode={mode!r}, "
                         f"tgt_vocab={tgt_vocab!r}): its tokens are the plaintext of phase-tagged source tokens")
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

    A phase-tagged source symbol (byte, phase) stands for one plaintext character, which the
    training pairs show: the first time a symbol occurs in them, its character is read off the
    plaintext beside it. A merged source token then stands for the concatenation of its
    symbols' characters, so each source merge ``(L, R)`` gives the target merge
    ``(plain(L), plain(R))``, in the same order. The result is an ordinary :class:`BPETokenizer`
    over characters (with ``<unk>``), whose vocabulary holds every plaintext string a source token
    can stand for: training pairs a target token with every source token
    (:meth:`cipherlab.data.corpus.SubwordChunkDataset`), so the alignment is one to one. No key is
    used, only the training pairs; a symbol the pairs never show is never part of a merge (merges
    are counted on the same lines), and a single one decodes through the characters' base ids.
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

    A character outside the target's alphabet becomes ``<unk>`` (one token, as the source token of
    that one character); a multi-character piece whose text the target lacks (a source token whose
    plaintext differs from the one the training pairs showed: not this cipher) raises ValueError.
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
    """Fraction of source tokens that cut through a plaintext character (course notes §4.1).

    A token covering bits [a, b) straddles when a character boundary (a multiple of 8) lies
    strictly inside it and the token does not start and end on boundaries: it holds part of one
    character together with bits of another, which the model must pull apart again. A token made
    of whole characters does not count, so the rate is always 0.0 in "bytes" mode.
    """
    if tokenizer.pretokenizer != "cipher" or not set("".join(tokenizer.alphabet)) <= {"0", "1"}:
        raise ValueError(
            "boundary_straddle_rate needs a cipher tokenizer (pretokenizer 'cipher' over bits); got "
            f"pretokenizer={tokenizer.pretokenizer!r}, unit={tokenizer.unit!r}"
        )
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
