"""Setting up: what the README and the Makefile promise a student on a new machine."""

import shutil
import subprocess

import pytest

from cipherbook.viva import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
MAKEFILE = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_a_python_without_venv_gets_the_package_to_install(tmp_path):
    """`python3 -m venv` is a separate Debian/Ubuntu package; make says so instead of failing obscurely."""
    done = subprocess.run(["make", "-C", str(REPO_ROOT), "setup", "PYTHON=false", f"VENV={tmp_path / 'v'}"],
                          capture_output=True, text=True)
    assert done.returncode != 0
    assert "apt install python3-venv" in done.stderr
    assert not (tmp_path / "v").exists()


def test_the_install_prints_progress_and_can_take_the_cpu_build_of_torch():
    install = [line for line in MAKEFILE.splitlines() if "pip install" in line and "requirements.txt" in line]
    assert install and all("--quiet" not in line for line in install)
    assert "TORCH_INDEX" in MAKEFILE and "download.pytorch.org/whl/cpu" in README
    assert "CUDA build on Linux x86_64" in README


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_lab_installs_a_jupyter_front_end_and_opens_the_chapters():
    done = subprocess.run(["make", "-C", str(REPO_ROOT), "-n", "lab"], capture_output=True, text=True)
    assert done.returncode == 0
    assert "requirements-lab.txt" in done.stdout and "jupyter lab book/" in done.stdout
    pins = (REPO_ROOT / "requirements-lab.txt").read_text().split()
    assert any(p.startswith("jupyterlab==") for p in pins)


def test_the_readme_training_command_writes_outside_the_committed_results():
    from cipherlab.__main__ import build_parser

    command = next(line for line in README.splitlines() if "cipherlab train --config" in line)
    argv = command.split("cipherlab", 2)[-1].split("#")[0].split()
    args = build_parser().parse_args(argv)
    assert args.results_dir == "runs" and "runs/cpu/c2.json" in command


# The import name of each declared distribution, where the two differ.
_IMPORT_NAMES = {"pyyaml": "yaml", "huggingface_hub": "huggingface_hub", "rouge-score": "rouge_score", "markdown-it-py": "markdown_it", "ipython": "IPython"}


@pytest.mark.parametrize("package, pyproject", [("cipherlab", "pyproject.toml"), ("book/cipherbook", "book/pyproject.toml")])
def test_every_module_the_package_imports_is_declared_in_pyproject(package, pyproject):
    """Walks every import statement of the package (top level and inside functions) and compares
    the third-party ones with its pyproject.toml's dependencies: an undeclared one breaks a
    student's `pip install` (Colab), a declared one nothing imports is dead weight. The library
    (cipherlab) and the book's tools (cipherbook) each declare their own."""
    import ast
    import re
    import sys
    import tomllib

    root = REPO_ROOT
    project = tomllib.loads((root / pyproject).read_text())["project"]
    extras = [dep for name, deps in project.get("optional-dependencies", {}).items() if name not in ("test", "book")
              for dep in deps]  # the hand-in's extras: imported only inside the command that needs them
    declared = {re.split(r"[<>=!~ \[;]", dep, maxsplit=1)[0].lower() for dep in [*project["dependencies"], *extras]}
    declared_modules = {_IMPORT_NAMES.get(name, name) for name in declared}
    own = {"cipherlab", "cipherbook"}
    imported = {}
    for path in (root / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in own:
                    imported.setdefault(top, path.relative_to(root).as_posix())
    assert {m: f for m, f in imported.items() if m not in declared_modules} == {}
    assert declared_modules - set(imported) - own == set()


COLAB_RECORD = REPO_ROOT / "benchmarks" / "results" / "colab.json"


def _lower_bounds(pyproject: str) -> dict[str, str]:
    import tomllib

    project = tomllib.loads((REPO_ROOT / pyproject).read_text(encoding="utf-8"))["project"]
    extras = [dep for name, deps in project.get("optional-dependencies", {}).items() if name not in ("test", "book")
              for dep in deps]
    deps = [*project["dependencies"], *extras]
    found = {}
    for dep in deps:
        name, _, lower = dep.partition(">=")
        if lower:
            found[name.strip().lower()] = lower.split(",")[0].strip()
    return found


def test_each_lower_bound_is_the_oldest_version_tested():
    """pyproject.toml admits no version older than one that ran the tests: requirements.txt's pins (CI) or the
    Colab stack's (benchmarks/results/colab.json, `make colab-check`). A bound below both is a promise nobody
    checked; one above both refuses a version that works."""
    import json
    import re

    from packaging.version import Version

    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (REPO_ROOT / "requirements.txt").read_text(), re.M))
    pins = {name.lower(): version for name, version in pins.items()}
    colab = json.loads(COLAB_RECORD.read_text(encoding="utf-8"))["versions"]
    for name, lower in _lower_bounds("pyproject.toml").items():
        tested = [Version(v) for v in (pins.get(name), colab.get(name)) if v]
        assert tested, f"{name}: no tested version in requirements.txt or {COLAB_RECORD.name}"
        assert Version(lower) == min(tested), f"{name}>={lower}, but the oldest version tested is {min(tested)}"


def test_the_colab_stack_record_passed_with_colabs_own_versions_in_place():
    """The committed Colab-stack record: Colab's versions as benchmarks/colab_check.py names them, none moved by
    installing cipherlab, and no test or chapter failing (`make colab-check` rewrites it before a release)."""
    import importlib.util
    import json

    record = json.loads(COLAB_RECORD.read_text(encoding="utf-8"))
    spec = importlib.util.spec_from_file_location("colab_check", REPO_ROOT / "benchmarks" / "colab_check.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    assert record["colab"] == {"python": check.COLAB_PYTHON, **check.COLAB}
    assert record["python"].startswith(check.COLAB_PYTHON + ".")
    assert {name: record["versions"][name] for name in check.COLAB} == check.COLAB
    assert record["colab_versions_moved"] == {}
    assert record["failed"] == record["errors"] == 0 and record["passed"] > 1000, record["failing"]
