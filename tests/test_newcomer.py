"""The first hour of a newcomer (issue 39, item 5): a first line at once, progress where no bar shows, no
empty folder after an interrupted run, a plan table whose columns never run together with advice for a
GPU that is too small, and ``check`` on a file that exits or loops at import."""

from __future__ import annotations

import dataclasses
import time

import pytest

import cipherlab.cli.pipeline
import cipherlab.student.parts
from cipherlab.analysis import plan as planner
from cipherlab.runner import hooks as runs
from cipherlab.pipeline import train as training
from cipherlab.__main__ import main

SMOKE = ["train", "--config", "c1", "--preset", "smoke"]


def _interrupted(*args, **kwargs):
    raise KeyboardInterrupt


# --------------------------------------------------------------------------- train: a first line, no empty folder


def test_train_says_what_it_does_first_and_an_interrupted_run_leaves_no_empty_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cipherlab.cli.pipeline, "train_config", _interrupted)  # Ctrl-C while the data is read
    out, results = tmp_path / "runs" / "smoke" / "c1", tmp_path / "records"
    assert main([*SMOKE, "--out", str(out), "--results-dir", str(results)]) == 130
    printed = capsys.readouterr()
    assert f"c1 (smoke preset, cipher recipe) -> {out}: reading the data" in printed.out.splitlines()[-1]
    assert "interrupted before the first checkpoint: nothing to resume" in printed.err
    assert "Traceback" not in printed.err
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # runs/smoke/c1, runs/smoke, runs and records: gone


def test_an_interrupted_run_keeps_a_folder_it_did_not_create_or_that_holds_something(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cipherlab.cli.pipeline, "train_config", _interrupted)
    mine, kept = tmp_path / "mine", tmp_path / "kept"
    mine.mkdir()
    assert main([*SMOKE, "--out", str(mine), "--results-dir", str(tmp_path / "records")]) == 130
    assert mine.is_dir()  # empty, but there before the run

    def writes_then_stops(config, out, **kwargs):
        (out / "notes.txt").write_text("mine\n", encoding="utf-8")
        raise KeyboardInterrupt

    monkeypatch.setattr(cipherlab.cli.pipeline, "train_config", writes_then_stops)
    assert main([*SMOKE, "--out", str(kept), "--results-dir", str(tmp_path / "records")]) == 130
    assert (kept / "notes.txt").is_file()
    capsys.readouterr()


def test_where_no_bar_shows_a_progress_line_comes_every_heartbeat(capsys):
    class Batches:
        dataset = list(range(40))

        def epoch(self, epoch):
            return [[i] for i in range(4)]

        def load(self, indices, device):
            return {"src": indices}

    progress = training.Progress()
    trainer = type("T", (), {"progress": progress, "config": type("C", (), {"name": "c1"})})()
    beat = runs._Heartbeat(Batches(), trainer, every_s=0.0)
    batches = beat.epoch(0)
    assert beat.dataset == Batches.dataset  # everything else is the wrapped batches'
    beat.load(batches[0], "cpu")
    progress.batch, progress.epoch_seconds, progress.epoch_loss_sum, progress.epoch_tokens = 1, 30.0, 50.0, 10
    assert beat.load(batches[1], "cpu") == {"src": [1]}
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["c1 epoch 1: batch 0/4", "c1 epoch 1: batch 1/4, train loss 5.000, about 1.5 min left in the epoch"]
    quiet = runs._Heartbeat(Batches(), trainer)  # every HEARTBEAT_S (60 s): nothing within the first minute
    quiet.epoch(0)
    quiet.load([0], "cpu")
    assert capsys.readouterr().out == ""


# --------------------------------------------------------------------------- plan: columns and advice


def test_plan_columns_never_run_together():
    rows = planner._columns([["config", "dominant", "peak GB"], ["c1", "per-step", "19.38 (!)"],
                             ["c12345", "FLOPs", "4.68"]])
    assert rows[1].split() == ["c1", "per-step", "19.38", "(!)"]  # the old table printed "per-step19.38 (!)"
    assert len({len(r) for r in rows}) == 1 and all("  " in r for r in rows)
    assert rows[0].startswith("config ") and rows[2].startswith("c12345  ")


