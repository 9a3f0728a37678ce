"""Every failure names the file or the flag (issue 40, item 6), results written whole (item 3), and
``score`` saying when a file looks like another key's or the wrong one (item 5).

Before: ``--device tpu`` gave "unexpected RuntimeError ... (a bug in cipherlab)"; ``score --chunk -3``
"unexpected ZeroDivisionError", ``--chunk 0`` "range() arg 3 must not be zero", ``--first 0`` a silent
100 %; an emoji in ``--plain`` named no file or line; a closed pipe printed "broken pipe; check the
path" and exited 1; a ``--part`` calling ``sys.exit(3)`` at import exited silently and one looping
there hung; a part NaN only on long inputs was told to lower the learning rate; ``score --cipher``
of another key scored noise without a word; a full disk while writing the results left torn files.
"""

from __future__ import annotations

import errno
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch import nn

import cipherlab.student.parts
from cipherlab.__main__ import main
from cipherlab.data.cipher import encrypt
from cipherlab.base.config import make_config
from cipherlab.runner.errors import SIGPIPE_EXIT, run_command
from cipherlab.runner.evaluate import write_results
from cipherlab.pipeline.train import Trainer, TrainingDiverged, seed_everything
from cipherlab.runner.hooks import RunHooks
from test_train import PAD, VOCAB, batches

ROOT = Path(__file__).resolve().parents[1]
LINES = ["The quick brown fox jumps over the lazy dog.", "It was a dark and stormy night;", "Hello, world!"]


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("CIPHERLAB_DEBUG", raising=False)  # the debug switch would show tracebacks


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err and "unexpected" not in err, err
    return err


