"""What every part's checks compare with: the input sizes, the tolerances, and the shared verdicts.

The reference agrees with PyTorch to FLOAT32_TOL in float32; bfloat16 outputs are compared to
BF16_TOL. The small sizes (Lq != Lk, dv != d) make a swapped axis show in a shape. The verdicts
here are the checks several parts share: two calls in eval mode give the same output
(:func:`_deterministic`), the part moved with ``.to(torch.float64)`` (:func:`_in_float64`,
:func:`_float64_verdict`, :func:`_float64_run` where that run raises), bfloat16 in and out (:func:`_bf16_verdict`), no NaN on ordinary inputs
(:func:`_finite`), and the name of the known mistake an output matches (:func:`_name_the_bug`). Beyond PASS
and FAIL a check may return a :class:`Verdict`, WARN (passed, with a cost or caveat: a float32 output for float64
inputs, a complex buffer .to(float64) drops) or SKIP (could not run; passed or not as the part needs), its word
first in the message. :class:`Guarded` calls a student's part on copies of its inputs and names the call that
raised; :func:`_changed_inputs` is the check that the caller's inputs come back unchanged; :func:`_rows_differ` and
:func:`_wrap_period` say where outputs differ without naming a cause.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable

import torch
from torch import nn

from cipherlab.runner.errors import why
from cipherlab.student.trials import Unfit

FLOAT32_TOL = 1e-5  # atol and rtol against the reference in float32
BF16_TOL = 3e-2  # atol and rtol against the reference in bfloat16 (8 significant bits)

# Small sizes: Lq != Lk and dv != d so that a swapped axis shows in the shape.
B, H, LQ, LK, DK, DV, L = 2, 2, 5, 7, 8, 6, 6
D_MODEL, N_HEADS, N_KV_HEADS = 32, 4, 2


def _finite(*outs: torch.Tensor):
    """``outs`` (one tensor, or the tuple), unless one holds NaN or inf: then Unfit, as no other check can read it."""
    if not all(torch.isfinite(t).all() for t in outs):
        raise Unfit("the output holds NaN or inf on ordinary inputs (unit variance, no mask); "
                    "look for a division by zero, a log of 0 or a softmax over all -inf")
    return outs[0] if len(outs) == 1 else outs


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


def _deterministic(call: Callable[[], torch.Tensor]) -> tuple[bool, str]:
    """PASS when two calls on the same input give the same output: dropout is off in eval mode."""
    first, second = call(), call()
    if torch.equal(first, second):
        return True, "two calls on the same input give the same output: nothing random in eval mode"
    return False, (f"two calls on the same input differ by up to {_gap(first, second):.2g}: dropout active in eval "
                   "mode (F.dropout's training defaults to True); use an nn.Dropout module, which .eval() switches "
                   "off, or F.dropout(x, p, training=self.training)")


NO_FLOAT64 = ("the assignment never trains or decodes in float64 (float32, and bfloat16 under autocast), so it is "
              "no fault there")


def _float64_verdict(out: torch.Tensor, expected: torch.Tensor, module=None) -> tuple[bool, str]:
    """PASS when a float64 run gives float64 within FLOAT32_TOL of the expected output. A float32 output (an upcast
    not cast back), or other values from a module whose complex tensors .to(torch.float64) casts to real, is a WARN
    saying so: the assignment never runs a part in float64. Other values are a FAIL."""
    if out.dtype == torch.float32:
        return warn(f"float64 inputs give a float32 output: it computes in float32 (an upcast such as x.float()) and "
                    f"does not cast back; {NO_FLOAT64}; return x's dtype (.to(x.dtype)) to keep the part general")
    if out.dtype != torch.float64:
        return False, (f"float64 inputs give a {str(out.dtype)[6:]} output, fewer bits than float32; return the "
                       "input's dtype (compute in float32 if you like, then .to(x.dtype))")
    said = (f"max difference {_gap(out, expected):.1e}, {_tolerance_used(out, expected, FLOAT32_TOL):.0%} of the "
            f"tolerance there, {FLOAT32_TOL:g} + {FLOAT32_TOL:g} x |reference|")
    if _close(out, expected):
        return True, f"moved with .to(torch.float64), float64 in, float64 out, as the reference ({said})"
    complex_ = [n for n, t in _tensors(module) if t.is_complex()]
    if complex_:
        return warn(f"moved with .to(torch.float64), differs from the reference ({said}): .to(torch.float64) casts "
                    f"its complex {', '.join(f'`{n}`' for n in complex_)} to real, dropping the imaginary part (PyTorch "
                    f"warns as much); {NO_FLOAT64}; in float32 and bfloat16 it agrees (see the other checks)")
    return False, f"moved with .to(torch.float64), differs from the reference ({said})"


def _float64_run(module, call: Callable, inputs: tuple[torch.Tensor, ...], expected: torch.Tensor) -> tuple[bool, str]:
    """The float64 check: ``call(m, *inputs)`` with ``m`` a copy of ``module`` moved with .to(torch.float64) and the
    float32 ``inputs`` made float64, against ``expected`` (:func:`_float64_verdict`). Where that raises, the part is
    run again with its parameters left in float32: if float64 inputs then run and agree with the reference, the
    likely cause (it computes in float32, an upcast such as x.float(), against the float64 parameters) is a WARN, as
    the assignment never runs a part in float64; otherwise a FAIL naming the call that raised, without a cause."""
    doubles = tuple(t.double() for t in inputs)
    try:
        out = call(_in_float64(module), *doubles)
    except Unfit:
        raise
    except Exception as e:
        error = why(e)
    else:
        return _float64_verdict(out, expected, module)
    said = f"moved with .to(torch.float64), float64 inputs raise {error}"
    try:
        kept = call(module, *doubles)
    except Exception:
        return False, said
    if not _close(kept, expected):
        return False, said
    return warn(f"{said}; with its parameters left in float32 the same float64 inputs run and agree with the reference "
                f"(max difference {_gap(kept, expected):.1e}): likely it computes in float32 (an upcast such as "
                "x.float()) against parameters .to() made float64, which PyTorch refuses to mix; "
                f"{NO_FLOAT64}; cast the parameters too (self.weight.float()) or compute in x's dtype to keep the part general")


def _tensors(module) -> list[tuple[str, torch.Tensor]]:
    """The parameters and buffers of ``module`` (none for a function)."""
    if not isinstance(module, nn.Module):
        return []
    return [*module.named_parameters(), *module.named_buffers()]


def _in_float64(module: nn.Module) -> nn.Module:
    """A copy of ``module`` moved with .to(torch.float64); Unfit naming the exception if the move fails."""
    try:
        with warnings.catch_warnings():  # a complex buffer cast to real: the float64 verdict says so in its line
            warnings.filterwarnings("ignore", message="Casting complex values to real", category=UserWarning)
            return copy.deepcopy(module).to(torch.float64)
    except Exception as e:
        raise Unfit(f"moving it with .to(torch.float64) raised {why(e)}; keep tensors in parameters and buffers "
                    "(register_buffer), which .to() moves") from None


def _name_the_bug(out: torch.Tensor, suspects: dict[str, torch.Tensor]) -> str:
    """The suffix "; BUG" for the first suspect (BUG -> its output) that ``out`` matches, else an empty string."""
    return next((f"; {bug}" for bug, wrong in suspects.items() if _close(out, wrong, 1e-4)), "")


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


# --------------------------------------------------------------------------- WARN and SKIP, guarded calls


class Verdict(int):
    """A check's outcome other than PASS or FAIL: WARN (counts as passed: right for what the assignment
    does, with a cost or a caveat said) or SKIP (the check could not run; its truth says whether the part
    still counts as passed). An int (1 passed, 0 not) so that reports count it as they count a bool. A check
    returns (verdict, message); the message starts with the word."""

    word: str

    def __new__(cls, word: str, passed: bool):
        self = super().__new__(cls, int(passed))
        self.word = word
        return self

    def __repr__(self) -> str:
        return self.word

    __str__ = __repr__


WARN = Verdict("WARN", True)
SKIP = Verdict("SKIP", True)  # a check that cannot run where the part needs no more (train never uses it)
SKIP_FAILS = Verdict("SKIP", False)  # a check that cannot run where the part needs it: not passed


def warn(message: str) -> tuple[Verdict, str]:
    return WARN, f"WARN: {message}"


def skip(message: str, counts_as_passed: bool = True) -> tuple[Verdict, str]:
    return (SKIP if counts_as_passed else SKIP_FAILS), f"SKIP: {message}"


def _describe(value) -> str:
    """A call's argument in a message: a tensor's shape and dtype, a KV cache's kind and length, a short repr."""
    if isinstance(value, torch.Tensor):
        return f"{tuple(value.shape)} {str(value.dtype)[6:]}"
    if hasattr(value, "static") and hasattr(value, "length"):  # cipherlab's KVCache
        return f"KVCache(static={value.static}) holding {value.length} position{'s' * (value.length != 1)}"
    text = repr(value)
    return text if len(text) <= 30 else text[:27] + "..."


