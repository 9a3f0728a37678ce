"""cipherlab: an encoder-decoder Transformer, written from scratch, that learns to
decrypt a repeating-key XOR cipher of English text.

The folders are the layers. Each imports only from the ones listed before it
(``tests/test_layers.py`` reads the folders and checks it):

- ``cipherlab.models``    attention, MHA/GQA, sinusoidal/RoPE, LayerNorm/RMSNorm, the
                          encoder-decoder (C1-C4), the BLT (C5); imports only torch
- ``cipherlab.base``      configurations and presets, the device, the atomic writer, Markdown tables
- ``cipherlab.data``      the cipher, the corpus and its chunks, the plaintext sources, the tokenizers
- ``cipherlab.pipeline``  codec and model, checkpoints, the training loop, decoding, metrics
- ``cipherlab.runner``    files and runs: a run from a configuration, its hooks and messages, checks of
                          files read back, trained models, evaluation, records, the lock, one-line
                          errors, Weights & Biases and the Hugging Face hub
- ``cipherlab.student``   a student's own parts inside the model, and the checker for them
- ``cipherlab.analysis``  runs read back (records, statistics, tables, plots), probes, score,
                          plan, attention maps, doctor, report
- ``cipherlab.cli``       the command line; ``python -m cipherlab`` gathers every command

The book's own tools (the viva bank, the facts sync, the chapters' experiments, the explorers,
the broken variants) are not part of the library: they are ``cipherbook``, in the repository's
``book/`` folder.
"""

__version__ = "0.1.0"
