"""Check a student's own attention, norms and positions against cipherlab's reference and PyTorch's own.

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

Each function's docstring gives the interface (the same as cipherlab's reference module) and returns
a :class:`Report`. Masks are bool and True = BLOCKED, as everywhere in cipherlab
(``F.scaled_dot_product_attention`` uses True = keep). An object that cannot even be called as the
interface says raises :class:`InterfaceError`, one line naming the call and the fix; a check that
raises inside is a FAIL naming the exception. The reference agrees with PyTorch to FLOAT32_TOL in
float32; bfloat16 outputs are compared to BF16_TOL.
"""

from __future__ import annotations

import copy
import importlib.machinery
import importlib.util
import inspect
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from cipherlab.errors import require_file, why
from cipherlab.models.attention import MultiHeadAttention, ScaledDotProductAttention, causal_mask, padding_mask
from cipherlab.models.norm import NORMS
from cipherlab.models.positional import (RotaryPositionalEmbedding, SinusoidalPositionalEncoding,
                                         inverse_frequencies, rotate_half)

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
        if name == "shape" and not passed:
            break  # every other check needs the shape right first
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


def _name_the_bug(out: torch.Tensor, suspects: dict[str, torch.Tensor]) -> str:
    """The suffix "; BUG" for the first suspect (BUG -> its output) that ``out`` matches, else an empty string."""
    return next((f"; {bug}" for bug, wrong in suspects.items() if _close(out, wrong, 1e-4)), "")


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
    if inspect.isclass(obj):
        fn = _interface_build(lambda: obj(), f"{obj.__name__}()", SDPA_INTERFACE)
    if isinstance(fn, nn.Module):
        fn.eval()
    q, k, v = _qkv()
    _interface(lambda: fn(q, k, v, None), f"{_label(obj)}(q, k, v, mask=None)", SDPA_INTERFACE)
    return _run("attention", _label(obj), [
        ("shape", partial(_sdpa_shape, fn)),
        ("weights", partial(_sdpa_rows, fn)),
        ("scaling", partial(_sdpa_scaling, fn)),
        ("reference", partial(_sdpa_reference, fn)),
        ("padding mask", partial(_sdpa_mask, fn, "padding")),
        ("causal mask", partial(_sdpa_mask, fn, "causal")),
        ("causality", partial(_sdpa_causality, fn)),
        ("all-blocked row", partial(_sdpa_blind_row, fn)),
        ("bfloat16", partial(_sdpa_bf16, fn)),
    ])


def _qkv(lq: int = LQ, lk: int = LK, d: int = DK, dv: int = DV, seed: int = 0):
    """Unit-variance q (B, H, lq, d), k (B, H, lk, d), v (B, H, lk, dv)."""
    return _randn(B, H, lq, d, seed=seed), _randn(B, H, lk, d, seed=seed + 1), _randn(B, H, lk, dv, seed=seed + 2)


def _weights(fn, q: torch.Tensor, k: torch.Tensor, mask=None) -> torch.Tensor:
    """(B, H, Lq, Lk) attention weights of ``fn``, read off as its output for v = the identity (W I = W)."""
    lk = k.size(-2)
    eye = torch.eye(lk, dtype=q.dtype).expand(*k.shape[:-1], lk).contiguous()  # (B, H, Lk, Lk)
    return fn(q, k, eye, mask)


def _sdpa_shape(fn) -> tuple[bool, str]:
    q, k, v = _qkv()
    out = _finite(fn(q, k, v, None))
    expected = (B, H, LQ, DV)
    passed = tuple(out.shape) == expected and out.dtype == torch.float32
    return passed, (f"output {tuple(out.shape)} {str(out.dtype)[6:]} for q {tuple(q.shape)}, k {tuple(k.shape)}, "
                    f"v {tuple(v.shape)}" + ("" if passed else f"; expected {expected} float32"))


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
    gap = _gap(out, ref)
    if _close(out, ref, BF16_TOL):
        return True, f"bfloat16 in, bfloat16 out, within {BF16_TOL:g} of the reference (max difference {gap:.2g})"
    return False, f"in bfloat16, differs from the reference by up to {gap:.2g} (tolerance {BF16_TOL:g})" + hint


# --------------------------------------------------------------------------- multi-head and grouped-query attention

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")
MHA_INTERFACE = ("cls(d_model, n_heads, n_kv_heads=..., rope=None) (n_kv_heads only for gqa) with nn.Linear "
                 "q_proj, k_proj, v_proj, o_proj; forward(query (B, Lq, D), key (B, Lk, D), value (B, Lk, D), "
                 "mask=None) -> (B, Lq, D), mask bool True = blocked, broadcast to (B, H, Lq, Lk)")


