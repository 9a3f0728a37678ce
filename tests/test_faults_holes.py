"""Holes in the fault tests (issue 54): data lost, silent wrong numbers, false reasons, security, and where a
student's machine differs from CI's. Each test tries one class of ``tests/fault_classes.py``.

Before: ``train --resume`` on a folder whose last.pt was gone started again and overwrote best.pt and the
log; ``data export-split`` overwrote a student's own file; ``data verify`` said OK on splits sharing lines;
``score`` gave 0 % for NFD text without a word; ``report`` trusted a record whose lines contradicted its totals;
``--set warmup_steps=-5`` ran as 1; ``plan --tflops nan`` printed ``nan h``; ``decrypt --input -`` said
"no such input file"; the book unpacked ``../escaped.txt`` outside its folder on Python 3.11.
"""

from __future__ import annotations

import pytest

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from cipherlab.__main__ import main
from cipherlab.data.cipher import encrypt
from cipherlab.data.corpus import CIPHER_FILE, PLAIN_FILE
from samples import SAMPLE_LINES
from test_faults_runs import _no_debug, _one_line, _train_argv  # noqa: F401 - _no_debug: a fixture, used here too

ROOT = Path(__file__).resolve().parents[1]


def _write_data(folder: Path, lines=SAMPLE_LINES) -> Path:
    """A data folder of ``lines`` and their cipher."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / PLAIN_FILE).write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    (folder / CIPHER_FILE).write_text("".join(encrypt(x) + "\n" for x in lines), encoding="utf-8")
    return folder


@pytest.fixture
def data(tmp_path):
    return _write_data(tmp_path / "data")


# --------------------------------------------------------------------------- data lost


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One finished smoke run (best.pt, last.pt, log.jsonl), copied by the tests that damage it."""
    tmp = tmp_path_factory.mktemp("trained")
    folder = _write_data(tmp / "data")
    assert main(_train_argv(folder, tmp)) == 0
    return tmp


def _copy_run(trained, tmp_path):
    import shutil

    shutil.copytree(trained / "out", tmp_path / "out")
    shutil.copytree(trained / "data", tmp_path / "data")
    return tmp_path / "out"


def test_resume_without_last_pt_is_refused_and_keeps_best_and_the_log(trained, tmp_path, capsys):
    out = _copy_run(trained, tmp_path)
    (out / "last.pt").unlink()
    best, log = (out / "best.pt").read_bytes(), (out / "log.jsonl").read_bytes()
    capsys.readouterr()
    assert main(_train_argv(tmp_path / "data", tmp_path, "--resume")) == 1
    _one_line(capsys.readouterr().err, f"{out / 'last.pt'}: not found, but {out} holds a training run")
    assert (out / "best.pt").read_bytes() == best and (out / "log.jsonl").read_bytes() == log


def test_resume_without_best_pt_names_it_not_a_time_budget(trained, tmp_path, capsys):
    out = _copy_run(trained, tmp_path)
    (out / "best.pt").unlink()
    capsys.readouterr()
    assert main(_train_argv(tmp_path / "data", tmp_path, "--resume")) == 1
    captured = capsys.readouterr()
    _one_line(captured.err, f"{out / 'best.pt'}: not found, but {out / 'last.pt'} says epoch 1 was the best")
    assert "time budget" not in captured.out + captured.err


def test_export_split_keeps_a_students_own_file_unless_forced(data, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "test_plain.txt").write_text("my own notes\n", encoding="utf-8")
    argv = ["data", "export-split", "test", "--data-dir", str(data), "--out", str(out)]
    assert main(argv) == 1
    _one_line(capsys.readouterr().err, f"{out / 'test_plain.txt'}: already exists with other lines; pass --force")
    assert (out / "test_plain.txt").read_text(encoding="utf-8") == "my own notes\n"
    assert not (out / "test_cipher.txt").exists()  # neither file written
    assert main([*argv, "--force"]) == 0
    exported = (out / "test_plain.txt").read_text(encoding="utf-8")
    assert exported != "my own notes\n" and exported.splitlines()[0] in SAMPLE_LINES
    assert main(argv) == 0  # the same split again loses nothing: no --force needed


def _fake_checkout(root):
    """A cipherlab checkout as `git clone` leaves one: results/, cipherlab/ and its pyproject.toml."""
    for folder in ("results/smoke", "cipherlab"):
        (root / folder).mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "cipherlab"\nversion = "0.1.0"\n', encoding="utf-8")
    return root


