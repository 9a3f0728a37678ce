"""From data to a trained model and its scores: strings to tensors and the model built
(``codec``), save and load with checksums (``checkpoint``; the checks of a file read back,
``integrity``), training (``train``; a run's progress, resuming and messages, ``runs``), greedy
and beam decoding (``decode``), the metrics (``metrics``), a checkpoint scored on test lines
(``evaluate``), the one record every run writes (``record``) and a run logged to Weights & Biases
(``tracking``; wandb imported only when asked for).

Imports ``cipherlab.models``, ``cipherlab.base``, ``cipherlab.data`` and ``cipherlab.student``."""