def _plan(activations: float, memory_gb: float = 16.0, rows: int = 43) -> dict:
    params = 9_683_968
    record = {"config": "c1", "train_epoch": {"train_flops": 6e13, "max_activation_bytes": activations, "steps": 160},
              "validation": {"forward_flops": 3e12, "steps": 10}, "typical_batch": {"flops": 3e11, "rows": rows},
              "per_step": {"kernels": {"train_step": 2000, "validation_step": 700}, "collate_seconds": 0.01,
                           "dispatch_us_measured": 20.0},
              "state_bytes": planner.ADAM_BYTES_PER_PARAM * params,
              "autocast_bytes": planner.AUTOCAST_BYTES_PER_PARAM * params}
    gpu = dataclasses.replace(planner.GPUS["T4"], memory_gb=memory_gb)
    records = []
    for name in ("c1", "c2"):
        r = {**record, "config": name}
        r["gpu"] = planner.gpu_estimate(r, gpu, 0.3, 4.0, 100)
        records.append(r)
    return {"gpu": dataclasses.asdict(gpu), "configs": records,
            "sizes": {"token_budget": 8192, "max_batch_size": 64, "chunk_chars": 256}}


def test_a_plan_over_the_gpus_memory_says_what_to_change_in_one_line():
    plan = _plan(activations=19.2e9)  # 19.4 GB on a 16 GB T4, as the notes' BPE once planned
    advice = planner.memory_advice(plan)
    assert "\n" not in advice
    assert advice.startswith("  (!) C1, C2 need up to 19.37 GB, over the 16 GB of the NVIDIA T4: ")
    assert "--set token_budget=4096 (about 9.77 GB" in advice and "max_batch_size" not in advice
    assert "--set chunk_chars=128" in advice and "bf16" in advice
    assert "--set max_batch_size=32" in planner.memory_advice(_plan(19.2e9, rows=64))  # the row limit binds
    assert planner.memory_advice(_plan(activations=2e9)) == ""  # all fit: no advice
    assert "do not fit" in planner.memory_advice(_plan(activations=2e9, memory_gb=0.1))


def test_plan_takes_set_and_names_a_bad_field_before_measuring(capsys):
    started = time.monotonic()
    assert main(["plan", "--preset", "smoke", "--set", "token_budgt=4096"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("cipherlab: error: ") and "token_budgt" in err and err.count("\n") == 1
    assert time.monotonic() - started < 5


# --------------------------------------------------------------------------- check: a file that exits or loops


def test_check_names_a_file_that_exits_at_import(tmp_path, capsys):
    target = tmp_path / "exits.py"
    target.write_text("import sys\nsys.exit(3)\n", encoding="utf-8")
    assert main(["check", "rmsnorm", f"{target}:RMSNorm"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"cipherlab: error: importing {target} called sys.exit(3)") and err.count("\n") == 1


def test_check_stops_a_file_that_loops_at_import(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cipherlab.student.parts, "IMPORT_TIME_LIMIT_S", 0.5)
    target = tmp_path / "loops.py"
    target.write_text("import time\nstart = time.time()\nwhile time.time() - start < 8:\n    pass\n", encoding="utf-8")
    started = time.monotonic()
    assert main(["check", "rmsnorm", f"{target}:RMSNorm"]) == 1
    assert time.monotonic() - started < 6
    err = capsys.readouterr().err
    assert f"importing {target} took more than 0.5 s and was stopped" in err and err.count("\n") == 1


@pytest.mark.parametrize("source, message", [("def f(:\n", "syntax error"), ("x = 1\n", "defines no 'RMSNorm'")])
def test_check_still_names_other_faults_of_the_file(tmp_path, capsys, source, message):
    target = tmp_path / "mine.py"
    target.write_text(source, encoding="utf-8")
    assert main(["check", "rmsnorm", f"{target}:RMSNorm"]) == 1
    assert message in capsys.readouterr().err


# --------------------------------------------------------------------------- doctor: a first line, then the report


def test_doctor_says_what_it_does_on_stderr_and_an_error_stays_one_line(tmp_path, capsys):
    checkpoint = "results/checkpoints/c1.safetensors"
    assert main(["doctor", "--checkpoint", checkpoint, "--lines", "2", "--random", "2", "--attention-chunks", "1"]) == 0
    printed = capsys.readouterr()
    assert printed.err.startswith(f"doctor: decoding 2 random strings, up to 2 lines of outside English and 2 test "
                                  f"lines (twice) with {checkpoint}")
    assert "decoding" not in printed.out.splitlines()[0]  # stdout is the report alone
    assert main(["doctor", "--checkpoint", str(tmp_path / "none.pt")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("cipherlab: error: ") and err.count("\n") == 1
