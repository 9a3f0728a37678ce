"""The backward pass of a part against the reference's, with the same weights and inputs (:func:`gradients`).

The part and the reference are called on the same inputs, which require gradients, with autograd on (the
checks run under torch.no_grad() otherwise); the sum of the output times a fixed random tensor is
differentiated in both. A forward or backward that raises with autograd on (an in-place operation on a
tensor autograd saved) is a FAIL naming the error and, from anomaly mode's record of the forward call, the
line of the student's file that saved the tensor; a parameter that gets no gradient (a buffer, a parameter
computed under torch.no_grad(), requires_grad=False) is named; where the outputs agree with the reference
the gradients of every input and every parameter the two share are compared to GRAD_TOL.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

import cipherlab
from cipherlab.runner.errors import why
from cipherlab.student.check.compare import _close, _gap, _tolerance_used
from cipherlab.student.trials import randn

GRAD_TOL = 1e-4  # atol and rtol of the gradients against the reference's, in float32 (a backward adds rounding)
_OURS = (str(Path(torch.__file__).parent), str(Path(cipherlab.__file__).parent))
_DETACHERS = "torch.no_grad(), .detach(), .data, .item(), .numpy() or a new tensor built from values"


def gradients(module, call: Callable, ref, ref_call: Callable, inputs: dict[str, torch.Tensor],
              shared: dict[str, str | None]) -> tuple[bool, str]:
    """Backward through ``call(module, *inputs)`` against ``ref_call(ref, *inputs)`` (each returns one tensor).

    ``module``/``ref``: the student's part and the reference (nn.Module, or a function: then no parameters);
    ``inputs``: name -> tensor, given to both as leaves that require gradients; ``shared``: the student's name
    of each reference parameter -> the reference's name (None where the student's part has no such tensor)."""
    refused = _buffers_for_parameters(module, shared)
    if refused:
        return False, refused
    leaves, out, failed = _backward(module, call, inputs)
    if failed:
        return False, failed
    if isinstance(out, Exception):  # the forward raises with autograd off too: not the backward's fault
        return False, f"the forward raised {why(out)}, with autograd off too, so no gradient is computed"
    starved = [n for n, p in _parameters(module) if p.grad is None]
    if starved:
        frozen = [n for n in starved if not dict(_parameters(module))[n].requires_grad]
        if frozen:
            return False, (f"`{frozen[0]}` has requires_grad=False: it gets no gradient and never trains; leave "
                           "nn.Parameter's default, requires_grad=True")
        return False, _starved(module, call, inputs, out, starved)
    said = f"backward runs, and {_each_gets(module)}"
    with torch.no_grad():
        expected = _quiet(lambda: ref_call(ref, *(t.detach() for t in inputs.values())))
    if expected is None or not _close(out.detach(), expected):
        return True, (f"{said}; the gradients are compared with the reference's only where the outputs agree, "
                      "and here they do not (another check says how)")
    ref_leaves, _, failed = _backward(ref, ref_call, inputs)
    if failed:  # the reference's own backward: never expected
        raise RuntimeError(f"the reference's backward failed: {failed}")
    pairs = [(n, _grad(leaves[n]), _grad(ref_leaves[n])) for n in inputs]
    mine, theirs = dict(_parameters(module)), dict(_parameters(ref))
    pairs += [(f"`{n}`", _grad(mine[n]), _grad(theirs[r])) for n, r in shared.items()
              if r is not None and n in mine and r in theirs]
    wrong = [name for name, a, b in pairs if not _close(a, b, GRAD_TOL)]
    if not wrong:
        worst = max(_gap(a, b) for _, a, b in pairs)
        return True, (f"{said}; the gradients of {', '.join(n for n, _, _ in pairs)} agree with the reference's "
                      f"(max difference {worst:.1e}, tolerance {GRAD_TOL:g} + {GRAD_TOL:g} x |reference|)")
    name, a, b = next(p for p in pairs if p[0] == wrong[0])
    right = [n for n, _, _ in pairs if n not in wrong]
    several = len(wrong) > 1
    gap = (f"the gradient{'s' * several} of {', '.join(wrong)} differ{'s' * (not several)} from the reference's"
           + (f" ({name}'s" if several else "") + f" by up to {_gap(a, b):.2g}, {_tolerance_used(a, b, GRAD_TOL):.0f} "
           f"times the tolerance{'; it is zero everywhere' if not a.any() and b.any() else ''}" + (")" if several else ""))
    agree = f", while those of {', '.join(right)} agree" if right else ""
    return False, (f"the outputs agree with the reference's but {gap}{agree}: part of the forward is hidden "
                   f"from autograd; look for {_DETACHERS}")


def _starved(module, call, inputs, out: torch.Tensor, starved: list[str]) -> str:
    """What is wrong with the parameters ``starved`` that got no gradient: unused (changing the first leaves the
    output as it was), or used out of autograd's sight."""
    name = starved[0]
    every = f" ({', '.join(f'`{n}`' for n in starved)} get none)" if len(starved) > 1 else ""
    p = dict(_parameters(module))[name]
    with torch.no_grad():
        saved = p.clone()
        p.add_(randn(*p.shape, seed=19) + 1)
        changed = _quiet(lambda: call(module, *inputs.values()))
        p.copy_(saved)
    if changed is not None and _gap(changed, out.detach()) == 0:
        return (f"`{name}` gets no gradient: it is never used (changing it leaves the output as it was), so it "
                f"never trains{every}; use it in the forward, or remove it")
    return (f"`{name}` gets no gradient, though the output depends on it{every}: is it used under torch.no_grad(), "
            f"or detached? Look for {_DETACHERS}")


