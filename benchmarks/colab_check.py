"""The Colab-stack check: cipherlab installed over Colab's own Python and packages, its tests and chapters run.

    make colab-check                                           # -> benchmarks/results/colab.json
    python3 benchmarks/colab_check.py --out /tmp/colab.json    # anywhere else

Colab's runtime (its published package list, late 2026) is :data:`COLAB`: Python 3.13 with torch, numpy,
matplotlib, ipywidgets and safetensors preinstalled at those versions. This script

1. makes a fresh venv with that Python (``--python``; by default the newest 3.13 pyenv or the PATH has),
2. installs Colab's versions there (torch from PyPI: a CUDA build of several GB, used on the CPU here),
3. installs cipherlab the way the chapters' setup cell does (``pip install -e <clone> -e <clone>/book``),
   then the test tools at requirements.txt's versions (pytest, nbval, hypothesis, ruff, pyyaml),
4. records whether any of Colab's versions moved (the install must leave them alone: upgrading ipywidgets
   over Colab's 7.7.1 breaks its widgets),
5. runs the test suite and every chapter under nbval, as ``make test`` does, without the browser tests and
   the book build (they need Chromium and Jupyter Book, which a Colab session has no use for),

and writes a JSON record: the versions found in the venv, what moved, passed/failed/skipped/errors, the
failing tests' names and the minutes each step took. Not part of ``make test`` (it downloads several GB):
run it before a release and commit the record.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "colab.json"
DEFAULT_OUT = ROOT / "runs" / "colab_check.json"  # results/ and benchmarks/results/ only when asked (--out)
COLAB_PYTHON = "3.13"
COLAB = {"torch": "2.11.0", "numpy": "2.1.3", "matplotlib": "3.10.0", "ipywidgets": "7.7.1", "safetensors": "0.8.0"}
TEST_TOOLS = ("pytest", "nbval", "hypothesis", "ruff", "pyyaml")  # at requirements.txt's pins
NOT_ON_COLAB = [
    "--ignore=tests/test_browser.py",  # Chromium and a built book (the book build is make test's, not pytest's)
    # the checks of this script's own committed record: a run cannot check the record it is about to write
    "--deselect=tests/test_setup.py::test_the_colab_stack_record_passed_with_colabs_own_versions_in_place",
    "--deselect=tests/test_setup.py::test_each_lower_bound_is_the_oldest_version_tested",
]
REPORTED = ("torch", "numpy", "matplotlib", "ipywidgets", "safetensors", "sacrebleu", "rouge-score", "rapidfuzz",
            "tqdm", "ipython", "ipykernel", "nbval", "pytest", "hypothesis", "cipherlab", "cipherbook")


def find_python(wanted: str = COLAB_PYTHON) -> str:
    """The newest Python ``wanted`` (e.g. "3.13") under pyenv, else ``python3.13`` on the PATH."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = sorted(glob.glob(str(pyenv / f"{wanted}.*" / "bin" / f"python{wanted}")))
    path = found[-1] if found else shutil.which(f"python{wanted}")
    if not path:
        sys.exit(f"colab_check: no Python {wanted} found (pyenv or PATH); pass --python /path/to/python{wanted}")
    return path


