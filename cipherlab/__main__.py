"""The command line: ``python -m cipherlab COMMAND ...`` (or the ``cipherlab`` script).

Each module that owns commands adds them with its own ``register_cli(subparsers)``. A user error
(bad data, a missing file, an unknown configuration, an unwritable output) and any other error end
with one line on stderr that names the problem and a non-zero exit, never a traceback
(:func:`cipherlab.errors.run_command`); set CIPHERLAB_DEBUG=1 to see the traceback.
"""

from __future__ import annotations

import argparse
import sys

from . import check, cli, data, doctor, plan, report, score
from .errors import OneLineParser, run_command


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m cipherlab",
        description="Train, evaluate and explore Transformers that decrypt a repeating-key XOR cipher.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    data.register_cli(sub)
    cli.register_cli(sub)
    score.register_cli(sub)
    doctor.register_cli(sub)
    plan.register_cli(sub)
    check.register_cli(sub)
    report.register_cli(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    args.argv = argv  # results record the command that made them
    return run_command("cipherlab", args.func, args)  # any error: one line on stderr (cipherlab/errors.py)


if __name__ == "__main__":
    sys.exit(main())
