"""Tokenisation for cipherlab: BPE from scratch (C1-C4) and the byte path (C5).

The package's modules:

- ``bpe``          the merge learner (naive and fast) and ``BPETokenizer``
- ``pretokenize``  pre-tokenizers (text -> pieces) and units (piece -> base symbols)
- ``cipher_task``  the cached source/target tokenizers and the boundary-straddle measurement
- ``bytes``        byte ids for the Byte Latent Transformer
"""

from cipherlab.data.tokenizers.bpe import (
    BPETokenizer,
    TokenizerFileError,
    apply_merges,
    iter_merges,
    learn_merges,
    merge_symbols,
    pair_counts,
)
from cipherlab.data.tokenizers.bytes import BOS_ID, EOS_ID, PAD_ID, SPECIAL_IDS, VOCAB_SIZE, ByteTokenizer
from cipherlab.data.tokenizers.cipher_task import boundary_straddle_rate, get_tokenizers
from cipherlab.data.tokenizers.pretokenize import split_cipher, split_plaintext

__all__ = [
    "BOS_ID",
    "BPETokenizer",
    "ByteTokenizer",
    "EOS_ID",
    "PAD_ID",
    "SPECIAL_IDS",
    "TokenizerFileError",
    "VOCAB_SIZE",
    "apply_merges",
    "boundary_straddle_rate",
    "get_tokenizers",
    "iter_merges",
    "learn_merges",
    "merge_symbols",
    "pair_counts",
    "split_cipher",
    "split_plaintext",
]
