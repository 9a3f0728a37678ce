"""More of issue 40's fault classes: a full disk under every command that writes a file, a beam too wide to
finish, a split file whose test lines are training lines, and cipher lines that are very long or not ASCII.

Before: a full disk under ``evaluate --json`` or ``score --json`` said "no space left on device" without
naming the file; ``doctor --json`` and ``report`` wrote their files in place (a full disk left them torn);
``evaluate --beam 100000`` ran for hours; a ``splits.json`` edited so that its test lines were training lines
(its digest intact) was used as it was, scoring the model on lines it learned.
"""

from __future__ import annotations

import errno
import json
import os
import shutil

import pytest

from cipherlab.__main__ import main
from cipherlab.analysis.doctor import OUTSIDE_DIR
from cipherlab.data.cipher import encrypt
from cipherlab.data.corpus import PLAIN_FILE, SPLITS_FILE, load_corpus, split_lines, write_cipher
from test_faults_checksum import tiny  # noqa: F401 - the module fixture: one smoke epoch of C1 and its export

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("CIPHERLAB_DEBUG", raising=False)  # the debug switch would show tracebacks


def _one_line(capsys, *names: str) -> str:
    out, err = capsys.readouterr()
    err = "".join(line for line in err.splitlines(keepends=True) if not line.startswith("doctor: "))  # its progress
    assert len(err.splitlines()) == 1 and err.startswith("cipherlab: error: "), err
    assert "Traceback" not in err and "unexpected" not in err, err
    assert all(name in err for name in names), (names, err)
    return err


# --------------------------------------------------------------------------- a full disk


def _commands(tiny, tmp):  # noqa: F811
    """name -> (argv, the file it writes). Doctor's outside English is a whole folder here: the repository's
    data/stdlib may not hold its derived cipher file yet, and doctor would write that first (under a full disk)."""
    data, export = str(tiny["root"] / "data"), str(tiny["export"])
    pred = tmp / "pred.txt"
    pred.write_text("one line\n", encoding="utf-8")
    outside = tmp / "outside"
    outside.mkdir()
    shutil.copyfile(OUTSIDE_DIR / PLAIN_FILE, outside / PLAIN_FILE)
    write_cipher(outside)
    return {
        "evaluate --json": (["evaluate", "--checkpoint", export, "--data-dir", data, "--device", "cpu", "--json",
                             str(tmp / "m.json")], tmp / "m.json"),
        "score --json": (["score", "--pred", str(pred), "--plain", str(pred), "--json", str(tmp / "s.json")],
                         tmp / "s.json"),
        "doctor --json": (["doctor", "--checkpoint", export, "--data-dir", data, "--lines", "2", "--random", "1",
                           "--attention-chunks", "1", "--outside", str(outside), "--device", "cpu", "--json",
                           str(tmp / "d.json")], tmp / "d.json"),
        "report --out": (["report", str(ROOT / "results" / "reference"), "--out", str(tmp / "report")],
                         tmp / "report" / "report.md"),
    }


@pytest.mark.parametrize("name", ["evaluate --json", "score --json", "doctor --json", "report --out"])
def test_a_full_disk_names_the_file_and_leaves_no_torn_one(name, tiny, tmp_path, monkeypatch, capsys):  # noqa: F811
    """ENOSPC when the data reaches the disk (at fsync, as with delayed allocation): one line naming the file,
    and no file, whole or torn, nor a temporary one."""
    argv, target = _commands(tiny, tmp_path)[name]

    def full_disk(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_disk)
    assert main(argv) == 1
    _one_line(capsys, f"{target}: no space left on device; free some disk space or choose another disk")
    assert not target.exists()
    assert [p.name for p in target.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_a_full_disk_under_export_names_the_file(tiny, tmp_path, monkeypatch, capsys):  # noqa: F811
    from safetensors import SafetensorError

    def full_disk(*args, **kwargs):
        raise SafetensorError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No '
                              'space left on device" })')

    monkeypatch.setattr("cipherlab.runner.trained.save_file", full_disk)
    out = tmp_path / "c1.safetensors"
    assert main(["export", "--checkpoint", str(tiny["best"]), "--out", str(out)]) == 1
    _one_line(capsys, f"{out}: cannot write the export", "No space left on device")
    assert not out.exists()


# --------------------------------------------------------------------------- a beam too wide


@pytest.mark.parametrize("command", ["decrypt", "evaluate"])
@pytest.mark.parametrize("beam", [33, 100000])
def test_a_beam_too_wide_to_finish_is_refused_before_decoding(command, beam, tiny, capsys):  # noqa: F811
    argv = [command, "--checkpoint", str(tiny["export"]), "--device", "cpu", "--beam", str(beam)]
    argv += [encrypt("abc")] if command == "decrypt" else ["--data-dir", str(tiny["root"] / "data")]
    if command == "evaluate" and beam > 33:
        argv[2] = str(tiny["root"] / "missing.pt")  # refused before the checkpoint is read (before: hours)
    assert main(argv) == 1
    _one_line(capsys, f"--beam {beam}: at most 32")


def test_the_widest_beam_allowed_decodes(tiny, capsys):  # noqa: F811
    assert main(["decrypt", "--checkpoint", str(tiny["export"]), "--device", "cpu", "--beam", "32", encrypt("ab")]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1


# --------------------------------------------------------------------------- a split file changed by hand


def test_a_split_file_whose_test_lines_are_training_lines_is_not_used(sample_dir, sample_lines, capsys):
    load_corpus(sample_dir)
    path = sample_dir / SPLITS_FILE
    saved = json.loads(path.read_text())
    saved["test"] = saved["train"][:len(saved["test"])]  # its digest, line count and seed as they were
    path.write_text(json.dumps(saved))
    corpus = load_corpus(sample_dir)
    err = capsys.readouterr().err
    assert f"{path} was changed by hand: its lists of lines are not the split of its seed" in err
    assert corpus.splits == split_lines(len(sample_lines)) and not set(corpus.splits["test"]) & set(corpus.splits["train"])
    assert json.loads(path.read_text())["test"] == corpus.splits["test"]  # written again, right
    load_corpus(sample_dir)
    assert capsys.readouterr().err == ""  # and reused from then on


# --------------------------------------------------------------------------- cipher lines


def test_a_very_long_cipher_line_decrypts_to_a_line_as_long(tiny, tmp_path, capsys):  # noqa: F811
    """4,000 characters (125 chunks of 32) in one line: decoded chunk by chunk, one output line of that length."""
    text = ("It was a dark and stormy night; " * 125)[:4000]
    cipher = tmp_path / "long.txt"
    cipher.write_text(encrypt(text) + "\n", encoding="utf-8")
    assert main(["decrypt", "--checkpoint", str(tiny["export"]), "--device", "cpu", "--input", str(cipher)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and len(lines[0]) == 4000


@pytest.mark.parametrize("bits", ["0100\uff10001", "0100 0001", "01000001\u00e9"], ids=["fullwidth 0", "space", "accent"])
def test_a_cipher_line_with_characters_other_than_0_and_1_is_named(bits, tiny, capsys):  # noqa: F811
    assert main(["decrypt", "--checkpoint", str(tiny["export"]), "--device", "cpu", bits]) == 1
    _one_line(capsys, "BITS")
