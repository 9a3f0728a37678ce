"""The checks of a LayerNorm or RMSNorm class (``norm``): cipherlab's own and PyTorch's with the same gain.

The class is built as train builds it, ``cls(d_model, eps=1e-5)``, and called on copies of its input (an input
changed in place is the 'inputs' check's). Its parameters are named ('parameters': a gain, LayerNorm's shift,
nothing else; buffers and extra parameters such as an RMSNorm bias are named). Every parameter is set to random
values, and the student's gain (gamma, weight or scale) and LayerNorm's shift (beta, bias or shift) copied into cipherlab's module and nn.LayerNorm or nn.RMSNorm; the checks then try
the norm as built (ones and zeros), its invariances (LayerNorm: adding a constant; RMSNorm: scaling),
statistics per token, all-zero and constant tokens, bfloat16 and float64, and the backward pass (the
gradients of x, the gain and the shift; a gain registered as a buffer is named). An unbiased variance, a
missing centring (or a centring RMSNorm should not do) and a division by the standard deviation are
named; eps outside the square root passes with a note.
"""

from __future__ import annotations

import copy
from functools import partial

import torch
from torch import nn

from cipherlab.models.norm import NORMS
from cipherlab.student.adapters import NORM_EPS, build_own_norm
from cipherlab.student.check.compare import (BF16_TOL, FLOAT32_TOL, Guarded, _bf16_verdict, _changed_inputs, _close,
                                             _deterministic, _finite, _float64_run, _gap,
                                             _name_the_bug, _rows_differ)
