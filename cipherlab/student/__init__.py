"""A student's own code: their attention, norm or positions inside the model (``parts``), the
checker that compares each part with cipherlab's and PyTorch's (``check``), the check of a whole
course hand-in, its layout and its parts (``handin``), and what the first two share (``trials``).

Imports ``cipherlab.models``, ``cipherlab.base`` and ``cipherlab.data``."""
