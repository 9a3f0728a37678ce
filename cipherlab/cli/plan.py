"""The command ``python -m cipherlab plan --preset assignment --gpu T4``.

The measurements and the estimate are :mod:`cipherlab.analysis.plan`'s (:func:`~cipherlab.analysis.plan.plan_preset`,
then :func:`~cipherlab.analysis.plan.report`); here are its flags, their checks, its progress bar and the
``--json`` file.
"""

from __future__ import annotations

import json
import math

from cipherlab.analysis.plan import DEFAULT_HOURS, DEFAULT_MFU, GPU, GPUS, plan_preset, report
from cipherlab.base.config import (CONFIG_NAMES, DEFAULT_RECIPE, PRESETS, RECIPES, TOKENIZATIONS, make_config,
                                   parse_field)
from cipherlab.base.files import write_atomic
from cipherlab.runner.errors import outside_results, writable_file
from cipherlab.runner.hooks import StepBar

__all__ = ["register_cli"]


def _check_numbers(args) -> None:
    """Each number flag finite and in its range, one line naming the flag: float() reads 'nan' and 'inf', which
    printed tables of 'nan h' (--tflops nan) or failed converting NaN to an integer (--hours inf)."""
    checks = (("--tflops", args.tflops, lambda v: v > 0, "a GPU's peak TFLOP/s, a number above 0 (e.g. 65)"),
              ("--memory-gb", args.memory_gb, lambda v: v > 0, "a GPU's memory in GB, a number above 0 (e.g. 16)"),
              ("--mfu", args.mfu, lambda v: 0 < v <= 1, "the utilisation is a share of the peak rate, above 0 and "
                                                         "at most 1"),
              ("--hours", args.hours, lambda v: v > 0, "must be positive: the length of the session in hours, "
                                                       "a finite number (e.g. 12)"),
              ("--launch-us", args.launch_us, lambda v: v >= 0, "a time per kernel launch cannot be negative: 0 or "
                                                                "more microseconds, a finite number"))
    for flag, value, test, allowed in checks:
        if value is not None and not (math.isfinite(value) and test(value)):
            raise ValueError(f"{flag} {value}: {allowed}")


def _gpu(args) -> GPU:
    if args.tflops is not None or args.memory_gb is not None:
        known = GPUS.get(args.gpu.upper())
        tflops = args.tflops if args.tflops is not None else known.tflops if known else None
        memory = args.memory_gb if args.memory_gb is not None else known.memory_gb if known else None
        if tflops is None or memory is None:
            raise ValueError(f"--gpu {args.gpu}: not in the table ({', '.join(GPUS)}); give both --tflops and --memory-gb")
        return GPU(args.gpu, tflops, memory, "user-supplied peak rate and memory")
    try:
        return GPUS[args.gpu.upper()]
    except KeyError:
        raise ValueError(f"--gpu {args.gpu}: unknown GPU; choose one of {', '.join(GPUS)}, or give its peak dense "
                         "bf16 TFLOP/s and memory with --tflops and --memory-gb") from None


def _cmd_plan(args) -> int:
    _check_numbers(args)
    gpu = _gpu(args)
    if args.preset.lower() not in PRESETS:
        raise ValueError(f"--preset {args.preset}: unknown preset; choose one of {', '.join(PRESETS)}")
    if args.json:
        writable_file(outside_results(args.json, "--json"), "--json")  # before the work
    configs = tuple(c.lower() for c in args.config) if args.config else CONFIG_NAMES
    overrides = dict(TOKENIZATIONS[args.tokens]) if args.tokens else {}
    for item in args.set or []:
        field, sep, value = item.partition("=")
        if not sep or not field.strip():
            raise ValueError(f"--set {item!r}: expected FIELD=VALUE, e.g. --set token_budget=4096")
        overrides[field.strip()] = parse_field(field.strip(), value)
    for name in configs:
        make_config(name, args.preset.lower(), args.recipe, **overrides)  # an unknown name or field: now, not later
    first = (f"plan: measuring {len(configs)} configuration{'s' if len(configs) != 1 else ''} of the "
             f"{args.preset.lower()} preset on this CPU (FLOPs, saved tensors, kernels; the assignment preset takes "
             "about 1 min each on 2 shared cores) ...")
    with StepBar(len(configs), "plan", first) as measuring:
        plan = plan_preset(args.preset.lower(), gpu, mfu=args.mfu, hours=args.hours, configs=configs,
                           data_dir=args.data_dir, tokenize=args.tokenize, recipe=args.recipe,
                           launch_us=args.launch_us, overrides=overrides or None, progress=measuring)
    print(report(plan))
    if args.json:
        write_atomic(args.json, json.dumps(plan, indent=2) + "\n")
        print(f"\nwrote {args.json}")
    return 0


def register_cli(subparsers) -> None:
    """Add ``python -m cipherlab plan``."""
    p = subparsers.add_parser(
        "plan",
        help="estimate time per epoch and peak memory of each configuration on a GPU",
        description="Estimate, per configuration of a preset, the time per epoch and the peak memory of "
        "training on a GPU, from FLOPs and saved-tensor bytes measured on this CPU (torch FlopCounterMode) "
        "and the GPU's published peak dense bf16/fp16 tensor rate at an assumed utilisation; and how many "
        "epochs fit a session. An estimate until measured on the GPU.",
    )
    p.add_argument("--preset", default="assignment", help="smoke, cpu or assignment (default assignment)")
    p.add_argument("--gpu", default="T4", help=f"one of {', '.join(GPUS)} (default T4), or a name with --tflops/--memory-gb")
    p.add_argument("--tflops", type=float, help="peak dense bf16/fp16 tensor TFLOP/s of another GPU")
    p.add_argument("--memory-gb", type=float, help="memory of that GPU, GB")
    p.add_argument("--mfu", type=float, default=DEFAULT_MFU,
                   help=f"assumed share of the peak rate reached (default {DEFAULT_MFU})")
    p.add_argument("--launch-us", type=float,
                   help="CPU microseconds per kernel launch (default: measured here, per operator of a tiny pass)")
    p.add_argument("--hours", type=float, default=DEFAULT_HOURS,
                   help=f"length of the session to plan for (default {DEFAULT_HOURS:g}; Colab's free tier is not guaranteed 12)")
    p.add_argument("--recipe", default=DEFAULT_RECIPE, choices=list(RECIPES),
                   help="the training recipe planned for (default: %(default)s)")
    p.add_argument("--tokens", choices=list(TOKENIZATIONS),
                   help="C1-C4's tokenisation (cipherlab/base/config.py TOKENIZATIONS; default: the preset's), e.g. 'notes' "
                   "for the course notes' 1024/8000 BPE over bits")
    p.add_argument("--config", action="append", metavar="CN", help="only these configurations (repeatable; default all five)")
    p.add_argument("--data-dir", help="data folder (default: $CIPHERLAB_DATA_DIR or the repository's data/)")
    p.add_argument("--tokenize", action="store_true",
                   help="learn (and cache) the real BPEs when they are not cached, instead of stand-ins (about a minute)")
    p.add_argument("--set", action="append", metavar="FIELD=VALUE",
                   help="override one Config field for every configuration, as train --set does, e.g. --set "
                   "token_budget=4096 (repeatable)")
    p.add_argument("--json", metavar="OUT", help="also write every number to OUT")
    p.set_defaults(func=_cmd_plan)
