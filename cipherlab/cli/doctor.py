"""The command ``python -m cipherlab doctor --checkpoint CK``.

The diagnosis is :mod:`cipherlab.analysis.doctor`'s (:func:`~cipherlab.analysis.doctor.diagnose_checkpoint`,
then :func:`~cipherlab.analysis.doctor.report`); here are its flags, its progress bar and the ``--json`` file.
"""

from __future__ import annotations

import json

from cipherlab.analysis.doctor import (DEFAULT_ATTENTION_CHUNKS, DEFAULT_LINES, DEFAULT_RANDOM, DEFAULT_SEED,
                                       diagnose_checkpoint, report)
from cipherlab.runner.errors import outside_results, writable_file
from cipherlab.base.files import write_atomic
from cipherlab.cli.common import device_option
from cipherlab.student.parts import PartsBuilder, import_parts
from cipherlab.runner.hooks import StepBar

__all__ = ["register_cli"]


def _cmd_doctor(args) -> int:
    for name in ("lines", "random", "attention_chunks"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} {getattr(args, name)}: must be at least 1")
    if args.json:
        writable_file(outside_results(args.json, "--json"), "--json")  # before the work
    from cipherlab.student.check import load_target  # a student's FILE.py:NAME for --part

    first = (f"doctor: decoding {args.random} random strings, up to {args.lines} lines of outside English and "
             f"{args.lines} test lines (twice) with {args.checkpoint}, then its cross-attention (2-7 min measured on "
             "2 shared cores) ...")
    with StepBar(5, "doctor", first) as step:
        result = diagnose_checkpoint(args.checkpoint, data_dir=args.data_dir, outside=args.outside,
                                     device=args.device, lines=args.lines, n_random=args.random, seed=args.seed,
                                     attention_chunks=args.attention_chunks, progress=step,
                                     builder=PartsBuilder(import_parts(args.part, load=load_target)))
    print(report(result))
    if args.json:
        write_atomic(args.json, json.dumps(result, indent=2) + "\n")  # whole or not at all (a full disk)
        print(f"wrote {args.json}")
    return 0


def register_cli(subparsers) -> None:
    """Add ``python -m cipherlab doctor``."""
    p = subparsers.add_parser(
        "doctor",
        help="diagnose a checkpoint: cipher, corpus or neither, where the errors are, stopping, attention",
        description="Diagnose a trained cipherlab model (best.pt or an exported .safetensors): (a) random "
        "strings over its training alphabet and English from outside Brown against its own test "
        "lines -- did it learn the cipher or the corpus?; (b) errors by key phase, chunk position, "
        "character class and line length; (c) free vs length-aware stopping; (d) how much of the "
        "last decoder layer's cross-attention sits on the aligned source character.",
    )
    p.add_argument("--checkpoint", required=True, metavar="CK", help="a best.pt / last.pt, a .safetensors export or a model folder (export --hub)")
    p.add_argument("--json", metavar="OUT", help="also write every number to OUT")
    p.add_argument("--data-dir", help="the data folder it was trained on (default: $CIPHERLAB_DATA_DIR or data/)")
    p.add_argument("--outside", metavar="DIR", help="English from outside the training text (default: data/stdlib)")
    p.add_argument("--lines", type=int, default=DEFAULT_LINES,
                   help=f"test (and outside) lines to decode, the first N (default {DEFAULT_LINES})")
    p.add_argument("--random", type=int, default=DEFAULT_RANDOM,
                   help=f"random strings of 40-120 characters (default {DEFAULT_RANDOM})")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"seed of the random strings (default {DEFAULT_SEED})")
    p.add_argument("--attention-chunks", type=int, default=DEFAULT_ATTENTION_CHUNKS,
                   help=f"test chunks for the cross-attention measurement (default {DEFAULT_ATTENTION_CHUNKS})")
    p.add_argument("--device", type=device_option, help="cpu, cuda, mps (default: cuda if present, then mps, then cpu)")
    p.add_argument("--part", action="append", metavar="PART=FILE.py:NAME",
                   help="the class of yours the checkpoint was trained with (as given to train --part); repeatable")
    p.set_defaults(func=_cmd_doctor)
