"""cipherlab: an encoder-decoder Transformer, written from scratch, that learns to
decrypt a repeating-key XOR cipher of English text.

The package mirrors the book: one module per chapter.

- ``cipherlab.cipher``      the cipher itself (chapter 1)
- ``cipherlab.data``        loading, verifying, splitting, chunking, batching (chapter 1)
- ``cipherlab.tokenizers``  BPE from scratch and the byte path (chapter 6)
- ``cipherlab.models``      attention, positions, norms, the encoder-decoder, the BLT (chapters 2-5, 7)
"""

__version__ = "0.1.0"
