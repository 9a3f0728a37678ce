"""``--wandb``: what a training run logs to Weights & Biases, and what happens without wandb, a key or a network.

Offline throughout, no network: one real smoke-preset ``train --wandb`` (in its own process, so that wandb's
service ends with it) under ``WANDB_MODE=offline``, whose run file (``run-*.wandb``) is read back with
wandb's own record type (``wandb.proto.wandb_internal_pb2.Record``; wandb 0.31 has no Python reader of the
file, so :func:`wandb_records` reads its LevelDB-log framing). The rest use a stand-in ``wandb`` module or
an offline run in this process, ended with ``wandb.teardown()``.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import types
from pathlib import Path

import pytest

from cipherlab.__main__ import main
from cipherlab.base.config import make_config
from cipherlab.runner import tracking
from cipherlab.runner.training import train_config

ROOT = Path(__file__).resolve().parents[1]
TEST_KEYS = {"bit_accuracy", "sequence_accuracy", "levenshtein", "bleu", "chrf", "rouge1", "rouge2", "rougeL"}
WANDB_ENV = ("WANDB_MODE", "WANDB_DIR", "WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_BASE_URL",
             "WANDB_RUN_GROUP", "WANDB_PROJECT", "WANDB_INIT_TIMEOUT")


# --------------------------------------------------------------------------- reading a run file back

_BLOCK, _HEADER = 32768, 7  # the LevelDB log framing of a .wandb file: 32 KiB blocks, 7-byte record headers
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def wandb_records(path: Path) -> list:
    """The records of a ``.wandb`` run file, as wandb's own ``Record`` protobufs."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    ident, magic, version = struct.unpack("<4sHB", data[:_HEADER])
    assert (ident, magic, version) == (b":W&B", 0xBEE1, 0), f"{path}: not a wandb run file"
    pos, pieces, raw = _HEADER, b"", []
    while pos + _HEADER <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _HEADER:  # a block's tail too short for a header is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + _HEADER])
        if kind == 0:  # zeros: the rest of the block is padding
            pos += left
            continue
        chunk, pos = data[pos + _HEADER:pos + _HEADER + length], pos + _HEADER + length
        if kind == _FULL:
            raw.append(chunk)
        elif kind == _FIRST:
            pieces = chunk
        elif kind == _MIDDLE:
            pieces += chunk
        elif kind == _LAST:
            raw.append(pieces + chunk)
    records = []
    for blob in raw:
        record = wandb_internal_pb2.Record()
        record.ParseFromString(blob)
        records.append(record)
    return records


def _items(items) -> dict:
    return {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in items}


def read_run(sync_dir: Path) -> dict:
    """The run in ``sync_dir``: its ``run`` record, ``config``, ``history`` rows and final ``summary``."""
    (path,) = sync_dir.glob("run-*.wandb")
    run, config, history, summary = None, {}, [], {}
    for record in wandb_records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run = record.run
            config.update(_items(record.run.config.update))
        elif kind == "config":
            config.update(_items(record.config.update))
        elif kind == "history":
            history.append(_items(record.history.item))
        elif kind == "summary":
            summary.update(_items(record.summary.update))
    return {"run": run, "config": config, "history": history, "summary": summary}


# --------------------------------------------------------------------------- one real run, offline


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    """``train --wandb`` of a smoke C1 on the sample corpus (two epochs of 3 steps, a validation every 2 steps),
    offline, files in WANDB_DIR: (the run read back, its --out folder, what train printed, WANDB_DIR)."""
    from samples import SAMPLE_LINES

    root = tmp_path_factory.mktemp("wandb")
    data = root / "data"
    data.mkdir()
    (data / "brown_plain.txt").write_text("".join(x + "\n" for x in SAMPLE_LINES), encoding="latin-1")
    env = {k: v for k, v in os.environ.items() if k not in WANDB_ENV}
    env.update(WANDB_MODE="offline", WANDB_DIR=str(root / "wandb_dir"), OMP_NUM_THREADS="1", TQDM_DISABLE="1")
    (root / "wandb_dir").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "cipherlab", "train", "--config", "c1", "--preset", "smoke", "--data-dir", str(data),
         "--device", "cpu", "--out", str(root / "run"), "--results-dir", str(root / "results"),
         "--set", "max_epochs=2", "--set", "eval_every=2", "--wandb", "cipherlab-test"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (sync_dir,) = (root / "wandb_dir" / "wandb").glob("offline-run-*")
    return read_run(sync_dir), root / "run", done.stdout, sync_dir


