"""Run every chapter under the second numerical conditions and list each cell whose stored output changes.

    python tools/numerics.py                      # every variant, every chapter (make numerics)
    python tools/numerics.py --variants avx2 book/05_norm.ipynb

A chapter's stored outputs are compared by nbval on every machine that runs the tests, so a number in
them must not depend on the machine's arithmetic. This runs ``pytest`` on the chapters once per variant
of ``book/cipherbook/numerics.py``'s ``NUMERICS`` (another CPU's float kernels, two threads, deterministic
algorithms, the global random generators seeded afresh before every cell), reads which cells failed
from pytest's JUnit report, prints one line per cell, and exits 1 when any cell changed. It writes
nothing into the repository unless ``--out`` names a file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book"))
from cipherbook.numerics import NUMERICS  # noqa: E402

# The tests that recompute, in pytest's own process, the numbers the prose quotes (the facts): under a
# variant the whole process runs on its kernels, so these see them too.
FACT_TESTS = ("tests/test_book.py::test_notebook_viva_section_and_prose_facts_are_what_sync_generates",
              "tests/test_book.py::test_the_drill_is_in_sync_too",
              "tests/test_broken.py::test_the_chapter_is_what_sync_writes")


def failed_cells(junit: Path) -> list[dict]:
    """The test cases of a JUnit report that failed or errored: chapter, cell and the first line of why."""
    found = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        for kind in ("failure", "error"):
            bad = case.find(kind)
            if bad is not None:
                why = (bad.get("message") or bad.text or "").strip().splitlines()
                found.append({"file": case.get("classname", ""), "test": case.get("name"),
                              "kind": kind, "why": why[0][:200] if why else ""})
    return found


def run_variant(variant: str, chapters: list[str], python: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        env = {**os.environ, **NUMERICS[variant]["env"], "CIPHERLAB_NUMERICS": variant}
        started = time.monotonic()
        done = subprocess.run([python, "-m", "pytest", *chapters, "-q", f"--junitxml={junit}"],
                              cwd=ROOT, env=env, capture_output=True, text=True)
        seconds = time.monotonic() - started
        if not junit.exists():
            tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
            raise SystemExit(f"numerics: pytest wrote no report for variant {variant}: " + " | ".join(tail))
        cells = failed_cells(junit)
    summary = (done.stdout.strip().splitlines() or [""])[-1]
    return {"variant": variant, "seconds": round(seconds), "pytest": summary, "changed": cells}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="numerics.py", description=__doc__.splitlines()[0])
    p.add_argument("chapters", nargs="*", default=["book", *FACT_TESTS],
                   help="chapters, folders or tests (default: book and the tests of the prose's facts)")
    p.add_argument("--variants", default=",".join(NUMERICS), help=f"comma-separated (default {','.join(NUMERICS)})")
    p.add_argument("--out", help="also write the findings as JSON here")
    args = p.parse_args(argv)
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in NUMERICS]
    if unknown or not names:
        p.error(f"--variants {args.variants}: choose from {', '.join(NUMERICS)}")
    runs = [run_variant(v, args.chapters, sys.executable) for v in names]
    for run in runs:
        print(f"{run['variant']}: {run['pytest']} ({run['seconds']} s)")
        for cell in run["changed"]:
            print(f"  {cell['file']} {cell['test']}: {cell['why']}")
    if args.out:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        import torch

        native = {"commit": commit.stdout.strip() or None, "native_kernels": torch.backends.cpu.get_cpu_capability(),
                  "cores": os.cpu_count()}
        Path(args.out).write_text(json.dumps({**native, "chapters": args.chapters, "runs": runs}, indent=2) + "\n",
                                  encoding="utf-8")
    changed = sum(len(run["changed"]) for run in runs)
    print(f"{changed} cell(s) changed under the second numerical conditions" if changed
          else "no cell changed under the second numerical conditions")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
