"""Where a student's machine and habits differ from CI's (issue 54, more): a Windows editor's files, a quoted
``~``, another working folder, a notebook cell run twice, a part that prints, a checkpoint from a GPU machine,
hidden GPUs, unwritable caches, another hash seed. Each test tries one class of ``tests/fault_classes.py``:
one clean line, or the same result as CI's.

Before: ``--out "~/run"`` (quoted in a notebook) made a folder named ``~`` in the working folder while
``--data-dir "~/data"`` was the home folder's; a ``print`` at the top of a part's file went into decrypt's
output lines; ``splits.json`` saved with a byte-order mark was "made from other data" and rewritten; a part
importing a missing module did not say at which line; ``--device cuda`` under ``CUDA_VISIBLE_DEVICES=""``
said only that CUDA was not available.
"""

from __future__ import annotations

import pytest

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from cipherlab.__main__ import main
from cipherlab.base.config import parse_field
from cipherlab.data.cipher import encrypt
from cipherlab.data.corpus import CIPHER_FILE, PLAIN_FILE, SPLITS_FILE
from samples import SAMPLE_LINES
import test_faults_holes
from test_faults_holes import _write_data
from test_faults_runs import _no_debug, _one_line, _train_argv  # noqa: F401 - _no_debug: a fixture, used here too

ROOT = Path(__file__).resolve().parents[1]
trained = test_faults_holes.trained  # the fixture: data/, out/ and res/ of one smoke run of c1
TIMING = ("decode_seconds", "decode_lines_per_s")  # what differs between two identical runs


def _record(res: Path) -> dict:
    return json.loads((res / "smoke" / "c1.json").read_text(encoding="utf-8"))


def _numbers(record: dict) -> dict:
    """What a run measured, less its timings."""
    sets = {name: {k: v for k, v in s.items() if k not in TIMING} for name, s in record["sets"].items()}
    return {"sets": sets, "best_val_loss": record["best_val_loss"], "epochs": record["epochs"]}


def _cipher_file(path: Path, lines=SAMPLE_LINES[:3], end: str = "\n") -> Path:
    path.write_text("".join(encrypt(x) + end for x in lines), encoding="utf-8")
    return path


