"""A student's part that breaks what training needs is named as theirs, in one line, before or while it runs.

Before: ``train --part``'s trial ran the part without gradients only, so an in-place ``/=`` on a tensor autograd
saved, a parameter used under ``torch.no_grad()`` or ``torch.set_grad_enabled(False)`` in forward passed it and
failed (or silently did not train) later; an exception raised in the part during training, evaluation or
decoding was "unexpected RuntimeError ... (a bug in cipherlab)"; ``torch.set_default_dtype(torch.float64)`` in
a part made the whole model float64 without a word; a forward pass that never returned hung ``check`` and the
trial; a thread the part started kept ``check`` from exiting; and an output closed with ``>&-`` ended in
"unexpected AttributeError ... (a bug in cipherlab)".
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

import cipherlab.cli.check
import cipherlab.student.parts
from cipherlab.__main__ import main
from cipherlab.runner.errors import describe, register_student_code, run_command
from cipherlab.data.cipher import encrypt
from samples import SAMPLE_LINES

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--preset", "smoke", "--set", "max_epochs=1", "--set", "max_train_lines=40", "--set", "max_eval_lines=2",
        "--device", "cpu"]
BUG = "a bug in cipherlab"

STUDENT = textwrap.dedent('''
    import os
    import threading
    import time

    import torch
    from torch import nn


    class Norm(nn.Module):
        def __init__(self, d_model, eps=1e-5):
            super().__init__()
            self.weight, self.bias = nn.Parameter(torch.ones(d_model)), nn.Parameter(torch.zeros(d_model))
            self.eps = eps

        def forward(self, x):
            y = x.float()
            mu, var = y.mean(-1, keepdim=True), y.var(-1, keepdim=True, unbiased=False)
            return ((y - mu) / torch.sqrt(var + self.eps) * self.weight + self.bias).to(x.dtype)


    class InPlace(Norm):
        def forward(self, x):
            mu, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)
            std = torch.sqrt(var + self.eps)  # SAVED
            std /= 1.0
            return (x - mu) / std * self.weight + self.bias


    class NoGradGain(Norm):
        def forward(self, x):
            with torch.no_grad():
                y = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + self.eps)
                y = y * self.weight
            return y + self.bias


    class NoGradAtAll(Norm):
        @torch.no_grad()
        def forward(self, x):
            return super().forward(x)


    class GradOff(Norm):
        def forward(self, x):
            torch.set_grad_enabled(False)
            return super().forward(x)


    class Float64(Norm):
        def forward(self, x):
            torch.set_default_dtype(torch.float64)
            return super().forward(x)


    class Float64Built(Norm):
        def __init__(self, d_model, eps=1e-5):
            torch.set_default_dtype(torch.float64)
            super().__init__(d_model, eps)


    class Hangs(Norm):
        def forward(self, x):
            while True:
                pass


    class Threads(Norm):
        def forward(self, x):
            threading.Thread(target=lambda: time.sleep(600)).start()
            return super().forward(x)


    class Fragile(Norm):
        def forward(self, x):
            if os.environ.get("CIPHERLAB_TEST_BOOM") and x.size(-2) > 5:
                raise RuntimeError("boom on long inputs")  # BOOM
            return super().forward(x)
''')


def _student(folder: Path, name: str = "student.py", text: str = STUDENT) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _line(path: Path, marker: str) -> int:
    """The line of ``path`` that holds ``marker``."""
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if marker in line)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("cipherlab: error: "), err
    assert BUG not in err and "Traceback" not in err, err
    return err


@pytest.fixture(autouse=True)
def _torch_settings_kept():
    """Each test leaves PyTorch's global settings as it found them (and fails if the code under test did not)."""
    before = torch.get_default_dtype(), torch.is_grad_enabled()
    yield
    after = torch.get_default_dtype(), torch.is_grad_enabled()
    torch.set_default_dtype(before[0])
    torch.set_grad_enabled(before[1])
    assert after == before


def _train(tmp_path, value: str, *extra: str) -> int:
    return main(["train", "--config", "c1", *TINY, "--out", str(tmp_path / "run"), "--results-dir",
                 str(tmp_path / "results"), *extra, "--part", value])


# --------------------------------------------------------------------------- 1. the trial's backward pass