def _grad(t: torch.Tensor) -> torch.Tensor:
    """``t``'s gradient, zeros where none reached it."""
    return torch.zeros_like(t) if t.grad is None else t.grad


def _parameters(module) -> list[tuple[str, nn.Parameter]]:
    return list(module.named_parameters()) if isinstance(module, nn.Module) else []


def _each_gets(module) -> str:
    n = len(_parameters(module))
    return {0: "it has no parameter to train", 1: "its parameter gets a gradient"}.get(
        n, f"each of its {n} parameters gets a gradient")


def _buffers_for_parameters(module, shared: dict[str, str | None]) -> str:
    """The refusal of a tensor the reference trains that the student's part registered as a buffer, or ""."""
    if not isinstance(module, nn.Module):
        return ""
    buffers = dict(module.named_buffers())
    for name, ref_name in shared.items():
        if name in buffers and buffers[name].is_floating_point():
            return (f"`{name}` gets no gradient: it is a buffer (register_buffer), so it never trains, where the "
                    f"reference's `{ref_name or name}` is a parameter; make it nn.Parameter(...)")
    return ""


def _leaves(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {n: t.detach().clone().requires_grad_(t.is_floating_point()) for n, t in inputs.items()}


def _activations(leaves: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """The leaves as a layer sees its inputs in training: results of earlier operations, not leaves (an
    in-place operation on a leaf that requires a gradient raises; on an activation, autograd records it)."""
    return [t.clone() for t in leaves.values()]


def _quiet(fn):
    """``fn()``, or None if it raises."""
    try:
        return fn()
    except Exception:
        return None


def _backward(module, call, inputs) -> tuple[dict[str, torch.Tensor], torch.Tensor | Exception | None, str]:
    """(the input leaves, the output, "") after one backward through ``call(module, *leaves)``; the message of a
    forward or backward that raises with autograd on in place of "" (and the output None); the exception in
    place of the output when the forward raises with autograd off too."""
    if isinstance(module, nn.Module):
        module.zero_grad(set_to_none=True)
    leaves = _leaves(inputs)
    with torch.enable_grad():
        try:
            out = call(module, *_activations(leaves))
        except Exception as e:
            with torch.no_grad():
                if _quiet(lambda: call(module, *inputs.values())) is None:
                    return leaves, e, ""
            return leaves, None, _raised(e, "with autograd on, as in training, the forward")
        if not out.requires_grad:
            return leaves, None, ("the output does not require a gradient: no input or parameter reaches it through "
                                  f"autograd; look for {_DETACHERS}")
        try:
            (out * randn(*out.shape, seed=17)).sum().backward()
        except Exception as e:
            return leaves, None, _raised(e, "the backward pass", _saved_where(module, call, inputs))
    return leaves, out, ""


def _raised(e: Exception, when: str, where: str = "") -> str:
    """What raised ``when`` (the forward or backward), with the fix for autograd's in-place errors."""
    text = str(e)
    if "modified by an inplace operation" in text:
        return (f"{when} raised {type(e).__name__}: a tensor autograd saved for the backward pass was modified by an "
                f"in-place operation (/=, *=, +=, .div_(), x[...] = ...) after {where or 'the forward'} saved it; "
                "write that operation out of place, x = x / s")
    return f"{when} raised {why(e)}"


def _saved_where(module, call, inputs) -> str:
    """"line N of FILE (`code`)": the deepest frame outside torch and cipherlab of the forward call whose
    saved tensor was changed, as anomaly mode records it; "" when it records none."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.enable_grad(), torch.autograd.detect_anomaly(check_nan=False):
                if isinstance(module, nn.Module):
                    module.zero_grad(set_to_none=True)
                out = call(module, *_activations(_leaves(inputs)))
                (out * randn(*out.shape, seed=17)).sum().backward()
        except Exception:
            pass
    if isinstance(module, nn.Module):
        module.zero_grad(set_to_none=True)
    frames = [m for w in caught for m in re.finditer(r'File "([^"]+)", line (\d+), in \S+\n\s*(.*)', str(w.message))]
    theirs = [m for m in frames if not m.group(1).startswith(_OURS) and not m.group(1).startswith("<")]
    if not theirs:
        return ""
    file, line, code = theirs[-1].groups()
    return f"line {line} of {Path(file).name} (`{code.strip()}`)"