def pins(names) -> list[str]:
    """``name==version`` of requirements.txt for each of ``names``."""
    lines = (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    found = {m.group(1).lower(): line.strip() for line in lines if (m := re.match(r"([A-Za-z0-9_.-]+)==", line))}
    missing = [name for name in names if name not in found]
    if missing:
        sys.exit(f"colab_check: requirements.txt pins no {', '.join(missing)}")
    return [found[name] for name in names]


def run(step: str, command: list[str], log, timings: dict, check: bool = True) -> int:
    """Run ``command``, its output appended to ``log``; the minutes it took go to ``timings[step]``."""
    print(f"colab_check: {step} ...", flush=True)
    log.write(f"\n$ {' '.join(command)}\n")
    log.flush()
    started = time.monotonic()
    code = subprocess.call(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    timings[step] = round((time.monotonic() - started) / 60, 2)
    if check and code:
        sys.exit(f"colab_check: {step} failed (exit {code}); see {log.name}")
    return code


def versions(python: str) -> dict[str, str | None]:
    """The installed version of each of :data:`REPORTED` in the venv of ``python``."""
    code = ("import importlib.metadata as m, json, sys\n"
            "def v(n):\n    try:\n        return m.version(n)\n    except m.PackageNotFoundError:\n        return None\n"
            f"print(json.dumps({{n: v(n) for n in {list(REPORTED)!r}}}))")
    return json.loads(subprocess.check_output([python, "-c", code], text=True))


def counts(junit: Path) -> dict:
    """passed, failed, errors, skipped and the failing tests' ids from pytest's JUnit XML."""
    root = ET.parse(junit).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    failing = [f"{case.get('classname')}::{case.get('name')}" for case in suite.iter("testcase")
               if case.find("failure") is not None or case.find("error") is not None]
    total, failed, errors, skipped = (int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
    return {"passed": total - failed - errors - skipped, "failed": failed, "errors": errors, "skipped": skipped,
            "failing": failing}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", help=f"the Python {COLAB_PYTHON} to build the venv with (default: found)")
    parser.add_argument("--venv", default=str(ROOT / "runs" / "colab-venv"), help="where the venv goes (made anew)")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help=f"the JSON record (default {DEFAULT_OUT.relative_to(ROOT)};"
                        f" `make colab-check` writes {RESULTS.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    python = args.python or find_python()
    venv, out = Path(args.venv), Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    log_path = out.with_suffix(".log")
    timings: dict[str, float] = {}
    started = time.monotonic()
    if venv.exists():
        shutil.rmtree(venv)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--progress-bar", "off"]
    with open(log_path, "w", encoding="utf-8") as log:
        run("venv", [python, "-m", "venv", str(venv)], log, timings)
        vpython = str(venv / "bin" / "python")
        run("Colab's packages", [*pip, *(f"{name}=={version}" for name, version in COLAB.items()), "ipykernel"],
            log, timings)
        before = versions(vpython)
        run("the setup cell's install", [*pip, "-e", str(ROOT), "-e", str(ROOT / "book")], log, timings)
        run("the test tools", [*pip, *pins(TEST_TOOLS)], log, timings)
        after = versions(vpython)
        moved = {name: [before[name], after[name]] for name in COLAB if before[name] != after[name]}
        junit = out.with_suffix(".junit.xml")
        code = run("tests and chapters", [vpython, "-m", "pytest", *NOT_ON_COLAB, f"--junitxml={junit}", "-q"],
                   log, timings, check=False)
    record = {
        "command": " ".join(["python3", "benchmarks/colab_check.py", *(argv if argv is not None else sys.argv[1:])]),
        "commit": subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip(),
        "colab": {"python": COLAB_PYTHON, **COLAB},
        "python": subprocess.check_output([vpython, "-c", "import platform; print(platform.python_version())"],
                                          text=True).strip(),
        "versions": after,
        "colab_versions_moved": moved,
        "pytest_exit": code,
        **counts(junit),
        "left_out": NOT_ON_COLAB + ["the book build and its browser tests (no jupyter-book, no Chromium)"],
        "minutes": {**timings, "total": round((time.monotonic() - started) / 60, 2)},
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_average": os.getloadavg()},
        "date": time.strftime("%Y-%m-%d"),
    }
    out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"colab_check: {record['passed']} passed, {record['failed']} failed, {record['errors']} errors, "
          f"{record['skipped']} skipped; Colab's versions moved: {moved or 'none'} -> {out}")
    return 0 if code == 0 and not moved else 1


if __name__ == "__main__":
    sys.exit(main())
