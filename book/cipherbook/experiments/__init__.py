"""The chapters' experiments: one module per chapter, the functions its code cells call and print.

- ``cipherbook.experiments.task``: the task and the data (key phases of chunks, bit costs).
- ``cipherbook.experiments.attention``: attention (scaling, masks, blocked rows, FLOPs).
- ``cipherbook.experiments.mha``: multi-head and grouped-query attention, the KV cache.
- ``cipherbook.experiments.positional``: positions (sinusoidal table, RoPE, the key phase).
- ``cipherbook.experiments.norm``: normalisation (bf16 statistics, Pre-LN against Post-LN).
- ``cipherbook.experiments.bpe``: tokenisation (the BPE drills, small tokenizers, bits or bytes).
- ``cipherbook.experiments.blt``: the Byte Latent Transformer (entropy patches, windows, C5).
- ``cipherbook.experiments.training``: assembling and training the model (init, AdamW, bucketing).
- ``cipherbook.experiments.results``: results and the ablation (metrics, committed runs).
- ``cipherbook.experiments.broken``: broken models (the checks of ``cipherbook.broken``).
- ``cipherbook.experiments.common``: what several chapters share (the assignment's sizes from
  ``cipherlab.base.config.Config``, the sinusoidal table, the calibration runs, committed test records).

A chapter's cells import its module (``import cipherbook.experiments.norm as nrm``), call these
functions and print what they return; the viva's facts (``cipherbook.viva.facts``) call the same
functions, so the number in a sentence is the one the cell above it shows. The experiments import
the core and the analysis layer (``cipherlab.analysis.ablation``, ``cipherlab.analysis.attention_maps``,
``cipherlab.analysis.plan``), never ``cipherbook.viva``.
"""
