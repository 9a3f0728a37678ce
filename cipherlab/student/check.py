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
float32; bfloat16 outputs are compared to BF16_TOL. The BPE check compares with a textbook loop
written here, independently of cipherlab's learner, as well as with cipherlab's BPETokenizer; its
speed check is the one timing, and fails only an encoder grossly slower than cipherlab's.

Beyond the main output, the checks try what training does to a part: two calls in eval mode (dropout
left on is named as such, and stops the checks it would confuse), the part moved with
``.to(torch.float64)``, stress inputs (scores of 1e4, all-zero and constant tokens, positions up to
200), a norm's gain and shift as built, RoPE's returned keys at an offset and under a cache, BPE on
runs of one symbol and bit strings. When a part differs from the reference, the known mistakes (a
section below, each the reference with one mistake) are run on the same inputs and the one it agrees with is named. A
class defining a name nn.Module already has (``_apply``, ``train``, ...) is refused before any check.
The conventions the book allows pass with a note: interleaved RoPE pairs, [sin | cos] sinusoids, eps
outside the square root, an attention that also returns its weights.
"""

from __future__ import annotations

import copy
import importlib.machinery
import importlib.util
import inspect
import itertools
import math
import operator
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from cipherlab.base.errors import require_file, why
from cipherlab.models.attention import (KVCache, MultiHeadAttention, ScaledDotProductAttention, causal_mask,
                                        padding_mask)
from cipherlab.models.blt import BLTModel, ByteEntropyModel, PatchPooling, patch_causal_mask, patch_membership
from cipherlab.models.norm import NORMS
from cipherlab.models.positional import (RotaryPositionalEmbedding, SinusoidalPositionalEncoding,
                                         inverse_frequencies, rotate_half)
from cipherlab.student.parts import internals_refusal, overridden_internals, shadowed_internals
from cipherlab.data.tokenizers.bpe import BPETokenizer
from cipherlab.data.tokenizers.bytes import BOS_ID, SPECIAL_IDS, VOCAB_SIZE
from cipherlab.data.tokenizers.pretokenize import split_plaintext

FLOAT32_TOL = 1e-5  # atol and rtol against the reference in float32
BF16_TOL = 3e-2  # atol and rtol against the reference in bfloat16 (8 significant bits)

# Small sizes: Lq != Lk and dv != d so that a swapped axis shows in the shape.
B, H, LQ, LK, DK, DV, L = 2, 2, 5, 7, 8, 6, 6
D_MODEL, N_HEADS, N_KV_HEADS = 32, 4, 2
SCALING_D, SCALING_L = 2048, 64  # where a missing 1/sqrt(d) saturates the softmax


# --------------------------------------------------------------------------- findings and reports


@dataclass
class Finding:
    """One check: its name, whether it passed, and what it saw."""

    name: str
    passed: bool
    message: str

    def __str__(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'}  {self.name}: {self.message}"


@dataclass
class Report:
    """The findings of one part's checks on one object; ``passed`` when every finding passed."""

    part: str
    subject: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(f.passed for f in self.findings)

    def __getitem__(self, name: str) -> Finding:
        """The finding of the check called ``name``; KeyError if it did not run."""
        found = next((f for f in self.findings if f.name == name), None)
        if found is None:
            raise KeyError(f"no check {name!r} ran; the findings are {[f.name for f in self.findings]}")
        return found

    def __str__(self) -> str:
        n = sum(f.passed for f in self.findings)
        lines = [f"check {self.part}: {self.subject}", *(f"  {f}" for f in self.findings),
                 f"{n} of {len(self.findings)} checks pass"]
        return "\n".join(lines)


class InterfaceError(ValueError):
    """The object cannot be built or called as its part's interface says."""


class NotWritten(InterfaceError):
    """The object raised NotImplementedError: a stub still to be filled in (the chapters' exercises
    catch it and check cipherlab's own module instead)."""


class _Unfit(Exception):
    """A check cannot compare (e.g. no q_proj to copy weights from); its message is the finding."""


Check = Callable[[], tuple[bool, str]]
STOPPERS = ("shape", "eval mode")  # a failure of one of these stops the rest of a part's checks


def _run(part: str, subject: str, checks: list[tuple[str, Check]]) -> Report:
    """Run each (name, check); an exception is a FAIL naming it. A wrong shape stops the rest."""
    report = Report(part, subject)
    for name, check in checks:
        try:
            with torch.no_grad():
                passed, message = check()
        except _Unfit as e:
            passed, message = False, str(e)
        except Exception as e:
            passed, message = False, f"raised {why(e)}"
        report.findings.append(Finding(name, passed, message))
        if name in STOPPERS and not passed:
            break  # every other check needs the shape right, and the same output for the same input, first
    return report


def _raised(e: Exception, what: str, interface: str) -> InterfaceError:
    """The InterfaceError (NotWritten for a stub's NotImplementedError) naming the call that raised ``e``."""
    kind = NotWritten if isinstance(e, NotImplementedError) else InterfaceError
    return kind(f"{what} raised {why(e)}; the interface is {interface}")


def _interface_build(build: Callable, what: str, interface: str):
    """``build()``, a constructor call; an exception is an InterfaceError naming the call."""
    try:
        return build()
    except Exception as e:
        raise _raised(e, what, interface) from None


def _interface(call: Callable, what: str, interface: str):
    """``call()``, which must return a tensor (or a tuple of them); anything else is an InterfaceError."""
    try:
        with torch.no_grad():
            out = call()
    except Exception as e:
        raise _raised(e, what, interface) from None
    parts = out if isinstance(out, tuple) else (out,)
    if not parts or not all(isinstance(t, torch.Tensor) for t in parts):
        raise InterfaceError(f"{what} returned {type(out).__name__}, not a tensor; the interface is {interface}")
    return out


def _finite(*outs: torch.Tensor):
    """``outs`` (one tensor, or the tuple), unless one holds NaN or inf: then _Unfit, as no other check can read it."""
    if not all(torch.isfinite(t).all() for t in outs):
        raise _Unfit("the output holds NaN or inf on ordinary inputs (unit variance, no mask); "
                     "look for a division by zero, a log of 0 or a softmax over all -inf")
    return outs[0] if len(outs) == 1 else outs


def _label(obj) -> str:
    return getattr(obj, "__name__", type(obj).__name__)


