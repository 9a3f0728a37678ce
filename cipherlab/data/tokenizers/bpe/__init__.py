"""Byte-pair encoding from scratch: the merge learner, the tokenizer, and its file format.

BPE training in five lines (Sennrich et al., 2016):
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

- ``naive``      the definition: ``pair_counts``, ``merge_symbols``, ``best_pair``, ``apply_merges``,
                 ``naive_merges``
- ``fast``       ``_LinkedCorpus`` and ``fast_merges``
- ``learn``      ``learn_merges`` and ``iter_merges``, either learner by ``method=``
- ``tokenizer``  ``BPETokenizer``, ``text_sequences`` and the file format
"""

from cipherlab.data.tokenizers.bpe.fast import _LinkedCorpus as _LinkedCorpus  # shown in the book; timed by bench_bpe.py
from cipherlab.data.tokenizers.bpe.fast import fast_merges
from cipherlab.data.tokenizers.bpe.learn import iter_merges, learn_merges
from cipherlab.data.tokenizers.bpe.naive import Pair, apply_merges, best_pair, merge_symbols, naive_merges, pair_counts
from cipherlab.data.tokenizers.bpe.tokenizer import (
    FORMAT,
    FORMAT_VERSION,
    MAX_CACHED_PIECE_CHARS,
    SPECIAL_TOKENS,
    TIE_RULE,
    UNK_TEXT,
    UNK_TOKEN,
    BPETokenizer,
    TokenizerFileError,
    text_sequences,
)


__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_CACHED_PIECE_CHARS",
    "SPECIAL_TOKENS",
    "TIE_RULE",
    "UNK_TEXT",
    "UNK_TOKEN",
    "BPETokenizer",
    "Pair",
    "TokenizerFileError",
    "apply_merges",
    "best_pair",
    "fast_merges",
    "iter_merges",
    "learn_merges",
    "merge_symbols",
    "naive_merges",
    "pair_counts",
    "text_sequences",
]