def test_the_results_guard_finds_a_checkouts_results_from_the_target(data, tmp_path, capsys):
    """An installed cipherlab (a wheel: the package's own path is in site-packages) still keeps out of the
    results/ of a checkout it is run in: the guard looks up from the target too."""
    from cipherlab.runner.errors import outside_results

    checkout = _fake_checkout(tmp_path / "my clone")
    with pytest.raises(ValueError, match=r"--out .*committed results folder"):
        outside_results(checkout / "results" / "smoke" / "x", "--out")
    assert outside_results(checkout / "runs", "--out") == checkout / "runs"  # beside results/: fine
    assert outside_results(checkout / "results", "--results-dir", "--results-dir results") == checkout / "results"
    stranger = tmp_path / "other"  # results/ of a project that is not cipherlab
    (stranger / "results").mkdir(parents=True)
    (stranger / "cipherlab").mkdir()
    (stranger / "pyproject.toml").write_text('[project]\nname = "other"\n', encoding="utf-8")
    assert outside_results(stranger / "results" / "x", "--out") == stranger / "results" / "x"
    target = checkout / "results" / "smoke"
    assert main(["data", "export-split", "test", "--data-dir", str(data), "--out", str(target)]) == 1
    _one_line(capsys.readouterr().err, f"--out {target}: inside the repository's committed results folder")
    assert list(target.iterdir()) == []


# --------------------------------------------------------------------------- silent wrong numbers


def test_data_verify_refuses_splits_that_share_lines(tmp_path, capsys):
    folder = _write_data(tmp_path / "dup", [*SAMPLE_LINES, *SAMPLE_LINES[:30]])  # 30 lines twice: some in two splits
    assert main(["data", "verify", "--data-dir", str(folder)]) == 1
    captured = capsys.readouterr()
    _one_line(captured.err, f"{folder / PLAIN_FILE}: the same line is in more than one split")
    assert "OK" not in captured.out and "train/" in captured.err


def test_data_verify_still_passes_splits_of_distinct_lines(data, capsys):
    assert main(["data", "verify", "--data-dir", str(data)]) == 0
    assert capsys.readouterr().out.startswith("OK: ")


def test_score_composes_nfd_predictions_and_says_so(tmp_path, capsys):
    import unicodedata

    lines = ["Café au lait à la crème", "naïve façade", "plain ascii line"]
    plain = tmp_path / "plain.txt"
    plain.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    pred = tmp_path / "pred.txt"  # what a Mac editor may save: e + combining acute
    pred.write_text("".join(unicodedata.normalize("NFD", x) + "\n" for x in lines), encoding="utf-8")
    assert main(["score", "--pred", str(pred), "--plain", str(plain)]) == 0
    captured = capsys.readouterr()
    notes = [line for line in captured.err.splitlines() if "NFD" in line]
    assert len(notes) == 1 and notes[0].startswith(f"cipherlab: note: {pred}: 2 of 3 lines")
    assert "exact lines         100.00 %" in captured.out


def _record_with(trained, tmp_path, change):
    """The trained run's record, changed by ``change(its test set)``, alone in a folder of tmp_path."""

    from cipherlab.runner.record import read_record

    source = trained / "res" / "smoke" / "c1.json"
    record = read_record(source)  # a good record to start from
    change(record["sets"]["test"])
    folder = tmp_path / "records"
    folder.mkdir(exist_ok=True)
    path = folder / source.name
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


def test_report_refuses_a_record_whose_lines_contradict_its_totals(trained, tmp_path, capsys):
    from cipherlab.runner.record import read_record

    def flip_one(test):
        outcomes = test["exact_by_line"]
        test["exact_by_line"] = ("1" if outcomes[0] == "0" else "0") + outcomes[1:]

    path = _record_with(trained, tmp_path, flip_one)
    with pytest.raises(ValueError, match=rf"{path}: sets.test: exact_by_line marks \d+ exact lines but exact_lines "
                                         r"says \d+"):
        read_record(path)
    assert main(["report", str(path.parent), "--out", str(tmp_path / "report")]) == 1
    _one_line(capsys.readouterr().err, f"{path}: sets.test: exact_by_line marks")

    def other_accuracy(test):
        test["sequence_accuracy"] = (test["exact_lines"] + 1) / test["lines"]

    path = _record_with(trained, tmp_path, other_accuracy)
    with pytest.raises(ValueError, match=r"sequence_accuracy is .* but exact_lines says"):
        read_record(path)


