"""The first steps of the ``assignment`` preset on a CPU: does each configuration start to learn?

    python benchmarks/assignment_steps.py                       # C1-C5, 200 steps each -> benchmarks/results/assignment_steps.json
    python benchmarks/assignment_steps.py --configs c1 --steps 50 --out /tmp/steps.json

Before any GPU run, this trains every configuration of the ``assignment`` preset (the course
notes' sizes, the default recipe and the preset's own tokenisation) for ``--steps`` optimiser
steps on the CPU, validating every ``--eval-every`` steps on the first ``--eval-lines``
validation lines (``Config.eval_every``: teacher-forced token accuracy, exact chunks, loss). The
record holds each configuration's learning curve, its measured seconds per step, and beside them
what ``cipherlab.analysis.plan`` estimates for the same configuration (its FLOPs per step, the steps of
one epoch), so that a first GPU run starts from a configuration measured to learn and a time
plan whose inputs were checked. Nothing is written into ``results/``; runs go to a temporary
folder unless ``--runs-dir`` names one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from cipherlab.pipeline.checkpoint import read_log  # noqa: E402
from cipherlab.pipeline.codec import select_lines  # noqa: E402
from cipherlab.base.config import CONFIG_NAMES, make_config  # noqa: E402
from cipherlab.data.corpus import load_corpus  # noqa: E402
from cipherlab.runner.record import versions  # noqa: E402
from cipherlab.analysis.plan import plan_config  # noqa: E402
from cipherlab.runner.hooks import NotLearning  # noqa: E402
from cipherlab.runner.training import train_config  # noqa: E402

PRESET = "assignment"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="assignment_steps.py", description=__doc__.splitlines()[0])
    p.add_argument("--configs", default=",".join(CONFIG_NAMES), help="comma-separated, default c1,...,c5")
    p.add_argument("--steps", type=int, default=200, help="optimiser steps per configuration (default 200)")
    p.add_argument("--eval-every", type=int, default=25, help="validate every N steps (default 25)")
    p.add_argument("--eval-lines", type=int, default=40, help="validation lines (default 40)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "assignment_steps.json"))
    p.add_argument("--runs-dir", help="keep the runs here (default: a temporary folder, removed)")
    p.add_argument("--shared", default="", help="what else ran on this machine meanwhile, recorded as it is "
                   "(the seconds per step are then not this machine's alone)")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="a Config override for every configuration, e.g. --set source_mode=bits")
    args = p.parse_args(argv)
    args.configs = [c.strip().lower() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in args.configs if c not in CONFIG_NAMES]
    if unknown or not args.configs:
        p.error(f"--configs {','.join(args.configs)}: expected some of {','.join(CONFIG_NAMES)}")
    for name in ("steps", "eval_every", "eval_lines", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} {getattr(args, name)}: at least 1")
    if Path(args.out).resolve().is_relative_to((ROOT / "results").resolve()):
        p.error(f"--out {args.out}: this script does not write into results/; name a file elsewhere")
    return args


def run_one(name: str, args, overrides: dict, runs: Path) -> dict:
    config = make_config(name, PRESET, eval_every=args.eval_every, max_eval_lines=args.eval_lines, **overrides)
    out = runs / name
    started = time.monotonic()
    try:
        run = train_config(config, out, progress=False, max_steps=args.steps)
        params, stopped = run.params, run.fit.stopped
    except NotLearning as e:  # still at the unigram level at onset_step: the curve so far is the measurement
        params, stopped = None, f"not learning: {e}"
    wall = time.monotonic() - started
    curve = read_log(out / "curve.jsonl")
    if not curve:
        raise SystemExit(f"{name}: no learning curve: --steps {args.steps} is below --eval-every {args.eval_every}")
    train_seconds = curve[-1]["train_seconds"]
    plan = plan_config(config, select_lines(load_corpus(), config))
    first, last = curve[0], curve[-1]
    return {
        "config": name, "params": plan["params"] if params is None else params, "steps": last["step"],
        "stopped": stopped, "wall_seconds": wall,
        "seconds_per_step": train_seconds / last["step"],
        "curve": curve,
        "learned": {"val_accuracy": [first["val_accuracy"], last["val_accuracy"]],
                    "val_loss": [first["val_loss"], last["val_loss"]]},
        # cipherlab.analysis.plan's figures for the same configuration: what a GPU estimate starts from
        "plan": {"params": plan["params"], "steps_per_epoch": plan["train_epoch"]["steps"],
                 "train_flops_per_epoch": plan["train_epoch"]["train_flops"],
                 "typical_batch": plan["typical_batch"], "units": plan["units"]},
        # plan's mean FLOPs of a step over the measured seconds of one: this CPU's rate
        "plan_flops_per_measured_second": plan["train_epoch"]["train_flops"] / plan["train_epoch"]["steps"]
        / (train_seconds / last["step"]),
        "hyperparameters": config.to_dict(),
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    overrides = {}
    from cipherlab.base.config import parse_field
    for item in args.set:
        field, _, value = item.partition("=")
        overrides[field] = parse_field(field, value)
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(args.runs_dir) if args.runs_dir else Path(tmp)
        records = []
        for name in args.configs:
            record = run_one(name, args, overrides, runs)
            records.append(record)
            acc = record["learned"]["val_accuracy"]
            print(f"{name}: {record['curve'][-1]['step']} steps, {record['seconds_per_step']:.2f} s/step; val token "
                  f"accuracy {100 * acc[0]:.1f}% -> {100 * acc[1]:.1f}%, val loss "
                  f"{record['learned']['val_loss'][0]:.3f} -> {record['learned']['val_loss'][1]:.3f}", flush=True)
    summary = {
        "command": shlex.join(["python", "benchmarks/assignment_steps.py", *(argv if argv is not None else sys.argv[1:])]),
        "preset": PRESET, "steps": args.steps, "eval_every": args.eval_every, "eval_lines": args.eval_lines,
        "threads": args.threads, "cpu": platform.processor() or platform.machine(), "os_cpus": os.cpu_count(),
        "shared_with": args.shared or None, "overrides": overrides, **versions(),
        "runs": records,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
