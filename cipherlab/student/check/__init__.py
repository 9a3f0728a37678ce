"""Check a student's own components against cipherlab's reference modules and PyTorch's own.

    python -m cipherlab check PART FILE.py:NAME

loads NAME from FILE.py, runs the checks of PART on it and prints one line per check, PASS or FAIL,
with what is wrong in the student's terms ("scores are not divided by sqrt(d_k): largest weight 0.96
at d = 2048 where the reference gives 0.11"); exit 0 when every check passes, 1 otherwise.

    PART          NAME is                                       from Python
    attention     scaled dot-product attention (class or fn)    check.attention(obj)
    mha, gqa      a multi-head / grouped-query attention class  check.multi_head(cls, "mha" | "gqa")
    layernorm,    a norm class                                  check.norm(cls, "layernorm" | "rmsnorm")
    rmsnorm
    sinusoidal,   a position class                              check.positional(cls, "sinusoidal" | "rope")
    rope
    bpe           a BPE trainer and encoder (class or fn)       check.bpe(obj)
    patcher       the BLT's entropy patcher (fn)                check.patcher(fn)
    pooling       the BLT's patch pooling class                 check.pooling(cls)
    patch_mask    the BLT's patch-causal mask (fn)              check.patch_mask(fn)
    decoding      a model (class or factory) with a KV cache    check.decoding(obj)

Each function's docstring gives the interface (the same as cipherlab's reference module) and returns
a :class:`Report`. Masks are bool and True = BLOCKED, as everywhere in cipherlab
(``F.scaled_dot_product_attention`` uses True = keep). An object that cannot even be called as the
interface says raises :class:`InterfaceError`, one line naming the call and the fix; a check that
raises inside is a FAIL naming the exception. The reference agrees with PyTorch to FLOAT32_TOL in
float32; bfloat16 outputs are compared to BF16_TOL. The BPE check compares with the textbook loop,
cipherlab's naive learner (:mod:`cipherlab.data.tokenizers.bpe.naive`), as well as with cipherlab's
BPETokenizer; its speed check is the one timing, and fails only an encoder grossly slower than cipherlab's.

A part is built with exactly the arguments ``train`` passes (an MHA gets ``dropout=``), and called on copies
of its inputs: an in-place change to the caller's tensors is its own FAIL (``inputs``). Beyond the main output,
the checks try what training does to a part: one backward pass against the reference's with the same weights
and inputs (:mod:`~cipherlab.student.check.gradients`: the gradients of the inputs and of every parameter, a
parameter that gets none named, a backward that raises a FAIL naming the operation's error), two calls in eval
mode (dropout left on is named as such, and stops the checks it would confuse), stress inputs (scores of 1e4,
all-zero and constant tokens, positions up to the corpus's longest line and past a table's ``max_len``), a
norm's randomised gain and shift and its parameters by name, RoPE's returned keys at an offset and under a
cache, BPE's decode on its own, then on runs of one symbol and bit strings. An exception inside a check is one
line naming the call that raised. A cause is named only when it is tested: the reference with that one mistake
(MHA_MISTAKES, PAIR_COUNTS, MERGES) reproduces the part's output; otherwise the line says where the outputs
differ. Beyond PASS and FAIL, WARN passes with a caveat (float64 inputs computed in float32, a complex buffer
that ``.to(torch.float64)`` drops, a static cross-attention cache never filled: the assignment never trains in
float64) and SKIP says why a check could not run (a layer with no ``cache=``, which train never gives one). A
class defining a name nn.Module already has (``_apply``, ``train``, ...) is refused before any check.
The conventions the book allows pass with a note: interleaved RoPE pairs, [sin | cos] sinusoids, eps
outside the square root, an attention that also returns its weights.

The package, by part: ``report`` (findings, reports, interface errors, nn.Module internals refused),
``compare`` (input sizes, tolerances, the verdicts the parts share), ``gradients`` (the backward pass), ``attention_layers`` (attention,
multi_head, the multi-head mistakes), ``norms``, ``positions`` (sinusoidal and RoPE), ``tokenizer`` (bpe,
the BPE mistakes), ``blt`` (patcher, pooling, patch_mask), ``cached_decoding`` (decoding) and ``target``
(load_target, a student's FILE.py:NAME); the helpers it shares with ``--part`` are
:mod:`cipherlab.student.trials`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from cipherlab.student.check.attention_layers import (MHA_INTERFACE, MHA_MISTAKES, PROJECTIONS, SCALING_D, SCALING_L,
                                                      SDPA_INTERFACE, SHIFT, attention, mha_variant, multi_head)
from cipherlab.student.check.blt import (MAX_PATCHES, PATCH_MASK_INTERFACE, PATCHER_INTERFACE, POOLING_INTERFACE,
                                         patch_mask, patcher, pooling)
from cipherlab.student.check.cached_decoding import BLT_SIZES, DECODE_TOL, DECODING_INTERFACE, DECODING_SIZES, decoding
from cipherlab.student.check.compare import B, BF16_TOL, D_MODEL, DK, DV, FLOAT32_TOL, H, L, LK, LQ, N_HEADS, N_KV_HEADS
from cipherlab.student.check.norms import GAINS, NORM_INTERFACE, SHIFTS, norm
from cipherlab.student.check.positions import LONG, POSITION_INTERFACES, positional
from cipherlab.student.check.report import STOPPERS, Check, Finding, InterfaceError, NotWritten, Report
from cipherlab.student.check.target import load_target
from cipherlab.student.check.tokenizer import (BPE_CORPUS, BPE_INTERFACE, BPE_NOISE_S, BPE_SLOWEST, BPE_SPEED_CHARS,
                                               BPE_UNSEEN, BPE_VOCAB, MERGES, PAIR_COUNTS, RUNS_CORPUS, RUNS_UNSEEN,
                                               RUNS_VOCAB, Pair, bpe, bpe_merges, distinct_pairs, merge_first_only,
                                               merge_left_to_right, merge_right_to_left, non_overlapping_pairs,
                                               overlapping_pairs, replay)

PARTS: dict[str, Callable[[object], Report]] = {
    "attention": attention,
    "mha": partial(multi_head, kind="mha"),
    "gqa": partial(multi_head, kind="gqa"),
    "layernorm": partial(norm, kind="layernorm"),
    "rmsnorm": partial(norm, kind="rmsnorm"),
    "sinusoidal": partial(positional, kind="sinusoidal"),
    "rope": partial(positional, kind="rope"),
    "bpe": bpe,
    "patcher": patcher,
    "pooling": pooling,
    "patch_mask": patch_mask,
    "decoding": decoding,
}

__all__ = [
    # the parts by name, and each part's check
    "PARTS", "attention", "multi_head", "norm", "positional", "bpe", "patcher", "pooling", "patch_mask", "decoding",
    "load_target",
    # findings and reports
    "Check", "Finding", "InterfaceError", "NotWritten", "Report", "STOPPERS",
    # sizes and tolerances
    "B", "BF16_TOL", "D_MODEL", "DK", "DV", "FLOAT32_TOL", "H", "L", "LK", "LQ", "N_HEADS", "N_KV_HEADS",
    # each part's interface and inputs
    "MHA_INTERFACE", "PROJECTIONS", "SCALING_D", "SCALING_L", "SDPA_INTERFACE", "SHIFT", "GAINS", "NORM_INTERFACE",
    "SHIFTS", "LONG", "POSITION_INTERFACES", "BPE_CORPUS", "BPE_INTERFACE", "BPE_NOISE_S", "BPE_SLOWEST",
    "BPE_SPEED_CHARS", "BPE_UNSEEN", "BPE_VOCAB", "Pair", "RUNS_CORPUS", "RUNS_UNSEEN", "RUNS_VOCAB", "MAX_PATCHES",
    "PATCH_MASK_INTERFACE", "PATCHER_INTERFACE", "POOLING_INTERFACE", "BLT_SIZES", "DECODE_TOL", "DECODING_INTERFACE",
    "DECODING_SIZES",
    # the known mistakes
    "MHA_MISTAKES", "mha_variant", "MERGES", "PAIR_COUNTS", "bpe_merges", "distinct_pairs", "merge_first_only",
    "merge_left_to_right", "merge_right_to_left", "non_overlapping_pairs", "overlapping_pairs", "replay",
]
