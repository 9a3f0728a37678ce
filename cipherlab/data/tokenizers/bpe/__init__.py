"""Byte-pair encoding from scratch (Sennrich et al., 2016): the merge learner, the tokenizer, its file format.

Start from the base symbols, count every adjacent pair weighted by how often its sequence occurs,
merge the most frequent pair into one new symbol, repeat. A pair is counted at *every* adjacent
position, overlapping ones included (``zip(symbols, symbols[1:])``); ties go to the smallest
``(left, right)`` by code point (``TIE_RULE``); a merge replaces occurrences left to right. A symbol
*is* its string: two merges that build the same string build one symbol.

- ``naive``      the definition: ``pair_counts``, ``merge_symbols``, ``best_pair``, ``apply_merges``, ``naive_merges``
- ``fast``       ``_LinkedCorpus`` and ``fast_merges``: the same merges, counts updated only around each merge
- ``learn``      ``learn_merges`` and ``iter_merges``, either learner by ``method=``
- ``tokenizer``  ``BPETokenizer``, ``text_sequences`` and the file format
"""

from cipherlab.data.tokenizers.bpe.fast import fast_merges
from cipherlab.data.tokenizers.bpe.learn import iter_merges, learn_merges
from cipherlab.data.tokenizers.bpe.naive import Pair, apply_merges, best_pair, merge_symbols, naive_merges, pair_counts
from cipherlab.data.tokenizers.bpe.tokenizer import (FORMAT, FORMAT_VERSION, MAX_CACHED_PIECE_CHARS, SPECIAL_TOKENS,
                                                     TIE_RULE, UNK_TEXT, UNK_TOKEN, BPETokenizer, TokenizerFileError,
                                                     text_sequences)

__all__ = ["FORMAT", "FORMAT_VERSION", "MAX_CACHED_PIECE_CHARS", "SPECIAL_TOKENS", "TIE_RULE", "UNK_TEXT", "UNK_TOKEN",
           "BPETokenizer", "Pair", "TokenizerFileError", "apply_merges", "best_pair", "fast_merges", "iter_merges",
           "learn_merges", "merge_symbols", "naive_merges", "pair_counts", "text_sequences"]
