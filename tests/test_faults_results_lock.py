"""A run owns its results record too (issue 40, item 3): two runs of one configuration into one results
folder, each with its own ``--out``, never both write ``<results-dir>/<run>/cN.json``.

Before: the ``--out`` folder was locked but the record was not; a second ``train`` of C1 into the same
``--results-dir`` with another ``--out`` trained and replaced the first run's ``c1.json`` (then with a
``c1.log.jsonl`` beside it) without a word (and ``ablate`` did the same through its ``train`` children).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cipherlab.__main__ import main
from test_faults_runs import _no_debug  # noqa: F401 - the fixture: no debug switch (it would show tracebacks)

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fcntl locks")


def _train(data_dir: Path, out: Path, results: Path, *extra: str) -> list[str]:
    return ["train", "--config", "c1", "--preset", "smoke", "--data-dir", str(data_dir), "--device", "cpu",
            "--out", str(out), "--results-dir", str(results), *extra]


def _one_line(err: str, names: str) -> None:
    assert "Traceback" not in err and "unexpected" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert names in err, (names, err)


@pytest.fixture
def first_run(sample_dir, tmp_path):
    """A real ``train`` of C1 into ``res`` with ``--out a``, running (for up to a minute) once it has said so."""
    child = subprocess.Popen(
        [sys.executable, "-m", "cipherlab",
         *_train(sample_dir, tmp_path / "a", tmp_path / "res", "--set", "max_epochs=100000", "--set", "patience=100000",
                 "--time-budget", "60")],
        cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True)
    try:
        lines = iter(child.stdout.readline, "")  # notes first; then a line once the run holds its folders
        assert any("reading the data" in line for line in lines), "the first run ended before training"
        yield child
    finally:
        child.kill()
        child.wait()
        child.stdout.close()


def test_a_second_run_of_the_same_configuration_into_the_same_results_is_refused(sample_dir, tmp_path, first_run, capsys):
    record = tmp_path / "res" / "smoke" / "c1.json"
    started = time.monotonic()
    assert main(_train(sample_dir, tmp_path / "b", tmp_path / "res", "--set", "max_epochs=1")) == 1
    assert time.monotonic() - started < 10  # before training, not after it
    err = capsys.readouterr().err
    _one_line(err, f"--results-dir: {record}: another cipherlab run of c1 is writing this results record now")
    assert "wait for it to end, or pass another --results-dir" in err
    assert not record.exists() and not (tmp_path / "b").exists()  # nothing written, no empty --out left
    assert first_run.poll() is None  # the first run goes on


def test_other_configurations_and_other_results_folders_stay_free(tmp_path):
    from cipherlab.runner.lock import FolderInUse, own_record

    with own_record(tmp_path / "res" / "smoke" / "c1.json"):
        with pytest.raises(FolderInUse, match=r"c1\.json: another cipherlab run of c1"):
            with own_record(tmp_path / "res" / "smoke" / "c1.json"):
                pass
        with own_record(tmp_path / "res" / "smoke" / "c2.json"), own_record(tmp_path / "other" / "smoke" / "c1.json"):
            pass
    with own_record(tmp_path / "res" / "smoke" / "c1.json"):  # free again once the run ends
        pass
    assert [p.name for p in (tmp_path / "res" / "smoke").iterdir()] == []  # no lock file left behind


def test_a_run_that_ends_leaves_its_results_folder_free_and_clean(sample_dir, tmp_path, capsys):
    res = tmp_path / "res"
    assert main(_train(sample_dir, tmp_path / "a", res, "--set", "max_epochs=1")) == 0
    assert sorted(p.name for p in (res / "smoke").iterdir()) == ["c1.json", "table.csv", "table.md"]
    assert main(_train(sample_dir, tmp_path / "b", res, "--set", "max_epochs=1")) == 0  # one after the other: fine
    capsys.readouterr()


def test_ablate_into_a_results_record_in_use_fails_that_configuration(sample_dir, tmp_path, capfd):
    from cipherlab.runner.lock import own_record

    record = tmp_path / "res" / "smoke" / "c1.json"
    with own_record(record):  # another run of C1 (e.g. an ablate started earlier) writing this record
        code = main(["ablate", "--preset", "smoke", "--configs", "c1", "--data-dir", str(sample_dir), "--device", "cpu",
                     "--runs-dir", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "res"),
                     "--set", "max_epochs=1"])
    err = capfd.readouterr().err
    assert code == 1 and not record.exists()
    assert f"--results-dir: {record}: another cipherlab run of c1 is writing this results record now" in err
    assert "Traceback" not in err