def multi_head(cls, kind: str = "mha") -> Report:
    """Check multi-head ("mha") or grouped-query ("gqa") attention, self and cross.

    ``cls`` is built as ``cls(d_model, n_heads)`` for "mha" and ``cls(d_model, n_heads,
    n_kv_heads=n_kv_heads)`` for "gqa" (plus ``rope=RotaryPositionalEmbedding(head_dim)`` for the RoPE
    check), then put in eval mode, so dropout may default to anything. Like cipherlab's
    MultiHeadAttention it holds nn.Linear projections q_proj (D -> D), k_proj and v_proj
    (D -> n_kv_heads * head_dim) and o_proj (D -> D), with or without bias, so its weights can be
    copied into the reference and into nn.MultiheadAttention. forward(query (B, Lq, D), key (B, Lk, D),
    value (B, Lk, D), mask=None) -> (B, Lq, D); mask bool, True = BLOCKED, broadcast to (B, H, Lq, Lk).
    With rope, q and k are rotated after the head split (self-attention: both at positions 0..L-1).
    """
    if kind not in ("mha", "gqa"):
        raise ValueError(f"check.multi_head: unknown kind {kind!r}; expected 'mha' or 'gqa'")
    build = partial(_build_mha, cls, kind)
    module = _interface_build(build, _build_call(cls, kind), MHA_INTERFACE)
    x = _randn(B, L, D_MODEL)
    _interface(lambda: module(x, x, x, None), f"{_build_call(cls, kind)}(x, x, x, mask=None)", MHA_INTERFACE)
    return _run(kind, _label(cls), [
        ("shape", partial(_mha_shape, module)),
        ("projections", partial(_mha_projections, module, kind)),
        ("reference", partial(_mha_reference, module, kind)),
        ("torch", partial(_mha_torch, build, kind)),
        ("causality", partial(_mha_causality, module)),
        ("permutation", partial(_mha_permutation, module)),
        ("padding", partial(_mha_padding, module)),
        ("rope", partial(_mha_rope, build, kind)),
        ("bfloat16", partial(_mha_bf16, module)),
    ])


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
        return False, "two identical calls in eval mode differ: dropout is not switched off by .eval() (use nn.Dropout)"
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
    gaps = {"self-attention under a causal mask": _gap(module(x, x, x, causal_mask(L)), ref(x, x, x, causal_mask(L))),
            "cross-attention under a padding mask": _gap(module(x, memory, memory, pad), ref(x, memory, memory, pad))}
    what = "GroupedQueryAttention" if kind == "gqa" else "MultiHeadAttention"
    said = ", ".join(f"{k} {v:.1e}" for k, v in gaps.items())
    if max(gaps.values()) <= FLOAT32_TOL:
        return True, f"with its weights copied, agrees with cipherlab's {what} ({said}; tolerance {FLOAT32_TOL:g})"
    return False, f"with its weights copied, differs from cipherlab's {what}: {said} (tolerance {FLOAT32_TOL:g})"


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
            _gap(module(x, memory, memory, padding_mask(ids, 0)), theirs(x, memory, memory, key_padding_mask=ids == 0)[0])]
    what = f"with n_kv_heads = n_heads = {N_HEADS} (then GQA is MHA)" if kind == "gqa" else "with its weights copied"
    if max(gaps) <= FLOAT32_TOL:
        return True, f"{what}, agrees with nn.MultiheadAttention, causal self- and padded cross-attention " \
                     f"(max difference {max(gaps):.1e})"
    return False, f"{what}, differs from nn.MultiheadAttention by up to {max(gaps):.2g} (tolerance {FLOAT32_TOL:g})"


def _mha_causality(module) -> tuple[bool, str]:
    x = _randn(B, L, D_MODEL)
    changed = x.clone()
    changed[:, -1] = _randn(B, D_MODEL, seed=5)
    gap = (module(changed, changed, changed, causal_mask(L)) - module(x, x, x, causal_mask(L)))[:, :-1].abs().max().item()
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


def _mha_bf16(module) -> tuple[bool, str]:
    low = copy.deepcopy(module).to(torch.bfloat16)
    x = _randn(B, L, D_MODEL).bfloat16()
    return _bf16_verdict(low(x, x, x, causal_mask(L)), module(x.float(), x.float(), x.float(), causal_mask(L)).bfloat16())


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
    module = _interface_build(lambda: cls(16, eps=1e-5), f"{_label(cls)}(16, eps=1e-5)", NORM_INTERFACE)
    x = _norm_input()
    _interface(lambda: module(x), f"{_label(cls)}(16, eps=1e-5)(x)", NORM_INTERFACE)
    module, ref = _randomised_pair(module, kind)
    return _run(kind, _label(cls), [
        ("shape", partial(_norm_shape, module)),
        ("reference", partial(_norm_reference, module, ref, kind)),
        ("invariance", partial(_norm_invariance, module, kind)),
        ("per token", partial(_norm_per_token, module)),
        ("bfloat16", partial(_norm_bf16, module, ref)),
    ])


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


