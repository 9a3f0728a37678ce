"""The broken-models chapter's experiments: the measurements its facts quote.

Each function runs the same check of ``cipherbook.broken`` with the same arguments as the chapter's
cell, on the real module and on the broken variant, so an answer quotes the number the chapter
shows. The few trainings are tiny (one layer each side, width 32, tens of steps) and cached.
"""

from __future__ import annotations

import functools
import inspect

from cipherbook import broken


def default_argument(function, name: str):
    """The default value of one argument of a check, as the chapter's cell calls it."""
    return inspect.signature(function).parameters[name].default


@functools.cache
def trainings() -> dict:
    """The trainings of sections 11.1 and 11.2: the real model, no causal mask, no target shift."""
    return {"real": broken.train_and_decode(broken.tiny()),
            "no_mask": broken.train_and_decode(broken.tiny(broken.NoCausalMask)),
            "unshifted": broken.train_and_decode(broken.tiny(), steps=broken.SHIFT_STEPS, pair=broken.unshifted_pair)}


@functools.cache
def pad_losses() -> dict:
    return {"real": broken.pad_loss_gap(broken.masked_loss), "broken": broken.pad_loss_gap(broken.loss_counting_pad)}
