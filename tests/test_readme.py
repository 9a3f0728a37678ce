"""The README's commands run as a newcomer would type them, in the order they appear.

Every ``.venv/bin/python -m cipherlab ...`` line of every ``bash`` block runs in a fresh folder
(with the committed ``results/`` and ``cipherlab/`` beside it, read only by the commands), in process. Training is
shortened, and the shortening is written out in :data:`SHORTER`: the ``smoke`` preset for one
epoch on a few lines instead of ``cpu``, fewer lines for the doctor, the test split and ``plan``.
``make`` lines and ``export VAR=...`` are the Makefile's and the shell's, not cipherlab's: they
are listed, not run (CI runs ``make test`` itself).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from cipherlab.__main__ import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PREFIX = ".venv/bin/python -m cipherlab"
TINY = ["--set", "max_epochs=1", "--set", "max_train_lines=40", "--set", "max_eval_lines=2"]

# (command, how the test shortens it): each rule is (pattern in the argv, replacement)
SHORTER = {
    "train": [(["--preset", "cpu"], ["--preset", "smoke", *TINY])],
    "ablate": [(["--preset", "cpu"], ["--preset", "smoke", *TINY])],
    "evaluate": [],
    "export": [],
    "decrypt": [],
    "score": [],
    "doctor": [(["--json"], ["--lines", "4", "--random", "4", "--attention-chunks", "1", "--json"])],
    "plan": [(["--preset", "assignment"], ["--preset", "smoke", "--config", "c1"])],
    "data": [(["--first", "200"], ["--first", "3"])],
    "check": [],
    "report": [(["runs/cpu"], ["runs/smoke"])],
}
NOT_CIPHERLAB = ("make ", "export ", "tools/release.sh")  # the release script: tests/test_setup_cell.py runs it


def _blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL)


def readme_commands() -> list[str]:
    """Every command line of the README's bash blocks, comments removed, in order."""
    lines = []
    for block in _blocks(README.read_text(encoding="utf-8")):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def _shorten(argv: list[str]) -> list[str]:
    for pattern, replacement in SHORTER[argv[0]]:
        for i in range(len(argv) - len(pattern) + 1):
            if argv[i:i + len(pattern)] == pattern:
                argv = argv[:i] + replacement + argv[i + len(pattern):]
                break
    return [a.replace("runs/cpu/", "runs/smoke/") for a in argv]


def test_every_readme_command_is_a_cipherlab_command_or_named_as_not_one():
    commands = readme_commands()
    assert len(commands) >= 12
    others = [c for c in commands if not c.startswith(PREFIX)]
    assert all(c.startswith(NOT_CIPHERLAB) for c in others), others
    assert {shlex.split(c)[3] for c in commands if c.startswith(PREFIX) and not c.endswith("--help")} <= set(SHORTER)


def test_the_readme_commands_run_in_order_in_a_fresh_folder(tmp_path, monkeypatch, capsys):
    for folder in ("results", "cipherlab"):  # read by the commands, as from the repository's root
        (tmp_path / folder).symlink_to(ROOT / folder, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CIPHERLAB_DATA_DIR", raising=False)
    ran = []
    for command in readme_commands():
        if not command.startswith(PREFIX):
            continue
        words = shlex.split(command)[3:]
        out = None
        if ">" in words:
            words, out = words[:words.index(">")], words[words.index(">") + 1]
        if words == ["--help"]:
            with pytest.raises(SystemExit) as e:
                main(words)
            assert e.value.code == 0
            capsys.readouterr()
            continue
        argv = _shorten(words)
        code = main(argv)
        printed = capsys.readouterr()
        assert code == 0, f"{command}\n(run as: {' '.join(argv)})\n{printed.err}"
        if out:
            Path(out).write_text(printed.out, encoding="utf-8")
        ran.append(argv[0])
    assert {"train", "ablate", "evaluate", "export", "decrypt", "score", "doctor", "plan", "data", "check",
            "report"} <= set(ran)
    # what the commands wrote stayed in the fresh folder
    runs = tmp_path / "runs"
    assert (runs / "smoke" / "c2" / "best.pt").is_file() and (runs / "c2.safetensors").is_file()
    own = json.loads((runs / "own-norm" / "smoke" / "c1.json").read_text(encoding="utf-8"))
    assert [p["part"] for p in own["parts"]] == ["norm"]  # the record names the replaced part
    assert "| C1 |" in (runs / "reference_report" / "report.md").read_text(encoding="utf-8")
    predictions = (runs / "my_predictions.txt").read_text(encoding="utf-8").splitlines()
    assert predictions == (runs / "my_test" / "test_plain.txt").read_text(encoding="utf-8").splitlines()
    assert (runs / "doctor_c2.json").is_file() and (runs / "my_report" / "report.md").is_file()
    assert (runs / "hub" / "c2" / "model.safetensors").is_file() and "model-index:" in (
        runs / "hub" / "c2" / "README.md").read_text(encoding="utf-8")  # a model folder, its card with scores
    assert list((runs / "handout_figures").glob("*.pdf")) and list((runs / "handout_tables").glob("*.tex"))
    # nothing beside runs/ in the folder the commands ran in (the repository's root): default outputs go under runs/
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cipherlab", "results", "runs"]