def _norm_bf16(module, ref) -> tuple[bool, str]:
    x = (_randn(4, 16, seed=5) * 1e-2 + 5).bfloat16()  # a small spread on a large mean: bf16 maths loses it
    right_in_float32 = _close(module(x.float()), ref(x.float()), BF16_TOL)
    hint = "; compute the statistics in float32 (x.float()) and cast back" if right_in_float32 else ""
    return _bf16_verdict(module(x), ref(x), hint=hint)


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
    module = _interface_build(lambda: cls(size, max_len=64), built, interface)
    if isinstance(module, nn.Module):
        module.eval()
    if kind == "sinusoidal":
        x = _randn(B, L, 16)
        _interface(lambda: module(x), f"{built}(x)", interface)
        return _run(kind, _label(cls), [
            ("shape", partial(_sinusoidal_shape, module)),
            ("table", partial(_sinusoidal_table, module)),
            ("offset", partial(_sinusoidal_offset, module)),
        ])
    q, k = _randn(B, H, L, DK), _randn(B, 1, L, DK, seed=1)
    _interface(lambda: module(q, k), f"{built}(q, k)", interface)
    return _run(kind, _label(cls), [
        ("shape", partial(_rope_shape, module)),
        ("rotation", partial(_rope_rotation, module)),
        ("relative", partial(_rope_relative, module)),
        ("reference", partial(_rope_reference, module)),
        ("offset", partial(_rope_offset, module)),
    ])


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
            "sin fills the first half and cos the second; cipherlab (and Vaswani et al.) interleave them: even "
            "columns sin, odd columns cos": torch.cat((angles.sin(), angles.cos()), dim=-1),
            "the frequencies are 10000^(-i/D); they are theta_i = 10000^(-2i/D), one per sin/cos pair":
            torch.stack((slow.sin(), slow.cos()), dim=-1).flatten(-2)}


def _sinusoidal_table(module) -> tuple[bool, str]:
    x = _randn(1, 40, 16)
    table = module(torch.zeros(1, 40, 16))[0]  # (40, 16): what it adds
    expected = SinusoidalPositionalEncoding(16, max_len=40, dropout=0.0).table
    added = _gap(module(x) - x, table[None])
    if _close(table, expected):
        if added > FLOAT32_TOL:
            return False, f"the table is right, but x + table is off by {added:.2g}: add the table to x, do not scale x"
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


# --------------------------------------------------------------------------- the command line

PARTS: dict[str, Callable[[object], Report]] = {
    "attention": attention,
    "mha": partial(multi_head, kind="mha"),
    "gqa": partial(multi_head, kind="gqa"),
    "layernorm": partial(norm, kind="layernorm"),
    "rmsnorm": partial(norm, kind="rmsnorm"),
    "sinusoidal": partial(positional, kind="sinusoidal"),
    "rope": partial(positional, kind="rope"),
}


def load_target(target: str):
    """The object NAME defined in FILE of ``FILE.py:NAME``; each way it can fail is a one-line ValueError/OSError."""
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


def _cmd_check(args) -> int:
    obj = load_target(args.target)
    try:
        report = PARTS[args.part](obj)
    except InterfaceError as e:
        raise ValueError(f"{args.target}: {e}") from None
    print(report)
    return 0 if report.passed else 1


def register_cli(subparsers) -> None:
    """Add ``python -m cipherlab check``."""
    p = subparsers.add_parser(
        "check",
        help="check your own attention, norm or positions against cipherlab's and PyTorch's",
        description="Load NAME from FILE.py and check it against cipherlab's reference module and PyTorch's own "
        "(F.scaled_dot_product_attention, nn.MultiheadAttention, nn.LayerNorm, nn.RMSNorm): shapes, dtypes "
        "(bfloat16 too), masks (True = blocked), causality, invariances and RoPE's relative property. One line "
        "per check; exit 0 when all pass. The interface of each part: help(cipherlab.check.PART).",
    )
    p.add_argument("part", choices=list(PARTS), help="the part NAME implements")
    p.add_argument("target", metavar="FILE.py:NAME", help="your file and the class or function in it")
    p.set_defaults(func=_cmd_check)
