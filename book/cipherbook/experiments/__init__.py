"""The chapters' experiments: one module per chapter, the functions its code cells call and print.

- ``cipherbook.experiments.task``: chapter 1, the task and the data (key phases of chunks, bit costs).
- ``cipherbook.experiments.attention``: chapter 2, attention (scaling, masks, blocked rows, FLOPs).
- ``cipherbook.experiments.mha``: chapter 3, multi-head and grouped-query attention, the KV cache.
- ``cipherbook.experiments.positional``: chapter 4, positions (sinusoidal table, RoPE, the key phase).
- ``cipherbook.experiments.norm``: chapter 5, normalisation (bf16 statistics, Pre-LN against Post-LN).
- ``cipherbook.experiments.bpe``: chapter 6, tokenisation (the BPE drills, small tokenizers, bits or bytes).
- ``cipherbook.experiments.blt``: chapter 7, the Byte Latent Transformer (entropy patches, windows, C5).
- ``cipherbook.experiments.training``: chapter 8, assembling and training the model (init, AdamW, bucketing).
- ``cipherbook.experiments.results``: chapter 9, results and the ablation (metrics, committed runs).
- ``cipherbook.experiments.broken``: chapter 11, broken models (the checks of ``cipherbook.broken``).
- ``cipherbook.experiments.common``: what several chapters share (the assignment's sizes from
  ``cipherlab.base.config.Config``, the sinusoidal table, the calibration runs, committed test records).

A chapter's cells import its module (``import cipherbook.experiments.norm as nrm``), call these
functions and print what they return; the viva's facts (``cipherbook.viva.facts``) call the same
functions, so the number in a sentence is the one the cell above it shows. The experiments import
the core and the analysis layer (``cipherlab.analysis.ablation``, ``cipherlab.analysis.attention_maps``,
``cipherlab.analysis.plan``), never ``cipherbook.viva``.
"""
