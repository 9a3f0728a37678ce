"""The command line: ``python -m cipherlab COMMAND ...`` (or the ``cipherlab`` script).

Each module of :mod:`cipherlab.cli` adds its commands with its own ``register_cli(subparsers)``, in the
order ``--help`` lists them: data, pipeline (train, evaluate, export, decrypt, ablate), score, doctor,
plan, check, report. A user error (bad data, a missing file, an unknown configuration, an unwritable
output) and any other error end with one line on stderr that names the problem and a non-zero exit,
never a traceback (:func:`cipherlab.runner.errors.run_command`); set CIPHERLAB_DEBUG=1 to see the traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from cipherlab.runner.errors import run_command
from cipherlab.cli import check, data, doctor, pipeline, plan, report, score
from cipherlab.cli.common import OneLineParser


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m cipherlab",
        description="Train, evaluate and explore Transformers that decrypt a repeating-key XOR cipher.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    data.register_cli(sub)
    pipeline.register_cli(sub)
    score.register_cli(sub)
    doctor.register_cli(sub)
    plan.register_cli(sub)
    check.register_cli(sub)
    report.register_cli(sub)
    return parser


def _escape_what_the_console_cannot_show() -> None:
    """A console that is not UTF-8 (an ASCII locale, a Windows code page) shows a character it lacks as an escape
    (``\\xdc`` for the Ü of ``My Drive/Übung``) instead of failing the command after its work is done. What
    ``decrypt`` prints is text to keep: it refuses such a line instead (:func:`cipherlab.cli.pipeline.printable`)."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "utf-8").lower().replace("-", "").replace("_", "")
        if encoding != "utf8":
            with contextlib.suppress(AttributeError, ValueError, OSError):
                stream.reconfigure(errors="backslashreplace")


def main(argv: list[str] | None = None) -> int:
    """Run the command ``argv`` (None: the process's own command line, and the process ends with it: a thread
    a student's part left running does not keep it alive)."""
    whole_process = argv is None
    _escape_what_the_console_cannot_show()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args([_home(arg) for arg in argv])
    args.argv = argv  # results record the command that made them
    # any error: one line on stderr (cipherlab/runner/errors.py)
    return run_command("cipherlab", args.func, args, leave_threads=whole_process)


def _home(arg: str) -> str:
    """``arg`` with a leading ``~/`` (or ``NAME=~/``: ``--out=~/run``, ``--part attention=~/mine.py:Mine``) made the
    home folder, as a shell would have: a notebook's quoted ``"~/run"`` otherwise made a folder named ``~``."""
    name, sep, value = arg.partition("=")
    if sep and "~" not in name and value.startswith("~"):
        return name + sep + _home(value)
    return os.path.expanduser(arg) if arg == "~" or arg.startswith(("~/", "~" + os.sep)) else arg


if __name__ == "__main__":
    sys.exit(main())