def test_the_run_is_named_by_configuration_seed_and_preset_and_holds_the_configuration(logged):
    run, _, _, _ = logged
    assert run["run"].display_name == "c1-seed0-smoke" and run["run"].project == "cipherlab-test"
    config = run["config"]
    assert config["name"] == "c1" and config["preset"] == "smoke" and config["recipe"] == "cipher"
    assert config["seed"] == 0 and config["max_epochs"] == 2 and config["eval_every"] == 2
    assert config["d_model"] == make_config("c1", "smoke").d_model
    assert "--wandb cipherlab-test" in config["command"]


def test_every_step_logs_its_training_loss_learning_rate_and_gradient_norm(logged):
    run, out, _, _ = logged
    rows = {row["_step"]: row for row in run["history"]}
    epochs = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    steps = epochs[-1]["step"]
    assert sorted(rows) == list(range(1, steps + 1))  # one row per optimiser step
    for step in range(1, steps + 1):
        row = rows[step]
        assert row["train/loss"] > 0 and row["train/grad_norm"] > 0
        assert row["train/lr"] == pytest.approx(3e-4 * step / 20)  # the smoke preset's warm-up: 20 steps to 3e-4
    assert rows[steps]["epoch/train_loss"] == pytest.approx(epochs[-1]["train_loss"])


def test_each_validation_and_epoch_is_logged(logged):
    run, out, _, _ = logged
    rows = {row["_step"]: row for row in run["history"]}
    curve = [json.loads(line) for line in (out / "curve.jsonl").read_text().splitlines()]
    assert curve, "eval_every=2 gives mid-epoch validations"
    for point in curve:  # mid-epoch: val loss, teacher-forced accuracy, exact chunks
        assert rows[point["step"]]["val/exact_chunks"] == pytest.approx(point["val_exact_chunks"])
        assert rows[point["step"]]["val/loss"] == pytest.approx(point["val_loss"])
    for epoch in (json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()):
        row = rows[epoch["step"]]
        assert row["val/accuracy"] == pytest.approx(epoch["val_accuracy"]) and row["epoch/number"] == epoch["epoch"]
        assert row["epoch/tokens_per_s"] > 0 and row["epoch/seconds"] > 0


def test_the_test_metrics_their_decoding_and_the_cost_are_logged(logged):
    run, _, _, _ = logged
    last = max(run["history"], key=lambda row: row["_step"])
    assert {f"test/{key}" for key in TEST_KEYS} <= set(last)
    summary = run["summary"]
    assert summary["decoding"] == "length-aware greedy" and summary["test/split"] == "test"
    assert summary["params"] > 0 and summary["peak_cpu_rss_bytes"] > 0 and summary["device"] == "cpu"
    assert "peak_gpu_memory_bytes" not in summary


def test_an_offline_run_says_where_its_files_are_and_how_to_upload_them(logged):
    _, out, printed, sync_dir = logged
    line = next(line for line in printed.splitlines() if "wandb sync" in line)
    assert f"`wandb sync {sync_dir}`" in line and "WANDB_MODE=offline" in line
    assert not (out / "wandb").exists()  # WANDB_DIR was set: the files went there


# --------------------------------------------------------------------------- failures, each one line