@pytest.fixture
def plain(tmp_path) -> Path:
    path = tmp_path / "plain.txt"
    path.write_text("".join(line + "\n" for line in LINES), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- flags


@pytest.mark.parametrize("command", [["train", "--config", "c1", "--preset", "smoke"],
                                     ["evaluate", "--checkpoint", "no.pt"],
                                     ["decrypt", "--checkpoint", "no.pt", "00001001"]])
@pytest.mark.parametrize("device", ["tpu", "meta", "cuda:x"])
def test_an_unknown_device_names_the_flag_and_the_choices(capsys, command, device):
    with pytest.raises(SystemExit) as stop:
        main([*command, "--device", device])
    err = _one_line(capsys)
    assert stop.value.code == 2 and f"argument --device: {device!r} is not a device" in err
    assert "cpu, cuda, cuda:N" in err and "mps" in err


@pytest.mark.parametrize("flag, value", [("--chunk", "-3"), ("--chunk", "0"), ("--first", "0"), ("--first", "-5")])
def test_score_sizes_below_one_name_the_flag_and_the_range(capsys, plain, flag, value):
    assert main(["score", "--pred", str(plain), "--plain", str(plain), flag, value]) == 1
    err = _one_line(capsys)
    assert f"error: {flag} {value}: " in err and "1 or more" in err


# --------------------------------------------------------------------------- files


def test_a_reference_character_the_cipher_cannot_encrypt_names_the_file_and_line(capsys, tmp_path, plain):
    emoji = tmp_path / "emoji.txt"
    emoji.write_text(f"{LINES[0]}\nIt was a dark \U0001F600 night;\n{LINES[2]}\n", encoding="utf-8")
    assert main(["score", "--pred", str(plain), "--plain", str(emoji)]) == 1
    err = _one_line(capsys)
    assert f"{emoji}, line 2: character '\U0001F600'" in err and "codes 0-255" in err


def test_score_warns_when_the_cipher_is_another_keys_or_the_predictions_are_noise(capsys, tmp_path, plain):
    key = b"SECRETKY"
    other = tmp_path / "other_key.txt"
    other.write_text("".join("".join(format(ord(c) ^ key[i % 8], "08b") for i, c in enumerate(line)) + "\n"
                             for line in LINES), encoding="utf-8")
    assert main(["score", "--pred", str(plain), "--cipher", str(other)]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "control characters" in line]
    assert len(warnings) == 1 and warnings[0].startswith(f"cipherlab: note: {other}: ") and "another key" in warnings[0]

    noise = tmp_path / "noise.txt"
    noise.write_text("".join("".join(chr(0x80 + ord(c) % 32) for c in line) + "\n" for line in LINES), encoding="utf-8")
    assert main(["score", "--pred", str(noise), "--plain", str(plain)]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "control characters" in line]
    assert len(warnings) == 1 and warnings[0].startswith(f"cipherlab: note: {noise}: ")

    cipher = tmp_path / "cipher.txt"
    cipher.write_text("".join(encrypt(line) + "\n" for line in LINES), encoding="utf-8")
    assert main(["score", "--pred", str(plain), "--cipher", str(cipher)]) == 0
    assert "control characters" not in capsys.readouterr().err  # text against its own cipher: nothing to say


# --------------------------------------------------------------------------- a closed pipe


def test_a_reader_closing_the_pipe_ends_the_command_quietly(plain):
    """``... | head -1``: the reader goes away; not an error, so no message, and the shell's exit code."""
    child = subprocess.Popen([sys.executable, "-m", "cipherlab", "score", "--pred", str(plain), "--plain", str(plain)],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdout.close()  # the reader is gone before the first line
    err = child.stderr.read().decode()
    assert child.wait(timeout=60) == SIGPIPE_EXIT and err == "", err


def test_a_broken_pipe_inside_a_command_is_not_reported_as_a_path(capsys):
    def command(args):
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    assert run_command("cipherlab", command, None) == SIGPIPE_EXIT
    assert capsys.readouterr().err == ""


# --------------------------------------------------------------------------- --part files that exit or hang


def test_a_part_that_exits_at_import_is_named(capsys, tmp_path):
    part = tmp_path / "exits.py"
    part.write_text("import sys\nsys.exit(3)\n", encoding="utf-8")
    assert main(["train", "--config", "c1", "--preset", "smoke", "--out", str(tmp_path / "run"),
                 "--part", f"attention={part}:Mine"]) == 1
    err = _one_line(capsys)
    assert f"importing {part} called sys.exit(3)" in err and '__name__ == "__main__"' in err


def test_a_part_that_loops_at_import_is_stopped_by_a_time_limit(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(cipherlab.student.parts, "IMPORT_TIME_LIMIT_S", 0.5)
    part = tmp_path / "loops.py"
    part.write_text("import time\nstart = time.time()\nwhile time.time() - start < 8:\n    pass\n", encoding="utf-8")
    started = time.monotonic()
    assert main(["train", "--config", "c1", "--preset", "smoke", "--out", str(tmp_path / "run"),
                 "--part", f"attention={part}:Mine"]) == 1
    assert time.monotonic() - started < 6
    err = _one_line(capsys)
    assert f"importing {part} took more than 0.5 s and was stopped" in err


# --------------------------------------------------------------------------- NaN: which advice


class LongNaN(nn.Module):
    """A model finite on sources of up to 4 tokens and NaN on longer ones (as a part NaN on long inputs)."""

    def __init__(self, d=16):
        super().__init__()
        self.src_emb, self.tgt_emb, self.out = nn.Embedding(VOCAB, d), nn.Embedding(VOCAB, d), nn.Linear(d, VOCAB)
        self.poisoned = False

    def forward(self, src, tgt_in):
        logits = self.out(self.tgt_emb(tgt_in) + self.src_emb(src).mean(dim=1, keepdim=True))
        return logits * math.nan if self.poisoned or src.size(1) > 4 else logits


def _trainer(out_dir, model) -> Trainer:
    seed_everything(0)
    config = make_config("c1", "smoke", lr=1e-2, warmup_steps=2, max_epochs=2)
    return Trainer(model, batches(24, seed=1), batches(8, seed=2, shuffle=False), config, out_dir,
                   device=torch.device("cpu"), tgt_pad_id=PAD, hooks=RunHooks())


def test_a_model_nan_only_on_long_inputs_is_not_told_to_lower_the_learning_rate(tmp_path):
    with pytest.raises(TrainingDiverged) as stop:
        _trainer(tmp_path, LongNaN()).fit()
    message = str(stop.value)
    assert "Lower lr" not in message and "Not the learning rate" in message
    assert "finite values on the first 4 source tokens" in message and "NaN from 5 on" in message


def test_weights_gone_wrong_after_updates_are_still_told_to_lower_the_learning_rate(tmp_path):
    model = LongNaN()
    model.forward = lambda src, tgt_in: LongNaN.forward(model, src[:, :4], tgt_in)  # finite at every length
    trainer = _trainer(tmp_path, model)
    trainer.fit(max_steps=2)
    model.poisoned = True  # NaN everywhere, as weights blown up by too large a learning rate
    with pytest.raises(TrainingDiverged, match=r"Lower lr \(now 0\.01\) or raise warmup_steps"):
        trainer.fit(resume=True)


# --------------------------------------------------------------------------- results written whole


def test_a_failing_write_leaves_every_results_file_as_it_was(tmp_path, monkeypatch):
    """A full disk (ENOSPC when the data reaches it) while writing the record or the table: each
    file is the old one, whole, and no temporary file is left behind."""
    config = make_config("c1", "smoke")
    folder = tmp_path / config.run_name
    folder.mkdir()
    record = json.loads((ROOT / "results" / "smoke" / "c1.json").read_text(encoding="utf-8"))  # read only
    write_results(config, record, tmp_path)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert set(before) == {"c1.json", "table.md", "table.csv"}

    def full_disk(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_results(config, {**record, "seed": 12345, "log": [{"epoch": 1}, {"epoch": 2}]}, tmp_path)
    from cipherlab.runner.evaluate import write_table

    with pytest.raises(OSError, match="No space left"):
        write_table(folder)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_doctor_refuses_a_device_cipherlab_does_not_run_on(capsys):
    with pytest.raises(SystemExit) as e:
        main(["doctor", "--checkpoint", "results/checkpoints/c1.safetensors", "--device", "tpu"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--device: 'tpu' is not a device" in err and "Traceback" not in err