def describe_call(name: str, args: tuple, kwargs: dict) -> str:
    """``name(arg, ..., key=arg)`` with each argument as :func:`_describe` writes it."""
    said = [_describe(a) for a in args] + [f"{k}={_describe(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(said)})"


class Guarded:
    """A student's module or function, called on copies of its tensor inputs (an in-place change of an input
    cannot reach the caller's tensors, which the reference then reads: the 'inputs' check names it alone),
    with an exception turned into Unfit naming the call: ``forward(q (2, 1, 32) float32, ...) raised ...``.
    Attributes are the student's object's; those named in ``methods`` are guarded too (``model.decode_step``)."""

    def __init__(self, obj, name: str, methods: tuple[str, ...] = ()):
        self.__dict__["_obj"], self.__dict__["_name"], self.__dict__["_methods"] = obj, name, methods

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        value = getattr(self.__dict__["_obj"], attr)
        return Guarded(value, f"{self._name}.{attr}") if attr in self.__dict__["_methods"] else value

    def __call__(self, *args, **kwargs):
        copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        kw = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        call = describe_call(self._name, args, kwargs)  # before the call, which may change a cache
        try:
            return self._obj(*copies, **kw)
        except Unfit:
            raise
        except Exception as e:
            raise Unfit(f"{call} raised {why(e)}") from None


def _changed_inputs(call: Callable, inputs: dict[str, torch.Tensor]) -> tuple[bool, str]:
    """PASS when ``call(**inputs)`` leaves every input as it was; FAIL naming each input changed in place."""
    before = {n: t.clone() for n, t in inputs.items()}
    try:
        call(**inputs)
    except Exception as e:
        raise Unfit(f"{describe_call('forward', (), inputs)} raised {why(e)}") from None
    changed = [f"{n} (by up to {_gap(inputs[n], before[n]):.2g})" for n in inputs
               if not torch.equal(inputs[n], before[n])]
    if not changed:
        return True, f"leaves its inputs ({', '.join(inputs)}) unchanged"
    return False, (f"changes its input {' and '.join(changed)} in place: the caller's tensor changes too (the next "
                   "layer, the residual connection, or the reference run after it reads the changed values); use "
                   "out-of-place operations (q = q * s, not q.mul_(s), q *= s or q[...] = ...)")


def _rows_differ(out: torch.Tensor, ref: torch.Tensor, axes: str, tol: float = FLOAT32_TOL) -> str:
    """Where ``out`` differs from ``ref`` (same shape, the last axis the features): how many of the rows named
    by ``axes`` (e.g. "batch, head, query"), the first few, the largest difference, and whether those rows are 0."""
    if out.shape != ref.shape:
        return f"its shape {tuple(out.shape)} differs from the reference's {tuple(ref.shape)}"
    bad = ~torch.isclose(out.float(), ref.float(), rtol=tol, atol=tol).all(-1)  # (..., rows)
    where = bad.nonzero().tolist()
    if not where:
        return "it agrees with the reference"
    shown = "; ".join(f"({', '.join(str(i) for i in w)})" for w in where[:4]) + (" ..." if len(where) > 4 else "")
    zero = out[bad].abs().max().item() == 0
    return (f"{len(where)} of {bad.numel()} rows differ, at ({axes}) {shown}, by up to {_gap(out, ref):.2g}"
            + ("; those rows are all zeros" if zero else ""))


def _wrap_period(values: torch.Tensor, expected: torch.Tensor, tol: float = 1e-4) -> int | None:
    """The n < len such that row p of ``values`` (positions first) is ``expected``'s row p % n for every p,
    where rows 0..n-1 agree and row n does not: a table that wraps around at n rows. None if none does."""
    length = values.size(0)
    agree = torch.isclose(values, expected, rtol=tol, atol=tol).flatten(1).all(-1)
    if agree.all():
        return None
    n = int((~agree).nonzero()[0])
    if n == 0:
        return None
    wrapped = expected[torch.arange(length) % n]
    return n if _close(values, wrapped, tol) else None