@pytest.mark.parametrize("argv", [
    ["train", "--config", "c1", "--preset", "smoke", "--wandb"],
    ["ablate", "--preset", "smoke", "--configs", "c1", "--wandb", "proj"],
])
def test_wandb_without_the_package_is_one_line_before_any_work(argv, monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError
    code = main([*argv, "--data-dir", str(tmp_path / "data"), "--results-dir", str(tmp_path / "results"),
                 *(["--out", str(tmp_path / "run")] if argv[0] == "train" else ["--runs-dir", str(tmp_path / "runs")])])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err == "cipherlab: error: --wandb needs the wandb package: pip install 'cipherlab[wandb]'\n"
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_gpu_run_with_wandb_without_the_package_stops_before_training(monkeypatch, capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_run", ROOT / "benchmarks" / "gpu_run.py")
    gpu_run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_run)
    args = gpu_run.parse_args(["--wandb", "proj"])
    command = gpu_run.train_command(args, "c1", 60.0)
    assert command[command.index("--wandb") + 1] == "proj" and command[command.index("--wandb-group") + 1].startswith("gpu_run-")
    monkeypatch.setitem(sys.modules, "wandb", None)
    assert gpu_run.main(["--cpu-check", "--wandb", "--results-dir", "/nonexistent/r", "--runs-dir", "/nonexistent/r"]) == 2
    assert capsys.readouterr().err == "gpu_run.py: --wandb needs the wandb package: pip install 'cipherlab[wandb]'\n"


def test_ablate_passes_wandb_to_every_train_with_one_group(monkeypatch, tmp_path, capsys):
    from cipherlab.cli import pipeline

    commands = []
    monkeypatch.setattr(pipeline, "_run_child", lambda command: commands.append(command) or 1)
    assert main(["ablate", "--preset", "smoke", "--configs", "c1,c2", "--wandb", "proj", "--runs-dir",
                 str(tmp_path / "runs"), "--results-dir", str(tmp_path / "results")]) == 1
    groups = {c[c.index("--wandb-group") + 1] for c in commands}
    assert len(commands) == 2 and all(c[c.index("--wandb") + 1] == "proj" for c in commands)
    assert len(groups) == 1 and next(iter(groups)).startswith("ablate-smoke-")


def test_a_wandb_dir_inside_the_committed_results_is_refused(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("WANDB_DIR", str(ROOT / "results"))
    assert main(["train", "--config", "c1", "--preset", "smoke", "--wandb", "--out", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("cipherlab: error: WANDB_DIR ") and err.count("\n") == 1
    assert not (tmp_path / "run").exists()


def test_wandb_group_alone_is_refused(capsys):
    assert main(["train", "--config", "c1", "--preset", "smoke", "--wandb-group", "g"]) == 1
    assert "pass --wandb too" in capsys.readouterr().err


# --------------------------------------------------------------------------- online or offline


@pytest.fixture
def no_key(monkeypatch, tmp_path):
    """No W&B credentials anywhere and WANDB_MODE unset (a home and netrc of the test's own)."""
    for name in WANDB_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NETRC", str(tmp_path / "home" / ".netrc"))
    (tmp_path / "home").mkdir()
    return tmp_path / "home" / ".netrc"


def test_an_api_key_is_found_in_the_environment_or_netrc_without_the_network(no_key, monkeypatch):
    assert not tracking.has_api_key()
    no_key.write_text("machine api.wandb.ai\n  login user\n  password " + "a" * 40 + "\n")
    no_key.chmod(0o600)
    assert tracking.has_api_key()
    no_key.unlink()
    monkeypatch.setenv("WANDB_API_KEY", "b" * 40)
    assert tracking.has_api_key()


def test_no_key_and_no_wandb_mode_logs_offline_into_the_out_folder_and_prints_the_sync_line(no_key, tmp_path, capsys):
    import wandb

    config = make_config("c2", "smoke", seed=3)
    try:
        logger = tracking.start_wandb(config, tmp_path / "run")
        assert logger.run.offline
        logger.step({"step": 1, "epoch": 0.5, "loss": 2.0, "lr": 1e-4, "grad_norm": 0.7, "tokens": 10})
        logger.finish()
    finally:
        wandb.teardown()  # the service process ends with the test
    (sync_dir,) = (tmp_path / "run" / "wandb").glob("offline-run-*")
    line = next(line for line in capsys.readouterr().out.splitlines() if "wandb sync" in line)
    assert line == (f"W&B run c2-seed3-smoke logged offline (no W&B API key: set WANDB_API_KEY or run `wandb login` "
                    f"to log online): its files are in {sync_dir}; upload them later with `wandb sync {sync_dir}`")
    run = read_run(sync_dir)
    assert run["run"].display_name == "c2-seed3-smoke" and run["run"].project == "cipherlab"
    assert run["history"][0]["train/grad_norm"] == 0.7


def _fake_wandb(online_fails: bool):
    """A stand-in wandb module whose online start fails like one without a network; records its calls."""
    calls = []

    class Run:
        def __init__(self, mode):
            self.offline, self.sync_dir, self.summary = mode == "offline", "/somewhere/offline-run-1", {}

        def log(self, values, step=None):
            calls.append(("log", values, step))

        def finish(self, exit_code=0):
            calls.append(("finish", exit_code))

    def init(mode=None, **kwargs):
        calls.append(("init", mode, kwargs))
        if mode == "online" and online_fails:
            raise RuntimeError("Timed out while retrying: dial tcp: connect: network is unreachable\nmore")
        return Run(mode)

    return types.SimpleNamespace(init=init, Settings=lambda **kw: kw, run=None), calls


def test_an_online_start_that_fails_falls_back_to_offline_with_the_same_line(no_key, monkeypatch, tmp_path, capsys):
    fake, calls = _fake_wandb(online_fails=True)
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.setenv("WANDB_API_KEY", "c" * 40)
    logger = tracking.start_wandb(make_config("c1", "smoke"), tmp_path / "run", project="p", group="g")
    assert [c[1] for c in calls if c[0] == "init"] == ["online", "offline"]
    init = calls[0][2]
    assert init["project"] == "p" and init["group"] == "g" and init["name"] == "c1-seed0-smoke"
    assert init["dir"] == tmp_path / "run" and init["settings"]["init_timeout"] == tracking.INIT_TIMEOUT_S
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "could not start an online W&B run (Timed out while retrying" in out
    assert "`wandb sync /somewhere/offline-run-1`" in out
    assert logger.run.offline


def test_wandb_mode_decides_when_set_and_wandb_dir_is_respected(no_key, monkeypatch, tmp_path, capsys):
    fake, calls = _fake_wandb(online_fails=False)
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "elsewhere"))
    tracking.start_wandb(make_config("c1", "smoke"), tmp_path / "run")
    (init,) = [c for c in calls if c[0] == "init"]
    assert init[1] is None and init[2]["dir"] is None  # wandb reads WANDB_MODE and WANDB_DIR itself
    assert capsys.readouterr().out == "" and not (tmp_path / "run").exists()


# --------------------------------------------------------------------------- the trainer's observer


def test_the_trainer_tells_a_logger_each_step_validation_and_epoch(sample_dir, tmp_path):
    """Any object with some of step / validation / epoch: no wandb needed."""

    class Seen:
        def __init__(self):
            self.steps, self.validations = [], []

        def step(self, record):
            self.steps.append(record)

        def validation(self, record):
            self.validations.append(record)

    seen = Seen()
    config = make_config("c1", "smoke", max_epochs=1, eval_every=2)
    run = train_config(config, tmp_path / "run", data_dir=sample_dir, device="cpu", logger=seen, progress=False)
    assert [s["step"] for s in seen.steps] == list(range(1, run.fit.history[-1]["step"] + 1))
    assert seen.steps[0]["lr"] == pytest.approx(config.lr / config.warmup_steps)  # the lr the first step used
    assert all(s["grad_norm"] > 0 and s["tokens"] > 0 for s in seen.steps)
    assert [v["step"] for v in seen.validations] == [2]
