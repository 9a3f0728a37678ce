"""cipherlab: an encoder-decoder Transformer, written from scratch, that learns to
decrypt a repeating-key XOR cipher of English text.

The package has three layers, and imports point down them, never up (``tests/test_layers.py``):

The core: from the cipher to a trained model and its decryptions.

- ``cipherlab.models``       attention, MHA/GQA, sinusoidal/RoPE, LayerNorm/RMSNorm, the
                             encoder-decoder (C1-C4), the BLT (C5); imports only torch
- ``cipherlab.cipher``       the cipher: ``encrypt``, ``decrypt``, the key and its period
- ``cipherlab.config``       the five configurations, the presets and the recipes
- ``cipherlab.device``       CUDA, MPS or CPU, and at what precision
- ``cipherlab.errors``       one line on stderr for every error a user can meet
- ``cipherlab.tables``       the one Markdown-table writer
- ``cipherlab.brown``        the recipe behind ``data/brown_plain.txt``
- ``cipherlab.letters``      the embedded data in the official format
- ``cipherlab.docstrings``   a second source of English for the generalisation check
- ``cipherlab.data``         load, verify, split, chunk, bucket, collate
- ``cipherlab.tokenizers``   BPE from scratch (C1-C4) and the byte path (C5)
- ``cipherlab.codec``        between strings and tensors for one configuration; ``build_model``
- ``cipherlab.parts``        a student's own attention, norm or positions inside the model
- ``cipherlab.checkpoint``   save, load, resume, export, with checksums
- ``cipherlab.train``        teacher forcing, AdamW with warm-up, early stopping
- ``cipherlab.decode``       greedy and beam decoding, whole lines from chunks
- ``cipherlab.metrics``      bit, character and line accuracy, chrF, BLEU, ROUGE
- ``cipherlab.evaluate``     a checkpoint scored on whole test lines; the ablation's records
- ``cipherlab.probes``       text no model was trained on

The analysis: reading runs back, judging them and a student's code.

- ``cipherlab.results``      records, reference figures, statistics, tables, error analysis, plots
- ``cipherlab.score``        any file of predictions scored in the book's units
- ``cipherlab.check``        a student's component checked against cipherlab's and PyTorch's
- ``cipherlab.plan``         a GPU run estimated before paying for it
- ``cipherlab.attention_maps``  attention weights captured, measured, drawn
- ``cipherlab.doctor``       did a checkpoint learn the cipher or the corpus?
- ``cipherlab.report``       chapter 9's tables and figures for anyone's runs

The book's tooling: what the chapters run and show.

- ``cipherlab.explorers``    Vega-Lite explorers that move wherever the book is read
- ``cipherlab.broken``       deliberately broken variants, and the checks that catch them
- ``cipherlab.experiments``  each chapter's experiments, one module per chapter
- ``cipherlab.viva``         the viva bank, the facts sync, the drill, flashcards, stored outputs

The command line sits on top and may import any layer.

- ``cipherlab.cli``        ``train``, ``evaluate``, ``decrypt``, ``export`` and ``ablate``; ``__main__``
                             gathers every command of ``python -m cipherlab``
"""

__version__ = "0.1.0"
