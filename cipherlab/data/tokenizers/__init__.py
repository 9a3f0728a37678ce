"""Tokenisation: BPE from scratch (``bpe``, C1-C4), pre-tokenizers and units (``pretokenize``), the cached
source/target tokenizers of the cipher task (``cipher_task``) and the byte ids of C5 (``bytes``)."""

from cipherlab.data.tokenizers.bpe import (BPETokenizer, TokenizerFileError, apply_merges, iter_merges, learn_merges,
                                           merge_symbols, pair_counts)
from cipherlab.data.tokenizers.bytes import BOS_ID, EOS_ID, PAD_ID, SPECIAL_IDS, VOCAB_SIZE, ByteTokenizer
from cipherlab.data.tokenizers.cipher_task import boundary_straddle_rate, get_tokenizers
from cipherlab.data.tokenizers.pretokenize import split_cipher, split_plaintext

__all__ = ["BOS_ID", "BPETokenizer", "ByteTokenizer", "EOS_ID", "PAD_ID", "SPECIAL_IDS", "TokenizerFileError",
           "VOCAB_SIZE", "apply_merges", "boundary_straddle_rate", "get_tokenizers", "iter_merges", "learn_merges",
           "merge_symbols", "pair_counts", "split_cipher", "split_plaintext"]