def test_report_advice_for_a_newer_schema_is_to_update_not_to_convert(trained, tmp_path):

    from cipherlab.runner.record import SCHEMA, read_record

    path = _record_with(trained, tmp_path, lambda test: None)
    record = json.loads(path.read_text(encoding="utf-8"))
    record["schema"] = "cipherlab-record/9"
    path.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(ValueError, match="written by a newer cipherlab") as e:
        read_record(path)
    assert "convert" not in str(e.value) and SCHEMA in str(e.value)
    older = {"config": "c1", "components": {}, "test": {"lines": 1}}  # the train layout of an older cipherlab
    path.write_text(json.dumps(older), encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{path}: written by an older cipherlab \(no schema field.*\); convert "
                                         rf"it with tools/convert_older\.py from the cipherlab repository: "
                                         rf"python tools/convert_older\.py {path}$"):
        read_record(path)
    path.write_text(json.dumps({"schema": "someone-else/1"}), encoding="utf-8")
    with pytest.raises(ValueError, match="not a cipherlab-record/1 record; move it out of the folder$") as e:
        read_record(path)
    assert "convert" not in str(e.value)


SETTINGS = [  # (--set FIELD=VALUE, words of the range the one line must give)
    ("warmup_steps=-5", "0 (none) or more"),
    ("betas=1.5,0.9", "each 0 or more and below 1"),
    ("betas=0.9,nan", "each 0 or more and below 1"),
    ("blt_entropy_percentile=150", "0 to 100"),
    ("blt_entropy_percentile=nan", "0 to 100"),
    ("src_vocab=0", "1 or more"),
    ("tgt_vocab=-3", "1 or more"),
]


@pytest.mark.parametrize("setting, allowed", SETTINGS, ids=[setting for setting, _ in SETTINGS])
def test_a_setting_once_unchecked_is_one_line_naming_the_flag(setting, allowed, tmp_path, capsys):
    code = main(["train", "--config", "c1", "--preset", "smoke", "--set", setting, "--data-dir",
                 str(tmp_path / "no-data"), "--out", str(tmp_path / "run"), "--results-dir", str(tmp_path / "res")])
    assert code == 1
    err = capsys.readouterr().err
    _one_line(err, f"cipherlab: error: --set {setting}: ")
    assert allowed in err


def test_a_vocabulary_below_the_base_symbols_names_the_flag(data, tmp_path, capsys):
    argv = _train_argv(data, tmp_path, "--set", "source_mode=bits", "--set", "target_tokens=bpe", "--set",
                       "tgt_vocab=5")
    assert main(argv) == 1
    err = capsys.readouterr().err
    _one_line(err, "--set tgt_vocab=5: smaller than the")
    assert "--set tgt_vocab=null" in err and "vocab_size" not in err


PLAN_NUMBERS = [("--tflops", "nan"), ("--tflops", "inf"), ("--memory-gb", "nan"), ("--hours", "inf"),
                ("--hours", "nan"), ("--mfu", "nan"), ("--launch-us", "nan"), ("--launch-us", "inf")]


@pytest.mark.parametrize("flag, value", PLAN_NUMBERS, ids=[f"{flag} {value}" for flag, value in PLAN_NUMBERS])
def test_plan_refuses_a_number_that_is_not_finite(flag, value, capsys):
    extra = ["--gpu", "mine", "--tflops", "50", "--memory-gb", "16"] if flag in ("--tflops", "--memory-gb") else []
    argv = ["plan", "--preset", "smoke", *extra, flag, value]
    assert main(argv) == 1
    err = capsys.readouterr().err
    _one_line(err, f"cipherlab: error: {flag} {float(value)}: ")
    assert "convert" not in err


