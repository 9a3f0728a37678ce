"""Files and runs, around the core's mechanism: one training run from a configuration (``training``) and what
the trainer asks of it (``hooks``: resuming's checks, mid-epoch validation, the divergence advice, the heartbeat),
checkpoints and model files read back with every check (``integrity``, ``trained``), a checkpoint scored on test
lines (``evaluate``), the one record every run writes (``record``), the one lock (``lock``), one-line errors
(``errors``), Weights & Biases (``tracking``; wandb imported only when asked for) and the Hugging Face hub (``hub``).

Imports ``cipherlab.pipeline``, ``cipherlab.data``, ``cipherlab.base`` and ``cipherlab.models``."""
