"""Facts for chapter 11 (broken models): the measurements its viva answers quote.

Each fact runs the same check of ``cipherlab.broken`` with the same arguments as the chapter's
cell, on the real module and on the broken variant, so an answer quotes the number the chapter
shows. The few trainings are tiny (one layer each side, width 32, tens of steps) and cached.
"""

from __future__ import annotations

import functools
import inspect
import math

from cipherlab import broken
from cipherlab.config import make_config
from cipherlab.tokenizers.bytes import VOCAB_SIZE

def _default(function, name: str):
    """The default value of one argument of a check, as the chapter's cell calls it."""
    return inspect.signature(function).parameters[name].default


@functools.cache
def _runs() -> dict:
    """The trainings of sections 11.1 and 11.2: the real model, no causal mask, no target shift."""
    return {"real": broken.train_and_decode(broken.tiny()),
            "no_mask": broken.train_and_decode(broken.tiny(broken.NoCausalMask)),
            "unshifted": broken.train_and_decode(broken.tiny(), steps=broken.SHIFT_STEPS, pair=broken.unshifted_pair)}


@functools.cache
def _pad() -> dict:
    return {"real": broken.pad_loss_gap(broken.masked_loss), "broken": broken.pad_loss_gap(broken.loss_counting_pad)}


FACTS = {
    # 11.1 the causal mask
    "tf_steps": lambda: _default(broken.train_and_decode, "steps"),
    "chance_acc": lambda: 1 / (ord("z") - ord("a") + 1),  # random lowercase lines
    "nomask_tf_acc": lambda: _runs()["no_mask"]["teacher_forced_acc"],
    "nomask_greedy_acc": lambda: _runs()["no_mask"]["greedy_acc"],
    "real_tf_acc": lambda: _runs()["real"]["teacher_forced_acc"],
    "real_greedy_acc": lambda: _runs()["real"]["greedy_acc"],
    "nomask_future_leak": lambda: broken.future_leak(broken.tiny(broken.NoCausalMask)),
    # 11.2 the target shift
    "shift_steps": lambda: broken.SHIFT_STEPS,
    "unshifted_train_loss": lambda: _runs()["unshifted"]["train_loss"],
    "unshifted_tf_loss": lambda: _runs()["unshifted"]["teacher_forced_loss"],
    "unshifted_greedy_acc": lambda: _runs()["unshifted"]["greedy_acc"],
    "chance_loss": lambda: math.log(VOCAB_SIZE),
    "unshifted_answer_share": lambda: broken.answer_in_input(broken.unshifted_pair),
    # 11.3 PAD in the loss
    "pad_loss_real": lambda: _pad()["real"]["loss"],
    "pad_loss_broken": lambda: _pad()["broken"]["loss"],
    "pad_loss_broken_longer": lambda: _pad()["broken"]["loss_longer"],
    "pad_share_longer": lambda: _pad()["broken"]["pad_share"],
    # 11.6 heads without transpose
    "heads_future_leak": lambda: broken.mha_future_leak(broken.tiny_attention(broken.HeadsWithoutTranspose)),
    "heads_future_leak_real": lambda: broken.mha_future_leak(broken.tiny_attention()),
    # 11.9 RoPE under the KV cache
    "cache_gap_real": lambda: broken.cache_gap(broken.tiny(pos_encoding="rope")),
    "cache_gap_broken": lambda: broken.cache_gap(broken.tiny(broken.RopeCacheWithoutOffset)),
    # 11.10 dropout at evaluation
    "eval_repeat_share": lambda: broken.repeat_gap(broken.decode_without_eval),
    "eval_dropout": lambda: broken.EVAL_DROPOUT,
    "cpu_dropout": lambda: make_config("c1", "cpu").dropout,
    "assignment_dropout": lambda: make_config("c1", "assignment").dropout,
    # 11.13 the BLT's own-patch mask
    "blt_leak_share": lambda: broken.blt_answer_leak(broken.tiny_blt(broken.OwnPatchBLT)),
}
