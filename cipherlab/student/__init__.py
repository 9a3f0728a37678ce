"""A student's own code: their attention, norm or positions inside the model (``parts``), the
checker that compares each part with cipherlab's and PyTorch's (``check``), and what the two share
(``trials``).

Imports ``cipherlab.models``, ``cipherlab.base`` and ``cipherlab.data``."""
