"""What checking a student's part and trying a ``--part`` before training both need.

``python -m cipherlab check`` (:mod:`cipherlab.student.check`) and the trial run of each ``--part``
class before training (:mod:`cipherlab.student.parts`) call a student's code on small random inputs
and turn what goes wrong into one line in the student's terms. Both draw the inputs with
:func:`randn`, which leaves the global random generator (hence a model's initial weights) as it was,
and both stop at :class:`Unfit`, whose message says what went wrong; the caller adds the part's name.
"""

from __future__ import annotations

import torch


class Unfit(Exception):
    """A check or a trial call cannot go on with a part (no q_proj to copy weights from, NaN on ordinary
    inputs, a call that raised); its message, in the student's terms, is the finding."""


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    """Unit-variance random values of ``shape``, the same for the same ``seed``, from a generator of their own."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
