"""How a part's checks run and what they return: findings, reports, and the errors of an unusable part.

A check is a function returning (passed, message); :func:`_run` runs a part's checks in order into a
:class:`Report` of :class:`Finding` lines (a raised exception is a FAIL naming it, and a failed
"shape" or "eval mode" check stops the rest). Before any check, an object that cannot even be built or
called as its part's interface says raises :class:`InterfaceError` (:class:`NotWritten` for a stub's
NotImplementedError), one line naming the call and the interface, and a class that defines or sets a
name nn.Module already has (``_apply``, ``train``, ...) is refused (:func:`_refuse_internals`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from cipherlab.runner.errors import why
from cipherlab.student.parts import internals_refusal, overridden_internals, shadowed_internals
from cipherlab.student.trials import Unfit


@dataclass
class Finding:
    """One check: its name, whether it passed, and what it saw."""

    name: str
    passed: bool
    message: str

    @property
    def word(self) -> str:
        """PASS or FAIL, or the verdict's own word (WARN, SKIP) when a check returned one."""
        return getattr(self.passed, "word", None) or ("PASS" if self.passed else "FAIL")

    def __str__(self) -> str:
        message = self.message.removeprefix(f"{self.word}: ")
        return f"{self.word}  {self.name}: {message}"


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
        n = sum(bool(f.passed) for f in self.findings)
        others = [w for w in ("WARN", "SKIP") if any(f.word == w for f in self.findings)]
        said = "".join(f", {sum(f.word == w for f in self.findings)} {w}" for w in others)
        lines = [f"check {self.part}: {self.subject}", *(f"  {f}" for f in self.findings),
                 f"{n} of {len(self.findings)} checks pass{said}"]
        return "\n".join(lines)


class InterfaceError(ValueError):
    """The object cannot be built or called as its part's interface says."""


class NotWritten(InterfaceError):
    """The object raised NotImplementedError: a stub still to be filled in (the chapters' exercises
    catch it and check cipherlab's own module instead)."""


Check = Callable[[], tuple[bool, str]]
STOPPERS = ("shape", "eval mode")  # a failure of one of these stops the rest of a part's checks


RUNNING = [""]
"""The name of the check running now ("" before a part's first): ``python -m cipherlab check``'s time limit names it."""


def _run(part: str, subject: str, checks: list[tuple[str, Check]]) -> Report:
    """Run each (name, check); an exception is a FAIL naming it. A wrong shape stops the rest."""
    report = Report(part, subject)
    for name, check in checks:
        RUNNING[0] = name
        try:
            with torch.no_grad():
                passed, message = check()
        except Unfit as e:
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
    """``build()``, a constructor call, with torch's global generator seeded (and restored afterwards), so a
    class that draws its initial weights from it is the same module on every run and in every notebook
    state; an exception is an InterfaceError naming the call."""
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
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


def _label(obj) -> str:
    return getattr(obj, "__name__", type(obj).__name__)


def _refuse_internals(obj, built=None) -> None:
    """InterfaceError when class ``obj`` (or the module ``built`` from it) defines a name nn.Module
    already has (a method _apply, train, to ...): PyTorch calls its own in .to(), .eval(), training
    and checkpoints, and gets the student's instead."""
    names = overridden_internals(obj) if inspect.isclass(obj) else []
    names += shadowed_internals(built) if built is not None else []
    if names:
        raise InterfaceError(f"{_label(obj)} {internals_refusal(names)}")


def _takes(fn, name: str) -> bool:
    """Whether ``fn`` has a parameter called ``name`` (False when its signature cannot be read)."""
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