def test_decrypt_warns_when_the_cipher_is_another_keys(trained, tmp_path, capsys):
    best = trained / "out" / "best.pt"
    own = tmp_path / "own.txt"
    own.write_text("".join(encrypt(x) + "\n" for x in SAMPLE_LINES[:4]), encoding="utf-8")
    assert main(["decrypt", "--checkpoint", str(best), "--input", str(own), "--device", "cpu"]) == 0
    assert "another key" not in capsys.readouterr().err  # its own key's cipher: nothing to say
    key = b"SECRETKY"
    other = tmp_path / "other_key.txt"
    other.write_text("".join("".join(format(ord(c) ^ key[i % 8], "08b") for i, c in enumerate(line)) + "\n"
                             for line in SAMPLE_LINES[:4]), encoding="utf-8")
    assert main(["decrypt", "--checkpoint", str(best), "--input", str(other), "--device", "cpu"]) == 0
    captured = capsys.readouterr()
    notes = [line for line in captured.err.splitlines() if "another key" in line]
    assert len(notes) == 1 and notes[0].startswith(f"cipherlab: note: --input {other}: ")
    assert len(captured.out.splitlines()) == 4  # the lines are still decrypted: a note, not a refusal


def test_evaluate_warns_when_the_plaintext_is_outside_the_training_alphabet(trained, tmp_path, capsys):
    foreign = _write_data(tmp_path / "foreign", ["ÀÉÎÕÜ ÿþ ßæø " * 3 + str(n) for n in range(12)])
    best = trained / "out" / "best.pt"
    assert main(["evaluate", "--checkpoint", str(best), "--data-dir", str(foreign), "--split", "all",
                 "--device", "cpu"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "never saw" in line]
    assert len(notes) == 1 and notes[0].startswith(f"cipherlab: note: {foreign} (all lines): ")
    assert main(["evaluate", "--checkpoint", str(best), "--data-dir", str(trained / "data"), "--device", "cpu"]) == 0
    assert "never saw" not in capsys.readouterr().err


# --------------------------------------------------------------------------- false reasons


def _decrypt_stdin(trained, text: str) -> subprocess.CompletedProcess:
    """``decrypt --input -`` in a real process, ``text`` piped into it."""
    return subprocess.run([sys.executable, "-m", "cipherlab", "decrypt", "--checkpoint", str(trained / "out" / "best.pt"),
                           "--input", "-", "--device", "cpu"], input=text, capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'book'}"})


def test_decrypt_reads_stdin_for_input_dash(trained):
    done = _decrypt_stdin(trained, "".join(encrypt(x) + "\n" for x in SAMPLE_LINES[:3]))
    assert done.returncode == 0, done.stderr
    assert "no such" not in done.stderr and len(done.stdout.splitlines()) == 3
    done = _decrypt_stdin(trained, "0101x\n")
    assert done.returncode == 1
    _one_line(done.stderr, "<stdin>, line 1")


# --------------------------------------------------------------------------- minor


def test_an_export_is_as_readable_as_any_other_file(trained, tmp_path):
    import stat

    out = tmp_path / "c1.safetensors"
    assert main(["export", "--checkpoint", str(trained / "out" / "best.pt"), "--out", str(out)]) == 0
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~mask
    assert stat.S_IMODE(out.stat().st_mode) == stat.S_IMODE((trained / "out" / "best.pt").stat().st_mode)


# --------------------------------------------------------------------------- security


def _escaping_archive(tmp_path) -> Path:
    """An upload whose member ../escaped.txt would land beside the folder it is unpacked into."""
    import io
    import tarfile

    archive = tmp_path / "upload.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in (("notes/README.md", b"not the repository"), ("../escaped.txt", b"written outside")):
            info = tarfile.TarInfo(name)
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text))
    return archive


@pytest.mark.parametrize("tarfile_filter", ["data_filter", "no filter"])
def test_the_setup_cell_writes_no_archive_member_outside_its_folder(tmp_path, tarfile_filter):
    """The book's setup cell unpacks a student's upload: with tarfile's data filter where it exists (Python 3.12,
    and 3.11.4 on: 3.11 once wrote ../escaped.txt), and refusing such a member where it does not."""

    from cipherbook.viva import setup_cell_source
    from test_setup_cell import HARNESS, failure_line

    archive = _escaping_archive(tmp_path)
    work = tmp_path / "content"
    work.mkdir()
    cell = setup_cell_source().replace('CIPHERLAB_SOURCE = ""', f"CIPHERLAB_SOURCE = {str(archive)!r}", 1)
    if tarfile_filter == "no filter":  # a Python before PEP 706's filters (3.11.3 and older)
        cell = "import tarfile\ndel tarfile.data_filter\n" + cell
    (tmp_path / "cell.py").write_text(cell, encoding="utf-8")
    (tmp_path / "harness.py").write_text(HARNESS, encoding="utf-8")
    done = subprocess.run([sys.executable, str(tmp_path / "harness.py"), "missing", str(tmp_path / "cell.py"),
                           str(tmp_path / "calls.json")], cwd=work, capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "CIPHERLAB_SOURCE"})
    line = failure_line(done.stdout + done.stderr)
    assert "escaped.txt" in line and str(archive) in line
    assert not (work / "escaped.txt").exists() and not (tmp_path / "escaped.txt").exists()
    assert json.loads((tmp_path / "calls.json").read_text()) == []  # no pip, no git


