"""The ``assignment`` ablation (C1-C5 at the course notes' sizes) on one GPU, within a time budget.

    python benchmarks/gpu_run.py                     # 13 minutes in all -> results/assignment/
    python benchmarks/gpu_run.py --budget-minutes 30 --configs c1,c5
    python benchmarks/gpu_run.py --plan              # print the time plan; needs no GPU
    python benchmarks/gpu_run.py --cpu-check --results-dir /tmp/check --runs-dir /tmp/check
                                                     # every step on a CPU, tiny sizes: a minute
    python benchmarks/gpu_run.py --wandb my-project  # also log each configuration to W&B, one group

The budget is the device time of the whole run. Each configuration trains in its own process
(``python -m cipherlab train``, so peak memory is its own) for its share of what is left,
less ``--overhead`` seconds for its data, tokenizers and test lines; time one configuration
leaves unused goes to the next. Validation and test use the first ``--eval-lines`` lines (a
``max_eval_lines`` override, recorded in every result with its command), so that evaluating
stays a small part of a short budget. Each ``results/assignment/c*.json`` names the GPU
(``device_name``, from ``torch.cuda.get_device_name``); ``gpu_run.json`` beside them records
the plan, what each configuration took and the command (a configuration whose budget ended
inside its first epoch has no best.pt, hence no record, and is reported as failed), with each
configuration's measured seconds per epoch (its record's ``log``). Every configuration trains
with the default recipe (``cipherlab.base.config.RECIPES``) unless ``--recipe`` names another.
Refuses to start without CUDA: on a CPU use ``python -m cipherlab ablate --preset cpu``, or
``--cpu-check``, which runs every step of this script on the CPU with the ``smoke`` preset's
sizes, 40 training lines, one epoch and 4 evaluation lines, so that the first GPU run cannot fail
on a typo (``tests/test_gpu_paths.py`` runs it).

``--wandb [PROJECT]`` passes ``--wandb`` to each configuration's ``train`` (:mod:`cipherlab.runner.tracking`:
one W&B run each, named ``c1-seed0-assignment`` ..., all in the group ``gpu_run-<date>-<time>``, their
files in each configuration's runs folder or ``$WANDB_DIR``; offline without an API key, each printing
its ``wandb sync`` line). Without the wandb package it stops before training, with one line.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cipherlab.base.config import DEFAULT_RECIPE, RECIPES  # noqa: E402
from cipherlab.runner.tracking import DEFAULT_PROJECT, check_wandb_dir, require_wandb  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ("c1", "c2", "c3", "c4", "c5")
PRESET = "assignment"
# --cpu-check: the smoke preset's sizes on the assignment preset's tokenization, 40 lines, one epoch
# (the aligned BPE's source vocabulary: its 2,048 phase-tagged bytes and the specials, then a few dozen merges)
CPU_CHECK = dict(d_model=32, n_heads=4, n_kv_heads=2, enc_layers=1, dec_layers=1, ffn_dim=64, blt_window=32,
                 src_vocab=2100, chunk_chars=32, max_train_lines=40, token_budget=2048,
                 max_batch_size=32, warmup_steps=20, max_epochs=1)
CPU_CHECK_EVAL_LINES = 4


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gpu_run.py", description=__doc__.splitlines()[0])
    p.add_argument("--budget-minutes", type=float, default=13.0,
                   help="device time for the whole ablation, in minutes (default 13)")
    p.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated, default c1,c2,c3,c4,c5")
    p.add_argument("--overhead", type=float, default=60.0,
                   help="seconds per configuration kept for data, tokenizers and the test lines (default 60)")
    p.add_argument("--eval-lines", type=int, default=500,
                   help="validation and test lines per configuration (default 500)")
    p.add_argument("--results-dir", default="results", help="default results/ (-> results/assignment/)")
    p.add_argument("--runs-dir", default="runs", help="checkpoints go to RUNS_DIR/assignment/<config>/")
    p.add_argument("--data-dir", help="folder with brown_plain.txt (default: the repository's data/)")
    p.add_argument("--device", default="cuda", help="a CUDA device, default cuda")
    p.add_argument("--plan", action="store_true", help="print the time plan and exit (no GPU needed)")
    p.add_argument("--recipe", default=DEFAULT_RECIPE, choices=list(RECIPES),
                   help="the training recipe of all five (default: %(default)s)")
    p.add_argument("--cpu-check", action="store_true",
                   help="run every step on the CPU with tiny sizes and data (a minute; no GPU needed)")
    p.add_argument("--wandb", nargs="?", const=DEFAULT_PROJECT, metavar="PROJECT",
                   help=f"log each configuration's run to Weights & Biases project PROJECT (default {DEFAULT_PROJECT}), "
                   "all in one group; files in its runs folder or $WANDB_DIR; offline without an API key "
                   "(`wandb sync` uploads it later). Needs pip install 'cipherlab[wandb]'")
    args = p.parse_args(argv)
    args.wandb_group = f"gpu_run-{time.strftime('%Y%m%d-%H%M%S')}" if args.wandb else None
    args.configs = [c.strip().lower() for c in args.configs.split(",") if c.strip()]
    if args.cpu_check:
        args.device, args.eval_lines = "cpu", min(args.eval_lines, CPU_CHECK_EVAL_LINES)
    unknown = [c for c in args.configs if c not in CONFIGS]
    if unknown or not args.configs:
        p.error(f"--configs {','.join(args.configs)}: expected some of {','.join(CONFIGS)}")
    if not args.device.startswith("cuda") and not args.cpu_check:
        p.error(f"--device {args.device}: this script trains on a CUDA device (cuda, cuda:1, ...)")
    if args.eval_lines < 1:
        p.error(f"--eval-lines {args.eval_lines}: at least 1")
    if args.overhead < 0:
        p.error(f"--overhead {args.overhead}: seconds, not negative")
    if args.budget_minutes * 60 <= len(args.configs) * (args.overhead + 30):
        p.error(f"--budget-minutes {args.budget_minutes}: too short for {len(args.configs)} configurations "
                f"({args.overhead:.0f} s overhead and at least 30 s of training each)")
    return args


def epoch_seconds(record: Path, log: Path) -> list[float]:
    """Training seconds of each epoch of a run: the ``log`` of the record it wrote
    (:mod:`cipherlab.runner.record`), else its runs folder's ``log.jsonl`` (a run that wrote no
    record); empty when there is neither."""
    if record.is_file():
        rows = json.loads(record.read_text(encoding="utf-8"))["log"]
    elif log.is_file():
        rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        return []
    return [row["seconds"] for row in rows]


def training_seconds(remaining_s: float, configs_left: int, overhead_s: float) -> float:
    """The training budget of the next configuration: an equal share of what is left, less its overhead."""
    return max(remaining_s / configs_left - overhead_s, 0.0)


def plan(args: argparse.Namespace) -> list[dict]:
    """The budget split before anything runs (each share grows by what earlier ones leave unused)."""
    total = args.budget_minutes * 60
    share = training_seconds(total, len(args.configs), args.overhead)
    return [{"config": c, "train_s": share, "overhead_s": args.overhead} for c in args.configs]


def train_command(args: argparse.Namespace, config: str, budget_s: float) -> list[str]:
    command = [
        sys.executable, "-m", "cipherlab", "train", "--config", config, "--preset", PRESET,
        "--device", args.device, "--time-budget", f"{budget_s:.0f}", "--overwrite",
        "--out", str(Path(args.runs_dir) / PRESET / config), "--results-dir", args.results_dir,
        "--set", f"max_eval_lines={args.eval_lines}", "--recipe", args.recipe,
    ]  # fmt: skip
    if args.cpu_check:
        command += [arg for field, value in CPU_CHECK.items() for arg in ("--set", f"{field}={value}")]
    if args.wandb:
        command += ["--wandb", args.wandb, "--wandb-group", args.wandb_group]
    return command + (["--data-dir", args.data_dir] if args.data_dir else [])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.plan:
        print(json.dumps(plan(args), indent=2))
        return 0
    if args.wandb:  # before any training: each train would fail on it alike
        try:
            require_wandb()
            check_wandb_dir()
        except ValueError as e:
            print(f"gpu_run.py: {e}", file=sys.stderr)
            return 2
    import torch

    if not torch.cuda.is_available() and not args.cpu_check:
        print(f"gpu_run.py: CUDA is not available here (torch {torch.__version__}, built for CUDA "
              f"{torch.version.cuda or 'none'}); this script trains the assignment preset on one GPU. "
              "On a CPU run `python -m cipherlab ablate --preset cpu`; `--plan` prints the time plan anywhere.",
              file=sys.stderr)
        return 2
    device_name = "cpu (--cpu-check)" if args.cpu_check else torch.cuda.get_device_name(torch.device(args.device))
    total = args.budget_minutes * 60
    started = time.monotonic()
    runs = []
    for i, config in enumerate(args.configs):
        remaining = total - (time.monotonic() - started)
        budget = training_seconds(remaining, len(args.configs) - i, args.overhead)
        if budget < 1:
            runs.append({"config": config, "skipped": f"{remaining:.0f} s of the budget left"})
            continue
        command = train_command(args, config, budget)
        print(f"=== {config}: {budget:.0f} s of training on {device_name} ===", flush=True)
        t0 = time.monotonic()
        record = ROOT / args.results_dir / PRESET / f"{config}.json"
        record.unlink(missing_ok=True)  # a record left by an earlier run must not count as this one's
        try:  # a process that overruns its share by far is stopped, so the next ones keep theirs
            rc = subprocess.run(command, cwd=ROOT, timeout=budget + 3 * args.overhead).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        runs.append({"config": config, "train_budget_s": budget, "seconds": time.monotonic() - t0,
                     "returncode": rc, "record": record.is_file(), "command": shlex.join(command),
                     "epoch_seconds": epoch_seconds(record, ROOT / args.runs_dir / PRESET / config / "log.jsonl")})
    folder = ROOT / args.results_dir / PRESET
    folder.mkdir(parents=True, exist_ok=True)
    summary = {"device_name": device_name, "recipe": args.recipe, "cpu_check": args.cpu_check, "budget_s": total, "seconds": time.monotonic() - started,
               "torch": torch.__version__, "command": shlex.join([sys.executable, *sys.argv]), "runs": runs}
    (folder / "gpu_run.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    failed = [r["config"] for r in runs if r.get("returncode") != 0 or not r.get("record")]
    print(f"{len(runs) - len(failed)} of {len(runs)} configurations ran in {summary['seconds'] / 60:.1f} min; "
          f"results in {folder}" + (f"; failed or skipped: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