@pytest.mark.parametrize("cls, says", [
    pytest.param("InPlace", ["modified by an inplace operation", "output 0 of Sqrt", "made at {f}:{saved}",
                             "`x = x / s`, not `x /= s`"], id="in-place division"),
    pytest.param("NoGradGain", ["its parameter weight got no gradient", "torch.no_grad()"], id="gain under no_grad"),
    pytest.param("NoGradAtAll", ["returned an output that carries no gradient", "torch.no_grad()"],
                 id="forward under no_grad"),
    pytest.param("GradOff", ["turned gradients off for all of PyTorch (torch.set_grad_enabled(False))"],
                 id="grad mode off in forward"),
])
def test_a_part_that_breaks_autograd_is_refused_before_training(tmp_path, capsys, cls, says):
    student = _student(tmp_path)
    assert _train(tmp_path, f"norm={student}:{cls}") == 1
    err = _one_line(capsys)
    assert err.startswith(f"cipherlab: error: norm={student}:{cls}: "), err
    for words in says:
        assert words.format(f=student, saved=_line(student, "# SAVED")) in err, (words, err)
    assert not (tmp_path / "run").exists()  # refused before training: no run folder was made


def test_a_part_that_fits_passes_the_backward_trial(tmp_path):
    from cipherlab.base.config import make_config
    from cipherlab.student.check import load_target
    student = _student(tmp_path)
    cipherlab.student.parts.load_parts([f"norm={student}:Norm"], make_config("c1", "smoke"), load=load_target)


# --------------------------------------------------------------------------- 2. an exception in a part is the student's


@pytest.fixture(scope="module")
def fragile(tmp_path_factory):
    """c1 (smoke, one epoch on 40 lines) trained with Fragile, which raises on inputs longer than 5 positions
    once CIPHERLAB_TEST_BOOM is set: (root, student file)."""
    import contextlib
    root = tmp_path_factory.mktemp("fragile")
    (root / "data").mkdir()
    (root / "data" / "brown_plain.txt").write_text("".join(x + "\n" for x in SAMPLE_LINES), encoding="latin-1")
    student = _student(root)
    with contextlib.redirect_stdout(io.StringIO()):
        assert _train(root, f"norm={student}:Fragile", "--data-dir", str(root / "data")) == 0
    return root, student


@pytest.mark.parametrize("command", ["train", "evaluate", "decrypt"])
def test_an_exception_in_a_part_is_named_as_the_students_with_its_line(fragile, tmp_path, capsys, monkeypatch, command):
    root, student = fragile
    monkeypatch.setenv("CIPHERLAB_TEST_BOOM", "1")
    part = ["--part", f"norm={student}:Fragile"]
    argv = {"train": ["train", "--config", "c1", *TINY, "--data-dir", str(root / "data"), "--out", str(tmp_path / "r"),
                      "--results-dir", str(tmp_path / "results"), *part],
            "evaluate": ["evaluate", "--checkpoint", str(root / "run" / "best.pt"), "--data-dir", str(root / "data"),
                         *part],
            "decrypt": ["decrypt", "--checkpoint", str(root / "run" / "best.pt"), encrypt("Hello there"), *part]}
    capsys.readouterr()
    assert main(argv[command]) == 1
    err = capsys.readouterr().err.splitlines()[-1]  # train and evaluate print their progress first
    assert err == (f"cipherlab: error: error in your norm ({student}:{_line(student, '# BOOM')}, class Fragile): "
                   f"RuntimeError: boom on long inputs; `python -m cipherlab check layernorm {student}:Fragile` tries "
                   "it on small inputs and says what is wrong"), err


def test_blame_finds_the_innermost_frame_in_the_students_file(tmp_path, capsys):
    student = _student(tmp_path, "helpers.py", textwrap.dedent('''
        import sys
        import torch


        class Mine:
            def step(self):
                return torch.zeros(2) @ torch.zeros(3)  # MATMUL

            def leave(self):
                sys.exit(3)  # EXIT
    '''))
    namespace = {}
    exec(compile(student.read_text(), str(student), "exec"), namespace)
    mine = namespace["Mine"]()
    try:
        mine.step()
    except RuntimeError as e:
        assert describe(e).startswith("error in your attention") is False  # not registered yet: torch's words
        register_student_code(student, "attention", "Mine", "python -m cipherlab check mha x.py:Mine")
        assert describe(e).startswith(f"error in your attention ({student}:{_line(student, '# MATMUL')}, class Mine): "
                                      "RuntimeError: "), describe(e)
    assert run_command("cipherlab", lambda args: mine.leave(), None) == 1
    err = capsys.readouterr().err
    assert f"your attention ({student}:{_line(student, '# EXIT')}, class Mine) called sys.exit(3)" in err, err

    def ours(args):  # an error of cipherlab's own is still one
        raise RuntimeError("nobody foresaw this")

    assert run_command("cipherlab", ours, None) == 1
    assert BUG in capsys.readouterr().err


# --------------------------------------------------------------------------- 3. PyTorch's global settings