# --------------------------------------------------------------------------- a student's machine is not CI's


def test_a_read_only_checkout_still_trains_with_notes(tmp_path, monkeypatch, capsys):
    """A course folder shared read-only (or a checkout on a read-only mount): the split and the tokenizers
    cannot be cached there; training goes on, with a note for each, and writes nothing into the data folder."""
    import errno

    from cipherlab.data.tokenizers.bpe import BPETokenizer

    data = _write_data(tmp_path / "shared data")
    before = sorted(p.name for p in data.iterdir())

    def refuse(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    real_mkdir = os.mkdir
    monkeypatch.setattr(os, "mkdir", lambda path, *a, **k: refuse() if str(path).startswith(str(data))
                        else real_mkdir(path, *a, **k))
    monkeypatch.setattr(BPETokenizer, "save", refuse)
    real_mkstemp = tempfile.mkstemp
    monkeypatch.setattr(tempfile, "mkstemp", lambda *a, dir=None, **k: refuse() if str(dir).startswith(str(data))
                        else real_mkstemp(*a, dir=dir, **k))
    assert main(_train_argv(data, tmp_path)) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error" not in err
    assert f"cannot save the split to {data / 'splits.json'} (Read-only file system)" in err
    assert f"tokenizer in {data / 'cache'} (Read-only file system)" in err
    assert sorted(p.name for p in data.iterdir()) == before
    assert (tmp_path / "out" / "best.pt").is_file()


def test_a_drive_folder_with_spaces_and_accents_works_throughout(trained, tmp_path, capsys):
    """Google Drive's "My Drive", a course name with accents: every command takes such paths as they are."""
    import shutil

    drive = tmp_path / "My Drive" / "Übung Kryptografie ç"
    shutil.copytree(trained / "out", drive / "run c1")
    shutil.copytree(trained / "data", drive / "données")
    argv = ["train", "--config", "c1", "--preset", "smoke", "--data-dir", str(drive / "données"), "--device", "cpu",
            "--out", str(drive / "run c1"), "--results-dir", str(drive / "résultats"), "--set", "max_epochs=2",
            "--resume"]
    assert main(argv) == 0
    (drive / "chiffre lines.txt").write_text("".join(encrypt(x) + "\n" for x in SAMPLE_LINES[:2]), encoding="utf-8")
    assert main(["decrypt", "--checkpoint", str(drive / "run c1" / "best.pt"), "--input",
                 str(drive / "chiffre lines.txt"), "--device", "cpu"]) == 0
    assert main(["export", "--checkpoint", str(drive / "run c1" / "best.pt"), "--out",
                 str(drive / "modèle c1.safetensors")]) == 0
    captured = capsys.readouterr()
    assert "error" not in captured.err and "Traceback" not in captured.err
    assert (drive / "résultats" / "smoke" / "c1.json").is_file() and (drive / "modèle c1.safetensors").is_file()
    assert [json.loads(line)["epoch"] for line in (drive / "run c1" / "log.jsonl").read_text().splitlines()] == [1, 2]


def test_a_run_killed_with_its_kernel_leaves_no_lock_that_stops_the_next(data, tmp_path, capsys):
    """A notebook kernel restarted mid-run (SIGKILL) leaves the results record's lock file behind; the next
    run into the same folders is not refused for it, and removes it when it ends."""
    out, record = tmp_path / "out", tmp_path / "res" / "smoke" / "c1.json"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom cipherlab.runner.lock import own_folder, own_record\n"
         "with own_folder(sys.argv[1]), own_record(sys.argv[2]):\n    print('held', flush=True)\n    time.sleep(60)",
         str(out), str(record)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "held"
    finally:
        holder.kill()  # what a kernel restart does to the run in it
        holder.wait()
    lock = record.with_name(".c1.json.lock")
    assert lock.exists()  # left behind
    assert main(_train_argv(data, tmp_path)) == 0
    assert "another cipherlab run" not in capsys.readouterr().err
    assert record.is_file() and not lock.exists()


def test_two_chapters_fitting_one_tokenizer_at_once_share_the_cache(data, tmp_path):
    """Two notebooks open at once, both fitting the same tokenizer into the data folder's cache: each gets a
    whole tokenizer, the cache holds one readable file, and no temporary file is left."""
    script = ("import sys\nfrom cipherlab.data.corpus import load_corpus\n"
              "from cipherlab.data.tokenizers.cipher_task import get_tokenizers\n"
              "src, tgt = get_tokenizers(load_corpus(sys.argv[1]), 'bits', 300, 120)\n"
              "print(src.vocab_size, tgt.vocab_size)")
    load_corpus_first = subprocess.run([sys.executable, "-c", "import sys\nfrom cipherlab.data.corpus import "
                                        "load_corpus\nload_corpus(sys.argv[1])", str(data)],
                                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert load_corpus_first.returncode == 0  # the split, written once
    runs = [subprocess.Popen([sys.executable, "-c", script, str(data)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
            for _ in range(2)]
    outputs = [run.communicate(timeout=300) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    assert outputs[0][0] == outputs[1][0] == "300 120\n"
    from cipherlab.data.tokenizers.bpe import BPETokenizer

    cached = sorted((data / "cache").glob("bpe_*.json"))
    assert len(cached) == 2 and all(BPETokenizer.load(path).vocab_size in (300, 120) for path in cached)
    assert [p.name for p in (data / "cache").iterdir() if p.name.startswith(".")] == []


def test_a_console_that_is_not_utf8_shows_an_accented_path_escaped(data, tmp_path):
    """An ASCII locale or a Windows code page: the files were written, then printing 'Übung' failed the command
    with "'ascii' codec can't encode"; now the path is shown escaped and the command succeeds."""
    out = tmp_path / "Übung"
    done = subprocess.run([sys.executable, "-m", "cipherlab", "data", "export-split", "test", "--data-dir", str(data),
                           "--out", str(out), "--first", "3"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0, done.stderr
    assert "\\xdcbung" in done.stdout and "codec" not in done.stderr
    assert len((out / "test_plain.txt").read_text(encoding="utf-8").splitlines()) == 3


def test_decrypt_refuses_a_line_its_console_cannot_write_rather_than_escape_it(trained, monkeypatch, capsys):
    import io

    import cipherlab.cli.pipeline as cli

    monkeypatch.setattr(cli, "decrypt_lines", lambda *args, **kwargs: iter(["Café au lait"]))
    ascii_out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    monkeypatch.setattr(sys, "stdout", ascii_out)
    code = main(["decrypt", "--checkpoint", str(trained / "out" / "best.pt"), encrypt("Cafe au lait"),
                 "--device", "cpu"])
    assert code == 1
    err = capsys.readouterr().err  # the decoding's name, then the one error line
    assert "Traceback" not in err and err.count("error") == 1
    assert err.splitlines()[-1].startswith("cipherlab: error: a decrypted line holds 'é', which this output's "
                                           "encoding (ascii) cannot write; set PYTHONIOENCODING=utf-8")
    ascii_out.flush()
    assert b"\\xe9" not in ascii_out.buffer.getvalue()  # no escaped character passed off as the plaintext


def test_a_python_without_fcntl_trains_unlocked(data, tmp_path, monkeypatch, capsys):
    """Windows' Python has no fcntl: the folder and record locks are skipped (the docstring's promise), not a crash,
    and no lock file is left beside the record."""
    monkeypatch.setitem(sys.modules, "fcntl", None)  # `import fcntl` raises ImportError, as on Windows
    with pytest.raises(ImportError):
        import fcntl  # noqa: F401
    assert main(_train_argv(data, tmp_path)) == 0
    assert "error" not in capsys.readouterr().err
    assert (tmp_path / "res" / "smoke" / "c1.json").is_file()
    assert [p.name for p in (tmp_path / "res" / "smoke").iterdir() if p.name.endswith(".lock")] == []
