"""The chapters' experiments: one module per chapter, the functions its code cells call and print.

- ``cipherlab.experiments.task``: chapter 1, the task and the data (key phases of chunks, bit costs).
- ``cipherlab.experiments.attention``: chapter 2, attention (scaling, masks, blocked rows, FLOPs).
- ``cipherlab.experiments.mha``: chapter 3, multi-head and grouped-query attention, the KV cache.
- ``cipherlab.experiments.positional``: chapter 4, positions (sinusoidal table, RoPE, the key phase).
- ``cipherlab.experiments.norm``: chapter 5, normalisation (bf16 statistics, Pre-LN against Post-LN).
- ``cipherlab.experiments.bpe``: chapter 6, tokenisation (the BPE drills, small tokenizers, bits or bytes).
- ``cipherlab.experiments.blt``: chapter 7, the Byte Latent Transformer (entropy patches, windows, C5).
- ``cipherlab.experiments.training``: chapter 8, assembling and training the model (init, AdamW, bucketing).
- ``cipherlab.experiments.results``: chapter 9, results and the ablation (metrics, committed runs).
- ``cipherlab.experiments.broken``: chapter 11, broken models (the checks of ``cipherlab.broken``).
- ``cipherlab.experiments.common``: what several chapters share (the assignment's sizes from
  ``cipherlab.config.Config``, the sinusoidal table, the calibration runs, committed test records).

A chapter's cells import its module (``import cipherlab.experiments.norm as nrm``), call these
functions and print what they return; the viva's facts (``cipherlab.viva.facts``) call the same
functions, so the number in a sentence is the one the cell above it shows. The experiments import
the core and the analysis layer (``cipherlab.results``, ``cipherlab.attention_maps``,
``cipherlab.plan``), never ``cipherlab.viva``.
"""
