"""What checking a student's part and trying a ``--part`` before training both need.

``python -m cipherlab check`` (:mod:`cipherlab.student.check`) and the trial run of each ``--part``
class before training (:mod:`cipherlab.student.parts`) call a student's code on small random inputs
and turn what goes wrong into one line in the student's terms. Both draw the inputs with
:func:`randn`, which leaves the global random generator (hence a model's initial weights) as it was,
and both stop at :class:`Unfit`, whose message says what went wrong; the caller adds the part's name.

Both also guard against code that does not return or that changes PyTorch for everyone after it:
:func:`time_limit` stops a call that runs too long (:class:`TooLong`), and :func:`torch_state` with
:func:`state_change` find (and undo) a change of torch's global settings, ``torch.set_default_dtype``
or ``torch.set_grad_enabled`` called by a part's import, constructor or forward.
"""

from __future__ import annotations

import contextlib
import signal
import threading

import torch

__all__ = ["TooLong", "Unfit", "randn", "state_change", "time_limit", "torch_state"]


class Unfit(Exception):
    """A check or a trial call cannot go on with a part (no q_proj to copy weights from, NaN on ordinary
    inputs, a call that raised); its message, in the student's terms, is the finding."""


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    """Unit-variance random values of ``shape``, the same for the same ``seed``, from a generator of their own."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# --------------------------------------------------------------------------- a time limit


class TooLong(BaseException):
    """Raised in the running code when :func:`time_limit` runs out (not an Exception: a student's
    ``except Exception`` around a loop does not swallow it)."""


@contextlib.contextmanager
def time_limit(seconds: float):
    """Run the body with a limit of ``seconds``: past it, :class:`TooLong` is raised in the code that runs.

    The limit is ``SIGALRM``'s, on the main thread of a POSIX system where no other alarm is running (a test
    runner's, say); elsewhere the body runs without one. Yields whether a limit is set."""
    timed = (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
             and signal.getitimer(signal.ITIMER_REAL)[0] == 0)
    if not timed:
        yield False
        return
    over = [False]

    def too_long(signum, frame):
        if not over[0]:  # not once the body has ended (an alarm between its end and the cancel)
            raise TooLong

    previous = signal.signal(signal.SIGALRM, too_long)
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        yield True
    finally:
        over[0] = True
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# --------------------------------------------------------------------------- torch's global settings


def torch_state() -> tuple:
    """What of PyTorch's global settings a part must leave as it found them: the default dtype, whether
    gradients are on, the default device."""
    device = torch.get_default_device() if hasattr(torch, "get_default_device") else None
    return torch.get_default_dtype(), torch.is_grad_enabled(), device


def state_change(before: tuple) -> str | None:
    """What changed in :func:`torch_state` since ``before`` (it is put back as it was), as words that follow
    "the call" and say the fix; None when nothing did."""
    dtype, grad, device = before
    now_dtype, now_grad, now_device = torch_state()
    changes = []
    if now_dtype != dtype:
        torch.set_default_dtype(dtype)
        changes.append(f"changed torch's default dtype from {dtype} to {now_dtype} (torch.set_default_dtype) and left "
                       "it so: every tensor made after it, the whole model's weights included, would be "
                       f"{str(now_dtype).removeprefix('torch.')}; give dtype= to the tensors you make instead")
    if now_grad != grad:
        torch.set_grad_enabled(grad)
        changes.append("turned gradients off for all of PyTorch (torch.set_grad_enabled(False)) and left them off: "
                       "nothing after it would train; put `with torch.no_grad():` around the lines that need none"
                       if grad else
                       "turned gradients on for all of PyTorch (torch.set_grad_enabled(True)) where cipherlab had them "
                       "off, and left them on; use `with torch.enable_grad():` around the lines that need them")
    if device is not None and now_device != device:
        torch.set_default_device(device)
        changes.append(f"changed torch's default device from {device} to {now_device} (torch.set_default_device) and "
                       "left it so; make your tensors on the device of the inputs (device=x.device) instead")
    return "; and ".join(changes) or None
