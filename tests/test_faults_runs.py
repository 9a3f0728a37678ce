"""A run owns its folder (issue 40, item 3): one writer per ``--out``, logs that survive a torn last line,
results folders read before training, and an ``ablate`` whose ``train`` child never outlives it.

Before: two ``train --out X`` at once both exited 0 with every epoch logged twice; a torn last line
of ``log.jsonl`` made ``--resume`` fail with "Expecting ',' delimiter" and no file named; a torn
``c1.json`` in the results folder was found only after training; ``kill`` of ``ablate`` left its
``train`` child running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cipherlab.__main__ import main
from cipherlab.data.cipher import encrypt
from cipherlab.data.corpus import CIPHER_FILE, PLAIN_FILE
from samples import SAMPLE_LINES
from test_train import make_trainer

ROOT = Path(__file__).resolve().parents[1]
LINUX = sys.platform.startswith("linux")


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("CIPHERLAB_DEBUG", raising=False)  # the debug switch would show tracebacks


@pytest.fixture
def data(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / PLAIN_FILE).write_text("".join(x + "\n" for x in SAMPLE_LINES), encoding="latin-1")
    (folder / CIPHER_FILE).write_text("".join(encrypt(x) + "\n" for x in SAMPLE_LINES), encoding="latin-1")
    return folder


def _one_line(err: str, names: str) -> None:
    assert "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert names in err, (names, err)


def _train_argv(data: Path, tmp_path: Path, *extra: str) -> list[str]:
    return ["train", "--config", "c1", "--preset", "smoke", "--data-dir", str(data), "--device", "cpu",
            "--out", str(tmp_path / "out"), "--results-dir", str(tmp_path / "res"), "--set", "max_epochs=1", *extra]


def test_a_second_train_into_a_folder_in_use_is_refused_with_one_line(data, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen(  # another run of the same --out, holding its lock
        [sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY); "
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)", str(out)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        for extra in ((), ("--overwrite",), ("--resume",)):
            assert main(_train_argv(data, tmp_path, *extra)) == 1
            _one_line(capsys.readouterr().err, f"--out {out}: another cipherlab run is writing in this folder now")
        assert list(out.iterdir()) == []  # nothing written by the refused runs
    finally:
        holder.kill()
        holder.wait()


def test_the_folder_lock_is_released_when_the_run_ends(tmp_path):
    from cipherlab.runner.lock import FolderInUse, own_folder

    with own_folder(tmp_path / "run"):
        with pytest.raises(FolderInUse, match="another cipherlab run"), own_folder(tmp_path / "run"):
            pass
    with own_folder(tmp_path / "run"):  # free again
        pass


def test_a_torn_last_log_line_is_dropped_on_resume_with_a_note(tmp_path, capsys):
    make_trainer(tmp_path, max_epochs=1).fit()
    log = tmp_path / "log.jsonl"
    with open(log, "a", encoding="utf-8") as f:  # a run killed while writing epoch 2's record
        f.write('{"epoch": 2, "step": 12, "train_loss": 2.')
    result = make_trainer(tmp_path, max_epochs=2).fit(resume=True)
    assert [r["epoch"] for r in result.history] == [1, 2]
    _one_line(capsys.readouterr().err, f"{log}: line 2, the last, is cut short")
    assert len(log.read_text().splitlines()) == 2
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_a_damaged_log_line_before_the_last_is_named(tmp_path):
    make_trainer(tmp_path, max_epochs=2).fit()
    log = tmp_path / "log.jsonl"
    first, second = log.read_text().splitlines()
    log.write_text(first[:20] + "\n" + second + "\n")
    with pytest.raises(ValueError, match=r"log\.jsonl: line 1 is not valid JSON"):
        make_trainer(tmp_path, max_epochs=3).fit(resume=True)


def test_a_torn_record_in_the_results_folder_is_refused_before_training(data, tmp_path, capsys):
    folder = tmp_path / "res" / "smoke"
    folder.mkdir(parents=True)
    (folder / "c2.json").write_text('{"config": "c2", "test": {"bit_accu')
    started = time.monotonic()
    assert main(_train_argv(data, tmp_path)) == 1
    assert time.monotonic() - started < 5  # before training, not after
    _one_line(capsys.readouterr().err, f"--results-dir: {folder / 'c2.json'} is not a readable results record")
    assert not (tmp_path / "out" / "last.pt").exists()


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _ablate_with_its_child(data: Path, tmp_path: Path) -> tuple[subprocess.Popen, int]:
    """``ablate`` of C1 for (nearly) ever, and the pid of its ``train`` child once it runs."""
    ablate = subprocess.Popen(
        [sys.executable, "-m", "cipherlab", "ablate", "--preset", "smoke", "--configs", "c1", "--data-dir", str(data),
         "--device", "cpu", "--runs-dir", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "res"),
         "--set", "max_epochs=100000", "--set", "patience=100000", "--time-budget", "0"],
        cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (children := [pid for pid in _children(ablate.pid)
                                                            if b"train" in _cmdline(pid)]):
        assert ablate.poll() is None, "ablate ended before starting its child"
        time.sleep(0.1)
    assert children, "ablate started no train child"
    time.sleep(0.5)
    return ablate, children[0]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not LINUX, reason="finds the child through /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_ablate_ends_its_train_child_when_it_is_signalled(sig, data, tmp_path):
    ablate, child = _ablate_with_its_child(data, tmp_path)
    try:
        ablate.send_signal(sig)
        assert ablate.wait(timeout=30) != 0
        assert _gone_within(child, 20), f"the train child {child} outlived ablate ({sig.name})"
    finally:
        for pid in (ablate.pid, child):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        ablate.wait()