def _decrypt(checkpoint, source, capsys, *extra) -> tuple[int, str, str]:
    code = main(["decrypt", "--checkpoint", str(checkpoint), "--input", str(source), "--device", "cpu", *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _run(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """``python -m cipherlab ARGV`` in a process of its own, ``env`` added to the environment."""
    base = {k: v for k, v in os.environ.items() if k != "CIPHERLAB_DEBUG"}
    return subprocess.run([sys.executable, "-m", "cipherlab", *argv], capture_output=True, text=True, timeout=240,
                          cwd=cwd, env={**base, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'book'}", **env})


# --------------------------------------------------------------------------- a notebook's habits


@pytest.fixture
def data_dir(tmp_path):
    return _write_data(tmp_path / "data")


def test_train_out_naming_an_existing_file_is_one_line_and_keeps_it(data_dir, tmp_path, capsys):
    file = tmp_path / "notes.txt"
    file.write_text("my notes\n", encoding="utf-8")
    argv = _train_argv(data_dir, tmp_path)
    argv[argv.index("--out") + 1] = str(file)
    assert main(argv) == 1
    _one_line(capsys.readouterr().err, f"--out {file}: {file} is a file, not a folder")
    assert file.read_text(encoding="utf-8") == "my notes\n"


def test_a_training_cell_run_twice_is_refused_unless_overwrite(trained, tmp_path, capsys):
    shutil.copytree(trained / "out", tmp_path / "out")
    shutil.copytree(trained / "data", tmp_path / "data")
    best, log = (tmp_path / "out" / "best.pt").read_bytes(), (tmp_path / "out" / "log.jsonl").read_bytes()
    capsys.readouterr()
    assert main(_train_argv(tmp_path / "data", tmp_path)) == 1
    _one_line(capsys.readouterr().err, f"{tmp_path / 'out'} already holds a training run; pass --resume to "
                                       "continue it, --overwrite to start again")
    assert (tmp_path / "out" / "best.pt").read_bytes() == best and (tmp_path / "out" / "log.jsonl").read_bytes() == log
    assert main(_train_argv(tmp_path / "data", tmp_path, "--overwrite")) == 0
    assert len((tmp_path / "out" / "log.jsonl").read_text().splitlines()) == 1


def test_python_style_set_values_are_read_as_python_writes_them(data_dir, tmp_path, capsys):
    assert parse_field("max_epochs", "1_000") == 1000 and parse_field("lr", "1e-3") == 0.001
    assert parse_field("lr", " 3E-4 ") == 0.0003 and parse_field("src_vocab", "None") is None
    assert parse_field("rope_cross_attention", "True") is True and parse_field("rope_cross_attention", "False") is False
    for value in ("1e3", "2.0"):  # not an integer as int() reads one: one line naming the flag, never 1000 or 2
        assert main(_train_argv(data_dir, tmp_path, "--set", f"max_epochs={value}")) == 1
        _one_line(capsys.readouterr().err, f"--set max_epochs={value}: max_epochs takes")
    assert not (tmp_path / "out").exists()


def test_a_setting_given_twice_takes_the_last(data_dir, tmp_path, capsys):
    """An earlier cell's ``--set`` left in the command: the last one wins, as for every other flag."""
    assert main(_train_argv(data_dir, tmp_path, "--set", "max_epochs=3", "--set", "max_epochs=1")) == 0
    assert len((tmp_path / "out" / "log.jsonl").read_text().splitlines()) == 1
    assert _record(tmp_path / "res")["hyperparameters"]["max_epochs"] == 1


# --------------------------------------------------------------------------- files a Windows editor saved


def test_a_split_file_resaved_with_a_bom_and_crlf_is_the_same_split(data_dir, capsys):
    assert main(["data", "verify", "--data-dir", str(data_dir)]) == 0
    before = capsys.readouterr().out
    splits = data_dir / SPLITS_FILE
    saved = json.dumps(json.loads(splits.read_text(encoding="utf-8")), indent=2).replace("\n", "\r\n")
    splits.write_bytes(("\ufeff" + saved + "  \r\n").encode("utf-8"))
    edited = splits.read_bytes()
    assert main(["data", "verify", "--data-dir", str(data_dir)]) == 0
    captured = capsys.readouterr()
    assert captured.out == before and "other data" not in captured.err and "new split" not in captured.err
    assert splits.read_bytes() == edited  # read as it is, not rewritten


def test_data_files_saved_by_notepad_train_to_the_same_numbers(trained, tmp_path, capsys):
    folder = _write_data(tmp_path / "data")
    for name in (PLAIN_FILE, CIPHER_FILE):
        text = (folder / name).read_text(encoding="utf-8")
        (folder / name).write_bytes(text.replace("\n", "\r\n").encode("utf-8-sig"))
    assert main(_train_argv(folder, tmp_path)) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "byte-order mark" in err
    assert _numbers(_record(tmp_path / "res")) == _numbers(_record(trained / "res"))


def test_a_data_file_saved_as_utf16_is_one_line_naming_it(tmp_path, capsys):
    folder = _write_data(tmp_path / "data")
    text = (folder / PLAIN_FILE).read_text(encoding="utf-8")
    (folder / PLAIN_FILE).write_bytes(text.encode("utf-16"))  # Notepad's "Unicode"
    assert main(_train_argv(folder, tmp_path)) == 1
    _one_line(capsys.readouterr().err, f"{folder / PLAIN_FILE}, line 1: not valid UTF-8")
    assert not (tmp_path / "res").exists()


def test_a_record_reformatted_by_an_editor_reports_the_same(trained, tmp_path, monkeypatch, capsys):
    reports = []
    for name, edit in (("as_written", None), ("edited", "\t")):
        shutil.copytree(trained / "res" / "smoke", tmp_path / name / "smoke")
        if edit:
            path = tmp_path / name / "smoke" / "c1.json"
            record = json.loads(path.read_text(encoding="utf-8"))
            path.write_bytes(("\ufeff" + json.dumps(record, indent=edit, ensure_ascii=False) + "   \r\n\r\n")
                             .replace("\n", "\r\n").encode("utf-8"))
        monkeypatch.chdir(tmp_path / name)
        assert main(["report", "smoke", "--out", "report"]) == 0
        reports.append((tmp_path / name / "report" / "report.md").read_text(encoding="utf-8"))
    assert "Traceback" not in capsys.readouterr().err
    assert reports[0] == reports[1]


def test_decrypt_of_a_last_line_without_a_newline_is_the_same(trained, tmp_path, capsys):
    best = trained / "out" / "best.pt"
    ended = _cipher_file(tmp_path / "ended.txt")
    unended = tmp_path / "unended.txt"
    unended.write_text(ended.read_text(encoding="utf-8").rstrip("\n"), encoding="utf-8")
    first, second = _decrypt(best, ended, capsys), _decrypt(best, unended, capsys)
    assert first[0] == second[0] == 0 and first[1] == second[1]
    assert "Traceback" not in second[2]


# --------------------------------------------------------------------------- paths


def test_relative_paths_from_another_working_folder(trained, tmp_path, monkeypatch, capsys):
    elsewhere = tmp_path / "notebooks" / "week 3"
    elsewhere.mkdir(parents=True)
    monkeypatch.chdir(elsewhere)
    best = os.path.relpath(trained / "out" / "best.pt", elsewhere)
    source = _cipher_file(tmp_path / "mine.txt")
    code, out, _ = _decrypt(best, "../../mine.txt", capsys)
    assert code == 0 and out == _decrypt(trained / "out" / "best.pt", source, capsys)[1]
    assert main(["export", "--checkpoint", best, "--out", "./c1.safetensors"]) == 0
    assert (elsewhere / "c1.safetensors").is_file()
    code, _, err = _decrypt(best, "./not_here.txt", capsys)
    assert code == 1
    _one_line(err, "not_here.txt: no such input file")


def test_a_quoted_tilde_path_is_the_home_folder(trained, tmp_path, monkeypatch, capsys):
    """``!python -m cipherlab ... --out "~/run"``: the quotes keep the shell from expanding ``~``."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    shutil.copytree(trained / "out", home / "run c1")
    _cipher_file(home / "mine.txt")
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    code, out, _ = _decrypt("~/run c1/best.pt", "~/mine.txt", capsys)
    assert code == 0 and len(out.splitlines()) == 3
    assert main(["export", "--checkpoint=~/run c1/best.pt", "--out", "~/c1.safetensors"]) == 0
    assert (home / "c1.safetensors").is_file()
    assert list(cwd.iterdir()) == []  # no folder named "~"
    code, _, err = _decrypt("~/run c1/best.pt", "~/gone.txt", capsys)
    assert code == 1
    _one_line(err, f"{home / 'gone.txt'}: no such input file")


# --------------------------------------------------------------------------- a student's part file


def test_a_part_with_a_syntax_error_or_a_missing_import_names_its_line(tmp_path, capsys):
    syntax = tmp_path / "syntax.py"
    syntax.write_text("import torch\n\nclass Mine(torch.nn.Module)\n    pass\n", encoding="utf-8")
    missing = tmp_path / "missing.py"
    missing.write_text("import torch\nimport not_a_module_anywhere\n", encoding="utf-8")
    for part, where in ((syntax, f"{syntax}:3: syntax error"), (missing, f"ModuleNotFoundError: No module named "
                                                                         f"'not_a_module_anywhere' at {missing}:2")):
        assert main(["train", "--config", "c1", "--preset", "smoke", "--out", str(tmp_path / "run"),
                     "--part", f"attention={part}:Mine"]) == 1
        _one_line(capsys.readouterr().err, where)
    assert not (tmp_path / "run").exists()


def test_a_part_printing_at_import_keeps_stdout_for_the_output(trained, tmp_path, capsys):
    from test_parts import STUDENT

    noisy = tmp_path / "noisy.py"
    noisy.write_text('print("hello from my part")\n' + STUDENT, encoding="utf-8")
    code, out, err = _decrypt(trained / "out" / "best.pt", _cipher_file(tmp_path / "mine.txt"), capsys,
                              "--part", f"attention={noisy}:MyAttention")
    assert code == 1 and out == ""  # another model's part: refused, and nothing of the part's on stdout
    assert "hello from my part" in err
    from cipherlab.student.check import load_target

    assert load_target(f"{noisy}:MyAttention").__name__ == "MyAttention"
    captured = capsys.readouterr()
    assert captured.out == "" and "hello from my part" in captured.err


# --------------------------------------------------------------------------- the machine


def test_a_checkpoint_saved_on_a_gpu_decrypts_the_same_on_a_cpu(trained, tmp_path, capsys, monkeypatch):
    """A best.pt copied from a GPU machine: its tensors are tagged cuda:0 (made here by a tagger that says so)."""
    import torch
    import torch.serialization as serialization

    payload = torch.load(trained / "out" / "best.pt", map_location="cpu", weights_only=True)
    registry = list(serialization._package_registry)
    monkeypatch.setattr(serialization, "_package_registry",
                        [(0, lambda obj: "cuda:0", lambda obj, location: None), *registry])
    torch.save(payload, tmp_path / "gpu_best.pt")
    monkeypatch.setattr(serialization, "_package_registry", registry)
    with pytest.raises(RuntimeError, match="CUDA"):
        with monkeypatch.context() as m:
            m.setattr(torch.cuda, "is_available", lambda: False)
            torch.load(tmp_path / "gpu_best.pt", weights_only=True)
    source = _cipher_file(tmp_path / "mine.txt")
    on_gpu, on_cpu = _decrypt(tmp_path / "gpu_best.pt", source, capsys), _decrypt(trained / "out" / "best.pt",
                                                                                 source, capsys)
    assert on_gpu[0] == on_cpu[0] == 0 and on_gpu[1] == on_cpu[1]


@pytest.mark.parametrize("hidden", ["", "-1"])
def test_gpus_hidden_by_cuda_visible_devices_are_named(hidden, trained, tmp_path, monkeypatch, capsys):
    import torch

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hidden)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    source = _cipher_file(tmp_path / "mine.txt")
    code, _, err = _decrypt(trained / "out" / "best.pt", source, capsys, "--device", "cuda")
    assert code == 1
    _one_line(err, f"CUDA is not available on this machine (CUDA_VISIBLE_DEVICES={hidden!r} hides every GPU")


def test_unwritable_torch_and_hf_homes_do_not_stop_training(tmp_path):
    blocked = tmp_path / "a file"
    blocked.write_text("not a folder\n", encoding="utf-8")  # below a file: unwritable, even for root
    folder = _write_data(tmp_path / "data")
    done = _run(_train_argv(folder, tmp_path), tmp_path, TORCH_HOME=str(blocked / "torch"),
                HF_HOME=str(blocked / "hf"), XDG_CACHE_HOME=str(blocked / "cache"))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and (tmp_path / "res" / "smoke" / "c1.json").is_file()


def test_another_pythonhashseed_gives_the_same_results(tmp_path):
    """A student's Python hashes strings with another seed than CI's: tokenizers, split and numbers the same."""
    records, tokenizers = [], []
    for seed in ("0", "4242"):
        run = tmp_path / f"seed{seed}"
        folder = _write_data(run / "data")
        done = _run(_train_argv(folder, run), run, PYTHONHASHSEED=seed)
        assert done.returncode == 0, done.stderr
        records.append(_numbers(_record(run / "res")))
        tokenizers.append({p.name: p.read_bytes() for p in sorted((folder / "cache").iterdir())})
        tokenizers[-1][SPLITS_FILE] = (folder / SPLITS_FILE).read_bytes()
    assert records[0] == records[1] and tokenizers[0] == tokenizers[1]
