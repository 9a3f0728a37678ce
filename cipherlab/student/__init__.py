"""A student's own code: their attention, norm or positions inside the model (``parts``), and
the checker that compares each part with cipherlab's and PyTorch's (``check``).

Imports ``cipherlab.models``, ``cipherlab.base`` and ``cipherlab.data``."""