from cipherlab.student.check.gradients import gradients
from cipherlab.student.check.report import Report, _interface, _interface_build, _label, _refuse_internals, _run
from cipherlab.student.trials import Unfit, randn

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
    fresh = _interface_build(lambda: build_own_norm(cls, 16), f"{_label(cls)}(16, eps={NORM_EPS:g})", NORM_INTERFACE)
    _refuse_internals(cls, fresh)
    x = _norm_input()
    _interface(lambda: fresh(x), f"{_label(cls)}(16, eps=1e-5)(x)", NORM_INTERFACE)
    raw, ref = _randomised_pair(fresh, kind)
    module = Guarded(raw, "forward")  # the checks call it on copies; 'inputs' and 'gradients' on the tensors
    expected = partial(_norm_expected, module, ref, kind)
    return _run(kind, _label(cls), [
        ("shape", partial(_norm_shape, module)),
        ("inputs", lambda: _changed_inputs(lambda x: raw(x), {"x": _norm_input()})),
        ("parameters", partial(_norm_parameters, raw, kind)),
        ("eval mode", lambda: _deterministic(lambda: module(_norm_input()))),
        ("at construction", partial(_norm_initial, fresh, kind)),
        ("reference", partial(_norm_reference, module, ref, kind)),
        ("gradients", partial(_norm_gradients, raw, ref, kind)),
        ("invariance", partial(_norm_invariance, module, kind)),
        ("per token", partial(_norm_per_token, module)),
        ("zero and constant tokens", partial(_norm_flat, module, expected, kind)),
        ("bfloat16", partial(_norm_bf16, module, expected)),
        ("float64", lambda: _float64_run(raw, lambda m, x: m(x), (_norm_input(),), expected(_norm_input()))),
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
        ordinary = _norm_input()
        if _gap(module(ordinary), expected(ordinary)) > 1e-4:
            return False, (f"on all-zero and constant tokens, differs from the reference by {gap:.2g}, as it does on "
                           "ordinary tokens (see 'reference'): fix that first")
        return False, (f"on all-zero and constant tokens, differs from the reference by {gap:.2g} (ordinary tokens "
                       f"agree): {_rows_differ(out, expected(x), 'token')}; the reference divides by {stat}")
    return True, "all-zero and constant tokens give finite outputs, as the reference: eps keeps 0 / 0 away"


def _norm_input(seed: int = 0) -> torch.Tensor:
    """(2, 5, 16) activations with a mean and spread away from 0 and 1."""
    return randn(2, 5, 16, seed=seed) * 3 + 1


def _parameter(module: nn.Module, names: tuple[str, ...]) -> nn.Parameter | None:
    return next((getattr(module, n) for n in names if isinstance(getattr(module, n, None), nn.Parameter)), None)


def _randomised_pair(module: nn.Module, kind: str) -> tuple[nn.Module, nn.Module]:
    """A copy of the student's norm with every parameter random (the gain about 1, the rest about 0: a shift
    RMSNorm should not have shows), and cipherlab's with the same gain (and shift)."""
    module, ref = copy.deepcopy(module).eval(), NORMS[kind](16, eps=1e-5)
    gen = torch.Generator().manual_seed(3)
    gain, shift = _parameter(module, GAINS), _parameter(module, SHIFTS)
    others = [p for _, p in sorted(module.named_parameters()) if p is not gain and p is not shift
              and p.is_floating_point()] if isinstance(module, nn.Module) else []
    with torch.no_grad():
        for mine, start in ((gain, 1.0), (shift, 0.0), *((p, 0.0) for p in others)):
            if mine is not None:
                mine.copy_(torch.randn(mine.shape, generator=gen) + start)
        for mine, theirs in ((gain, ref.gamma), (shift, getattr(ref, "beta", None))):
            if mine is not None and theirs is not None and mine.shape == theirs.shape:
                theirs.copy_(mine)
    return module, ref


def _norm_parameters(module, kind: str) -> tuple[bool, str]:
    """The parameters a norm has: a gain (D,) and, for LayerNorm, a shift (D,), nothing else; what it has
    instead is named (buffers and plain tensors never train)."""
    params = dict(module.named_parameters()) if isinstance(module, nn.Module) else {}
    buffers = dict(module.named_buffers()) if isinstance(module, nn.Module) else {}
    gain, shift = _name_of(module, GAINS), _name_of(module, SHIFTS)
    wanted = "a gain gamma (D,)" + (" and a shift beta (D,)" if kind == "layernorm" else "")
    listed = ", ".join(f"`{n}` {tuple(p.shape)}" for n, p in params.items()) or "none"
    if not params:
        plain = [n for n, v in vars(module).items() if isinstance(v, torch.Tensor)]
        held = [f"buffer{'s' * (len(buffers) > 1)} {', '.join(f'`{n}`' for n in buffers)}"] if buffers else []
        held += [f"plain tensor{'s' * (len(plain) > 1)} {', '.join(f'`{n}`' for n in plain)}"] if plain else []
        return False, ("it has no parameters, so nothing in it trains"
                       + (f": it holds {' and '.join(held)}, which get no gradient" if held else "")
                       + f"; make {wanted} nn.Parameter(...)")
    if gain is None:
        return False, (f"no gain parameter named {' or '.join(GAINS)}: its parameters are {listed}; name the gain "
                       "gamma (or weight), shape (D,), so it can be copied into the reference")
    if kind == "layernorm" and shift is None:
        return False, (f"no shift parameter named {' or '.join(SHIFTS)}: its parameters are {listed}; LayerNorm has "
                       "beta (D,)")
    extra = [n for n in params if n not in (gain, shift if kind == "layernorm" else None)]
    if extra:
        has = ", ".join(f"`{n}`" for n in extra)
        what = "RMSNorm has a gain and no shift (no bias)" if kind == "rmsnorm" else "LayerNorm has a gain and a shift"
        return False, f"{what}: yours also has {has}; remove {'it' if len(extra) == 1 else 'them'}"
    return True, (f"a gain `{gain}`" + (f" and a shift `{shift}`" if kind == "layernorm" else "")
                  + ", parameters of shape (D,), and nothing else")


def _name_of(module, names: tuple[str, ...]) -> str | None:
    return next((n for n in names if isinstance(getattr(module, n, None), nn.Parameter)), None)


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
    buffer = next((n for n in GAINS if n in dict(module.named_buffers())), None)
    if gain is None and buffer is not None:
        raise Unfit(f"the gain `{buffer}` is a buffer (register_buffer), not a parameter, so it never trains and "
                    f"cannot be copied into the reference; make it nn.Parameter(torch.ones(d_model))")
    if gain is None or (kind == "layernorm" and _parameter(module, SHIFTS) is None):
        raise Unfit("cannot copy its gain and shift into the reference (see 'parameters')")
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


def _norm_gradients(module, ref, kind: str) -> tuple[bool, str]:
    """The backward pass against the reference's (or the eps-outside formula's) with the same gain and shift."""
    outside = _eps_is_outside(module, ref, kind)
    shared = {}
    for names, theirs in ((GAINS, "gamma"), (SHIFTS, "beta" if kind == "layernorm" else None)):
        mine = next((n for n in names if isinstance(getattr(module, n, None), torch.Tensor)), None)
        if mine is not None and theirs is not None:
            shared[mine] = theirs
    return gradients(module, lambda m, x: m(x), ref, lambda r, x: _eps_outside(x, r, kind) if outside else r(x),
                     {"x": _norm_input()}, shared)


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
    changed[1, 3] = randn(16, seed=4) * 10
    gap = (module(changed) - module(x)).flatten(0, 1)[torch.arange(10) != 8].abs().max().item()
    if gap <= 1e-6:
        return True, "each token is normalised on its own: changing one token leaves the others unchanged"
    return False, (f"changing one token changes other tokens' outputs by up to {gap:.2g}: take the statistics over "
                   "the last dimension only (dim=-1, keepdim=True), never across the batch or the sequence")


def _norm_bf16(module, expected) -> tuple[bool, str]:
    x = (randn(4, 16, seed=5) * 1e-2 + 5).bfloat16()  # a small spread on a large mean: bf16 maths loses it
    right_in_float32 = _close(module(x.float()), expected(x.float()), BF16_TOL)
    hint = "; compute the statistics in float32 (x.float()) and cast back" if right_in_float32 else ""
    return _bf16_verdict(module(x), expected(x), hint=hint)