@pytest.mark.parametrize("where, cls, says", [
    pytest.param("forward", "Float64", "forward(x) on a (2, 5, 32) input changed torch's default dtype from "
                 "torch.float32 to torch.float64 (torch.set_default_dtype)", id="default dtype in forward"),
    pytest.param("constructor", "Float64Built", "Float64Built(32, eps=1e-5) changed torch's default dtype",
                 id="default dtype in the constructor"),
    pytest.param("import", "Norm", "importing {f} changed torch's default dtype", id="default dtype at import"),
])
def test_a_part_changing_torch_global_settings_is_refused_and_undone(tmp_path, capsys, where, cls, says):
    text = STUDENT + ("\ntorch.set_default_dtype(torch.float64)\n" if where == "import" else "")
    student = _student(tmp_path, text=text)
    assert _train(tmp_path, f"norm={student}:{cls}") == 1
    err = _one_line(capsys)
    assert says.format(f=student) in err and f"norm={student}:{cls}" in err, err
    assert torch.get_default_dtype() == torch.float32  # put back


def test_check_names_a_part_that_changed_the_default_dtype(tmp_path, capsys):
    student = _student(tmp_path)
    assert main(["check", "layernorm", f"{student}:Float64"]) == 1
    captured = capsys.readouterr()
    assert "check layernorm:" in captured.out  # the report, then the one line
    err = captured.err
    assert err.startswith(f"cipherlab: error: check layernorm {student}:Float64: your code changed torch's default "
                          "dtype from torch.float32 to torch.float64"), err
    assert len(err.splitlines()) == 1 and torch.get_default_dtype() == torch.float32


# --------------------------------------------------------------------------- 4. hangs and threads


def test_a_forward_that_never_returns_is_stopped_in_the_trial(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cipherlab.student.parts, "TRIAL_TIME_LIMIT_S", 0.5)
    student = _student(tmp_path)
    started = time.monotonic()
    assert _train(tmp_path, f"norm={student}:Hangs") == 1
    assert time.monotonic() - started < 30
    err = _one_line(capsys)
    assert f"norm={student}:Hangs: forward(x) on a (2, 5, 32) input did not end within 0.5 s" in err, err


def test_a_forward_that_never_returns_is_stopped_in_check(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cipherlab.cli.check, "CHECK_TIME_LIMIT_S", 1.0)
    student = _student(tmp_path)
    started = time.monotonic()
    assert main(["check", "layernorm", f"{student}:Hangs"]) == 1
    assert time.monotonic() - started < 30
    err = _one_line(capsys)
    assert err.startswith(f"cipherlab: error: check layernorm {student}:Hangs: did not end within 1 s and was "
                          "stopped"), err


def test_a_thread_left_running_by_a_part_does_not_keep_check_from_ending(tmp_path):
    student = _student(tmp_path)
    done = subprocess.run([sys.executable, "-m", "cipherlab", "check", "layernorm", f"{student}:Threads"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)  # a thread that sleeps 600 s: not waited for
    assert done.returncode == 0 and re.search(r"\n(\d+) of \1 checks pass\n", done.stdout), (done.stdout, done.stderr)
    assert done.stderr.startswith("cipherlab: note: your code left ") and "of " + str(student) in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr


# --------------------------------------------------------------------------- 5. a closed output


def test_a_closed_stdout_is_one_line_not_a_bug(tmp_path):
    """``python -m cipherlab ... >&-``: no standard output at all."""
    plain = tmp_path / "plain.txt"
    plain.write_text("Hello there\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "cipherlab", "score", "--pred", str(plain), "--plain", str(plain)],
                          cwd=ROOT, stderr=subprocess.PIPE, text=True, timeout=120, preexec_fn=lambda: os.close(1))
    assert done.returncode == 1 and done.stderr.startswith("cipherlab: error: standard output is closed"), done.stderr
    assert len(done.stderr.splitlines()) == 1 and BUG not in done.stderr


def test_stdout_closed_during_a_command_is_one_line_not_a_bug(capsys, monkeypatch):
    def command(args):
        sys.stdout.close()
        print("lost")
        return 0

    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert run_command("cipherlab", command, None) == 1
    err = capsys.readouterr().err
    assert err.startswith("cipherlab: error: standard output was closed during the command") and BUG not in err, err


@pytest.mark.parametrize("argv", [["--help"], ["check", "--help"], ["score", "--help"]])
def test_a_reader_that_reads_nothing_ends_the_command_quietly(argv):
    """``python -m cipherlab ... | head -0``: the reader is gone at once."""
    done = subprocess.run(["bash", "-c", 'set -o pipefail; "$@" | head -c0; echo "rc=$?" >&2', "--", sys.executable,
                           "-m", "cipherlab", *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stderr.strip() in ("rc=0", "rc=141"), done.stderr
