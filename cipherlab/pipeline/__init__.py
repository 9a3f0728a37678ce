"""From data to a trained model and its scores, the mechanism only: strings to tensors and the model built
(``codec``), the training loop (``train``) and what it saves (``checkpoint``), greedy and beam decoding
(``decode``) and the metrics (``metrics``). The run around them (files, checks, messages) is ``cipherlab.runner``.

Imports ``cipherlab.models``, ``cipherlab.base`` and ``cipherlab.data``."""
