"""``ruff check`` passes on the whole repository with the settings in ``pyproject.toml``."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str] | None:
    beside = Path(sys.executable).with_name("ruff")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("ruff")
    return [found] if found else None


def test_ruff_check_passes():
    ruff = _ruff()
    if ruff is None:
        pytest.skip("ruff is not installed (requirements.txt pins it)")
    done = subprocess.run([*ruff, "check", "--output-format", "concise", str(ROOT)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_would_see_an_unused_import(tmp_path):
    ruff = _ruff()
    if ruff is None:
        pytest.skip("ruff is not installed (requirements.txt pins it)")
    (tmp_path / "bad.py").write_text("import os\n", encoding="utf-8")
    done = subprocess.run([*ruff, "check", "--config", str(ROOT / "pyproject.toml"), str(tmp_path / "bad.py")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "F401" in done.stdout


def test_the_quick_loop_leaves_out_only_modules_that_exist():
    """`make quick` skips the modules conftest.py names: a renamed module must not slip into it unseen."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("tests_conftest", ROOT / "tests" / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)  # by its path: book/ has a conftest.py of its own
    spec.loader.exec_module(conftest)
    SLOW_MODULES = conftest.SLOW_MODULES
    here = {p.name for p in (ROOT / "tests").glob("test_*.py")}
    assert SLOW_MODULES <= here, sorted(SLOW_MODULES - here)
    assert len(here - SLOW_MODULES) >= len(here) // 2  # the quick loop still runs most modules
