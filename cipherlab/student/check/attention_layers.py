"""The checks of scaled dot-product attention (``attention``) and multi-head or grouped-query attention
(``multi_head``), self and cross, with the known mistakes of a multi-head layer.

:func:`attention` compares with cipherlab's ScaledDotProductAttention and
``F.scaled_dot_product_attention``: shape, weights summing to 1 over the keys, the 1/sqrt(d) scaling,
padding and causal masks (True = blocked), the gradients of q, k and v, a row that sees no key, scores of 1e4, bfloat16, float64.
:func:`multi_head` copies a layer's q_proj, k_proj, v_proj and o_proj into cipherlab's
MultiHeadAttention and nn.MultiheadAttention (outputs, and the gradients of the inputs and every
projection), after two identical calls in eval mode agree ('eval mode'), then checks causality, permutation,
padding, RoPE and the KV cache. When a layer differs, :func:`mha_variant` runs each of :data:`MHA_MISTAKES` (the reference with
one mistake, written here independently of cipherlab's layer) with the layer's own weights, and names
the one it agrees with.

A layer is built with exactly the arguments train passes (:func:`cipherlab.student.adapters.build_own_attention`:
dropout=p, n_kv_heads= in GQA, rope= with RoPE), so one train refuses fails here the same way; a stub written
without dropout= is still NotWritten. Every check calls it on copies of its inputs (:class:`~cipherlab.student.
check.compare.Guarded`): an input changed in place is the 'inputs' check's alone, and an exception is one line
naming the call. A cause is named only where a test of it passes (the reference with that mistake gives the
student's output, or the cache's own length shows it); otherwise the message says where the outputs differ. Heads
that take feature f into head f % H pass with a note (the projections permuted into the reference); a layer
without ``cache=`` gets a SKIP, a static cache never filled a WARN with its cost.
"""

from __future__ import annotations

import copy
import inspect
import math
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from cipherlab.runner.errors import why
from cipherlab.models.attention import (KVCache, MultiHeadAttention, ScaledDotProductAttention, causal_mask,
                                        padding_mask)
from cipherlab.base.config import Config
from cipherlab.models.positional import RotaryPositionalEmbedding
from cipherlab.student.adapters import build_own_attention
from cipherlab.student.check.compare import (B, D_MODEL, DK, DV, FLOAT32_TOL, H, L, LK, LQ, N_HEADS, N_KV_HEADS,
                                             Guarded, _bf16_verdict, _changed_inputs, _close, _deterministic, _finite,
                                             _float64_verdict, _gap, _in_float64, _name_the_bug, _rows_differ, skip,
                                             warn)
from cipherlab.student.check.gradients import gradients
from cipherlab.student.check.report import (Report, _interface, _interface_build, _label, _raised, _refuse_internals,
                                            _run, _takes)
from cipherlab.student.trials import Unfit, randn

SCALING_D, SCALING_L = 2048, 64  # where a missing 1/sqrt(d) saturates the softmax


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


# --------------------------------------------------------------------------- scaled dot-product attention

SDPA_INTERFACE = ("fn(q, k, v, mask=None) with q (B, H, Lq, d), k (B, H, Lk, d), v (B, H, Lk, dv), mask bool "
                  "broadcast to (B, H, Lq, Lk), True = blocked -> (B, H, Lq, dv); a class is built with no arguments")