def _randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _gap(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest |a - b| (inf where a shape differs or a NaN appears)."""
    if a.shape != b.shape:
        return math.inf
    gap = (a.float() - b.float()).abs().max().item()
    return math.inf if math.isnan(gap) else gap


def _close(a: torch.Tensor, b: torch.Tensor, tol: float = FLOAT32_TOL) -> bool:
    return a.shape == b.shape and torch.allclose(a.float(), b.float(), rtol=tol, atol=tol)


def _tolerance_used(a: torch.Tensor, b: torch.Tensor, tol: float) -> float:
    """The largest |a - b| / (tol + tol |b|), the share of _close's tolerance used (over 1: not close)."""
    if a.shape != b.shape:
        return math.inf
    used = ((a.float() - b.float()).abs() / (tol + tol * b.float().abs())).max().item()
    return math.inf if math.isnan(used) else used


def _refuse_internals(obj, built=None) -> None:
    """InterfaceError when class ``obj`` (or the module ``built`` from it) defines a name nn.Module
    already has (a method _apply, train, to ...): PyTorch calls its own in .to(), .eval(), training
    and checkpoints, and gets the student's instead."""
    names = overridden_internals(obj) if inspect.isclass(obj) else []
    names += shadowed_internals(built) if built is not None else []
    if names:
        raise InterfaceError(f"{_label(obj)} {internals_refusal(names)}")


def _deterministic(call: Callable[[], torch.Tensor]) -> tuple[bool, str]:
    """PASS when two calls on the same input give the same output: dropout is off in eval mode."""
    first, second = call(), call()
    if torch.equal(first, second):
        return True, "two calls on the same input give the same output: nothing random in eval mode"
    return False, (f"two calls on the same input differ by up to {_gap(first, second):.2g}: dropout active in eval "
                   "mode (F.dropout's training defaults to True); use an nn.Dropout module, which .eval() switches "
                   "off, or F.dropout(x, p, training=self.training)")


def _float64_verdict(out: torch.Tensor, expected: torch.Tensor) -> tuple[bool, str]:
    """PASS when a float64 run gives float64 within FLOAT32_TOL of the expected output."""
    if out.dtype != torch.float64:
        return False, (f"float64 inputs give a {str(out.dtype)[6:]} output; return the input's dtype (compute in "
                       "float32 if you like, then .to(x.dtype))")
    said = (f"max difference {_gap(out, expected):.1e}, {_tolerance_used(out, expected, FLOAT32_TOL):.0%} of the "
            f"tolerance there, {FLOAT32_TOL:g} + {FLOAT32_TOL:g} x |reference|")
    if _close(out, expected):
        return True, f"moved with .to(torch.float64), float64 in, float64 out, as the reference ({said})"
    return False, f"moved with .to(torch.float64), differs from the reference ({said})"


def _in_float64(module: nn.Module) -> nn.Module:
    """A copy of ``module`` moved with .to(torch.float64); _Unfit naming the exception if the move fails."""
    try:
        return copy.deepcopy(module).to(torch.float64)
    except Exception as e:
        raise _Unfit(f"moving it with .to(torch.float64) raised {why(e)}; keep tensors in parameters and buffers "
                     "(register_buffer), which .to() moves") from None


def _name_the_bug(out: torch.Tensor, suspects: dict[str, torch.Tensor]) -> str:
    """The suffix "; BUG" for the first suspect (BUG -> its output) that ``out`` matches, else an empty string."""
    return next((f"; {bug}" for bug, wrong in suspects.items() if _close(out, wrong, 1e-4)), "")


# --------------------------------------------------------------------------- known mistakes; nn.Module internals
#
# When a part differs from the reference, the variants below (each the reference with one known mistake) run on the
# same inputs, and the one the part agrees with is named ("use repeat_interleave: ..."). They are written here,
# independently of the parts they diagnose.

# --------------------------------------------------------------------------- multi-head attention, one mistake each

MHA_MISTAKES = {  # name: what is wrong and the fix, as check prints it
    "repeat": ("K/V heads are shared with .repeat (or an expand on the wrong axis), giving the order kv0, kv1, "
               "kv0, kv1 where query heads 0 and 1 must both read kv0: use repeat_interleave(n_heads // n_kv_heads, "
               "dim=1), as .repeat interleaves the groups wrongly"),
    "sqrt_d_model": ("scores are divided by sqrt(d_model), not sqrt(head_dim): each head's dot product sums head_dim "
                     "terms; divide by math.sqrt(head_dim)"),
    "no_scale": "scores are not divided by sqrt(head_dim); divide q k^T by math.sqrt(head_dim)",
    "merge_no_transpose": ("the heads are merged without the transpose: (B, H, L, d).reshape(B, L, D) mixes "
                           "positions; merge with out.transpose(1, 2).reshape(B, L, D)"),
    "split_no_transpose": ("the heads are split without the transpose: .view(B, H, L, d) mixes positions; split with "
                           ".view(B, L, H, d).transpose(1, 2)"),
    "v_from_k": "the values are projected with k_proj; project them with v_proj",
    "no_o_proj": "o_proj is never applied: the concatenated heads must go through o_proj",
    "mask_on_queries": ("the padding mask blocks queries (it is transposed to (B, 1, Lk, 1)); a padding mask "
                        "(B, 1, 1, Lk) blocks PAD keys, the last axis of the scores: use it as it is"),
    "mask_keep": ("the mask is read as True = keep; cipherlab's masks are True = BLOCKED (F.scaled_dot_product_"
                  "attention's are the opposite), so fill the scores where mask is True"),
    "softmax_queries": "the softmax runs over the queries (dim=-2); take it over the keys, dim=-1",
}


def mha_variant(module: nn.Module, n_heads: int, mistake: str | None, query, key, value, mask=None):
    """(B, Lq, D): multi-head attention with ``module``'s q_proj, k_proj, v_proj and o_proj, right
    (``mistake`` None) or with one of MHA_MISTAKES. K/V heads: k_proj's width over head_dim."""
    B, Lq, D = query.shape
    head_dim = D // n_heads
    n_kv = module.k_proj.out_features // head_dim

    def split(x, n):
        if mistake == "split_no_transpose":
            return x.reshape(B, n, x.size(1), head_dim)
        return x.view(B, x.size(1), n, head_dim).transpose(1, 2)

    q = split(module.q_proj(query), n_heads)
    k = split(module.k_proj(key), n_kv)
    v = split((module.k_proj if mistake == "v_from_k" else module.v_proj)(value), n_kv)
    group = n_heads // n_kv
    if mistake == "repeat":
        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
    else:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scale = {"sqrt_d_model": math.sqrt(D), "no_scale": 1.0}.get(mistake, math.sqrt(head_dim))
    scores = q @ k.transpose(-2, -1) / scale
    if mask is not None:
        if mistake == "mask_keep":
            mask = ~mask
        elif mistake == "mask_on_queries" and mask.size(-2) == 1:
            mask = mask.transpose(-2, -1)
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    out = scores.softmax(-2 if mistake == "softmax_queries" else -1) @ v  # (B, H, Lq, d)
    out = out.reshape(B, Lq, D) if mistake == "merge_no_transpose" else out.transpose(1, 2).reshape(B, Lq, D)
    return out if mistake == "no_o_proj" else module.o_proj(out)


# --------------------------------------------------------------------------- BPE, one mistake each

def overlapping_pairs(symbols) -> list[Pair]:
    """Every adjacent pair, overlapping ones too: ('a', 'a') twice in 'aaa'. The right count."""
    return list(zip(symbols, symbols[1:]))


def non_overlapping_pairs(symbols) -> list[Pair]:
    """As str.count counts: a pair of two equal symbols consumes both, ('a', 'a') once in 'aaa'."""
    out, i = [], 0
    while i + 1 < len(symbols):
        out.append((symbols[i], symbols[i + 1]))
        i += 2 if symbols[i] == symbols[i + 1] else 1
    return out


def distinct_pairs(symbols) -> list[Pair]:
    """Each distinct pair once per pre-token (a set)."""
    return list(dict.fromkeys(zip(symbols, symbols[1:])))


def merge_left_to_right(symbols, pair: Pair) -> tuple[str, ...]:
    """Every occurrence of ``pair`` joined, scanning left to right. The right merge."""
    out, i = [], 0
    while i < len(symbols):
        if tuple(symbols[i:i + 2]) == pair:
            out.append(pair[0] + pair[1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return tuple(out)


def merge_right_to_left(symbols, pair: Pair) -> tuple[str, ...]:
    """Every occurrence joined scanning from the right: 'aaa' -> ('a', 'aa')."""
    symbols, out, i = tuple(symbols), [], len(symbols) - 1
    while i >= 0:
        if i > 0 and (symbols[i - 1], symbols[i]) == pair:
            out.append(pair[0] + pair[1])
            i -= 2
        else:
            out.append(symbols[i])
            i -= 1
    return tuple(out[::-1])


def merge_first_only(symbols, pair: Pair) -> tuple[str, ...]:
    """Only the first occurrence of ``pair`` joined."""
    symbols = tuple(symbols)
    for i in range(len(symbols) - 1):
        if symbols[i:i + 2] == pair:
            return symbols[:i] + (pair[0] + pair[1],) + symbols[i + 2:]
    return symbols


PAIR_COUNTS: dict[str, Callable] = {
    "overlapping pairs are counted once: ('a', 'a') occurs twice in 'aaa' (positions 0-1 and 1-2); count every "
    "adjacent pair, zip(symbols, symbols[1:])": non_overlapping_pairs,
    "each pair is counted once per pre-token (a set); count every occurrence, weighted by the pre-token's "
    "frequency": distinct_pairs,
}
MERGES: dict[str, Callable] = {
    "pairs are merged from right to left: 'aaa' becomes 'a' + 'aa'; scan left to right, as the merges were "
    "learned": merge_right_to_left,
    "only the first occurrence of a pair in a pre-token is merged; merge every occurrence, left to right":
    merge_first_only,
}


def bpe_merges(pieces: Counter, n_merges: int, pairs: Callable = overlapping_pairs,
               merge: Callable = merge_left_to_right) -> list[Pair]:
    """The merges the textbook loop learns from pre-token counts ``pieces`` with the given pair
    counting and merging (ties to the smallest pair)."""
    words = Counter({tuple(p): n for p, n in pieces.items()})
    merges: list[Pair] = []
    while len(merges) < n_merges:
        counts = Counter()
        for symbols, n in words.items():
            for pair in pairs(symbols):
                counts[pair] += n
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        merges.append(best)
        merged = Counter()
        for symbols, n in words.items():
            merged[merge(symbols, best)] += n
        words = merged
    return merges


def replay(pieces: list[str], merges: list[Pair], merge: Callable = merge_left_to_right) -> list[str]:
    """The tokens of ``pieces`` with every merge replayed in order, within each piece."""
    tokens = []
    for piece in pieces:
        symbols = tuple(piece)
        for pair in merges:
            symbols = merge(symbols, pair)
        tokens.extend(symbols)
    return tokens


# --------------------------------------------------------------------------- scaled dot-product attention

SDPA_INTERFACE = ("fn(q, k, v, mask=None) with q (B, H, Lq, d), k (B, H, Lk, d), v (B, H, Lk, dv), mask bool "
                  "broadcast to (B, H, Lq, Lk), True = blocked -> (B, H, Lq, dv); a class is built with no arguments")
_REFERENCE_SDPA = ScaledDotProductAttention().eval()


def attention(obj) -> Report:
    """Check scaled dot-product attention: softmax(q k^T / sqrt(d) + mask) v.

    ``obj``: a function or nn.Module instance called as ``obj(q, k, v, mask=None)``, or a class built
    with no arguments (dropout off by default or in eval mode) like cipherlab's
    ScaledDotProductAttention. q (B, H, Lq, d), k (B, H, Lk, d), v (B, H, Lk, dv) -> (B, H, Lq, dv).
    mask: bool, True = BLOCKED, broadcast against the scores (B, H, Lq, Lk); a query whose keys are
    all blocked must output zeros (no NaN), as cipherlab and F.scaled_dot_product_attention do.
    """
    fn = obj
    _refuse_internals(obj)
    if inspect.isclass(obj):
        fn = _interface_build(lambda: obj(), f"{obj.__name__}()", SDPA_INTERFACE)
        _refuse_internals(obj, fn)
    if isinstance(fn, nn.Module):
        fn.eval()
    q, k, v = _qkv()
    out = _interface(lambda: fn(q, k, v, None), f"{_label(obj)}(q, k, v, mask=None)", SDPA_INTERFACE)
    note = ""
    if isinstance(out, tuple):  # (output, weights), as nn.MultiheadAttention returns: the output is checked
        fn, note = partial(_first, fn), "; it returns a tuple, (output, weights?): its first tensor is checked"
    return _run("attention", _label(obj), [
        ("shape", partial(_sdpa_shape, fn, note)),
        ("eval mode", lambda: _deterministic(lambda: fn(*_qkv(), None))),
        ("weights", partial(_sdpa_rows, fn)),
        ("scaling", partial(_sdpa_scaling, fn)),
        ("reference", partial(_sdpa_reference, fn)),
        ("padding mask", partial(_sdpa_mask, fn, "padding")),
        ("causal mask", partial(_sdpa_mask, fn, "causal")),
        ("causality", partial(_sdpa_causality, fn)),
        ("all-blocked row", partial(_sdpa_blind_row, fn)),
        ("large scores", partial(_sdpa_large, fn)),
        ("bfloat16", partial(_sdpa_bf16, fn)),
        ("float64", lambda: _float64_verdict(fn(*(t.double() for t in _qkv()), None), _REFERENCE_SDPA(*_qkv()))),
    ])


def _first(fn, *args):
    """The first tensor of what ``fn`` returns (for an attention returning (output, weights))."""
    out = fn(*args)
    return out[0] if isinstance(out, tuple) else out


def _sdpa_large(fn) -> tuple[bool, str]:
    q, k, v = _qkv()
    q, k = q * 100, k * 100  # scores q.k / sqrt(d) of about 1e4
    out, ref = fn(q, k, v, None), F.scaled_dot_product_attention(q, k, v)
    if not torch.isfinite(out).all():
        return False, ("scores of about 1e4 give NaN or inf: exp(score) overflows float32 beyond 88; subtract each "
                       "row's max before exp, exp(s - s.max(-1, keepdim=True)), or call torch.softmax, which does")
    gap = _gap(out, ref)
    if gap > 1e-4:
        return False, f"with scores of about 1e4, differs from F.scaled_dot_product_attention by {gap:.2g}"
    return True, "scores of about 1e4 give the reference's output: the softmax is stable (max subtracted)"


def _qkv(lq: int = LQ, lk: int = LK, d: int = DK, dv: int = DV, seed: int = 0):
    """Unit-variance q (B, H, lq, d), k (B, H, lk, d), v (B, H, lk, dv)."""
    return _randn(B, H, lq, d, seed=seed), _randn(B, H, lk, d, seed=seed + 1), _randn(B, H, lk, dv, seed=seed + 2)


def _weights(fn, q: torch.Tensor, k: torch.Tensor, mask=None) -> torch.Tensor:
    """(B, H, Lq, Lk) attention weights of ``fn``, read off as its output for v = the identity (W I = W)."""
    lk = k.size(-2)
    eye = torch.eye(lk, dtype=q.dtype).expand(*k.shape[:-1], lk).contiguous()  # (B, H, Lk, Lk)
    return fn(q, k, eye, mask)


def _sdpa_shape(fn, note: str = "") -> tuple[bool, str]:
    q, k, v = _qkv()
    out = _finite(fn(q, k, v, None))
    expected = (B, H, LQ, DV)
    passed = tuple(out.shape) == expected and out.dtype == torch.float32
    return passed, (f"output {tuple(out.shape)} {str(out.dtype)[6:]} for q {tuple(q.shape)}, k {tuple(k.shape)}, "
                    f"v {tuple(v.shape)}" + ("" if passed else f"; expected {expected} float32") + note)


def _sdpa_rows(fn) -> tuple[bool, str]:
    w = _weights(fn, *_qkv()[:2])  # (B, H, Lq, Lk)
    rows, cols = w.sum(-1), w.sum(-2)
    if _close(rows, torch.ones_like(rows), 1e-4):
        return True, f"each query's weights sum to 1 over its {LK} keys"
    if _close(cols, torch.ones_like(cols), 1e-4):
        return False, ("each KEY's weights sum to 1 over the queries: the softmax runs over the query axis "
                       "(dim=-2); take it over the keys, softmax(scores, dim=-1)")
    return False, (f"a query's weights sum to {rows.min().item():.3f} .. {rows.max().item():.3f}, not 1: "
                   "apply a softmax over the keys (dim=-1) to the scores")


def _largest_weight(fn, q, k) -> float:
    """A query's largest attention weight, averaged over the queries (1 = one-hot rows)."""
    return _weights(fn, q, k).amax(-1).mean().item()


def _sdpa_scaling(fn) -> tuple[bool, str]:
    q, k = _randn(1, 1, SCALING_L, SCALING_D), _randn(1, 1, SCALING_L, SCALING_D, seed=1)
    ours, ref = _largest_weight(fn, q, k), _largest_weight(_REFERENCE_SDPA, q, k)
    seen = f"largest weight {ours:.2f} at d = {SCALING_D} where the reference gives {ref:.2f}"
    if abs(ours - ref) <= 0.05:
        return True, f"scores divided by sqrt(d_k): largest weight {ours:.2f} at d = {SCALING_D}, as the reference"
    if ours > ref:
        return False, (f"scores are not divided by sqrt(d_k): {seen} (the softmax saturates to one-hot rows and "
                       "passes almost no gradient); divide q k^T by math.sqrt(q.size(-1))")
    return False, f"scores are shrunk by more than sqrt(d_k) (divided by d_k?): {seen}; divide by math.sqrt(d_k)"


def _sdpa_suspects(q, k, v) -> dict[str, torch.Tensor]:
    """The outputs of the usual wrong formulas, by the bug they have."""
    scores, d = q @ k.transpose(-2, -1), q.size(-1)
    return {"scores are not divided by sqrt(d_k)": scores.softmax(-1) @ v,
            "scores are divided by d_k, not sqrt(d_k)": (scores / d).softmax(-1) @ v,
            "the softmax runs over the queries (dim=-2), not the keys": (scores / math.sqrt(d)).softmax(-2) @ v}


def _sdpa_reference(fn) -> tuple[bool, str]:
    q, k, v = _qkv()
    out = fn(q, k, v, None)
    gaps = _gap(out, _REFERENCE_SDPA(q, k, v)), _gap(out, F.scaled_dot_product_attention(q, k, v))
    said = (f"cipherlab's ScaledDotProductAttention (max difference {gaps[0]:.1e}) and "
            f"F.scaled_dot_product_attention ({gaps[1]:.1e}), tolerance {FLOAT32_TOL:g}")
    if max(gaps) <= FLOAT32_TOL:
        return True, f"agrees with {said}"
    return False, f"differs from {said}" + _name_the_bug(out, _sdpa_suspects(q, k, v))


def _sdpa_mask(fn, kind: str) -> tuple[bool, str]:
    if kind == "padding":
        q, k, v = _qkv()
        ids = torch.tensor([[1] * 4 + [0] * 3, [1] * LK])  # row 0: its last 3 keys are PAD
        mask = padding_mask(ids, 0)  # (B, 1, 1, Lk)
    else:
        q, k, v = _qkv(L, L)
        mask = causal_mask(L)  # (1, 1, L, L)
    out = fn(q, k, v, mask)
    gap = _gap(out, F.scaled_dot_product_attention(q, k, v, attn_mask=~mask))
    if gap <= FLOAT32_TOL and _gap(out, _REFERENCE_SDPA(q, k, v, mask)) <= FLOAT32_TOL:
        return True, f"with a {kind} mask, agrees with F.scaled_dot_product_attention and the reference"
    said = f"with a {kind} mask, differs from F.scaled_dot_product_attention by {gap:.2g}: "
    if _gap(fn(q, k, v, None), _REFERENCE_SDPA(q, k, v)) > FLOAT32_TOL:
        return False, said + "it differs without a mask too; fix that first (see 'reference')"
    return False, said + _mask_diagnosis(_weights(fn, q, k, mask), mask.expand(B, H, q.size(-2), k.size(-2)))


def _mask_diagnosis(w: torch.Tensor, mask: torch.Tensor) -> str:
    """What the weights ``w`` (B, H, Lq, Lk) under ``mask`` (True = blocked) say about how the mask was used."""
    blocked = w.masked_fill(~mask, 0).abs().max().item()
    allowed = w.masked_fill(mask, 0).abs().max().item()
    rows = w.sum(-1)  # (B, H, Lq)
    if blocked > 1e-6 and allowed < 1e-6:
        return ("only blocked keys get weight: the mask is read as True = keep; cipherlab's masks are True = "
                "BLOCKED (F.scaled_dot_product_attention's are the opposite), so fill the scores where mask is True")
    if blocked > 1e-6:
        return (f"blocked keys get weights up to {blocked:.2f}: the mask is not applied; fill the blocked scores "
                "with torch.finfo(scores.dtype).min before the softmax")
    if rows.min().item() < 1 - 1e-4:
        return (f"blocked keys get weight 0 but a query's weights sum to only {rows.min().item():.2f}: the mask "
                "is applied after the softmax; fill the scores before it, so the allowed weights sum to 1")
    return "the weights on blocked keys are 0 and rows sum to 1, so the difference is elsewhere (see 'reference')"


def _sdpa_causality(fn) -> tuple[bool, str]:
    q, k, v = _qkv(L, L)
    later = [t.clone() for t in (q, k, v)]
    for t, seed in zip(later, (7, 8, 9)):
        t[..., -1, :] = _randn(*t[..., -1, :].shape, seed=seed)  # only position L-1 changes
    gap = (fn(*later, causal_mask(L)) - fn(q, k, v, causal_mask(L)))[..., :-1, :].abs().max().item()
    if gap <= 1e-6:
        return True, f"under the causal mask, outputs 0..{L - 2} do not change when only position {L - 1} changes"
    return False, (f"under the causal mask, the outputs of positions 0..{L - 2} change by up to {gap:.2g} when "
                   f"only position {L - 1} (its query, key and value) changes: a later position leaks backwards")


def _sdpa_blind_row(fn) -> tuple[bool, str]:
    q, k, v = _qkv()
    mask = torch.zeros(B, 1, LQ, LK, dtype=torch.bool)
    mask[0, 0, 1] = True  # batch 0, query 1 sees no key
    out = fn(q, k, v, mask)
    if not torch.isfinite(out).all():
        return False, ("a query whose keys are all blocked outputs NaN (softmax over all -inf scores is 0/0); fill "
                       "blocked scores with torch.finfo(dtype).min, then set rows that see no key to zero")
    row = out[0, :, 1].abs().max().item()
    if row > 1e-6:
        return False, (f"a query whose keys are all blocked outputs values up to {row:.2f}, not zeros: it averages "
                       "values it was told not to read; zero the rows that see no key (mask.all(-1))")
    return True, "a query whose keys are all blocked outputs zeros, no NaN"


def _sdpa_bf16(fn) -> tuple[bool, str]:
    q, k, v = (t.bfloat16() for t in _qkv(L, L))
    out = fn(q, k, v, causal_mask(L))
    ref = _REFERENCE_SDPA(q, k, v, causal_mask(L))
    return _bf16_verdict(out, ref)


def _bf16_verdict(out: torch.Tensor, ref: torch.Tensor, hint: str = "") -> tuple[bool, str]:
    """PASS when ``out`` is bfloat16, finite and within BF16_TOL of the reference's bfloat16 ``ref``."""
    if out.dtype != torch.bfloat16:
        return False, f"bfloat16 inputs give a {str(out.dtype)[6:]} output; return the input's dtype"
    if not torch.isfinite(out).all():
        return False, "bfloat16 inputs give NaN or inf" + hint
    gap, used = _gap(out, ref), _tolerance_used(out, ref, BF16_TOL)
    said = (f"max difference {gap:.2g}, {used:.0%} of the tolerance there ({BF16_TOL:g} + {BF16_TOL:g} x "
            "|reference|, bfloat16's 8 significant bits)")
    if _close(out, ref, BF16_TOL):
        return True, f"bfloat16 in, bfloat16 out, agrees with the reference ({said})"
    return False, f"in bfloat16, differs from the reference ({said})" + hint


# --------------------------------------------------------------------------- multi-head and grouped-query attention

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")
MHA_INTERFACE = ("cls(d_model, n_heads, n_kv_heads=..., rope=None) (n_kv_heads only for gqa) with nn.Linear "
                 "q_proj, k_proj, v_proj, o_proj; forward(query (B, Lq, D), key (B, Lk, D), value (B, Lk, D), "
                 "mask=None) -> (B, Lq, D), mask bool True = blocked, broadcast to (B, H, Lq, Lk)")


def multi_head(cls, kind: str = "mha", kv_cache: bool = True) -> Report:
    """Check multi-head ("mha") or grouped-query ("gqa") attention, self and cross.

    ``cls`` is built as ``cls(d_model, n_heads)`` for "mha" and ``cls(d_model, n_heads,
    n_kv_heads=n_kv_heads)`` for "gqa" (plus ``rope=RotaryPositionalEmbedding(head_dim)`` for the RoPE
    check), then put in eval mode, so dropout may default to anything. Like cipherlab's
    MultiHeadAttention it holds nn.Linear projections q_proj (D -> D), k_proj and v_proj
    (D -> n_kv_heads * head_dim) and o_proj (D -> D), with or without bias, so its weights can be
    copied into the reference and into nn.MultiheadAttention. forward(query (B, Lq, D), key (B, Lk, D),
    value (B, Lk, D), mask=None) -> (B, Lq, D); mask bool, True = BLOCKED, broadcast to (B, H, Lq, Lk).
    With rope, q and k are rotated after the head split (self-attention: both at positions 0..L-1).
    ``kv_cache`` (on by default; off checks a layer without a cache alone): when forward also takes
    ``cache=`` (cipherlab's KVCache, chapter 3), check that a self-attention cache filled one
    position at a time gives the full causal pass, with RoPE at offset = cache.length too, and
    that a static cross-attention cache gives what recomputing gives.
    """
    if kind not in ("mha", "gqa"):
        raise ValueError(f"check.multi_head: unknown kind {kind!r}; expected 'mha' or 'gqa'")
    _refuse_internals(cls)
    build = partial(_build_mha, cls, kind)
    module = _interface_build(build, _build_call(cls, kind), MHA_INTERFACE)
    _refuse_internals(cls, module)
    x = _randn(B, L, D_MODEL)
    _interface(lambda: module(x, x, x, None), f"{_build_call(cls, kind)}(x, x, x, mask=None)", MHA_INTERFACE)
    checks = [
        ("shape", partial(_mha_shape, module)),
        ("projections", partial(_mha_projections, module, kind)),
        ("reference", partial(_mha_reference, module, kind)),
        ("torch", partial(_mha_torch, build, kind)),
        ("causality", partial(_mha_causality, module)),
        ("permutation", partial(_mha_permutation, module)),
        ("padding", partial(_mha_padding, module)),
        ("rope", partial(_mha_rope, build, kind)),
        ("bfloat16", partial(_mha_bf16, module)),
        ("float64", partial(_mha_float64, module)),
    ]
    if kv_cache and _takes(module.forward, "cache"):  # the KV cache of chapter 3 is optional in a student's layer
        checks.append(("kv cache", partial(_mha_cache, build, module)))
    return _run(kind, _label(cls), checks)


def _takes(fn, name: str) -> bool:
    """Whether ``fn`` has a parameter called ``name`` (False when its signature cannot be read)."""
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _build_call(cls, kind: str, **extra) -> str:
    args = [str(D_MODEL), str(N_HEADS)] + ([f"n_kv_heads={N_KV_HEADS}"] if kind == "gqa" else [])
    return f"{_label(cls)}({', '.join(args + [f'{k}=...' for k in extra])})"


def _build_mha(cls, kind: str, n_kv_heads: int = N_KV_HEADS, **extra) -> nn.Module:
    """The student's layer at D_MODEL, N_HEADS (and n_kv_heads for gqa), in eval mode."""
    kv = {"n_kv_heads": n_kv_heads} if kind == "gqa" else {}
    return cls(D_MODEL, N_HEADS, **kv, **extra).eval()


def _n_kv(module: nn.Module, kind: str) -> int:
    return module.k_proj.out_features // (D_MODEL // N_HEADS) if kind == "gqa" else N_HEADS


def _reference_mha(module: nn.Module, kind: str, rope=None) -> MultiHeadAttention:
    """cipherlab's MultiHeadAttention with the student's projection weights copied in."""
    missing = [n for n in PROJECTIONS if not isinstance(getattr(module, n, None), nn.Linear)]
    if missing:
        raise _Unfit(f"cannot copy weights into the reference: no nn.Linear {', '.join(missing)}; name the "
                     "projections q_proj, k_proj, v_proj, o_proj as cipherlab's MultiHeadAttention does")
    ref = MultiHeadAttention(D_MODEL, N_HEADS, 0.0, rope, n_kv_heads=_n_kv(module, kind),
                             bias=module.q_proj.bias is not None).eval()
    for name in PROJECTIONS:
        getattr(ref, name).load_state_dict(getattr(module, name).state_dict())
    return ref


def _mha_shape(module) -> tuple[bool, str]:
    x, memory = _randn(B, LQ, D_MODEL), _randn(B, LK, D_MODEL, seed=1)
    self_out, cross_out = _finite(module(x, x, x), module(x, memory, memory))
    shapes = {tuple(self_out.shape), tuple(cross_out.shape)}
    if shapes != {(B, LQ, D_MODEL)} or cross_out.dtype != torch.float32:
        return False, (f"self-attention gives {tuple(self_out.shape)}, cross-attention on a ({B}, {LK}, {D_MODEL}) "
                       f"memory {tuple(cross_out.shape)} {str(cross_out.dtype)[6:]}; expected ({B}, {LQ}, {D_MODEL}) "
                       "float32, the query's shape")
    if not torch.equal(module(x, x, x), self_out):
        return False, ("two identical calls in eval mode differ: dropout active in eval mode, not switched off by "
                       ".eval(); use nn.Dropout, or F.dropout(x, p, training=self.training)")
    return True, f"self- and cross-attention give the query's shape ({B}, {LQ}, {D_MODEL}) float32"


def _mha_projections(module, kind: str) -> tuple[bool, str]:
    head_dim, n_kv = D_MODEL // N_HEADS, N_KV_HEADS if kind == "gqa" else N_HEADS
    expected = {"q_proj": D_MODEL, "k_proj": n_kv * head_dim, "v_proj": n_kv * head_dim, "o_proj": D_MODEL}
    wrong = []
    for name, out_features in expected.items():
        proj = getattr(module, name, None)
        if not isinstance(proj, nn.Linear):
            wrong.append(f"no nn.Linear {name}")
        elif (proj.in_features, proj.out_features) != (D_MODEL, out_features):
            wrong.append(f"{name} maps {proj.in_features} -> {proj.out_features} features, expected "
                         f"{D_MODEL} -> {out_features}")
    if wrong:
        return False, "; ".join(wrong) + (f" ({n_kv} K/V heads of {head_dim})" if kind == "gqa" else "")
    return True, f"q_proj, k_proj, v_proj, o_proj with K/V projected to {n_kv} heads of {head_dim}"


def _mha_reference(module, kind: str) -> tuple[bool, str]:
    ref = _reference_mha(module, kind)
    x, memory = _randn(B, L, D_MODEL), _randn(B, LK, D_MODEL, seed=1)
    pad = padding_mask(torch.tensor([[1] * 4 + [0] * 3, [1] * LK]), 0)
    try:
        gaps = {"self-attention under a causal mask": _gap(module(x, x, x, causal_mask(L)),
                                                           ref(x, x, x, causal_mask(L))),
                "cross-attention under a padding mask": _gap(module(x, memory, memory, pad),
                                                             ref(x, memory, memory, pad))}
    except Exception as e:
        bug = _mha_diagnosis(module)
        if not bug:
            raise
        return False, f"{bug[2:]} (with the reference's inputs it raised {why(e)})"  # the mistake first
    what = "GroupedQueryAttention" if kind == "gqa" else "MultiHeadAttention"
    said = ", ".join(f"{k} {v:.1e}" for k, v in gaps.items())
    if max(gaps.values()) <= FLOAT32_TOL:
        return True, f"with its weights copied, agrees with cipherlab's {what} ({said}; tolerance {FLOAT32_TOL:g})"
    return False, (f"with its weights copied, differs from cipherlab's {what}: {said} (tolerance {FLOAT32_TOL:g})"
                   + _mha_diagnosis(module))


def _mha_diagnosis(module) -> str:
    """"; MISTAKE" for the first of MHA_MISTAKES that, run with the layer's own weights, gives
    its outputs (self-attention under a causal and under a padding mask, Lq = Lk so that a mask put on the
    wrong axis still runs), else ""."""
    x = _randn(B, LK, D_MODEL, seed=2)
    cases = [(x, x, x, causal_mask(LK)), (x, x, x, padding_mask(torch.tensor([[1] * 4 + [0] * 3, [1] * LK]), 0))]
    try:
        outs = [module(*case) for case in cases]
    except Exception:
        return ""
    for mistake, words in MHA_MISTAKES.items():
        try:
            wrong = [mha_variant(module, N_HEADS, mistake, *case) for case in cases]
        except Exception:
            continue
        if all(_close(out, w, 1e-4) for out, w in zip(outs, wrong)):
            return f"; {words}"
    return ""


def _mha_float64(module) -> tuple[bool, str]:
    x = _randn(B, L, D_MODEL)
    out = _in_float64(module)(*(x.double(),) * 3, causal_mask(L))
    return _float64_verdict(out, module(x, x, x, causal_mask(L)))


def _torch_mha(ref: MultiHeadAttention) -> nn.MultiheadAttention:
    """nn.MultiheadAttention holding the weights of cipherlab's (MHA, n_kv_heads = n_heads) ``ref``."""
    bias = ref.q_proj.bias is not None
    out = nn.MultiheadAttention(D_MODEL, N_HEADS, dropout=0.0, bias=bias, batch_first=True).eval()
    projections = [ref.q_proj, ref.k_proj, ref.v_proj]
    with torch.no_grad():
        out.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
        out.out_proj.weight.copy_(ref.o_proj.weight)
        if bias:
            out.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))
            out.out_proj.bias.copy_(ref.o_proj.bias)
    return out


def _mha_torch(build, kind: str) -> tuple[bool, str]:
    module = build(n_kv_heads=N_HEADS)  # for gqa: as many K/V heads as query heads, i.e. MHA
    theirs = _torch_mha(_reference_mha(module, kind))
    x, memory = _randn(B, L, D_MODEL), _randn(B, LK, D_MODEL, seed=1)
    ids = torch.tensor([[1] * 4 + [0] * 3, [1] * LK])
    gaps = [_gap(module(x, x, x, causal_mask(L)), theirs(x, x, x, attn_mask=causal_mask(L)[0, 0])[0]),
            _gap(module(x, memory, memory, padding_mask(ids, 0)),
                 theirs(x, memory, memory, key_padding_mask=ids == 0)[0])]
    what = f"with n_kv_heads = n_heads = {N_HEADS} (then GQA is MHA)" if kind == "gqa" else "with its weights copied"
    if max(gaps) <= FLOAT32_TOL:
        return True, f"{what}, agrees with nn.MultiheadAttention, causal self- and padded cross-attention " \
                     f"(max difference {max(gaps):.1e})"
    return False, f"{what}, differs from nn.MultiheadAttention by up to {max(gaps):.2g} (tolerance {FLOAT32_TOL:g})"


def _mha_causality(module) -> tuple[bool, str]:
    x = _randn(B, L, D_MODEL)
    changed = x.clone()
    changed[:, -1] = _randn(B, D_MODEL, seed=5)
    mask = causal_mask(L)
    gap = (module(changed, changed, changed, mask) - module(x, x, x, mask))[:, :-1].abs().max().item()
    if gap <= 1e-6:
        return True, f"under the causal mask, outputs 0..{L - 2} do not change when only input {L - 1} changes"
    return False, (f"under the causal mask, the outputs of positions 0..{L - 2} change by up to {gap:.2g} when "
                   f"only input {L - 1} changes: a later position leaks into earlier ones (through the mask, or "
                   "through a head split that mixes positions: see 'permutation')")


def _mha_permutation(module) -> tuple[bool, str]:
    x = _randn(1, L, D_MODEL)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    gap = _gap(module(x[:, perm], x[:, perm], x[:, perm]), module(x, x, x)[:, perm])
    if gap <= FLOAT32_TOL:
        return True, "without positions or mask, shuffling the input positions shuffles the outputs the same way"
    return False, (f"without positions or mask, shuffling the inputs changes the outputs by up to {gap:.2g} beyond "
                   "shuffling them: features of different positions get mixed; split heads as "
                   ".view(B, L, H, d).transpose(1, 2), not .view(B, H, L, d), and merge them back the same way")


def _mha_padding(module) -> tuple[bool, str]:
    x, memory = _randn(B, LQ, D_MODEL), _randn(B, LK, D_MODEL, seed=1)
    mask = padding_mask(torch.tensor([[1] * 4 + [0] * 3, [1] * LK]), 0)
    changed = memory.clone()
    changed[0, 4:] = _randn(3, D_MODEL, seed=6)  # only the PAD rows of line 0
    gap = _gap(module(x, changed, changed, mask), module(x, memory, memory, mask))
    if gap <= 1e-6:
        return True, "cross-attention outputs ignore what the padded memory rows hold"
    return False, (f"changing only the padded (masked) memory rows changes the cross-attention outputs by up to "
                   f"{gap:.2g}: blocked keys are read (apply the mask, True = blocked, to the scores before the "
                   "softmax) or positions get mixed outside the attention (see 'permutation')")


SHIFT = 5  # positions the RoPE check moves the tokens by


def _shift_gap(module) -> float:
    """Largest change of self-attention outputs when the same tokens sit SHIFT positions later, behind
    SHIFT blocked slots (0 without positions, and with RoPE on q and k alone)."""
    x = _randn(B, L, D_MODEL)
    later = torch.cat([torch.zeros(B, SHIFT, D_MODEL), x], dim=1)
    blocked = (torch.arange(SHIFT + L) < SHIFT)[None, None, None, :]  # the empty slots are blocked keys
    return _gap(module(later, later, later, blocked)[:, SHIFT:], module(x, x, x))


def _mha_rope(build, kind: str) -> tuple[bool, str]:
    rope = RotaryPositionalEmbedding(D_MODEL // N_HEADS, max_len=64)
    try:
        module = build(rope=rope)
    except TypeError as e:
        raise _Unfit(f"cannot be built with rope=RotaryPositionalEmbedding(head_dim) ({why(e)}); accept rope= "
                     "and rotate q and k after the head split") from None
    plain = build()
    if _shift_gap(plain) > 1e-4:
        return False, ("without RoPE, the same tokens behind blocked slots already give other outputs; "
                       "fix that first (see 'permutation' and 'padding')")
    gap = _shift_gap(module)
    if gap > 1e-4:
        return False, (f"with RoPE, the same tokens {SHIFT} positions later give outputs different by {gap:.2g}: RoPE "
                       "on q and k alone makes self-attention depend on offsets only; rotate q and k, never v")
    x, mask = _randn(B, L, D_MODEL), causal_mask(L)
    out = module(x, x, x, mask)
    ref_gap = _gap(out, _reference_mha(module, kind, rope)(x, x, x, mask))
    if ref_gap > FLOAT32_TOL:
        unused = _gap(out, _reference_mha(module, kind)(x, x, x, mask)) <= FLOAT32_TOL
        return False, (f"with RoPE, differs from cipherlab's layer with the same weights and rope by {ref_gap:.2g}"
                       + ("; it equals the layer without RoPE: rope= is accepted but never applied" if unused else ""))
    return True, "with RoPE, agrees with the reference and depends on offsets only (shifted inputs, same outputs)"


class _OffsetBlindRope(RotaryPositionalEmbedding):
    """RoPE that rotates every call at positions 0, 1, ..., whatever offset it is given."""

    def forward(self, q, k, offset: int = 0):
        return super().forward(q, k, 0)

    def rotate(self, x, offset: int = 0):
        return super().rotate(x, 0)


def _with_rope(build, module: nn.Module, rope_cls) -> nn.Module:
    """The student's layer built again with a ``rope_cls`` rope and ``module``'s weights."""
    other = build(rope=rope_cls(D_MODEL // N_HEADS, max_len=64))
    other.load_state_dict(module.state_dict())
    return other


def _stepped(module, x: torch.Tensor, memory: torch.Tensor | None = None, mask=None) -> torch.Tensor:
    """(B, L, D): ``x`` fed one position per call through one KVCache, as incremental decoding does.
    Self-attention (``memory`` None) grows the cache; cross-attention fills a static cache once."""
    cache = KVCache(static=memory is not None)
    steps = []
    for t in range(x.size(1)):
        q = x[:, t:t + 1]
        if memory is None:
            steps.append(module(q, q, q, causal_mask(1, offset=t), cache=cache))
        else:
            steps.append(module(q, memory, memory, mask, cache=cache))
    return torch.cat(steps, dim=1)


def _mha_cache(build, module) -> tuple[bool, str]:
    """Self-attention through a growing cache, cross-attention through a static one, then RoPE under the cache."""
    x, memory = _randn(B, L, D_MODEL), _randn(B, LK, D_MODEL, seed=1)
    pad = padding_mask(torch.tensor([[1] * 4 + [0] * 3, [1] * LK]), 0)
    fix = ("append each step's keys and values (cache.update(k, v)) and attend over all of them, "
           "keys and values that are already cached included")
    gap = _gap(_stepped(module, x), module(x, x, x, causal_mask(L)))
    if gap > 1e-5:
        return False, (f"self-attention fed one position at a time through cache=KVCache() differs from the full "
                       f"causal pass by up to {gap:.2g}: {fix}")
    gap = _gap(_stepped(module, x, memory, pad), module(x, memory, memory, pad))
    if gap > 1e-5:
        return False, (f"cross-attention with a static cache (KVCache(static=True)) differs from recomputing it by "
                       f"up to {gap:.2g}: project the memory into the cache on the first step only, then reuse "
                       "cache.k and cache.v (never append the memory again)")
    try:
        roped = build(rope=RotaryPositionalEmbedding(D_MODEL // N_HEADS, max_len=64))
    except TypeError:
        return True, "a self-attention cache built step by step equals the full causal pass; a static "\
                     "cross-attention cache equals recomputing (no rope=, so RoPE under the cache is not checked)"
    stepped = _stepped(roped, x)
    gap = _gap(stepped, roped(x, x, x, causal_mask(L)))
    if gap > 1e-5:
        said = (f"with RoPE, self-attention fed one position at a time through the cache differs from the full "
                f"causal pass by up to {gap:.2g} (without RoPE it agrees)")
        if _shift_gap(roped) > 1e-4:
            return False, said + "; the layer with RoPE is wrong without a cache too (see 'rope'): fix that first"
        if _close(stepped, _stepped(_with_rope(build, roped, _OffsetBlindRope), x), 1e-5):
            return False, (said + ": the cache ignores the position offset, every step is rotated as position 0; "
                           "rotate the new q and k at offset = cache.length, the position of the new token")
        return False, said + "; rotate the new q and k at offset = cache.length and cache the rotated k"
    return True, ("a self-attention cache built step by step equals the full causal pass, with RoPE too (offset = "
                  "cache.length); a static cross-attention cache equals recomputing")


def _mha_bf16(module) -> tuple[bool, str]:
    low = copy.deepcopy(module).to(torch.bfloat16)
    x = _randn(B, L, D_MODEL).bfloat16()
    mask, high = causal_mask(L), x.float()
    return _bf16_verdict(low(x, x, x, mask), module(high, high, high, mask).bfloat16())


# --------------------------------------------------------------------------- LayerNorm and RMSNorm

NORM_INTERFACE = "cls(d_model, eps=1e-5) with forward(x (..., D)) -> (..., D) in x's dtype"
GAINS, SHIFTS = ("gamma", "weight", "scale"), ("beta", "bias", "shift")


def norm(cls, kind: str) -> Report:
    """Check a LayerNorm ("layernorm") or RMSNorm ("rmsnorm").

    ``cls(d_model, eps=1e-5)`` as cipherlab's LayerNorm/RMSNorm, forward(x (..., D)) -> (..., D) in x's
    dtype, statistics over the last dimension of each token only (LayerNorm: biased variance). The
    gain parameter (D,) is named gamma or weight, LayerNorm's shift (D,) beta or bias; they are set
    to random values and copied into cipherlab's module, nn.LayerNorm or nn.RMSNorm.
    """
    if kind not in NORMS:
        raise ValueError(f"check.norm: unknown kind {kind!r}; expected one of {sorted(NORMS)}")
    _refuse_internals(cls)
    fresh = _interface_build(lambda: cls(16, eps=1e-5), f"{_label(cls)}(16, eps=1e-5)", NORM_INTERFACE)
    _refuse_internals(cls, fresh)
    x = _norm_input()
    _interface(lambda: fresh(x), f"{_label(cls)}(16, eps=1e-5)(x)", NORM_INTERFACE)
    module, ref = _randomised_pair(fresh, kind)
    expected = partial(_norm_expected, module, ref, kind)
    return _run(kind, _label(cls), [
        ("shape", partial(_norm_shape, module)),
        ("eval mode", lambda: _deterministic(lambda: module(_norm_input()))),
        ("at construction", partial(_norm_initial, fresh, kind)),
        ("reference", partial(_norm_reference, module, ref, kind)),
        ("invariance", partial(_norm_invariance, module, kind)),
        ("per token", partial(_norm_per_token, module)),
        ("zero and constant tokens", partial(_norm_flat, module, expected, kind)),
        ("bfloat16", partial(_norm_bf16, module, expected)),
        ("float64", lambda: _float64_verdict(_in_float64(module)(_norm_input().double()), expected(_norm_input()))),
    ])


def _eps_outside(x: torch.Tensor, ref: nn.Module, kind: str) -> torch.Tensor:
    """The norm of ``x`` with eps added outside the square root, x / (sqrt(var) + eps), the reference's gain
    and shift, computed in float32 and cast to x's dtype."""
    x32 = x.float()
    if kind == "layernorm":
        centred = x32 - x32.mean(-1, keepdim=True)
        y = centred / (centred.pow(2).mean(-1, keepdim=True).sqrt() + ref.eps) * ref.gamma + ref.beta
    else:
        y = x32 / (x32.pow(2).mean(-1, keepdim=True).sqrt() + ref.eps) * ref.gamma
    return y.to(x.dtype)


def _eps_is_outside(module, ref, kind: str) -> bool:
    """Whether ``module`` adds eps outside the square root (and agrees with that formula, not the reference's)."""
    x = _norm_input()
    out = module(x)
    return _gap(out, ref(x)) > FLOAT32_TOL and _gap(out, _eps_outside(x, ref, kind)) <= FLOAT32_TOL


def _norm_expected(module, ref, kind: str, x: torch.Tensor) -> torch.Tensor:
    """What ``module`` should give for ``x``: the reference's output, or, for a module that adds eps
    outside the square root (a convention, passed with a note), that formula's."""
    return _eps_outside(x, ref, kind) if _eps_is_outside(module, ref, kind) else ref(x)


def _norm_initial(fresh, kind: str) -> tuple[bool, str]:
    """At construction the gain is all ones and the shift all zeros, as nn.LayerNorm and nn.RMSNorm start."""
    wrong = []
    for names, start, what in ((GAINS, 1.0, "gain"), (SHIFTS, 0.0, "shift")):
        name = next((n for n in names if isinstance(getattr(fresh, n, None), nn.Parameter)), None)
        if name is None or (what == "shift" and kind != "layernorm"):
            continue
        value = getattr(fresh, name).detach().float()
        if torch.equal(value, torch.full_like(value, start)):
            continue
        seen = (f"starts at {value.flatten()[0].item():g}" if torch.equal(value, value.flatten()[0].expand_as(value))
                else f"starts at random values ({value.min().item():.2f} .. {value.max().item():.2f})")
        why_not = {1.0: (" (every output is 0 at first, and no gradient reaches the layers before it)"
                         if value.abs().max().item() == 0 else ""), 0.0: ""}[start]
        wrong.append(f"the {what} {name} {seen}{why_not}; start it at {'ones' if start else 'zeros'}, "
                     f"nn.Parameter(torch.{'ones' if start else 'zeros'}(d_model))")
    if wrong:
        return False, "; ".join(wrong) + ", as nn.LayerNorm and nn.RMSNorm do: a norm starts as the identity map"
    return True, ("a new norm starts with its gain at ones" + (" and its shift at zeros" if kind == "layernorm" else "")
                  + ", as PyTorch's do: the identity map at first")


def _norm_flat(module, expected, kind: str) -> tuple[bool, str]:
    """All-zero and constant tokens (variance 0, and for the zero token mean square 0) give finite outputs."""
    x = torch.zeros(3, 16)
    x[1], x[2] = 3.0, -0.5
    out = module(x)
    stat = "sqrt(var + eps)" if kind == "layernorm" else "sqrt(mean(x^2) + eps)"
    if not torch.isfinite(out).all():
        rows = [r for r in range(3) if not torch.isfinite(out[r]).all()]
        what = "an all-zero token" if rows[0] == 0 else "a constant token"
        spread = "variance" if kind == "layernorm" else "mean square"
        return False, f"{what} gives NaN or inf: no eps where the {spread} is 0, so it divides 0 by 0; divide by {stat}"
    gap = _gap(out, expected(x))
    if gap > 1e-4:
        return False, f"on all-zero and constant tokens, differs from the reference by {gap:.2g}; divide by {stat}"
    return True, "all-zero and constant tokens give finite outputs, as the reference: eps keeps 0 / 0 away"


def _norm_input(seed: int = 0) -> torch.Tensor:
    """(2, 5, 16) activations with a mean and spread away from 0 and 1."""
    return _randn(2, 5, 16, seed=seed) * 3 + 1


def _parameter(module: nn.Module, names: tuple[str, ...]) -> nn.Parameter | None:
    return next((getattr(module, n) for n in names if isinstance(getattr(module, n, None), nn.Parameter)), None)


def _randomised_pair(module: nn.Module, kind: str) -> tuple[nn.Module, nn.Module]:
    """A copy of the student's norm with random gain (and shift), and cipherlab's with the same values."""
    module, ref = copy.deepcopy(module).eval(), NORMS[kind](16, eps=1e-5)
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for names, theirs in ((GAINS, ref.gamma), (SHIFTS, getattr(ref, "beta", None))):
            mine = _parameter(module, names)
            if mine is not None and theirs is not None and mine.shape == theirs.shape:
                mine.copy_(torch.randn(mine.shape, generator=gen) + (1.0 if names is GAINS else 0.0))
                theirs.copy_(mine)
    return module, ref


def _norm_shape(module) -> tuple[bool, str]:
    x = _norm_input()
    out = _finite(module(x))
    passed = out.shape == x.shape and out.dtype == torch.float32
    return passed, f"output {tuple(out.shape)} {str(out.dtype)[6:]} for x {tuple(x.shape)} float32" + \
        ("" if passed else "; expected the input's shape and dtype")


def _norm_suspects(x: torch.Tensor, ref: nn.Module, kind: str) -> dict[str, torch.Tensor]:
    """Outputs of the usual wrong formulas with the reference's gamma (and beta)."""
    gamma, beta = ref.gamma, getattr(ref, "beta", 0.0)
    centred = x - x.mean(-1, keepdim=True)
    if kind == "layernorm":
        return {"the variance is unbiased (x.var() divides by D - 1); LayerNorm divides by D: "
                "x.var(dim=-1, unbiased=False)": centred / (x.var(-1, keepdim=True) + 1e-5).sqrt() * gamma + beta,
                "the mean is not subtracted: LayerNorm centres each token, (x - mean) / sqrt(var + eps)":
                    x / (x.var(-1, keepdim=True, unbiased=False) + 1e-5).sqrt() * gamma + beta}
    return {"the mean is subtracted: that is LayerNorm; RMSNorm does not centre, x / sqrt(mean(x^2) + eps)":
            centred / (centred.pow(2).mean(-1, keepdim=True) + 1e-5).sqrt() * gamma,
            "it divides by the standard deviation (x.std()), not the root mean square sqrt(mean(x^2) + eps)":
            x / (x.std(-1, keepdim=True) + 1e-5) * gamma}


def _norm_reference(module, ref, kind: str) -> tuple[bool, str]:
    gain = _parameter(module, GAINS)
    if gain is None:
        raise _Unfit(f"no gain parameter named {' or '.join(GAINS)}; name it gamma, shape (D,), "
                     "so it can be copied into the reference")
    if kind == "layernorm" and _parameter(module, SHIFTS) is None:
        raise _Unfit(f"no shift parameter named {' or '.join(SHIFTS)}; LayerNorm has beta, shape (D,)")
    theirs = nn.LayerNorm(16, eps=1e-5) if kind == "layernorm" else nn.RMSNorm(16, eps=1e-5)
    with torch.no_grad():
        theirs.weight.copy_(ref.gamma)
        if kind == "layernorm":
            theirs.bias.copy_(ref.beta)
    x = _norm_input()
    out = module(x)
    gaps = _gap(out, ref(x)), _gap(out, theirs(x))
    said = (f"cipherlab's {type(ref).__name__} ({gaps[0]:.1e}) and nn.{type(theirs).__name__} ({gaps[1]:.1e}) "
            f"with the same random gain{' and shift' if kind == 'layernorm' else ''}, tolerance {FLOAT32_TOL:g}")
    with torch.no_grad():
        bug = _name_the_bug(out, _norm_suspects(x, ref, kind))
    if max(gaps) <= FLOAT32_TOL:
        return True, f"agrees with {said}"
    if _eps_is_outside(module, ref, kind):
        small = _norm_input() * 1e-2  # a small spread: where eps's place shows most
        stat = "var" if kind == "layernorm" else "mean(x^2)"
        return True, (f"eps is added outside the square root, x / (sqrt({stat}) + eps): a valid convention; cipherlab "
                      f"and PyTorch add eps = {ref.eps:g} inside, sqrt({stat} + eps). The two differ by {gaps[0]:.1e} "
                      f"on these tokens and {_gap(module(small), ref(small)):.1e} on tokens 100 times smaller, where "
                      "eps matters; the other checks compare yours with the eps-outside formula")
    return False, f"differs from {said}{bug}"


def _norm_invariance(module, kind: str) -> tuple[bool, str]:
    x = _norm_input()
    shifted = _gap(module(x + 5.0), module(x))
    scaled = _gap(module(x * 4.0), module(x))
    if kind == "layernorm":
        if shifted <= 1e-4:
            return True, "adding a constant to every feature of a token leaves its output unchanged"
        return False, (f"adding 5 to every feature of a token changes its output by {shifted:.2g}: LayerNorm must "
                       "subtract each token's mean over its features (dim=-1)")
    if scaled > 1e-4:
        return False, (f"multiplying a token by 4 changes its output by {scaled:.2g}: RMSNorm must divide each token "
                       "by its root mean square over its features (dim=-1)")
    if shifted <= 1e-4:
        return False, ("adding a constant to a token leaves its output unchanged: the mean is subtracted, which makes "
                       "it LayerNorm without beta; RMSNorm does not centre")
    return True, "multiplying a token by 4 leaves its output unchanged, adding a constant does not (no centring)"


def _norm_per_token(module) -> tuple[bool, str]:
    x = _norm_input()
    changed = x.clone()
    changed[1, 3] = _randn(16, seed=4) * 10
    gap = (module(changed) - module(x)).flatten(0, 1)[torch.arange(10) != 8].abs().max().item()
    if gap <= 1e-6:
        return True, "each token is normalised on its own: changing one token leaves the others unchanged"
    return False, (f"changing one token changes other tokens' outputs by up to {gap:.2g}: take the statistics over "
                   "the last dimension only (dim=-1, keepdim=True), never across the batch or the sequence")


def _norm_bf16(module, expected) -> tuple[bool, str]:
    x = (_randn(4, 16, seed=5) * 1e-2 + 5).bfloat16()  # a small spread on a large mean: bf16 maths loses it
    right_in_float32 = _close(module(x.float()), expected(x.float()), BF16_TOL)
    hint = "; compute the statistics in float32 (x.float()) and cast back" if right_in_float32 else ""
    return _bf16_verdict(module(x), expected(x), hint=hint)


# --------------------------------------------------------------------------- sinusoidal positions and RoPE

POSITION_INTERFACES = {
    "sinusoidal": "cls(d_model, max_len=64) with forward(x (B, L, D), offset=0) -> x + table[offset:offset+L]",
    "rope": "cls(head_dim, max_len=64) with forward(q (B, H, L, d), k (B, Hkv, L, d), offset=0) -> (q, k) rotated "
            "at positions offset..offset+L-1",
}


def positional(cls, kind: str) -> Report:
    """Check sinusoidal positions ("sinusoidal") or rotary position embedding ("rope").

    "sinusoidal": ``cls(d_model, max_len=64)`` (dropout off in eval mode), forward(x (B, L, D),
    offset=0) -> x + table[offset : offset + L], table[p, 2i] = sin(p theta_i), table[p, 2i+1] =
    cos(p theta_i), theta_i = 10000^(-2i/D), as cipherlab's SinusoidalPositionalEncoding.
    "rope": ``cls(head_dim, max_len=64)``, forward(q (B, H, L, d), k (B, Hkv, L, d), offset=0) ->
    (q, k) each rotated at positions offset .. offset + L - 1, as cipherlab's RotaryPositionalEmbedding
    (half-split pairs i, i + d/2; interleaved pairs pass too, with a note).
    """
    if kind not in POSITION_INTERFACES:
        raise ValueError(f"check.positional: unknown kind {kind!r}; expected one of {sorted(POSITION_INTERFACES)}")
    interface, size = POSITION_INTERFACES[kind], 16 if kind == "sinusoidal" else DK
    built = f"{_label(cls)}({size}, max_len=64)"
    _refuse_internals(cls)
    module = _interface_build(lambda: cls(size, max_len=64), built, interface)
    _refuse_internals(cls, module)
    if isinstance(module, nn.Module):
        module.eval()
    longer = partial(_build_long, cls, size)
    if kind == "sinusoidal":
        x = _randn(B, L, 16)
        _interface(lambda: module(x), f"{built}(x)", interface)
        return _run(kind, _label(cls), [
            ("shape", partial(_sinusoidal_shape, module)),
            ("eval mode", lambda: _deterministic(lambda: module(_randn(B, L, 16)))),
            ("table", partial(_sinusoidal_table, module)),
            ("offset", partial(_sinusoidal_offset, module)),
            ("long positions", partial(_sinusoidal_long, longer)),
            ("float64", partial(_sinusoidal_float64, module)),
        ])
    q, k = _randn(B, H, L, DK), _randn(B, 1, L, DK, seed=1)
    _interface(lambda: module(q, k), f"{built}(q, k)", interface)
    return _run(kind, _label(cls), [
        ("shape", partial(_rope_shape, module)),
        ("rotation", partial(_rope_rotation, module)),
        ("relative", partial(_rope_relative, module)),
        ("reference", partial(_rope_reference, module)),
        ("keys", partial(_rope_keys, module)),
        ("offset", partial(_rope_offset, module)),
        ("cached steps", partial(_rope_steps, module)),
        ("long positions", partial(_rope_long, module, longer)),
        ("float64", partial(_rope_float64, module)),
    ])


LONG = 200  # positions 0..LONG-1, far past the 64 of the other checks: a rounded angle shows there


def _build_long(cls, size: int) -> nn.Module:
    """The student's module with max_len = 256, in eval mode; _Unfit if it cannot be built so."""
    try:
        module = cls(size, max_len=256)
    except Exception as e:
        raise _Unfit(f"{_label(cls)}({size}, max_len=256) raised {why(e)}; build the table for max_len positions")
    return module.eval() if isinstance(module, nn.Module) else module


def _rounded_angles(angles: torch.Tensor) -> list[torch.Tensor]:
    """``angles`` (L, n) = outer(positions, theta) as bfloat16 makes them: the product rounded, or
    positions and frequencies rounded before it."""
    positions, theta = angles[:, 0], angles[1] if angles.size(0) > 1 else angles[0]
    return [angles.bfloat16().float(),
            torch.outer(positions.bfloat16(), theta.bfloat16()).float()]


def _long_verdict(gap: float, where: int, rounded: bool) -> tuple[bool, str]:
    if gap <= 1e-3:
        return True, f"positions 0..{LONG - 1} agree with the reference (max difference {gap:.1e}, tolerance 1e-3)"
    return False, (f"at position {where} the rotation is off by up to {gap:.2g} (positions 0..{LONG - 1}, max_len 256)"
                   + ("; the angles rounded to bfloat16 (8 significant bits: steps of 1 radian past position 128); "
                      "build positions, frequencies and their product in float32" if rounded else
                      "; build the angles p theta_i = p * 10000^(-2i/d) in float32"))


def _sinusoidal_shape(module) -> tuple[bool, str]:
    x = _randn(B, L, 16)
    out, low = _finite(module(x)), module(x.bfloat16())
    if out.shape != x.shape or out.dtype != torch.float32 or low.dtype != torch.bfloat16:
        return False, (f"x {tuple(x.shape)} float32 gives {tuple(out.shape)} {str(out.dtype)[6:]}, bfloat16 gives "
                       f"{str(low.dtype)[6:]}; expected the input's shape and dtype (cast the table: .to(x.dtype))")
    return True, f"x {tuple(x.shape)} gives the same shape, in float32 and in bfloat16"


def _sinusoid_suspects(length: int, d: int) -> dict[str, torch.Tensor]:
    """Tables (length, d) of the usual wrong layouts, by the bug they have."""
    angles = torch.outer(torch.arange(length, dtype=torch.float32), inverse_frequencies(d))  # (L, d/2)
    swapped = torch.stack((angles.cos(), angles.sin()), dim=-1).flatten(-2)
    slow = torch.outer(torch.arange(length, dtype=torch.float32), inverse_frequencies(2 * d)[: d // 2])
    return {"sin and cos are swapped: even columns 2i hold sin(p theta_i), odd columns 2i+1 cos(p theta_i)": swapped,
            "the frequencies are 10000^(-i/D); they are theta_i = 10000^(-2i/D), one per sin/cos pair":
            torch.stack((slow.sin(), slow.cos()), dim=-1).flatten(-2)}


def _sinusoidal_table(module) -> tuple[bool, str]:
    x = _randn(1, 40, 16)
    table = module(torch.zeros(1, 40, 16))[0]  # (40, 16): what it adds
    expected = SinusoidalPositionalEncoding(16, max_len=40, dropout=0.0).table
    added = _gap(module(x) - x, table[None])
    concatenated = torch.cat((expected[:, 0::2], expected[:, 1::2]), dim=-1)
    if _close(table, expected) or _close(table, concatenated):
        if added > FLOAT32_TOL:
            return False, f"the table is right, but x + table is off by {added:.2g}: add the table to x, do not scale x"
        if _close(table, concatenated):
            return True, ("adds [sin(p theta_i) | cos(p theta_i)], sines in the first half and cosines in the second, "
                          "to x: a valid layout (a fixed permutation of the columns, which the first layer absorbs); "
                          "cipherlab interleaves them, even columns sin, odd columns cos")
        return True, "adds table[p, 2i] = sin(p theta_i), table[p, 2i+1] = cos(p theta_i), as the reference, to x"
    error = (table - expected).abs()
    p, c = divmod(error.argmax().item(), 16)
    return False, (f"the table differs from sin/cos(p theta_i) by up to {error.max().item():.2g} (position {p}, "
                   f"column {c}: {table[p, c].item():.4f}, expected {expected[p, c].item():.4f})"
                   + _name_the_bug(table, _sinusoid_suspects(40, 16)))


def _sinusoidal_offset(module) -> tuple[bool, str]:
    x = _randn(B, 10, 16)
    gap = _gap(module(x[:, 7:], offset=7), module(x)[:, 7:])
    if gap <= FLOAT32_TOL:
        return True, "forward(x, offset=7) adds rows 7.. of the table, as incremental decoding needs"
    return False, f"forward(x, offset=7) differs from rows 7.. of a full pass by {gap:.2g}: add table[offset:offset+L]"


def _sinusoidal_long(build) -> tuple[bool, str]:
    module = build()
    table = module(torch.zeros(1, LONG, 16))[0]  # (LONG, 16)
    expected = SinusoidalPositionalEncoding(16, max_len=LONG, dropout=0.0).table
    if not _close(table[:40], expected[:40], 1e-3):  # another layout: the table check names it
        expected = torch.cat((expected[:, 0::2], expected[:, 1::2]), dim=-1)
    error = (table - expected).abs()
    angles = torch.outer(torch.arange(LONG, dtype=torch.float32), inverse_frequencies(16))
    rounded = any(_close(table[:, 0::2], a.sin(), 1e-4) or _close(table[:, :8], a.sin(), 1e-4)
                  for a in _rounded_angles(angles))
    return _long_verdict(error.max().item(), int(error.amax(-1).argmax()), rounded)


def _sinusoidal_float64(module) -> tuple[bool, str]:
    x = _randn(B, L, 16)
    return _float64_verdict(_in_float64(module)(x.double()), module(x))


def _rope_shape(module) -> tuple[bool, str]:
    q, k = _randn(B, H, L, DK), _randn(B, 1, L, DK, seed=1)  # fewer K heads, as in GQA
    rq, rk = _finite(*module(q, k))
    low = module(q.bfloat16(), k.bfloat16())[0]
    if rq.shape != q.shape or rk.shape != k.shape or rq.dtype != torch.float32 or low.dtype != torch.bfloat16:
        return False, (f"q {tuple(q.shape)}, k {tuple(k.shape)} give {tuple(rq.shape)}, {tuple(rk.shape)} "
                       f"{str(rq.dtype)[6:]} (bfloat16 in: {str(low.dtype)[6:]} out); expected their shapes and dtypes")
    return True, f"q {tuple(q.shape)} and k {tuple(k.shape)} keep their shapes and dtypes, float32 and bfloat16"


def _rope_rotation(module) -> tuple[bool, str]:
    q = _randn(1, 1, 40, DK)
    rq = module(q, q)[0]
    stretch = _gap(rq.norm(dim=-1), q.norm(dim=-1))
    if stretch > 1e-4:
        return False, (f"the rotation changes vector lengths by up to {stretch:.2g}: each pair's two coordinates must "
                       "turn by the same angle, x cos + rotate_half(x) sin, with the cos/sin table laid out like "
                       "the pairs (cat(angles, angles) for half-split pairs)")
    if _gap(rq[..., 0, :], q[..., 0, :]) > 1e-6:
        return False, "position 0 is rotated; the angle at position p is p theta_i, 0 at p = 0"
    return True, "a pure rotation: lengths unchanged, position 0 untouched"


def _rope_relative(module) -> tuple[bool, str]:
    n = 40
    q, k = _randn(DK).expand(1, 1, n, DK), _randn(DK, seed=1).expand(1, 1, n, DK)  # one vector at every position
    rq, rk = module(q.contiguous(), k.contiguous())
    scores = rq[0, 0] @ rk[0, 0].T  # (n, n): q at position m against k at position n
    gap = _gap(scores[1:, 1:], scores[:-1, :-1])
    if gap > 1e-4:
        return False, (f"q.k changes by up to {gap:.2g} when q and k both move one position: RoPE scores must depend "
                       "on the offset n - m only; the cos/sin table's layout must match the pairs rotate_half makes")
    if _gap(scores[0, 0:1], scores[0, 5:6]) < 1e-4:
        return False, "scores do not depend on positions at all: nothing is rotated"
    return True, "q.k depends on the offset between the positions only"


def _rope_reference(module) -> tuple[bool, str]:
    ref = RotaryPositionalEmbedding(DK, max_len=64)
    q = _randn(B, H, L, DK)
    out = module(q, q)[0]
    if _close(out, ref.rotate(q)):
        return True, "agrees with cipherlab's RotaryPositionalEmbedding (half-split pairs i, i + d/2)"
    if _close(out, ref.rotate_interleaved(q)):
        return True, ("agrees with cipherlab's rotate_interleaved: pairs (x0, x1), (x2, x3), ..., a valid RoPE; "
                      "cipherlab's default pairs coordinates i and i + d/2")
    cos, sin = ref.cos[:L], ref.sin[:L]
    bug = _name_the_bug(out, {"it rotates the other way (the sign of sin is flipped): x cos + rotate_half(x) sin":
                              q * cos - rotate_half(q) * sin})
    return False, f"differs from cipherlab's RotaryPositionalEmbedding by up to {_gap(out, ref.rotate(q)):.2g}{bug}"


def _rope_rotate(module, max_len: int = 64):
    """The reference's rotation in the module's convention: rotate (half-split pairs) or rotate_interleaved."""
    ref = RotaryPositionalEmbedding(DK, max_len=max_len)
    q = _randn(B, H, L, DK, seed=3)
    return ref.rotate_interleaved if _close(module(q, q)[0], ref.rotate_interleaved(q)) else ref.rotate


def _rope_keys(module) -> tuple[bool, str]:
    """The returned keys: rotated as the queries, GQA keys (fewer heads) too, at the offset given."""
    rotate = _rope_rotate(module)
    q, k_full, k_few = _randn(B, H, L, DK), _randn(B, H, L, DK, seed=1), _randn(B, 1, L, DK, seed=2)
    for k, offset in ((k_full, 0), (k_few, 0), (k_full, 7), (k_few, 7)):
        rq, rk = module(q, k, offset=offset)
        if _close(rk, rotate(k, offset)) or (offset and not _close(rq, rotate(q, offset))):
            continue  # the queries wrong at an offset too: the 'offset' check names that
        gqa = k.size(1) < q.size(1)
        said = (f"the keys returned for k {tuple(k.shape)}{' (GQA: fewer heads than q)' if gqa else ''} at offset "
                f"{offset} differ from the reference's by {_gap(rk, rotate(k, offset)):.2g}")
        if _close(rk, k):
            if gqa and _close(module(q, k_full, offset=offset)[1], rotate(k_full, offset)):
                return False, (said + ": keys with fewer heads than the queries (GQA) are returned unrotated; rotate "
                               "k whatever its head count (cos and sin broadcast over the heads)")
            return False, said + ": the keys are returned unrotated; rotate k exactly as q, RoPE turns both"
        if offset and _close(rk, rotate(k, 0)) and _close(rq, rotate(q, offset)):
            return False, (said + ": the offset is applied to the queries only, keys are rotated from position 0; "
                           "a cached step then scores its query against a key at the wrong position: rotate q and k "
                           "at positions offset..")
        if _close(rk, rotate(k, offset + 1)):
            return False, (said + f": keys are rotated at positions {offset + 1}.. and queries at {offset}.. (an "
                           "off-by-one); rotate both at positions offset, offset + 1, ...")
        if _close(rk, _rotate_back(k, offset, rotate)):
            return False, said + ": the keys are rotated the other way (angle -p theta); turn k by +p theta, as q"
        return False, said + "; rotate k as q, at positions offset .. offset + L - 1"
    return True, ("returns the keys rotated as the reference's, at offset 0 and 7, with as many heads as q and with "
                  "fewer (GQA)")


def _rotate_back(x: torch.Tensor, offset: int, rotate) -> torch.Tensor:
    """``x`` rotated by -p theta, in the convention of ``rotate``: the rotation R_p is linear and
    orthogonal, so R(-p theta) x = R_p^T x."""
    eye = torch.eye(DK).expand(x.size(-2), DK, DK)  # (L, d, d): e_j at every position
    basis = rotate(eye.transpose(0, 1).contiguous(), offset).transpose(0, 1)  # (L, d, d): R_p e_j, row j
    return torch.einsum("...ld,ljd->...lj", x, basis)  # x . (R_p e_j) = (R_p^T x)_j


def _rope_steps(module) -> tuple[bool, str]:
    """Scores of cached steps (one position per call, offset = cached length, keys kept) against a full pass."""
    q, k = _randn(1, H, 12, DK, seed=4), _randn(1, 1, 12, DK, seed=5)
    rq, rk = module(q, k)
    full = rq @ rk.transpose(-2, -1)  # (1, H, 12, 12)
    keys = []
    for t in range(12):
        sq, sk = module(q[:, :, t:t + 1], k[:, :, t:t + 1], offset=t)
        keys.append(sk)
        row = sq @ torch.cat(keys, dim=-2).transpose(-2, -1)  # (1, H, 1, t + 1)
        gap = _gap(row[..., 0, :], full[..., t, :t + 1])
        if gap > 1e-4:
            return False, (f"a cached step (q and k of position {t} rotated at offset {t}, earlier keys kept) scores "
                           f"differently from the full pass by {gap:.2g} at step {t}: cached and uncached decoding "
                           "would pick different tokens; rotate each step's q and k at offset = the cache's length")
    return True, "12 cached steps, one position per call at offset = cached length, score as the full pass"


def _rope_long(module, build) -> tuple[bool, str]:
    long = build()
    rotate = _rope_rotate(module, max_len=256)
    q, k = _randn(1, 2, LONG, DK, seed=6), _randn(1, 1, LONG, DK, seed=7)
    rq, rk = long(q, k)
    error = torch.maximum((rq - rotate(q)).abs().amax((0, 1, 3)), (rk - rotate(k)).abs().amax((0, 1, 3)))  # (LONG,)
    angles = torch.outer(torch.arange(LONG, dtype=torch.float32), inverse_frequencies(DK))
    rounded = False
    for a in _rounded_angles(angles):
        table = torch.cat((a, a), dim=-1)
        rounded |= _close(rq, q * table.cos() + rotate_half(q) * table.sin(), 1e-3)
        cos, sin = a.cos(), a.sin()
        even, odd = q[..., 0::2], q[..., 1::2]
        rounded |= _close(rq, torch.stack((even * cos - odd * sin, even * sin + odd * cos), -1).flatten(-2), 1e-3)
    return _long_verdict(error.max().item(), int(error.argmax()), rounded)


def _rope_float64(module) -> tuple[bool, str]:
    q, k = _randn(B, H, L, DK), _randn(B, 1, L, DK, seed=1)
    rq, rk = _in_float64(module)(q.double(), k.double())
    if rq.dtype != torch.float64 or rk.dtype != torch.float64:
        return _float64_verdict(rq if rq.dtype != torch.float64 else rk, rotate_half(q))
    rotate = _rope_rotate(module)
    return _float64_verdict(torch.cat((rq, rk), dim=1), torch.cat((rotate(q), rotate(k)), dim=1))


def _rope_offset(module) -> tuple[bool, str]:
    q = _randn(1, H, 10, DK)
    tail = module(q[:, :, 7:], q[:, :, 7:], offset=7)[0]
    gap = _gap(tail, module(q, q)[0][:, :, 7:])
    if gap <= FLOAT32_TOL:
        return True, "forward(q, k, offset=7) rotates at positions 7.., as the KV cache needs"
    ignored = _close(tail, module(q[:, :, 7:], q[:, :, 7:])[0])
    return False, (f"forward(q, k, offset=7) differs from positions 7.. of a full pass by {gap:.2g}"
                   + (": the offset is ignored, every cached decoding step is rotated as position 0" if ignored else "")
                   + "; rotate at positions offset .. offset + L - 1")


# --------------------------------------------------------------------------- BPE: the trainer and the encoder

Pair = tuple[str, str]
BPE_INTERFACE = ("cls.train(texts, vocab_size) (a classmethod, as cipherlab's BPETokenizer), cls().train(texts, "
                 "vocab_size), or fn(texts, vocab_size) -> a tokenizer with .merges [(left, right), ...] in the order "
                 "learned, .vocab_size, .encode(text) -> list of ids and .decode(ids) -> text; pre-tokens of "
                 "split_plaintext, characters as base symbols")
BPE_CORPUS = (
    "the cat sat on the mat and the dog sat on the log",
    "a cat and a dog met at the gate of the old garden",
    "then the cat ran at the rat that ate the oats",
    "the rain in the lane ran down the drain again and again",
    "a man and his dog walked to the dam at ten",
    "that hat on the mat is the hat the cat hated",
)
BPE_UNSEEN = "the old dog ate the  oats at the gate then this dog sat down again "  # a new line: 2 spaces, 1 last
BPE_VOCAB = 60  # cipherlab's BPETokenizer: 3 specials, <unk>, 18 characters and 38 merged tokens
BPE_SPEED_CHARS = (1_000, 10_000)  # the encoder is timed on the first, and on the second unless grossly slow
BPE_SLOWEST = 50  # times cipherlab's encoding time: beyond it the speed check fails
BPE_NOISE_S = 0.02  # an encoding this short passes whatever the ratio: the timer's noise
RUNS_CORPUS = (  # runs of one symbol, long pieces and bit strings: where counting and merging order show
    "aaaa aaa aaaaaa aa aaaaaaaaa",
    "0000 0000 1111 0000 0101 0000000000",
    "10110011 01001110 11100001 00000000 111111111111",
    "abababab baba aaab abababababababab",
    "1111111 000 0110 1001 10000001 0000 0000",
    "aa aaaaaaa ab abab 01 10 0011001100110011",
)
RUNS_UNSEEN = ("aaaaaaaaaaa aaa aaaaa", "0000000000000 11111 000", "0110100110010110 01010101 1110111",
               "abababababa aabbaabb", "00000000 11111111 10101010 0000 0000")
RUNS_VOCAB = 40


def bpe(obj) -> Report:
    """Check a byte-pair-encoding trainer and its encoder.

    ``obj`` is trained on a small corpus as ``obj.train(texts, vocab_size)`` when ``train`` is a
    classmethod (cipherlab's BPETokenizer), ``obj().train(texts, vocab_size)`` (returning the
    tokenizer, or None for the object itself) when it is an ordinary method, else
    ``obj(texts, vocab_size)``. The tokenizer has ``merges``, the (left, right) string pairs in the
    order learned; ``vocab_size``, every id it can return (specials, if any, the base alphabet and
    the merged tokens); ``encode(text)`` -> ids and ``decode(ids)`` -> text. It cuts texts into
    pre-tokens with ``cipherlab.data.tokenizers.split_plaintext`` (whitespace glued to the front of the
    next word) and pieces into characters, counts every adjacent pair within each pre-token
    (overlapping ones too), merges the most frequent, ties to the smallest (left, right) by code
    point, and encodes by replaying the merges in order within each pre-token.
    """
    call = _bpe_call(obj)
    tok = _interface_build(lambda: _bpe_train(obj, list(BPE_CORPUS), BPE_VOCAB), call, BPE_INTERFACE)
    ids = _interface_value(lambda: tok.encode("the cat"), f"{call}.encode('the cat')", BPE_INTERFACE,
                           lambda out: all(isinstance(i, int) or getattr(i, "ndim", 1) == 0 for i in out),
                           "a sequence of int ids")
    _interface_value(lambda: tok.decode([int(i) for i in ids]), f"{call}.decode(ids)", BPE_INTERFACE,
                     lambda out: isinstance(out, str), "a str")
    return _run("bpe", _label(obj), [
        ("merges", partial(_bpe_merges, tok)),
        ("pre-token boundaries", partial(_bpe_boundaries, tok)),
        ("encode", partial(_bpe_encode, tok)),
        ("round trip", partial(_bpe_round_trip, tok)),
        ("vocabulary size", partial(_bpe_vocab, tok)),
        ("runs and bit strings", partial(_bpe_runs, obj)),
        ("speed", partial(_bpe_speed, tok)),
    ])


def _bpe_runs(obj) -> tuple[bool, str]:
    """Trained on RUNS_CORPUS: the textbook loop's merges, and held-out lines encoded as cipherlab's
    BPETokenizer encodes them with the same merges; a difference is named when a known mistake
    (counting, merging direction, first occurrence only) gives it."""
    tok = _bpe_train(obj, list(RUNS_CORPUS), RUNS_VOCAB)
    mine = _pairs(tok)
    pieces = Counter(piece for text in RUNS_CORPUS for piece in split_plaintext(text))
    right = bpe_merges(pieces, len(mine))
    corpus = f"runs of one symbol and bit strings ({RUNS_CORPUS[0][:14]!r}, {RUNS_CORPUS[1][:14]!r}, ...)"
    if mine != right[:len(mine)]:
        i = next((i for i, (a, b) in enumerate(zip(mine, right)) if a != b), len(right))
        bug = next((f"; {words}" for words, pairs in PAIR_COUNTS.items()
                    if bpe_merges(pieces, len(mine), pairs=pairs) == mine), "")
        bug = bug or next((f"; {words}" for words, merge in MERGES.items()
                           if bpe_merges(pieces, len(mine), merge=merge) == mine), "")
        theirs = repr(right[i]) if i < len(right) else "none (the corpus runs out of pairs)"
        return False, f"trained on {corpus}, merge {i} is {mine[i]!r} where the textbook loop learns {theirs}{bug}"
    alphabet = sorted(set("".join(RUNS_CORPUS)))
    ref = BPETokenizer(mine, alphabet, unk=True)
    for text in RUNS_UNSEEN:
        got, expected = _tokens(tok, text), [ref.decode([i]) for i in ref.encode(text)]
        if got != expected:
            bug = next((f"; {words}" for words, merge in MERGES.items()
                        if got == replay(split_plaintext(text), mine, merge)), "")
            first = next((k for k, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
            return False, (f"trained on {corpus}, encoding the unseen {text!r} gives tokens "
                           f"{got[max(first - 1, 0):first + 3]} (from token {first}) where cipherlab's BPETokenizer "
                           f"with your merges gives {expected[max(first - 1, 0):first + 3]}{bug}")
    return True, (f"trained on {corpus}: the textbook loop's {len(mine)} merges, and {len(RUNS_UNSEEN)} unseen lines "
                  "encoded as cipherlab's BPETokenizer encodes them with those merges")


def _bpe_call(obj) -> str:
    """How ``obj`` is trained, in words for an error message."""
    train = inspect.getattr_static(obj, "train", None) if inspect.isclass(obj) else None
    if isinstance(train, (classmethod, staticmethod)):
        return f"{_label(obj)}.train(texts, {BPE_VOCAB})"
    return f"{_label(obj)}().train(texts, {BPE_VOCAB})" if train is not None else f"{_label(obj)}(texts, {BPE_VOCAB})"


def _bpe_train(obj, texts: list[str], vocab_size: int):
    """The tokenizer ``obj`` trains on ``texts`` (see :func:`bpe` for the three ways)."""
    train = inspect.getattr_static(obj, "train", None) if inspect.isclass(obj) else None
    if isinstance(train, (classmethod, staticmethod)):
        return obj.train(texts, vocab_size)
    if train is not None:
        tok = obj()
        out = tok.train(texts, vocab_size)
        return tok if out is None else out
    return obj(texts, vocab_size)


def _interface_value(call: Callable, what: str, interface: str, ok: Callable, expected: str):
    """``call()``, whose result must satisfy ``ok``; an exception or anything else is an InterfaceError."""
    try:
        out = call()
    except Exception as e:
        raise _raised(e, what, interface) from None
    try:
        fits = ok(out)
    except Exception:
        fits = False
    if not fits:
        raise InterfaceError(f"{what} returned {type(out).__name__}, not {expected}; the interface is {interface}")
    return out


def _merged(symbols: tuple[str, ...], pair: Pair) -> tuple[str, ...]:
    """``symbols`` with each occurrence of ``pair``, left to right, joined into one symbol."""
    return merge_left_to_right(symbols, pair)


def _textbook_bpe(texts, n_merges: int) -> list[tuple[Pair, Counter]]:
    """The textbook loop, written here independently of cipherlab's learner: count the adjacent
    pairs within each pre-token weighted by its frequency, merge the most frequent (ties: the
    smallest pair), repeat. Each step's (merged pair, the counts it was chosen from)."""
    pieces = Counter(piece for text in texts for piece in split_plaintext(text))
    words = Counter({tuple(piece): n for piece, n in pieces.items()})
    steps = []
    while len(steps) < n_merges:
        counts = Counter()
        for symbols, n in words.items():
            for pair in zip(symbols, symbols[1:]):
                counts[pair] += n
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        steps.append((best, counts))
        merged = Counter()
        for symbols, n in words.items():
            merged[_merged(symbols, best)] += n
        words = merged
    return steps


def _replay(text: str, merges: list[Pair]) -> list[str]:
    """The tokens of ``text`` by the definition: each pre-token's characters, every merge replayed in order."""
    tokens = []
    for piece in split_plaintext(text):
        symbols = tuple(piece)
        for pair in merges:
            symbols = _merged(symbols, pair)
        tokens.extend(symbols)
    return tokens


def _pairs(tok) -> list[Pair]:
    """The tokenizer's merges as (str, str) tuples; _Unfit when it has none to read."""
    merges = getattr(tok, "merges", None)
    if merges is None:
        raise _Unfit("the tokenizer has no .merges; keep the learned (left, right) pairs, in order, in .merges as "
                     "cipherlab's BPETokenizer does")
    return [(str(left), str(right)) for left, right in merges]


def _tokens(tok, text: str) -> list[str]:
    """The token strings of ``text``: each id of ``tok.encode(text)`` decoded alone."""
    return [tok.decode([int(i)]) for i in tok.encode(text)]


def _spanning(tokens) -> str | None:
    """The first token that holds whitespace after a non-space character, i.e. spans two pre-tokens."""
    return next((t for t in tokens if re.search(r"\S\s", t)), None)


def _bpe_merges(tok) -> tuple[bool, str]:
    mine = _pairs(tok)
    if not mine:
        return False, (f"no merges learned for vocab_size = {BPE_VOCAB}: learn merges until vocab_size ids are used, "
                       "your specials and base symbols counted")
    steps = _textbook_bpe(BPE_CORPUS, len(mine))
    theirs = BPETokenizer.train(BPE_CORPUS, BPE_VOCAB).merges
    for i, pair in enumerate(mine):
        if i >= len(steps):
            return False, f"{len(mine)} merges where the corpus runs out of pairs after {len(steps)}"
        best, counts = steps[i]
        if pair != best:
            return False, f"merge {i}: yours is {pair!r}, the textbook loop's {best!r}; " + _merge_diagnosis(
                pair, best, counts)
    agree = mine[:len(theirs)] == theirs[:len(mine)]
    return agree, (f"the same {len(mine)} merges in the same order as the textbook loop (pairs counted within each "
                   f"pre-token, the most frequent merged, ties to the smallest pair), first {mine[0]!r}, {mine[1]!r}"
                   + ("" if agree else "; but cipherlab's BPETokenizer.train learns others (report this)"))


def _merge_diagnosis(pair: Pair, best: Pair, counts: Counter) -> str:
    """Why ``pair`` rather than ``best`` was merged, read off the pair ``counts`` of that step."""
    joined = pair[0] + pair[1]
    if re.search(r"\S\s", joined):
        return f"merges across pre-token boundaries: token {joined!r} spans a space; count pairs within each pre-token"
    if pair not in counts:
        return (f"{pair!r} is never adjacent inside a pre-token at that step; after the earlier merges count "
                "the pairs of the merged symbols, within each pre-token of split_plaintext")
    if counts[pair] == counts[best]:
        return (f"both occur {counts[best]} times: ties must go to the smallest (left, right) by code point, "
                "min(counts, key=lambda p: (-counts[p], p))")
    return (f"{pair!r} occurs {counts[pair]} times, {best!r} {counts[best]} times: merge the most frequent pair, "
            "each pre-token's pairs weighted by how often it occurs, overlapping pairs ('a', 'a') in 'aaa' counted "
            "twice")


def _bpe_boundaries(tok) -> tuple[bool, str]:
    learned = _spanning(left + right for left, right in _pairs(tok))
    encoded = _spanning(_tokens(tok, BPE_UNSEEN))
    token = learned or encoded
    if token is not None:
        where = "a learned merge" if learned else f"encoding {BPE_UNSEEN!r}"
        return False, (f"merges across pre-token boundaries: token {token!r} spans a space ({where}); "
                       "split_plaintext cuts ' the cat' into ' the' and ' cat', whitespace glued to the front of "
                       "the next word, and no merge may join two pre-tokens")
    return True, ("no learned token and no token of an unseen text holds a space after a letter: merges stay inside "
                  "a pre-token")


def _bpe_encode(tok) -> tuple[bool, str]:
    merges = _pairs(tok)
    for text in (BPE_UNSEEN, _random_text(60, seed=1)):
        mine, expected = _tokens(tok, text), _replay(text, merges)
        if mine != expected:
            first = next(k for k, (a, b) in enumerate(zip(mine + [None] * len(expected), expected)) if a != b)
            bug = _name_encode_bug(mine, text, merges)
            return False, (f"encoding {text!r} gives tokens {mine[max(first - 2, 0):first + 3]} (from token {first}) "
                           f"where replaying your merges in order within each pre-token gives "
                           f"{expected[max(first - 2, 0):first + 3]}{bug}")
    return True, "encodes unseen text as its merges replayed in the order learned, within each pre-token"


def _name_encode_bug(mine: list[str], text: str, merges: list[Pair]) -> str:
    """"; BUG" when ``mine`` is what a usual wrong encoder makes of ``text``, else ""."""
    vocab = {c for c in text} | {left + right for left, right in merges}
    if mine == _longest_match(text, vocab):
        return ("; it takes the longest known token first (greedy longest match): BPE replays the merges in the "
                "order it learned them")
    symbols = tuple(text)
    for pair in merges:
        symbols = _merged(symbols, pair)
    if mine == list(symbols):
        return "; it encodes the whole text as one piece: merges across pre-token boundaries"
    return ""


def _longest_match(text: str, vocab: set[str]) -> list[str]:
    """``text`` cut greedily, left to right, into the longest strings of ``vocab`` (one character at worst)."""
    tokens, i, longest = [], 0, max(map(len, vocab))
    while i < len(text):
        n = next(n for n in range(min(longest, len(text) - i), 0, -1) if n == 1 or text[i:i + n] in vocab)
        tokens.append(text[i:i + n])
        i += n
    return tokens


def _random_text(n: int, seed: int) -> str:
    """``n`` random characters of the corpus's alphabet, spaces (runs of them too) included."""
    alphabet = sorted(set("".join(BPE_CORPUS)))
    return "".join(random.Random(seed).choices(alphabet, k=n))


def _bpe_round_trip(tok) -> tuple[bool, str]:
    texts = [BPE_UNSEEN, "  the   cat ", "t", "", *(_random_text(40 + 10 * k, seed=k) for k in range(3))]
    for text in texts:
        out = tok.decode([int(i) for i in tok.encode(text)])
        if out != text:
            return False, (f"decode(encode({text!r})) gives {out!r}: every character, spaces included, must come "
                           "back (pre-tokens concatenate to the text; decode joins the token strings)")
    return True, f"decode(encode(text)) gives text back for {len(texts)} unseen texts (random strings and '' too)"


def _bpe_vocab(tok) -> tuple[bool, str]:
    size = getattr(tok, "vocab_size", None)
    size = size() if callable(size) else size
    if not isinstance(size, int):
        raise _Unfit("the tokenizer has no int .vocab_size; give it the number of ids it can return")
    alphabet = len(set("".join(BPE_CORPUS)))
    ids = [int(i) for text in (BPE_UNSEEN, _random_text(200, seed=5)) for i in tok.encode(text)]
    merges = len(_pairs(tok))
    if size != BPE_VOCAB:
        return False, f"vocab_size is {size} where {BPE_VOCAB} was asked for (the corpus has pairs enough to fill it)"
    if merges > BPE_VOCAB - alphabet:
        return False, (f"{merges} merges: with {alphabet} base characters a vocabulary of {BPE_VOCAB} holds at most "
                       f"{BPE_VOCAB - alphabet} merged tokens; stop merging when the vocabulary is full")
    if min(ids) < 0 or max(ids) >= size:
        return False, f"encode returns ids {min(ids)}..{max(ids)}, outside 0..{size - 1} (vocab_size {size})"
    return True, f"vocab_size {size} as asked, {merges} merges on {alphabet} characters, every id in 0..{size - 1}"


def _encode_seconds(tok, text: str) -> float:
    start = time.perf_counter()
    tok.encode(text)
    return time.perf_counter() - start


def _speed_ratio(tok, ref: BPETokenizer, n_chars: int) -> tuple[float, float, float]:
    """(ratio, seconds, reference seconds) encoding ``n_chars`` characters: the best of up to three fresh
    texts (a timing is only ever too long, never too short), each against a fresh, cold reference."""
    best = (math.inf, math.inf, math.inf)
    for attempt in range(3):
        text = _speed_text(n_chars, seed=attempt)
        mine = _encode_seconds(tok, text)
        theirs = min(_encode_seconds(BPETokenizer(ref.merges, ref.alphabet, unk=True), text) for _ in range(3))
        best = min(best, (mine / max(theirs, 1e-6), mine, theirs))
        if best[0] <= BPE_SLOWEST or best[0] > 4 * BPE_SLOWEST or best[1] <= BPE_NOISE_S:
            break  # retried only near the limit, where a busy machine could tip the verdict
    return best


def _bpe_speed(tok) -> tuple[bool, str]:
    if type(tok) is BPETokenizer:
        return True, (f"this is cipherlab's own BPETokenizer, the yardstick: an encoder passes within {BPE_SLOWEST}x "
                      f"its time on {BPE_SPEED_CHARS[-1]:,} characters")
    ref = BPETokenizer.train(BPE_CORPUS, BPE_VOCAB)
    for n in BPE_SPEED_CHARS:  # the short text first: a grossly slow encoder fails before the long one
        ratio, mine, theirs = _speed_ratio(tok, ref, n)
        if ratio > BPE_SLOWEST and mine > BPE_NOISE_S:
            return False, (f"encoding {n:,} characters takes {mine:.2f} s, {ratio:.0f}x cipherlab's {theirs * 1e3:.1f} "
                           f"ms, grossly slower (the limit is {BPE_SLOWEST}x): look up each pair's merge rank in a "
                           "dict and merge the lowest-ranked pair present, piece by piece, memoising repeated words")
    return True, (f"encodes {n:,} characters in {mine * 1e3:.0f} ms, {ratio:.1f}x cipherlab's time "
                  f"(limit {BPE_SLOWEST}x)")


def _speed_text(n_chars: int, seed: int = 0) -> str:
    """``n_chars`` characters of text: mostly the corpus's words, some random ones, as natural text repeats."""
    rng = random.Random(n_chars + seed)
    words = sorted(set(" ".join(BPE_CORPUS).split()))
    letters = sorted(set("".join(BPE_CORPUS)) - {" "})
    out, size = [], 0
    while size < n_chars:
        word = rng.choice(words) if rng.random() < 0.8 else "".join(rng.choices(letters, k=rng.randint(3, 9)))
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:n_chars]


# --------------------------------------------------------------------------- BLT: the entropy patcher

PATCHER_INTERFACE = ("fn(entropies, threshold, max_patch) -> the patch start indices: entropies (L,) floats, byte i's "
                     "entropy in bits given the bytes before it; a patch starts at 0, at each i with entropies[i] > "
                     "threshold, and after max_patch bytes without a start; a class is built with no arguments")
MAX_PATCHES = (3, 5)  # the max_patch values the patcher is checked at


def patcher(obj) -> Report:
    """Check an entropy patcher: where the BLT's source patches begin.

    ``obj``: a function (or an object, or a class built with no arguments, that is called)
    ``fn(entropies, threshold, max_patch)`` -> the start index of every patch, 0 first, rising
    (a list of ints; none for an empty sequence). ``entropies`` (L,) float64, a numpy array as
    ``ByteEntropyModel.entropy_curve`` returns it: the entropy in bits of byte i's distribution
    given the bytes before it. A patch starts at i when ``entropies[i] > threshold`` or when the
    running patch already holds ``max_patch`` bytes, as ``ByteEntropyModel.patch_boundaries``.
    """
    fn = _interface_build(lambda: obj(), f"{obj.__name__}()", PATCHER_INTERFACE) if inspect.isclass(obj) else obj
    curve = _entropy_curves()[0]
    _interface_value(lambda: fn(curve, float(np.median(curve)), 4), f"{_label(obj)}(entropies, threshold, 4)",
                     PATCHER_INTERFACE, _int_list, "a list of int start indices")
    return _run("patcher", _label(obj), [
        ("starts", partial(_patcher_starts, fn)),
        ("reference", partial(_patcher_reference, fn)),
        ("max patch", partial(_patcher_max_patch, fn)),
        ("threshold", partial(_patcher_threshold, fn)),
        ("prefix", partial(_patcher_prefix, fn)),
    ])


def _int_list(out) -> bool:
    return all(float(s) == int(s) for s in out)


def _starts(fn, curve, threshold: float, max_patch: int) -> list[int]:
    return [int(s) for s in fn(np.asarray(curve, dtype=np.float64), float(threshold), max_patch)]


class _GivenCurve(ByteEntropyModel):
    """A ByteEntropyModel whose entropy curve is given: cipherlab's own patch_boundaries on any curve."""

    def __init__(self, curve):
        super().__init__()
        self.curve = np.asarray(curve, dtype=np.float64)

    def entropy_curve(self, seq=None) -> np.ndarray:
        return self.curve


def _reference_starts(curve, threshold: float, max_patch: int) -> list[int]:
    return _GivenCurve(curve).patch_boundaries(None, threshold, max_patch)


def _entropy_curves() -> list[np.ndarray]:
    """Two curves: a real one (an order-2 byte model of the BPE corpus on an unseen line) and random
    entropies on a 0.25-bit grid, so that thresholds equal to an entropy occur."""
    model = ByteEntropyModel(min_count=1).fit([line.encode() for line in BPE_CORPUS])
    real = model.entropy_curve(BPE_UNSEEN.encode())
    grid = np.random.default_rng(0).integers(0, 13, 40) / 4
    return [real, grid]


def _patcher_cases():
    """(curve, threshold, max_patch): each curve at thresholds on, between and around its values."""
    for curve in _entropy_curves():
        for threshold in (*np.quantile(curve, [0.3, 0.6]), float(curve[5]), float(np.median(curve))):
            for max_patch in MAX_PATCHES:
                yield curve, float(threshold), max_patch


def _patcher_starts(fn) -> tuple[bool, str]:
    curve = _entropy_curves()[0]
    if _starts(fn, curve[:0], 1.0, 4) != []:
        return False, "an empty sequence gives patches; it has none (an empty list)"
    for curve, threshold, max_patch in _patcher_cases():
        starts = _starts(fn, curve, threshold, max_patch)
        if not starts or starts[0] != 0 or any(a >= b for a, b in zip(starts, starts[1:])) or starts[-1] >= len(curve):
            return False, (f"starts {starts[:12]} for {len(curve)} bytes: the first patch starts at 0, and the "
                           f"starts rise strictly and stay below the length")
    return True, "starts at 0, rising strictly, below the length; none for an empty sequence"


def _loop_starts(curve, threshold: float, max_patch: float, starts_at=operator.gt) -> list[int]:
    """Byte by byte: a patch starts at 0, where ``starts_at(entropy, threshold)``, or after ``max_patch`` bytes."""
    starts, run = [], 0
    for i, h in enumerate(curve):
        if i == 0 or starts_at(h, threshold) or run >= max_patch:
            starts.append(i)
            run = 0
        run += 1
    return starts


def _patcher_suspects(curve, threshold: float, max_patch: int) -> dict[str, list[int]]:
    """The starts of the usual wrong patchers, by their bug."""
    fixed = sorted({0, *np.flatnonzero(curve > threshold).tolist(), *range(0, len(curve), max_patch)})
    return {"a patch starts where the entropy EQUALS the threshold too (>=); it starts only above it (>)":
            _loop_starts(curve, threshold, max_patch, operator.ge),
            "patches start where the entropy is BELOW the threshold; a boundary goes where the next byte is hard "
            "to predict, entropy > threshold": _loop_starts(curve, threshold, max_patch, operator.lt),
            "max_patch is not applied: a patch must end after max_patch bytes":
            _loop_starts(curve, threshold, math.inf),
            "the patches hold max_patch + 1 bytes: start a new patch once the running one holds max_patch":
            _loop_starts(curve, threshold, max_patch + 1),
            "the forced starts sit at multiples of max_patch; count max_patch bytes from each patch's own start":
            fixed}


def _patcher_reference(fn) -> tuple[bool, str]:
    cases = list(_patcher_cases())
    for curve, threshold, max_patch in cases:
        mine, theirs = _starts(fn, curve, threshold, max_patch), _reference_starts(curve, threshold, max_patch)
        if mine != theirs:
            first = next((k for k, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
            bugs = _patcher_suspects(curve, threshold, max_patch)
            bug = next((f"; {name}" for name, starts in bugs.items() if starts == mine), "")
            return False, (f"at threshold {threshold:.3g}, max_patch {max_patch}: starts {mine[first:first + 6]} "
                           f"(from patch {first}) where ByteEntropyModel.patch_boundaries gives "
                           f"{theirs[first:first + 6]}{bug}")
    return True, f"agrees with ByteEntropyModel.patch_boundaries on {len(cases)} curves, thresholds and max_patch"


def _patcher_max_patch(fn) -> tuple[bool, str]:
    for curve in _entropy_curves():
        for max_patch in MAX_PATCHES:
            lengths = np.diff([*_starts(fn, curve, curve.max() + 1, max_patch), len(curve)]).tolist()
            if lengths[:-1] != [max_patch] * (len(lengths) - 1) or lengths[-1] > max_patch:
                return False, (f"with the threshold above every entropy and max_patch {max_patch}, the patches hold "
                               f"{lengths[:8]} bytes: each must end after max_patch bytes (the last may be shorter)")
    return True, f"above every entropy, patches of exactly max_patch bytes ({', '.join(map(str, MAX_PATCHES))})"


def _patcher_threshold(fn) -> tuple[bool, str]:
    for curve in _entropy_curves():
        levels = [curve.min() - 1, *np.unique(curve), curve.max() + 1]
        counts = [len(_starts(fn, curve, t, 4)) for t in levels]
        if counts[0] != len(curve):
            return False, (f"with the threshold below every entropy, {counts[0]} patches for {len(curve)} bytes: "
                           "every byte's entropy is above it, so every byte starts a patch")
        rise = next((k for k in range(1, len(counts)) if counts[k] > counts[k - 1]), None)
        if rise is not None:
            return False, (f"raising the threshold from {levels[rise - 1]:.3g} to {levels[rise]:.3g} bits makes "
                           f"{counts[rise - 1]} patches {counts[rise]}: a higher threshold may only merge patches")
    return True, "a higher threshold never makes more patches; below every entropy every byte starts one"


def _patcher_prefix(fn) -> tuple[bool, str]:
    for curve, threshold, max_patch in list(_patcher_cases())[:: len(MAX_PATCHES)]:
        whole = _starts(fn, curve, threshold, max_patch)
        for n in range(1, len(curve)):
            if _starts(fn, curve[:n], threshold, max_patch) != [s for s in whole if s < n]:
                return False, (f"the patches of the first {n} bytes are not those of the whole sequence cut at {n}: "
                               "a boundary at i depends on entropies after i; it may read entropies[0..i] only, so "
                               "that the patches of a prefix never change as bytes are appended")
    return True, "the patches of every prefix are those of the whole sequence: no boundary looks ahead"


# --------------------------------------------------------------------------- BLT: patch pooling

POOLING_INTERFACE = ("cls(d_model, n_heads) with forward(x (B, L, D), member (B, K, L) bool) -> (pooled (B, K, D), "
                     "empty (B, K) bool): patch k pools the bytes i with member[b, k, i], an empty patch gives zeros")


def pooling(cls) -> Report:
    """Check patch pooling: one vector per patch from the vectors of its bytes (the BLT's PatchPooling).

    ``cls(d_model, n_heads)``, put in eval mode, with forward(x (B, L, D) byte vectors,
    member (B, K, L) bool, True where byte i is in patch k) -> (pooled (B, K, D), empty (B, K) bool,
    True for a patch with no bytes, whose vector is zeros). Each patch reads its own bytes only, and
    its vector depends on their order (the byte vectors carry their positions). As cipherlab's
    PatchPooling: a learned query (D,) attends over the patch's bytes, then a LayerNorm; with its
    parameter names (query, attn.q_proj ... attn.o_proj, norm.gamma, norm.beta) the weights are copied
    into the reference for the comparison.
    """
    build = f"{_label(cls)}({D_MODEL}, {N_HEADS})"
    module = _interface_build(lambda: cls(D_MODEL, N_HEADS), build, POOLING_INTERFACE)
    if isinstance(module, nn.Module):
        module.eval()
    x, member = _pooling_input()
    _interface_value(lambda: module(x, member), f"{build}(x, member)", POOLING_INTERFACE,
                     lambda out: isinstance(out, tuple) and all(isinstance(t, torch.Tensor) for t in out)
                     and len(out) == 2, "a pair of tensors (pooled, empty)")
    return _run("pooling", _label(cls), [
        ("shape", partial(_pooling_shape, module)),
        ("empty patches", partial(_pooling_empty, module)),
        ("own bytes", partial(_pooling_own_bytes, module)),
        ("order", partial(_pooling_order, module)),
        ("reference", partial(_pooling_reference, module)),
    ])


def _pooling_input(content: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """x (2, 10, D): content plus sinusoidal byte positions, as the BLT pools them; member (2, 4, 10):
    row 0 patches [0, 3) [3, 4) [4, 8) [8, 10); row 1 patches [0, 5) [5, 7), two empty patches and
    three padding bytes."""
    content = _randn(2, 10, D_MODEL, seed=11) if content is None else content
    positions = SinusoidalPositionalEncoding(D_MODEL, max_len=16, dropout=0.0)
    return positions(content), patch_membership([[0, 3, 4, 8], [0, 5]], [10, 7], 10)


def _pooling_out(module, content=None) -> torch.Tensor:
    return module(*_pooling_input(content))[0]


def _pooling_shape(module) -> tuple[bool, str]:
    x, member = _pooling_input()
    pooled, empty = module(x, member)
    expected = torch.tensor([[False] * 4, [False, False, True, True]])
    if tuple(pooled.shape) != (2, 4, D_MODEL) or pooled.dtype != torch.float32:
        return False, f"pooled is {tuple(pooled.shape)} {str(pooled.dtype)[6:]}; expected (2, 4, {D_MODEL}) float32"
    if not isinstance(empty, torch.Tensor) or empty.dtype != torch.bool or not torch.equal(empty, expected):
        return False, f"empty is {empty!r}; expected (B, K) bool, True exactly for the patches with no byte"
    return True, f"pooled (2, 4, {D_MODEL}) float32 and empty (2, 4) bool for 2 rows of 4 patches (2 empty)"


def _pooling_empty(module) -> tuple[bool, str]:
    pooled = _pooling_out(module)
    if not torch.isfinite(pooled).all():
        return False, ("an empty patch gives NaN or inf: its attention sees no key (a softmax over nothing); output "
                       "zeros for it, as ScaledDotProductAttention does for a row that sees no key")
    if pooled[1, 2:].abs().max() > 1e-6:
        return False, f"an empty patch gives values up to {pooled[1, 2:].abs().max():.2g}, not zeros"
    return True, "an empty patch gives a zero vector, no NaN"


def _pooling_own_bytes(module) -> tuple[bool, str]:
    content = _randn(2, 10, D_MODEL, seed=11)
    base = _pooling_out(module, content)
    for (row, bytes_, patch), what in (((0, [3], 1), "the byte of patch 1"), ((1, [7, 8, 9], None), "padding bytes")):
        changed = content.clone()
        changed[row, bytes_] = _randn(len(bytes_), D_MODEL, seed=12)
        moved = (_pooling_out(module, changed) - base).abs().amax(-1)  # (2, 4)
        if patch is not None:
            moved[row, patch] = 0
        if moved.max() > 1e-6:
            b, k = divmod(int(moved.argmax()), moved.size(1))
            return False, (f"changing only {what} (row {row}) changes pooled patch {k} of row {b} by "
                           f"{moved.max():.2g}: "
                           "a patch reads bytes outside it; attend over member[b, k]'s bytes only (mask the others)")
    return True, "each patch reads its own bytes only: changing one patch's bytes, or padding, moves no other patch"


def _pooling_order(module) -> tuple[bool, str]:
    content = _randn(2, 10, D_MODEL, seed=11)
    swapped = content[:, [2, 1, 0, *range(3, 10)]]  # bytes 0 and 2 of patch 0 swap places, positions stay
    gap = (_pooling_out(module, swapped)[0, 0] - _pooling_out(module, content)[0, 0]).abs().max().item()
    if gap > 1e-4:
        return True, f"swapping two bytes inside a patch changes its vector (by up to {gap:.2g}): it sees their order"
    x, member = _pooling_input(content)
    mean = member.float() @ x / member.sum(-1, keepdim=True).clamp(min=1)
    pooled = _pooling_out(module, content)[0]
    is_mean = any(_close(pooled, m[0], 1e-4) for m in (mean, F.layer_norm(mean, (D_MODEL,), eps=1e-5)))
    return False, ("swapping two bytes inside a patch leaves its vector unchanged: "
                   + ("it is the mean of its bytes' vectors, " if is_mean else "")
                   + "blind to their order, as a mean of (content + position) vectors is (the 'bag of bits' bug); "
                   "pool with attention, a learned query over the patch's bytes")


def _pooling_reference(module) -> tuple[bool, str]:
    ref = PatchPooling(D_MODEL, N_HEADS, dropout=0.0).eval()
    try:
        ref.load_state_dict(module.state_dict())
    except Exception as e:
        names = sorted({n.rsplit(".", 1)[0] if n.startswith("attn.") else n for n in module.state_dict()})
        raise _Unfit(f"cannot copy its weights ({', '.join(names) or 'none'}) into cipherlab's PatchPooling "
                     f"({type(e).__name__}); name them as it does: query (D,), attn.q_proj, attn.k_proj, attn.v_proj, "
                     "attn.o_proj (nn.Linear), norm.gamma, norm.beta") from None
    x, member = _pooling_input()
    gap = _gap(module(x, member)[0], ref(x, member)[0])
    if gap <= FLOAT32_TOL:
        return True, f"with its weights copied, agrees with cipherlab's PatchPooling (max difference {gap:.1e})"
    return False, f"with its weights copied, differs from cipherlab's PatchPooling by up to {gap:.2g}"


# --------------------------------------------------------------------------- BLT: the patch-causal mask

PATCH_MASK_INTERFACE = ("fn(Lt, K, patch) -> (1, 1, Lt, K) bool (or anything that broadcasts to (Lt, K)), True = "
                        "BLOCKED: decoder-input byte i may read global slot j iff slot j pools only bytes 0..i")


def patch_mask(fn) -> Report:
    """Check the BLT's patch-causal mask: which global slots each target byte may read.

    ``fn(Lt, K, patch)`` -> bool, (1, 1, Lt, K) as cipherlab's ``patch_causal_mask`` or anything
    that broadcasts to (Lt, K), True = BLOCKED. Slot 0 is the start patch; slot j >= 1 pools target
    patch j - 1, decoder-input positions (j - 1) * patch .. j * patch - 1. Byte i predicts byte
    i + 1, so it may read exactly the slots that pool nothing after i: j <= (i + 1) // patch.
    """
    _interface(lambda: fn(8, 3, 4), f"{_label(fn)}(8, 3, 4)", PATCH_MASK_INTERFACE)
    return _run("patch_mask", _label(fn), [
        ("shape", partial(_mask_shape, fn)),
        ("no leak", partial(_mask_no_leak, fn)),
        ("no over-blocking", partial(_mask_complete, fn)),
        ("reference", partial(_mask_reference, fn)),
        ("in a model", partial(_mask_in_model, fn)),
    ])


def _mask_grid():
    """(Lt, K, patch) for patch 1..4 and Lt up to 13, K = Lt // patch + 1 slots, as BLTModel makes them."""
    return [(lt, lt // p + 1, p) for p in range(1, 5) for lt in range(1, 14)]


def _mask(fn, lt: int, k: int, p: int) -> torch.Tensor:
    """(Lt, K) bool, True = blocked."""
    return torch.as_tensor(fn(lt, k, p)).expand(1, 1, lt, k)[0, 0]


def _mask_shape(fn) -> tuple[bool, str]:
    out = torch.as_tensor(fn(13, 4, 4))
    try:
        out.expand(1, 1, 13, 4)
    except RuntimeError:
        return False, f"fn(13, 4, 4) is {tuple(out.shape)}; expected (1, 1, 13, 4) (Lt rows, K slots)"
    if out.dtype != torch.bool:
        return False, f"fn(13, 4, 4) is {str(out.dtype)[6:]}; expected bool, True = blocked"
    return True, f"fn(13, 4, 4) is {tuple(out.shape)} bool"


def _first_wrong(fn, wrong: Callable[[bool, int, int, int], bool]):
    """The first (Lt, K, patch, i, j) over the grid where ``wrong(byte i may read slot j, i, j, patch)``, else None."""
    for lt, k, p in _mask_grid():
        allowed = ~_mask(fn, lt, k, p)
        for i, j in itertools.product(range(lt), range(k)):
            if wrong(bool(allowed[i, j]), i, j, p):
                return lt, k, p, i, j
    return None


def _mask_no_leak(fn) -> tuple[bool, str]:
    found = _first_wrong(fn, lambda allowed, i, j, p: allowed and j * p - 1 > i)
    if found is None:
        return True, "no byte i may read a slot that pools a position after i"
    lt, k, p, i, j = found
    own = " (the slot of its own patch)" if j == i // p + 1 else ""
    return False, (f"byte {i} may read slot {j}{own}, which pools positions {(j - 1) * p}..{j * p - 1} (patch = {p}, "
                   f"Lt = {lt}): it sees bytes after itself, byte {i + 1}, the one it must predict, among them, so "
                   "under teacher forcing the answer leaks; block slot j unless j <= (i + 1) // patch")


def _mask_complete(fn) -> tuple[bool, str]:
    found = _first_wrong(fn, lambda allowed, i, j, p: not allowed and j * p - 1 <= i)
    if found is None:
        return True, "every byte may read every slot whose bytes it has read, slot 0 (the start patch) included"
    lt, k, p, i, j = found
    return False, (f"byte {i} is blocked from slot {j}, which pools only positions up to {j * p - 1} <= {i} (patch = "
                   f"{p}, Lt = {lt}): it loses a complete patch it is entitled to (j <= (i + 1) // patch, "
                   "not i // patch)" + ("; slot 0 must be open to every byte" if j == 0 else ""))


def _mask_reference(fn) -> tuple[bool, str]:
    grid = _mask_grid()
    for lt, k, p in grid:
        mine, theirs = _mask(fn, lt, k, p), patch_causal_mask(lt, k, p)[0, 0]
        if not torch.equal(mine, theirs):
            i, j = (int(t) for t in (mine != theirs).nonzero()[0])
            keep = " (read as True = keep: cipherlab's masks are True = BLOCKED)" if torch.equal(mine, ~theirs) else ""
            return False, (f"differs from patch_causal_mask at Lt = {lt}, K = {k}, patch = {p}: byte {i}, slot {j} is "
                           f"{'blocked' if mine[i, j] else 'open'}{keep}")
    return True, f"equals cipherlab's patch_causal_mask on {len(grid)} sizes (patch 1..4, Lt 1..13)"


def _mask_in_model(fn) -> tuple[bool, str]:
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = BLTModel(**{**BLT_SIZES, "patch_tgt": 3}).eval()
    # fn in place of patch_causal_mask: BLTModel.decode reads its mask from model.patch_mask
    model.patch_mask = lambda lt, k, device=None: torch.as_tensor(fn(lt, k, model.patch_tgt))
    src, member, tgt_in = _decoding_batch(1, 13, blt=True)

    def logits(tgt):
        return model(src, member, tgt)

    base = logits(tgt_in)
    leaks = []
    for i in range(tgt_in.size(1) - 1):
        changed = tgt_in.clone()
        changed[0, i + 1] = changed[0, i + 1] % 26 + ord("a")  # another letter
        leaks += [i] if _gap(logits(changed)[0, i], base[0, i]) > 1e-6 else []
    if leaks:
        return False, (f"in a tiny BLT (patch_tgt = 3) with this mask, the logits at positions {leaks} change when "
                       "only tgt_in[i + 1], the byte position i must predict, changes: the answer leaks")
    return True, "in a tiny BLT (patch_tgt = 3), no position's logits change when only the byte it predicts changes"


# --------------------------------------------------------------------------- a whole model's incremental decoding

DECODING_SIZES = dict(d_model=32, n_heads=4, enc_layers=1, dec_layers=1, ffn_dim=64, dropout=0.0)
BLT_SIZES = {**DECODING_SIZES, "local_layers": 1, "window": 8, "patch_tgt": 4, "source_memory": "bytes",
             "max_len": 128, **SPECIAL_IDS}
DECODING_INTERFACE = (f"a model class built as cls({VOCAB_SIZE}, {VOCAB_SIZE}, d_model=32, n_heads=4, enc_layers=1, "
                      "dec_layers=1, ffn_dim=64, dropout=0.0), or a function with no arguments returning a model, with "
                      "model(src, tgt_in) -> logits (B, Lt, V), model.begin_decoding(src) -> state and "
                      "model.decode_step(state, tokens (B,)) -> logits (B, V); a BLT takes src_member after src")
DECODE_TOL = 1e-4  # cached against full-pass logits: the same sums in another order


def decoding(obj) -> Report:
    """Check a whole model's incremental decoding: ``begin_decoding`` and ``decode_step`` with a cache.

    ``obj`` is a model class, built (seeded) as ``cls(259, 259, d_model=32, n_heads=4, enc_layers=1,
    dec_layers=1, ffn_dim=64, dropout=0.0)`` like cipherlab's Seq2SeqTransformer (a BLTModel
    subclass as ``cls(d_model=32, ..., window=8, patch_tgt=4)``), or a function with no arguments
    that returns a model; it is put in eval mode. Ids are bytes: source 0..255, target BOS = 257
    then lowercase letters. ``model(src, tgt_in)`` -> teacher-forced logits (B, Lt, V), position i
    predicting tgt_in[i + 1]; ``model.begin_decoding(src)`` -> a state (encoder run once, empty
    cache); ``model.decode_step(state, tokens)`` feeds tokens (B,), the ids at the next target
    position, and returns that position's logits (B, V), as cipherlab.pipeline.decode drives every model.
    A BLT takes ``src_member`` (B, Ks, Ls) after ``src`` in the call and in begin_decoding.
    """
    model = _interface_build(lambda: _build_model(obj), _decoding_call(obj), DECODING_INTERFACE)
    if isinstance(model, nn.Module):
        model.eval()
    blt = _takes(model.begin_decoding, "src_member") if hasattr(model, "begin_decoding") else False
    src, member, tgt_in = _decoding_batch(2, 8, blt)
    head = (src, member) if blt else (src,)
    _interface(lambda: model(*head, tgt_in), f"{_label(obj)} model(src{', src_member' * blt}, tgt_in)",
               DECODING_INTERFACE)
    _interface(lambda: model.decode_step(model.begin_decoding(*head), tgt_in[:, 0]),
               f"model.decode_step(model.begin_decoding(src{', src_member' * blt}), tokens)", DECODING_INTERFACE)
    return _run("decoding", _label(obj), [
        ("shape", partial(_decoding_shape, model, head, tgt_in)),
        ("causality", partial(_decoding_causality, model, head, tgt_in)),
        ("cache", partial(_decoding_cache, model, head, tgt_in)),
        ("greedy", partial(_decoding_greedy, model, head, tgt_in)),
        ("batch rows", partial(_decoding_rows, model, head, tgt_in)),
        *([] if blt else [("source padding", partial(_decoding_padding, model, src, tgt_in))]),
    ])


def _decoding_call(obj) -> str:
    if not inspect.isclass(obj):
        return f"{_label(obj)}()"
    if issubclass(obj, BLTModel):
        return f"{obj.__name__}({', '.join(f'{k}={v}' for k, v in BLT_SIZES.items())})"
    return f"{obj.__name__}({VOCAB_SIZE}, {VOCAB_SIZE}, {', '.join(f'{k}={v}' for k, v in DECODING_SIZES.items())})"


def _build_model(obj):
    """The model ``obj`` builds (see :func:`decoding`), its weights drawn from seed 0."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        if not inspect.isclass(obj):
            return obj()
        if issubclass(obj, BLTModel):
            return obj(**BLT_SIZES)
        return obj(VOCAB_SIZE, VOCAB_SIZE, **DECODING_SIZES)


def _decoding_batch(n: int, length: int, blt: bool):
    """src (n, 12) cipher bytes 1..255 (never 0, a default PAD id), src_member (n, 4, 12) 3-byte patches
    for a BLT (else None), tgt_in (n, length) = BOS + lowercase letters."""
    gen = torch.Generator().manual_seed(n * 100 + length)
    src = torch.randint(1, 256, (n, 12), generator=gen)
    member = patch_membership([[0, 3, 6, 9]] * n, [12] * n, 12) if blt else None
    letters = torch.randint(ord("a"), ord("z") + 1, (n, length - 1), generator=gen)
    return src, member, torch.cat([torch.full((n, 1), BOS_ID), letters], dim=1)


def _step_all(model, head, tgt_in: torch.Tensor) -> torch.Tensor:
    """(B, Lt, V): the logits of decode_step fed tgt_in one position at a time from a fresh state."""
    state = model.begin_decoding(*head)
    return torch.stack([model.decode_step(state, tgt_in[:, t]) for t in range(tgt_in.size(1))], dim=1)


def _decoding_shape(model, head, tgt_in) -> tuple[bool, str]:
    full = _finite(model(*head, tgt_in))
    step = _finite(model.decode_step(model.begin_decoding(*head), tgt_in[:, 0]))
    B, Lt = tgt_in.shape
    if full.dim() != 3 or full.shape[:2] != (B, Lt) or tuple(step.shape) != (B, full.size(-1)):
        return False, (f"model(..., tgt_in {tuple(tgt_in.shape)}) gives {tuple(full.shape)} and decode_step "
                       f"{tuple(step.shape)}; expected (B, Lt, V) and (B, V)")
    return True, f"model(...) gives (B, Lt, V) = {tuple(full.shape)} and decode_step (B, V) = {tuple(step.shape)}"


def _decoding_causality(model, head, tgt_in) -> tuple[bool, str]:
    base = model(*head, tgt_in)
    for at in range(1, tgt_in.size(1)):
        changed = tgt_in.clone()
        changed[:, at:] = changed[:, at:] % 26 + ord("a")  # other letters from position at on
        gap = _gap(model(*head, changed)[:, :at], base[:, :at])
        if gap > 1e-6:
            where = "position 0" if at == 1 else f"positions 0..{at - 1}"
            return False, (f"the teacher-forced logits at target {where} change by up to {gap:.2g} when only "
                           f"positions {at}.. change: a later target position leaks backwards; position i "
                           "predicts tgt_in[i + 1] and may read tgt_in[0..i] only (a causal mask on the decoder's "
                           "self-attention, and nothing else that mixes target positions)")
    return True, "no teacher-forced logit changes when only later target positions change"


def _decoding_cache(model, head, tgt_in) -> tuple[bool, str]:
    stepped, full = _step_all(model, head, tgt_in), model(*head, tgt_in)
    gaps = (stepped - full).abs().flatten(2).amax(-1).amax(0)  # (Lt,) per position
    if gaps.max() <= DECODE_TOL:
        return True, (f"decode_step, fed one token at a time through the cache, gives the full pass's logits "
                      f"(max difference {gaps.max():.1e}, tolerance {DECODE_TOL:g})")
    t = int((gaps > DECODE_TOL).nonzero()[0])
    said = (f"decode_step's logits at target position {t} differ from the full teacher-forced pass by "
            f"{gaps[t]:.2g} (tolerance {DECODE_TOL:g})")
    if not _decoding_causality(model, head, tgt_in)[0]:
        return False, said + "; the full pass is not causal (see 'causality'), so no cache can match it"
    if t == 0:
        return False, said + ": already the first step differs; begin_decoding must encode the source as forward does"
    ignored = _offset_ignored(model, head, tgt_in)
    if ignored:
        return False, (said + f" (position 0 agrees): the cache ignores the position offset: {ignored}; a step at "
                       "target position t must be embedded and rotated at position t (offset = the cache's length)")
    return False, (said + " (position 0 agrees): each step must see the keys and values of every earlier position "
                   "(appended to the cache) at their own positions, the new token at position t")


def _offset_ignored(model, head, tgt_in) -> str:
    """Words for the position modules (those whose forward takes ``offset``) that ignore it: called
    with offset 0 at a cached step t > 0, or giving at offset 7 what they give at 0. "" if none."""
    found, seen = [], {}

    def record(name):
        def hook(module, args, kwargs):
            try:
                bound = inspect.signature(module.forward).bind(*args, **kwargs)
                seen.setdefault(name, set()).add(int(bound.arguments.get("offset", 0) or 0))
            except (TypeError, ValueError):
                pass
        return hook

    modules = [(n, m) for n, m in model.named_modules() if n and _takes(m.forward, "offset")]
    handles = [m.register_forward_pre_hook(record(n), with_kwargs=True) for n, m in modules]
    try:
        state = model.begin_decoding(*head)
        seen.clear()
        for t in range(tgt_in.size(1)):
            model.decode_step(state, tgt_in[:, t])
    finally:
        for h in handles:
            h.remove()
    found += [f"{n} is only ever called with offset 0" for n, offsets in seen.items() if offsets == {0}]
    found += [f"{n}(..., offset=7) gives what offset=0 gives" for n, m in modules if _blind_to_offset(m)]
    return "; ".join(found)


def _blind_to_offset(module) -> bool:
    """Whether a RoPE (it has head_dim) or absolute position module (a 2-D table) gives the same at offsets 0 and 7."""
    try:
        if isinstance(getattr(module, "head_dim", None), int):
            q = _randn(1, 1, 3, module.head_dim)
            return _close(module(q, q, offset=7)[0], module(q, q, offset=0)[0])
        table = getattr(module, "table", None)
        if isinstance(table, torch.Tensor) and table.dim() == 2:
            x = _randn(1, 3, table.size(1))
            return _close(module(x, offset=7), module(x, offset=0))
    except Exception:
        return False
    return False


def _greedy(model, head, bos: torch.Tensor, steps: int, cached: bool) -> torch.Tensor:
    """(B, steps) argmax tokens after ``bos`` (B, 1): through the cache, or a full pass per step."""
    ys = bos
    state = model.begin_decoding(*head) if cached else None
    for _ in range(steps):
        logits = model.decode_step(state, ys[:, -1]) if cached else model(*head, ys)[:, -1]
        ys = torch.cat([ys, logits.argmax(-1, keepdim=True)], dim=1)
    return ys[:, 1:]


def _decoding_greedy(model, head, tgt_in) -> tuple[bool, str]:
    steps = 8
    cached, recomputed = (_greedy(model, head, tgt_in[:, :1], steps, c) for c in (True, False))
    if torch.equal(cached, recomputed):
        return True, f"greedy decoding of {steps} tokens through the cache picks the same tokens as full passes"
    t = int((cached != recomputed).any(0).nonzero()[0])
    return False, (f"greedy decoding through the cache picks {cached[:, t].tolist()} at step {t} where a full pass "
                   f"over the prefix picks {recomputed[:, t].tolist()}")


def _decoding_rows(model, head, tgt_in) -> tuple[bool, str]:
    together = _step_all(model, head, tgt_in)
    alone = torch.cat([_step_all(model, tuple(h[b:b + 1] for h in head), tgt_in[b:b + 1]) for b in range(2)])
    gap = _gap(together, alone)
    if gap <= DECODE_TOL:
        return True, "each row decodes as it would alone: the cache keeps the batch rows apart"
    return False, (f"a row's cached logits change by up to {gap:.2g} with the other row of the batch: the state mixes "
                   "rows; keep the batch dimension first in every cached tensor")


def _decoding_padding(model, src, tgt_in, extra: int = 3) -> tuple[bool, str]:
    """PAD ids appended to every source line (a batch padded to a longer line) change no logit."""
    pad = int(getattr(model, "src_pad_id", 0))
    padded = torch.cat([src, torch.full((src.size(0), extra), pad)], dim=1)
    gap = _gap(model(padded, tgt_in), model(src, tgt_in))
    if gap <= DECODE_TOL:
        return True, f"{extra} PAD ids (id {pad}) appended to each source line change no logit: padding is masked"
    return False, (f"{extra} PAD ids (id {pad}) appended to each source line change the logits by up to {gap:.2g}: the "
                   "encoder or the cross-attention reads PAD as if it were text; mask the PAD keys "
                   "(padding_mask(src, pad_id)) in the encoder's self-attention and in the cross-attention")


# --------------------------------------------------------------------------- the parts by name; a student's FILE.py:NAME

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


def load_target(target: str):
    """The object NAME defined in FILE of ``FILE.py:NAME``; each way it can fail is a one-line ValueError/OSError,
    a file that calls ``sys.exit`` or loops at import too (the time limit of ``--part``: ``parts._load_in_time``)."""
    from cipherlab.student.parts import _load_in_time

    return _load_in_time(_import_target, target)


def _import_target(target: str):
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name.isidentifier():
        raise ValueError(f"{target}: expected FILE.py:NAME, the file and the class or function in it, "
                         "e.g. my_attention.py:MyAttention")
    path = require_file(path, "Python file", "check the path to your file")
    module_name = f"_cipherlab_check_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_loader(module_name, importlib.machinery.SourceFileLoader(module_name, str(path)))
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look their module up there
    sys.path.insert(0, str(path.parent.resolve()))  # the student's file may import its neighbours
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise ValueError(f"{path}:{e.lineno}: syntax error ({e.msg}); fix that line and run again") from None
    except Exception as e:
        raise ValueError(f"{path}: importing it raised {why(e)}; run `python {path}` to see where") from None
    finally:
        sys.path.remove(str(path.parent.resolve()))
    if not hasattr(module, name):
        defined = sorted(n for n, v in vars(module).items()
                         if (inspect.isclass(v) or inspect.isfunction(v)) and v.__module__ == module_name)
        raise ValueError(f"{path}: defines no {name!r}; it defines "
                         + (", ".join(defined) if defined else "no class or function"))
    return getattr(module, name)
