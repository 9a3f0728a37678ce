"""The committed ``results/`` is read-only to every ``python -m cipherlab`` command unless asked.

Each command that writes a file, pointed at a file or folder inside the repository's ``results/``
(directly or through a symlink), stops before its work with one line naming the flag and the path,
and ``results/`` is as it was. The one way in is ``train``/``ablate`` ``--results-dir results``,
named as such (not through a link). The scripts under ``results/`` (``results/learn/probe.py``
``--out``/``--export``) write there through the library, which has no such guard.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from cipherlab.__main__ import main
from cipherlab.runner.errors import REPO_RESULTS_DIR, outside_results

RESULTS = REPO_RESULTS_DIR
WATCHED = ("smoke", "checkpoints")  # the folders these tests aim at (background runs may write elsewhere)


def _state() -> tuple[str, dict[str, str]]:
    """``git status --porcelain`` of the watched folders (if git is here), and every file's SHA-256 in them."""
    folders = [RESULTS / name for name in WATCHED]
    status = ""
    if shutil.which("git") and (RESULTS.parent / ".git").exists():
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--", *map(str, folders)],
                                cwd=RESULTS.parent, capture_output=True, text=True, check=True).stdout
    files = {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
             for folder in folders for p in sorted(folder.rglob("*")) if p.is_file()}
    return status, files


@pytest.fixture
def link(tmp_path):
    """A symlink to the repository's results/ folder."""
    path = tmp_path / "link"
    path.symlink_to(RESULTS, target_is_directory=True)
    return path


def _commands(data: Path, tmp: Path, link: Path) -> dict[str, tuple[list[str], str, str]]:
    """name -> (argv, the flag the error must name, the path it must name)."""
    pred, plain = tmp / "pred.txt", tmp / "plain.txt"
    ck = str(RESULTS / "checkpoints" / "c1.safetensors")
    smoke = ["--config", "c1", "--preset", "smoke", "--data-dir", str(data), "--device", "cpu"]
    table, c1, c2 = (str(RESULTS / "smoke" / name) for name in ("table.md", "c1.json", "c2.json"))
    return {
        "evaluate --json": (["evaluate", "--checkpoint", ck, "--data-dir", str(data), "--split", "all", "--device",
                             "cpu", "--json", c1], "--json", c1),
        "score --json": (["score", "--pred", str(pred), "--plain", str(plain), "--json", table], "--json", table),
        "doctor --json": (["doctor", "--checkpoint", str(RESULTS / "checkpoints" / "c2.safetensors"), "--lines", "2",
                           "--random", "1", "--attention-chunks", "1", "--device", "cpu", "--json", c2], "--json", c2),
        "export --out": (["export", "--checkpoint", str(tmp / "best.pt"), "--out", ck], "--out", ck),
        "plan --json": (["plan", "--preset", "smoke", "--config", "c1", "--json", str(RESULTS / "smoke" / "plan.json")],
                        "--json", str(RESULTS / "smoke" / "plan.json")),
        "train --out": (["train", *smoke, "--out", str(RESULTS / "smoke" / "run"), "--results-dir", str(tmp)],
                        "--out", str(RESULTS / "smoke" / "run")),
        "train --results-dir through a link": (["train", *smoke, "--out", str(tmp / "run"), "--results-dir", str(link)],
                                               "--results-dir", str(link / "smoke")),
        "ablate --runs-dir": (["ablate", "--preset", "smoke", "--configs", "c1", "--data-dir", str(data), "--device",
                               "cpu", "--runs-dir", str(RESULTS), "--results-dir", str(tmp)],
                              "--runs-dir", str(RESULTS / "smoke")),
        "ablate --results-dir through a link": (["ablate", "--preset", "smoke", "--configs", "c1", "--data-dir",
                                                 str(data), "--device", "cpu", "--runs-dir", str(tmp / "runs"),
                                                 "--results-dir", str(link)], "--results-dir", str(link / "smoke")),
        "data build-docstrings --out": (["data", "build-docstrings", "--out", str(RESULTS / "smoke" / "table.csv")],
                                        "--out", str(RESULTS / "smoke" / "table.csv")),
        "data export-split --out": (["data", "export-split", "test", "--data-dir", str(data),
                                     "--out", str(RESULTS / "smoke")], "--out", str(RESULTS / "smoke")),
        "report --out": (["report", str(RESULTS / "reference"), "--out", str(link / "smoke" / "report"), "--force"],
                         "--out", str(link / "smoke" / "report")),
    }


COMMANDS = list(_commands(Path("d"), Path("t"), Path("l")))


@pytest.mark.parametrize("name", COMMANDS)
def test_no_command_writes_inside_the_committed_results(name, sample_dir, sample_lines, tmp_path, link, capsys):
    (tmp_path / "pred.txt").write_text("".join(x + "\n" for x in sample_lines), encoding="utf-8")
    (tmp_path / "plain.txt").write_text("".join(x + "\n" for x in sample_lines), encoding="utf-8")
    (tmp_path / "best.pt").write_bytes(b"not reached: the output is checked first")
    argv, flag, path = _commands(sample_dir, tmp_path, link)[name]
    before = _state()
    capsys.readouterr()
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("cipherlab: error: ") and f"{flag} {path}: " in err
    assert f"committed results folder ({RESULTS.resolve()})" in err and "on purpose" in err
    if "link" in name or path.startswith(str(link)):
        assert f"through the link {link}" in err
    assert _state() == before


def test_results_dir_results_is_the_way_in_on_purpose():
    """``--results-dir results`` (or a folder inside it), named as such, is how train and ablate refresh the
    committed results (results/notes/*/c*.json record such commands); the guard lets it through."""
    on_purpose = "--results-dir results"
    assert outside_results(RESULTS, "--results-dir", on_purpose) == RESULTS
    assert outside_results(RESULTS / "extended" / "cpu", "--results-dir", on_purpose) == RESULTS / "extended" / "cpu"
    with pytest.raises(ValueError, match="--out .*committed results folder"):
        outside_results(RESULTS / "extended" / "cpu", "--out")  # no other flag has a way in
    assert outside_results("runs/smoke", "--results-dir", on_purpose) == Path("runs/smoke")


def test_train_results_dir_results_passes_the_guard(capsys, tmp_path, monkeypatch):
    """Through the command line: the run stops on its (missing) data, not on --results-dir results."""
    monkeypatch.chdir(RESULTS.parent)
    before = _state()
    code = main(["train", "--config", "c1", "--preset", "smoke", "--data-dir", str(tmp_path / "no-data"),
                 "--device", "cpu", "--out", str(tmp_path / "run"), "--results-dir", "results"])
    err = capsys.readouterr().err
    assert code != 0 and "committed results" not in err and "no-data" in err
    assert _state() == before


def test_a_link_into_results_is_refused_even_where_results_is_allowed(link, tmp_path):
    inner = tmp_path / "notes-link"
    inner.symlink_to(RESULTS / "notes", target_is_directory=True)
    for path in (link, link / "smoke", inner / "cpu"):
        with pytest.raises(ValueError, match=r"through the link .*name the folder itself, as --results-dir results"):
            outside_results(path, "--results-dir", "--results-dir results")
    with pytest.raises(ValueError, match="through the link"):  # notes/.. is results/, as the system resolves it
        outside_results(inner / ".." / "elsewhere", "--results-dir", "--results-dir results")
    assert outside_results(tmp_path / "elsewhere", "--results-dir") == tmp_path / "elsewhere"