_REFERENCE_SDPA = ScaledDotProductAttention().eval()
_PAD_MASK = padding_mask(torch.tensor([[1] * 4 + [0] * 3, [1] * LK]), 0)  # (B, 1, 1, LK): row 0's last 3 keys PAD


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
    raw, fn = fn, Guarded(fn, _label(obj))  # the checks call it on copies of their inputs; 'inputs' on them
    return _run("attention", _label(obj), [
        ("shape", partial(_sdpa_shape, fn, note)),
        ("inputs", lambda: _changed_inputs(lambda q, k, v, mask: raw(q, k, v, mask),
                                           dict(zip("qkv", _qkv()), mask=_PAD_MASK.clone()))),
        ("eval mode", lambda: _deterministic(lambda: fn(*_qkv(), None))),
        ("weights", partial(_sdpa_rows, fn)),
        ("scaling", partial(_sdpa_scaling, fn)),
        ("reference", partial(_sdpa_reference, fn)),
        ("gradients", partial(_sdpa_gradients, raw)),
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
    return randn(B, H, lq, d, seed=seed), randn(B, H, lk, d, seed=seed + 1), randn(B, H, lk, dv, seed=seed + 2)


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
    q, k = randn(1, 1, SCALING_L, SCALING_D), randn(1, 1, SCALING_L, SCALING_D, seed=1)
    ours, ref = _largest_weight(fn, q, k), _largest_weight(_REFERENCE_SDPA, q, k)
    seen = f"largest weight {ours:.2f} at d = {SCALING_D} where the reference gives {ref:.2f}"
    if abs(ours - ref) <= 0.05:
        return True, f"scores divided by sqrt(d_k): largest weight {ours:.2f} at d = {SCALING_D}, as the reference"
    scores = q @ k.transpose(-2, -1)
    unscaled, by_d = (scores.softmax(-1).amax(-1).mean().item(),
                      (scores / SCALING_D).softmax(-1).amax(-1).mean().item())  # the two usual wrong scalings
    if abs(ours - unscaled) <= 0.05:
        return False, (f"scores are not divided by sqrt(d_k): {seen}, as unscaled scores give (the softmax "
                       "saturates to one-hot rows and passes almost no gradient); divide q k^T by math.sqrt(q.size(-1))")
    if abs(ours - by_d) <= 0.05:
        return False, f"scores are divided by d_k, not sqrt(d_k): {seen}, as scores / d_k give; divide by math.sqrt(d_k)"
    return False, (f"the scores are scaled otherwise than by 1/sqrt(d_k): {seen} ("
                   + ("sharper" if ours > ref else "flatter") + " rows than the reference's)")


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


def _sdpa_masked_twice(fn, q, k, v) -> torch.Tensor:
    """``fn``'s outputs without a mask and under a padding mask, flattened into one vector."""
    pad = padding_mask(torch.tensor([[1] * 4 + [0] * 3, [1] * LK]), 0)
    return torch.cat((fn(q, k, v, None).flatten(), fn(q, k, v, pad).flatten()))


def _sdpa_gradients(fn) -> tuple[bool, str]:
    """The gradients of q, k and v against the reference's, without a mask and under a padding mask."""
    q, k, v = _qkv()
    return gradients(fn, _sdpa_masked_twice, _REFERENCE_SDPA, _sdpa_masked_twice, {"q": q, "k": k, "v": v}, {})


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
    return False, said + _mask_diagnosis(fn, q, k, v, mask)


def _mask_diagnosis(fn, q, k, v, mask) -> str:
    """What differs under ``mask`` (True = blocked), and its cause only where a test of it passes: the reference
    run with that mistake gives the student's output (or its weights show it), else where the rows differ."""
    out, ref = fn(q, k, v, mask), _REFERENCE_SDPA(q, k, v, mask)
    w = _weights(fn, q, k, mask)
    full = mask.expand(w.shape)
    blocked, allowed = w.masked_fill(~full, 0).abs().max().item(), w.masked_fill(full, 0).abs().max().item()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if blocked > 1e-6 and allowed < 1e-6:
        return ("only blocked keys get weight: the mask is read as True = keep; cipherlab's masks are True = "
                "BLOCKED (F.scaled_dot_product_attention's are the opposite), so fill the scores where mask is True")
    if _close(out, _REFERENCE_SDPA(q, k, v), 1e-4):
        return (f"blocked keys get weights up to {blocked:.2f}, and the output is the unmasked one: the mask is not "
                "applied; fill the blocked scores with torch.finfo(scores.dtype).min before the softmax")
    if _close(out, scores.softmax(-1).masked_fill(full, 0) @ v, 1e-4):
        return ("blocked keys get weight 0 but the allowed weights are those of the unmasked softmax (they no longer "
                "sum to 1): the mask is applied after the softmax; fill the scores before it")
    return _rows_differ(out, ref, "batch, head, query") + (f"; blocked keys get weights up to {blocked:.2f}"
                                                            if blocked > 1e-6 else "; blocked keys get weight 0")


def _sdpa_causality(fn) -> tuple[bool, str]:
    q, k, v = _qkv(L, L)
    later = [t.clone() for t in (q, k, v)]
    for t, seed in zip(later, (7, 8, 9)):
        t[..., -1, :] = randn(*t[..., -1, :].shape, seed=seed)  # only position L-1 changes
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


# --------------------------------------------------------------------------- multi-head and grouped-query attention

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")
DROPOUT = Config.dropout  # the dropout= train passes (the configurations' default); the checks run in eval mode
MHA_INTERFACE = ("cls(d_model, n_heads, dropout=p, n_kv_heads=..., rope=...) (n_kv_heads only for gqa, rope only "
                 "with RoPE; as train builds it) with nn.Linear "
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
    ``cache=`` (cipherlab's KVCache), check that a self-attention cache filled one
    position at a time gives the full causal pass, with RoPE at offset = cache.length too, and
    that a static cross-attention cache gives what recomputing gives.
    """
    if kind not in ("mha", "gqa"):
        raise ValueError(f"check.multi_head: unknown kind {kind!r}; expected 'mha' or 'gqa'")
    _refuse_internals(cls)
    build = partial(_guarded_build, partial(_build_mha, cls, kind))
    _refuse_stub(cls, kind)
    module = _interface_build(build, _build_call(cls, kind), MHA_INTERFACE)
    _refuse_internals(cls, module._obj)
    x = randn(B, L, D_MODEL)
    _interface(lambda: module(x, x, x, None), f"{_build_call(cls, kind)}(x, x, x, mask=None)", MHA_INTERFACE)
    raw = module._obj  # the checks call it on copies (Guarded); 'inputs' and 'gradients' on the tensors
    memory = randn(B, LK, D_MODEL, seed=1)
    checks = [
        ("shape", partial(_mha_shape, module)),
        ("eval mode", lambda: _deterministic(lambda: module(*(randn(B, LQ, D_MODEL),) * 3))),
        ("inputs", lambda: _changed_inputs(lambda query, key, value, mask: raw(query, key, value, mask),
                                           {"query": randn(B, LQ, D_MODEL), "key": memory, "value": memory.clone(),
                                            "mask": _PAD_MASK.clone()})),
        ("projections", partial(_mha_projections, module, kind)),
        ("reference", partial(_mha_reference, module, kind)),
        ("gradients", partial(_mha_gradients, raw, kind)),
        ("torch", partial(_mha_torch, build, kind)),
        ("causality", partial(_mha_causality, module)),
        ("permutation", partial(_mha_permutation, module)),
        ("padding", partial(_mha_padding, module)),
        ("rope", partial(_mha_rope, build, kind, cls)),
        ("bfloat16", partial(_mha_bf16, module)),
        ("float64", partial(_mha_float64, module)),
    ]
    if kv_cache and _takes(raw.forward, "cache"):  # a KV cache is optional in a student's layer
        checks.append(("kv cache", partial(_mha_cache, build, module)))
    elif kv_cache:
        checks.append(("kv cache", lambda: skip(
            "forward takes no cache=, so cached decoding is not checked; train never gives your layer a cache (the "
            "decoder runs it over the whole prefix at each step, PrefixAttention), so this is no fault; add "
            "cache=None (cipherlab's KVCache) to have it checked")))
    return _run(kind, _label(cls), checks)


def _build_call(cls, kind: str, **extra) -> str:
    args = [str(D_MODEL), str(N_HEADS), f"dropout={DROPOUT}"] + ([f"n_kv_heads={N_KV_HEADS}"] if kind == "gqa" else [])
    return f"{_label(cls)}({', '.join(args + [f'{k}=...' for k in extra])})"


def _build_mha(cls, kind: str, n_kv_heads: int = N_KV_HEADS, rope=None) -> nn.Module:
    """The student's layer at D_MODEL, N_HEADS (and n_kv_heads for gqa), built with exactly the arguments
    train passes (:func:`cipherlab.student.adapters.build_own_attention`: dropout=p, n_kv_heads= in GQA, rope=
    with RoPE), in eval mode."""
    return build_own_attention(cls, D_MODEL, N_HEADS, dropout=DROPOUT, attn_type=kind, n_kv_heads=n_kv_heads,
                               rope=rope).eval()


def _accepts(cls, name: str) -> bool:
    """Whether ``cls(...)`` takes a keyword ``name`` (or **kwargs); True when its signature cannot be read."""
    try:
        parameters = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in parameters)


def _refuse_stub(cls, kind: str) -> None:
    """NotWritten for a stub whose constructor raises NotImplementedError, even one written without the dropout=
    train passes (a chapter's exercise before it is done), so that it reads as unwritten, not as unusable."""
    try:
        inspect.signature(cls).bind(D_MODEL, N_HEADS, dropout=DROPOUT)
        return  # it takes dropout=: the build itself says whether it is a stub
    except (TypeError, ValueError):
        pass
    kv = {"n_kv_heads": N_KV_HEADS} if kind == "gqa" else {}
    try:
        with torch.random.fork_rng(devices=[]):
            cls(D_MODEL, N_HEADS, **kv)
    except NotImplementedError as e:
        raise _raised(e, f"{_label(cls)}({D_MODEL}, {N_HEADS}{', n_kv_heads=' + str(N_KV_HEADS) if kv else ''})",
                      MHA_INTERFACE) from None
    except Exception:
        pass


def _guarded_build(build, **options) -> Guarded:
    """``build(**options)``, called through :class:`Guarded` (an exception names the call)."""
    return Guarded(build(**options), "forward")


def _n_kv(module: nn.Module, kind: str) -> int:
    return module.k_proj.out_features // (D_MODEL // N_HEADS) if kind == "gqa" else N_HEADS


def _reference_mha(module: nn.Module, kind: str, rope=None) -> MultiHeadAttention:
    """cipherlab's MultiHeadAttention with the student's projection weights copied in. A layer whose heads are laid
    out another way, feature f of a projection in head f % H (a view as (B, L, d, H)), is a fixed permutation of
    the book's (feature f in head f // d): when the copy with the projections permuted agrees with it and the
    plain copy does not, that copy is returned, marked ``strided_layout``."""
    ref = _copied_mha(module, kind, rope, strided=False)
    x, mask = randn(B, L, D_MODEL, seed=7), causal_mask(L)
    try:
        out = module(x, x, x, mask)
    except Exception:
        return ref
    if _close(out, ref(x, x, x, mask)):
        return ref
    strided = _copied_mha(module, kind, rope, strided=True)
    return strided if _close(out, strided(x, x, x, mask)) else ref


def _strided(n: int, d: int) -> torch.Tensor:
    """The feature of a head-f % n layout at each place h * d + j of the book's layout: j * n + h."""
    return torch.arange(n * d).view(d, n).T.flatten()


def _copied_mha(module: nn.Module, kind: str, rope=None, strided: bool = False) -> MultiHeadAttention:
    missing = [n for n in PROJECTIONS if not isinstance(getattr(module, n, None), nn.Linear)]
    if missing:
        raise Unfit(f"cannot copy weights into the reference: no nn.Linear {', '.join(missing)}; name the "
                    "projections q_proj, k_proj, v_proj, o_proj as cipherlab's MultiHeadAttention does")
    ref = MultiHeadAttention(D_MODEL, N_HEADS, 0.0, rope, n_kv_heads=_n_kv(module, kind),
                             bias=module.q_proj.bias is not None).eval()
    for name in PROJECTIONS:
        getattr(ref, name).load_state_dict(getattr(module, name).state_dict())
    if strided:
        head_dim = D_MODEL // N_HEADS
        with torch.no_grad():
            for name in ("q_proj", "k_proj", "v_proj"):
                proj = getattr(ref, name)
                n = N_HEADS if name == "q_proj" else proj.out_features // head_dim
                order = _strided(n, head_dim)
                proj.weight.copy_(proj.weight[order])
                if proj.bias is not None:
                    proj.bias.copy_(proj.bias[order])
            ref.o_proj.weight.copy_(ref.o_proj.weight[:, _strided(N_HEADS, head_dim)])
        ref.strided_layout = True
    return ref


def _mha_shape(module) -> tuple[bool, str]:
    x, memory = randn(B, LQ, D_MODEL), randn(B, LK, D_MODEL, seed=1)
    self_out, cross_out = _finite(module(x, x, x), module(x, memory, memory))
    shapes = {tuple(self_out.shape), tuple(cross_out.shape)}
    if shapes != {(B, LQ, D_MODEL)} or cross_out.dtype != torch.float32:
        return False, (f"self-attention gives {tuple(self_out.shape)}, cross-attention on a ({B}, {LK}, {D_MODEL}) "
                       f"memory {tuple(cross_out.shape)} {str(cross_out.dtype)[6:]}; expected ({B}, {LQ}, {D_MODEL}) "
                       "float32, the query's shape")
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
    x, memory = randn(B, L, D_MODEL), randn(B, LK, D_MODEL, seed=1)
    pad = padding_mask(torch.tensor([[1] * 4 + [0] * 3, [1] * LK]), 0)
    try:
        gaps = {"self-attention under a causal mask": _gap(module(x, x, x, causal_mask(L)),
                                                           ref(x, x, x, causal_mask(L))),
                "cross-attention under a padding mask": _gap(module(x, memory, memory, pad),
                                                             ref(x, memory, memory, pad))}
    except Exception as e:
        bug = _mha_diagnosis(module, raises=(x, memory, memory, pad))
        if not bug:
            raise
        said = str(e) if isinstance(e, Unfit) else f"it raised {why(e)}"
        return False, f"{bug[2:]} (with the reference's inputs, {said})"  # the mistake first
    what = "GroupedQueryAttention" if kind == "gqa" else "MultiHeadAttention"
    said = ", ".join(f"{k} {v:.1e}" for k, v in gaps.items())
    if max(gaps.values()) <= FLOAT32_TOL and getattr(ref, "strided_layout", False):
        return True, (f"with its weights copied and permuted, agrees with cipherlab's {what} ({said}; tolerance "
                      f"{FLOAT32_TOL:g}): note that its heads take feature f of each projection into head f % H "
                      "(a view as (B, L, head_dim, H)), where the book's take head f // head_dim ((B, L, H, head_dim)); "
                      "a fixed permutation of the projections' rows, which training learns as well, so it is right")
    if max(gaps.values()) <= FLOAT32_TOL:
        return True, f"with its weights copied, agrees with cipherlab's {what} ({said}; tolerance {FLOAT32_TOL:g})"
    return False, (f"with its weights copied, differs from cipherlab's {what}: {said} (tolerance {FLOAT32_TOL:g})"
                   + _mha_diagnosis(module))


def _mha_self_and_cross(module, x, memory) -> torch.Tensor:
    """Causal self-attention on ``x`` and padded cross-attention on ``memory``, flattened into one vector."""
    pad = padding_mask(torch.tensor([[1] * 4 + [0] * 3, [1] * LK]), 0)
    return torch.cat((module(x, x, x, causal_mask(L)).flatten(), module(x, memory, memory, pad).flatten()))


def _mha_gradients(module, kind: str) -> tuple[bool, str]:
    """The gradients of the inputs and of every projection's weight and bias against the reference's."""
    try:
        ref = _reference_mha(module, kind)
    except Unfit:
        ref = None  # the backward still runs: it must, and every parameter must get a gradient
    strided = getattr(ref, "strided_layout", False)  # its parameters' gradients are permuted: inputs' only
    shared = {n: n for n, _ in ref.named_parameters()} if ref is not None and not strided else {}
    inputs = {"query": randn(B, L, D_MODEL), "memory": randn(B, LK, D_MODEL, seed=1)}
    return gradients(module, _mha_self_and_cross, ref, _mha_self_and_cross, inputs, shared)


def _mha_diagnosis(module, raises: tuple | None = None) -> str:
    """"; MISTAKE" for the first of MHA_MISTAKES that, run with the layer's own weights, gives
    its outputs (self-attention under a causal and under a padding mask, Lq = Lk so that a mask put on the
    wrong axis still runs) where the right layer gives others (a mistake the test cannot tell from the right layer,
    such as .repeat with one query head per K/V head, is not named), else "". With ``raises`` (the call on which the
    layer raised), the mistake must raise on that call too."""
    x = randn(B, LK, D_MODEL, seed=2)
    cases = [(x, x, x, causal_mask(LK)), (x, x, x, padding_mask(torch.tensor([[1] * 4 + [0] * 3, [1] * LK]), 0))]
    try:
        outs = [module(*case) for case in cases]
        right = [mha_variant(module, N_HEADS, None, *case) for case in cases]
    except Exception:
        return ""
    for mistake, words in MHA_MISTAKES.items():
        try:
            wrong = [mha_variant(module, N_HEADS, mistake, *case) for case in cases]
        except Exception:
            continue
        if all(_close(r, w, 1e-4) for r, w in zip(right, wrong)):
            continue  # no test of this mistake here: it gives what the right layer gives
        if all(_close(out, w, 1e-4) for out, w in zip(outs, wrong)) and (raises is None or _raises(mistake, module,
                                                                                                    raises)):
            return f"; {words}"
    return ""


def _raises(mistake: str, module, call: tuple) -> bool:
    """Whether the MHA_MISTAKES variant ``mistake`` with ``module``'s weights raises on ``call``."""
    try:
        mha_variant(module, N_HEADS, mistake, *call)
    except Exception:
        return True
    return False


def _mha_float64(module) -> tuple[bool, str]:
    x = randn(B, L, D_MODEL)
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
    x, memory = randn(B, L, D_MODEL), randn(B, LK, D_MODEL, seed=1)
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
    x = randn(B, L, D_MODEL)
    changed = x.clone()
    changed[:, -1] = randn(B, D_MODEL, seed=5)
    mask = causal_mask(L)
    gap = (module(changed, changed, changed, mask) - module(x, x, x, mask))[:, :-1].abs().max().item()
    if gap <= 1e-6:
        return True, f"under the causal mask, outputs 0..{L - 2} do not change when only input {L - 1} changes"
    return False, (f"under the causal mask, the outputs of positions 0..{L - 2} change by up to {gap:.2g} when "
                   f"only input {L - 1} changes: a later position leaks into earlier ones (through the mask, or "
                   "through a head split that mixes positions: see 'permutation')")


def _mha_permutation(module) -> tuple[bool, str]:
    x = randn(1, L, D_MODEL)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    gap = _gap(module(x[:, perm], x[:, perm], x[:, perm]), module(x, x, x)[:, perm])
    if gap <= FLOAT32_TOL:
        return True, "without positions or mask, shuffling the input positions shuffles the outputs the same way"
    return False, (f"without positions or mask, shuffling the inputs changes the outputs by up to {gap:.2g} beyond "
                   "shuffling them: features of different positions get mixed; split heads as "
                   ".view(B, L, H, d).transpose(1, 2), not .view(B, H, L, d), and merge them back the same way")


def _mha_padding(module) -> tuple[bool, str]:
    x, memory = randn(B, LQ, D_MODEL), randn(B, LK, D_MODEL, seed=1)
    mask = padding_mask(torch.tensor([[1] * 4 + [0] * 3, [1] * LK]), 0)
    changed = memory.clone()
    changed[0, 4:] = randn(3, D_MODEL, seed=6)  # only the PAD rows of line 0
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
    x = randn(B, L, D_MODEL)
    later = torch.cat([torch.zeros(B, SHIFT, D_MODEL), x], dim=1)
    blocked = (torch.arange(SHIFT + L) < SHIFT)[None, None, None, :]  # the empty slots are blocked keys
    return _gap(module(later, later, later, blocked)[:, SHIFT:], module(x, x, x))


def _mha_rope(build, kind: str, cls=None) -> tuple[bool, str]:
    rope = RotaryPositionalEmbedding(D_MODEL // N_HEADS, max_len=64)
    if cls is not None and not _accepts(cls, "rope"):
        return skip("its constructor takes no rope=, so RoPE is not checked; train passes rope= only in C2 (C1, C3 "
                    "and C4 build it without), so this layer cannot stand in C2's attention; accept rope=None and "
                    "rotate q and k after the head split to use it there")
    try:
        module = build(rope=rope)
    except TypeError as e:
        raise Unfit(f"cannot be built with rope=RotaryPositionalEmbedding(head_dim) ({why(e)}); accept rope= "
                    "and rotate q and k after the head split") from None
    plain = build()
    if _shift_gap(plain) > 1e-4:
        return False, ("without RoPE, the same tokens behind blocked slots already give other outputs; "
                       "fix that first (see 'permutation' and 'padding')")
    gap = _shift_gap(module)
    if gap > 1e-4:
        return False, (f"with RoPE, the same tokens {SHIFT} positions later give outputs different by {gap:.2g}: RoPE "
                       "on q and k alone makes self-attention depend on offsets only; rotate q and k, never v")
    x, mask = randn(B, L, D_MODEL), causal_mask(L)
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


def _stepped(module, x: torch.Tensor, memory: torch.Tensor | None = None, mask=None) -> tuple[torch.Tensor, KVCache]:
    """(B, L, D): ``x`` fed one position per call through one KVCache, as incremental decoding does, and the cache.
    Self-attention (``memory`` None) grows the cache by one position a step; cross-attention fills a static cache
    once (or never: the caller says so). A cache that grows otherwise is Unfit saying by how much, at which step."""
    cache = KVCache(static=memory is not None)
    steps = []
    for t in range(x.size(1)):
        q = x[:, t:t + 1]
        try:
            if memory is None:
                steps.append(module(q, q, q, causal_mask(1, offset=t), cache=cache))
            else:
                steps.append(module(q, memory, memory, mask, cache=cache))
        except Unfit as e:
            raise Unfit(_cache_growth(cache, t, memory, after=True) or str(e)) from None
        grown = _cache_growth(cache, t, memory)
        if grown:
            raise Unfit(grown)
    return torch.cat(steps, dim=1), cache


def _cache_growth(cache: KVCache, t: int, memory, after: bool = False) -> str:
    """What is wrong with the cache's length after step ``t`` ("" if nothing): a self-attention cache holds
    t + 1 positions, a static one the memory's length (or 0, never filled)."""
    n = cache.length
    when = f"at step {t} (its call raised)" if after else f"after step {t}"
    if memory is None:
        expected = t + 1
        if n > expected:
            return (f"the self-attention cache holds {n} positions {when}, where {expected} token{'s' * (expected > 1)} {'were' if expected > 1 else 'was'} fed: each "
                    "step must append its new keys and values once (one cache.update per call)")
        return ""
    if n > memory.size(1):
        return (f"the static cache (KVCache(static=True)) holds {n} positions {when}, where the memory has "
                f"{memory.size(1)}: the memory is appended again at a later step; fill it on the first step only, "
                "then reuse cache.k and cache.v")
    return ""


def _mha_cache(build, module) -> tuple[bool, str]:
    """Self-attention through a growing cache, cross-attention through a static one, then RoPE under the cache."""
    x, memory = randn(B, L, D_MODEL), randn(B, LK, D_MODEL, seed=1)
    pad = _PAD_MASK
    stepped, _ = _stepped(module, x)
    full = module(x, x, x, causal_mask(L))
    gap = _gap(stepped, full)
    if gap > 1e-5:
        t = int((stepped - full).abs().amax((0, 2)).gt(1e-5).nonzero()[0])
        return False, (f"self-attention fed one position at a time through cache=KVCache() differs from the full "
                       f"causal pass by up to {gap:.2g}, first at step {t}; step t must give what the full pass gives "
                       "position t, attending over the cached keys and values of positions 0..t")
    stepped, cache = _stepped(module, x, memory, pad)
    recomputed = module(x, memory, memory, pad)
    gap = _gap(stepped, recomputed)
    if gap > 1e-5:
        said = (f"cross-attention with a static cache (KVCache(static=True)) differs from recomputing it by up to "
                f"{gap:.2g}")
        if _close(stepped, module(x, memory, memory, None)):
            return False, (said + ": the steps give what cross-attention gives without its mask, so the padding mask "
                           "is not applied when a cache is given; apply mask whether or not there is a cache")
        return False, said + "; " + _rows_differ(stepped, recomputed, "batch, step")
    if cache.length == 0:
        head_dim = D_MODEL // N_HEADS
        kv = module.k_proj.out_features // head_dim if isinstance(getattr(module, "k_proj", None), nn.Linear) else 0
        return warn(f"right outputs, but the static cache is never filled (cache.length 0 after {L} steps): the memory "
                    f"is projected again at every step, 2 x Lk x D x {kv} x {head_dim} multiply-adds per step and layer "
                    f"(Lk the source length; {2 * LK * D_MODEL * kv * head_dim:,} here) that storing the projected "
                    "memory with cache.update on the first step saves")
    try:
        roped = build(rope=RotaryPositionalEmbedding(D_MODEL // N_HEADS, max_len=64))
    except TypeError:
        return True, "a self-attention cache built step by step equals the full causal pass; a static "\
                     "cross-attention cache equals recomputing (no rope=, so RoPE under the cache is not checked)"
    try:
        stepped, _ = _stepped(roped, x)
    except Unfit as e:
        raise Unfit(f"with rope=RotaryPositionalEmbedding(head_dim) (without RoPE the cache agrees): {e}") from None
    gap = _gap(stepped, roped(x, x, x, causal_mask(L)))
    if gap > 1e-5:
        said = (f"with RoPE, self-attention fed one position at a time through the cache differs from the full "
                f"causal pass by up to {gap:.2g} (without RoPE it agrees)")
        if _shift_gap(roped) > 1e-4:
            return False, said + "; the layer with RoPE is wrong without a cache too (see 'rope'): fix that first"
        if _close(stepped, _stepped(_with_rope(build, roped, _OffsetBlindRope), x)[0], 1e-5):
            return False, (said + ": the cache ignores the position offset, every step is rotated as position 0; "
                           "rotate the new q and k at offset = cache.length, the position of the new token")
        return False, said + "; rotate the new q and k at offset = cache.length and cache the rotated k"
    return True, ("a self-attention cache built step by step equals the full causal pass, with RoPE too (offset = "
                  "cache.length); a static cross-attention cache equals recomputing")


def _mha_bf16(module) -> tuple[bool, str]:
    low = copy.deepcopy(module).to(torch.bfloat16)
    x = randn(B, L, D_MODEL).bfloat16()
    mask, high = causal_mask(L), x.float()
    return _bf16_verdict(low(x, x, x, mask), module(high, high, high, mask).bfloat16())
