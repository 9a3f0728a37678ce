"""The two BPE tokenizers of C1-C4, trained once per corpus and cached, and how they cut the cipher.

Chapter 6 ("Tokenisation") teaches this module. The source (cipher) side has two modes:

- ``"bits"``: the course notes' design. The alphabet is {'0', '1'} and merges may run across the
  8-bit character boundaries of the cipher (§4.1 of the notes calls this the BPE pathology);
- ``"bytes"``: the base symbols are the 8-bit groups, so every token covers whole characters.

``boundary_straddle_rate`` measures the difference. The target (plaintext) tokenizer is the same
in both modes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from cipherlab.cipher import BITS_PER_CHAR
from cipherlab.tokenizers.bpe import FORMAT_VERSION, BPETokenizer, TokenizerFileError

SOURCE_MODES = {
    "bits": {"pretokenizer": "cipher", "unit": "char", "alphabet": "01"},
    "bytes": {"pretokenizer": "cipher", "unit": "byte8", "alphabet": None},
}
TARGET_SETTINGS = {"pretokenizer": "plaintext", "unit": "char", "alphabet": None}


def _cached_tokenizer(corpus, name: str, texts: list[str], vocab_size: int | None, settings: dict) -> BPETokenizer:
    """Load the tokenizer cached for this request, or train and cache it."""
    description = {
        "corpus_sha256": corpus.sha256,
        "format_version": FORMAT_VERSION,
        "tokenizer": name,
        "split": "train",
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
    corpus.cache_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save(path)
    return tokenizer


def get_tokenizers(corpus, mode: str = "bits", src_vocab: int | None = 1024, tgt_vocab: int | None = 8000):
    """(source tokenizer, target tokenizer) for C1-C4, trained on the training split only.

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
    plain, cipher = corpus.lines("train")
    src = _cached_tokenizer(corpus, f"source-{mode}", cipher, src_vocab, SOURCE_MODES[mode])
    tgt = _cached_tokenizer(corpus, "target", plain, tgt_vocab, TARGET_SETTINGS)
    return src, tgt


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
