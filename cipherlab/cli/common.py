"""What every command group of ``python -m cipherlab`` shares, argparse's side of it.

:class:`OneLineParser` makes a usage error one line, like every other error of a command
(:func:`cipherlab.runner.errors.run_command` words those); :func:`device_option` checks ``--device``
as the command line is read. ``python -m cipherbook.viva`` uses the parser too.
"""

from __future__ import annotations

import argparse

__all__ = ["DEVICE_TYPES", "OneLineParser", "device_option"]


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line too (subcommands' parsers inherit it)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


DEVICE_TYPES = ("cpu", "cuda", "mps")
"""The device types cipherlab runs on (``--device``): ``cuda`` and ``mps`` may carry an index, ``cuda:1``."""


def device_option(value: str) -> str:
    """``--device``'s value, checked as the command line is read (an argparse ``type=``): a device type of
    :data:`DEVICE_TYPES`, with an index that exists; else an error naming the flag, the value and the choices."""
    import torch  # only when --device is given

    try:
        device = torch.device(value.strip())
    except (RuntimeError, ValueError):
        device = None
    if device is None or device.type not in DEVICE_TYPES:
        raise argparse.ArgumentTypeError(f"{value!r} is not a device cipherlab runs on; use cpu, cuda, cuda:N "
                                         "(N counts from 0) or mps, or leave --device out for the best one here")
    if device.type == "cuda" and device.index is not None and torch.cuda.is_available() \
            and device.index >= torch.cuda.device_count():
        raise argparse.ArgumentTypeError(f"{value!r}: this machine has {torch.cuda.device_count()} CUDA device(s), "
                                         f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    return value.strip()
