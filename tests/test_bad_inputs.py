"""Every command against the bad inputs a student's laptop produces: one line on stderr, never a traceback.

A table of cases runs each command of ``python -m cipherlab`` (train, evaluate, decrypt, score,
export, doctor, plan, data ...) and of ``python -m cipherbook.viva`` on a missing file, an empty
file, a folder given as a file, bytes that are not UTF-8, a truncated or damaged checkpoint, a file
of the wrong kind and an output location that cannot be written. Each must exit non-zero with one
line on stderr that names the path. Then the defects of issue 27, one test each, and a Hypothesis
test that feeds random bytes as a data file, a predictions file and a checkpoint.

The commands run in-process (``main(argv)``), but for two real subprocesses; nothing trains for
more than one smoke epoch.
"""

from __future__ import annotations

import errno
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cipherlab.__main__ import main
from cipherlab.data.cipher import encrypt
from cipherlab.base.config import make_config
from cipherlab.data.corpus import CIPHER_FILE, PLAIN_FILE, SPLITS_FILE
from cipherlab.base.files import UTF8_BOM
from cipherlab.runner.training import train_config
from cipherbook.viva.__main__ import main as viva_main
from samples import SAMPLE_LINES

ROOT = Path(__file__).resolve().parents[1]
C2 = ROOT / "results" / "checkpoints" / "c2.safetensors"  # the reference C2
FAST_DOCTOR = ["--lines", "4", "--random", "2", "--attention-chunks", "1"]


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("CIPHERLAB_DEBUG", raising=False)  # the debug switch would show tracebacks


def _data_dir(folder: Path, plain: bytes | None = None) -> Path:
    """A data folder: the sample lines, or ``plain`` as its plaintext file."""
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join(line + "\n" for line in SAMPLE_LINES).encode("latin-1")
    (folder / PLAIN_FILE).write_bytes(text if plain is None else plain)
    return folder


def _flip_inside_largest_tensor(path: Path, n_bytes: int = 16) -> None:
    """Flip ``n_bytes`` in the middle of the largest tensor record of a torch.save zip file:
    the zip and pickle stay readable, only weights change."""
    with zipfile.ZipFile(path) as z:
        info = max((i for i in z.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    raw = bytearray(path.read_bytes())
    local = info.header_offset
    start = local + 30 + int.from_bytes(raw[local + 26:local + 28], "little") + int.from_bytes(
        raw[local + 28:local + 30], "little")  # the local header, its name and extra field
    middle = start + info.file_size // 2
    for i in range(middle, middle + n_bytes):
        raw[i] ^= 0xFF
    path.write_bytes(bytes(raw))


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> dict[str, Path]:
    """Every kind of bad file, and a good smoke checkpoint to damage."""
    root = tmp_path_factory.mktemp("zoo")
    data = _data_dir(root / "data")
    run = train_config(make_config("c1", "smoke", max_epochs=1), root / "run", data_dir=data, device="cpu")
    z = {"root": root, "data": data, "best": run.best_checkpoint, "missing": root / "missing.txt",
         "folder": root / "a_folder", "file": root / "a_file"}
    z["folder"].mkdir()
    z["file"].write_text("a file where a folder should be\n")
    for name, content in {
        "empty.txt": b"",
        "latin1.txt": b"ok\ncaf\xe9\n",
        "nul.txt": b"ok\n\x00\x01\x02\n",
        "text.pt": b"not a checkpoint\n",
        "json.pt": json.dumps({"format": "cipherlab-checkpoint-1", "model": [1, 2]}).encode(),
        "text.safetensors": b"not a model\n",
        "cut.safetensors": C2.read_bytes()[:3000],
        "not_bits.txt": b"hello\n",
        "not_a_notebook.ipynb": b"{\"cells\": 3}",
        "nb_latin1.ipynb": b"\xff\xfe not json",
    }.items():
        z[name] = root / name
        z[name].write_bytes(content)
    z["cut.pt"] = root / "cut.pt"
    z["cut.pt"].write_bytes(run.best_checkpoint.read_bytes()[:5000])
    z["damaged.pt"] = root / "damaged.pt"
    z["damaged.pt"].write_bytes(run.best_checkpoint.read_bytes())
    _flip_inside_largest_tensor(z["damaged.pt"])
    z["empty_data"] = _data_dir(root / "empty_data", b"")
    z["latin1_data"] = _data_dir(root / "latin1_data", b"ok line\ncaf\xe9 au lait\n" * 8)
    z["bad_cipher_data"] = _data_dir(root / "bad_cipher_data")
    (z["bad_cipher_data"] / CIPHER_FILE).write_text("".join(encrypt(x[::-1]) + "\n" for x in SAMPLE_LINES))
    z["folder_data"] = root / "folder_data"
    (z["folder_data"] / PLAIN_FILE).mkdir(parents=True)
    z["good.txt"] = root / "good.txt"
    z["good.txt"].write_text("".join(x + "\n" for x in SAMPLE_LINES[:3]))
    return z


UNDER_A_FILE = "{file}/out/x"  # a path whose parent is a regular file: unwritable even for root
CK = ["--checkpoint"]

# (command line with {placeholders} from the zoo, the path the error must name)
CASES = [
    # train
    (["train", "--config", "c1", "--preset", "smoke", "--data-dir", "{missing}"], "{missing}"),
    (["train", "--config", "c1", "--preset", "smoke", "--data-dir", "{empty_data}"], "{empty_data}"),
    (["train", "--config", "c1", "--preset", "smoke", "--data-dir", "{latin1_data}"], "{latin1_data}"),
    (["train", "--config", "c1", "--preset", "smoke", "--data-dir", "{data}", "--out", UNDER_A_FILE], "{file}"),
    (["train", "--config", "c1", "--preset", "smoke", "--data-dir", "{data}", "--out", "{root}/t1",
      "--results-dir", UNDER_A_FILE], "{file}"),
    # evaluate
    (["evaluate", *CK, "{missing}"], "{missing}"),
    (["evaluate", *CK, "{empty.txt}"], "{empty.txt}"),
    (["evaluate", *CK, "{folder}"], "{folder}"),
    (["evaluate", *CK, "{json.pt}", "--data-dir", "{data}"], "{json.pt}"),
    (["evaluate", *CK, "{cut.pt}", "--data-dir", "{data}"], "{cut.pt}"),
    (["evaluate", *CK, "{damaged.pt}", "--data-dir", "{data}"], "{damaged.pt}"),
    (["evaluate", *CK, "{best}", "--data-dir", "{data}", "--json", UNDER_A_FILE], "{file}"),
    (["evaluate", *CK, "{best}", "--data-dir", "{folder_data}"], "{folder_data}"),
    # decrypt
    (["decrypt", *CK, "{best}", "--input", "{missing}"], "{missing}"),
    (["decrypt", *CK, "{best}", "--input", "{empty.txt}"], "{empty.txt}"),
    (["decrypt", *CK, "{best}", "--input", "{folder}"], "{folder}"),
    (["decrypt", *CK, "{best}", "--input", "{latin1.txt}"], "{latin1.txt}"),
    (["decrypt", *CK, "{best}", "--input", "{not_bits.txt}"], "{not_bits.txt}"),
    (["decrypt", *CK, "{text.pt}", "01000001"], "{text.pt}"),
    (["decrypt", *CK, "{text.safetensors}", "01000001"], "{text.safetensors}"),
    (["decrypt", *CK, "{cut.safetensors}", "01000001"], "{cut.safetensors}"),
    # score
    (["score", "--pred", "{missing}", "--plain", "{good.txt}"], "{missing}"),
    (["score", "--pred", "{empty.txt}", "--plain", "{good.txt}"], "{empty.txt}"),
    (["score", "--pred", "{folder}", "--plain", "{good.txt}"], "{folder}"),
    (["score", "--pred", "{latin1.txt}", "--plain", "{good.txt}"], "{latin1.txt}"),
    (["score", "--pred", "{nul.txt}", "--plain", "{good.txt}"], "{nul.txt}"),
    (["score", "--pred", "{good.txt}", "--cipher", "{good.txt}"], "{good.txt}"),
    (["score", "--pred", "{good.txt}", "--plain", "{good.txt}", "--json", UNDER_A_FILE], "{file}"),
    # export
    (["export", *CK, "{missing}", "--out", "{root}/e.safetensors"], "{missing}"),
    (["export", *CK, "{json.pt}", "--out", "{root}/e.safetensors"], "{json.pt}"),
    (["export", *CK, "{damaged.pt}", "--out", "{root}/e.safetensors"], "{damaged.pt}"),
    (["export", *CK, "{best}", "--out", "{file}/c2.safetensors"], "{file}"),
    (["export", *CK, "{best}", "--out", "{root}/c2.bin"], "{root}/c2.bin"),
    # doctor
    (["doctor", *CK, "{cut.pt}", *FAST_DOCTOR], "{cut.pt}"),
    (["doctor", *CK, "{best}", "--data-dir", "{data}", "--outside", "{latin1_data}", *FAST_DOCTOR],
     "{latin1_data}"),
    (["doctor", *CK, "{best}", "--data-dir", "{data}", "--json", UNDER_A_FILE, *FAST_DOCTOR], "{file}"),
    # plan
    (["plan", "--preset", "smoke", "--config", "c1", "--data-dir", "{missing}", "--tokenize"], "{missing}"),
    (["plan", "--preset", "smoke", "--config", "c1", "--json", UNDER_A_FILE], "{file}"),
    # data
    (["data", "verify", "--data-dir", "{empty_data}"], "{empty_data}"),
    (["data", "verify", "--data-dir", "{bad_cipher_data}"], "{bad_cipher_data}"),
    (["data", "stats", "--data-dir", "{latin1_data}"], "{latin1_data}"),
    (["data", "cipher", "--data-dir", "{folder_data}"], "{folder_data}"),
    (["data", "build-letters", "--source", "{missing}", "--out", "{root}/letters.txt"], "{missing}"),
    (["data", "build-letters", "--source", "{good.txt}", "--out", UNDER_A_FILE], "{file}"),
    # check
    (["check", "attention", "{missing}:Attention"], "{missing}"),
    (["check", "rmsnorm", "{empty.txt}:MyNorm"], "{empty.txt}"),
    (["check", "rope", "{latin1.txt}:Rope"], "{latin1.txt}"),
    (["check", "mha", "{folder}:Attention"], "{folder}"),
]
VIVA_CASES = [
    (["view", "{missing}"], "{missing}"),
    (["view", "{folder}"], "{folder}"),
    (["view", "{not_a_notebook.ipynb}", "--out", "{root}/v.html"], "{not_a_notebook.ipynb}"),
    (["view", "{nb_latin1.ipynb}", "--out", "{root}/v.html"], "{nb_latin1.ipynb}"),
    (["view", str(ROOT / "book" / "01_task.ipynb"), "--out", UNDER_A_FILE], "{file}"),
    (["check", "{missing}"], "{missing}"),
    (["sync", "{not_a_notebook.ipynb}"], "{not_a_notebook.ipynb}"),
]


def _fill(words: list[str], zoo: dict[str, Path]) -> list[str]:
    """The words with each {name} of the zoo replaced by its path."""
    filled = []
    for word in words:
        for key, value in zoo.items():
            word = word.replace(f"{{{key}}}", str(value))
        filled.append(word)
    return filled


def _one_clear_line(err: str, names: str) -> None:
    assert "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and err.endswith("\n"), err
    assert names in err, (names, err)


def test_the_table_covers_every_command_and_at_least_30_cases():
    commands = {argv[0] if argv[0] != "data" else f"data {argv[1]}" for argv, _ in CASES}
    assert {"train", "evaluate", "decrypt", "score", "export", "doctor", "plan", "data verify"} <= commands
    assert len(CASES) + len(VIVA_CASES) >= 30


ENTRY_POINTS = {"cipherlab": main, "cipherbook.viva": viva_main}


@pytest.mark.parametrize(
    "prog, argv, names",
    [("cipherlab", argv, names) for argv, names in CASES] + [("cipherbook.viva", argv, names) for argv, names in VIVA_CASES],
    ids=lambda x: " ".join(x[:2]) if isinstance(x, list) else x if x.startswith("cipherlab") else None,
)
def test_a_bad_input_is_one_line_naming_the_path(prog, argv, names, zoo, capsys):
    code = ENTRY_POINTS[prog](_fill(argv, zoo))
    err = capsys.readouterr().err
    assert code != 0
    assert err.startswith(f"{prog}: error: ")
    _one_clear_line(err, _fill([names], zoo)[0])


def test_a_usage_error_is_one_line_too(capsys):
    with pytest.raises(SystemExit) as e:
        main(["decrypt", "--checkpoint", "x.pt", "--beam", "two", "01000001"])
    assert e.value.code == 2
    _one_clear_line(capsys.readouterr().err, "--beam")


# --------------------------------------------------------------------------- the defects of issue 27, one by one


def test_export_onto_a_read_only_disk_is_one_line(zoo, monkeypatch, capsys):
    """safetensors raises its own SafetensorError, which the command line once let through as a traceback."""
    from safetensors import SafetensorError

    def read_only(*args, **kwargs):
        raise SafetensorError('Error while serializing: IoError(Os { code: 30, kind: ReadOnlyFilesystem, '
                              'message: "Read-only file system" })')

    monkeypatch.setattr("cipherlab.runner.trained.save_file", read_only)
    out = zoo["root"] / "ro" / "c1.safetensors"
    assert main(["export", "--checkpoint", str(zoo["best"]), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    _one_clear_line(err, str(out))
    assert "Read-only file system" in err and "writable disk" in err


def test_an_error_nobody_foresaw_is_one_line_too(zoo, monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise RuntimeError("something inside torch\nwith a second line")

    monkeypatch.setattr("cipherlab.cli.pipeline.load_trained", broken)
    assert main(["decrypt", "--checkpoint", str(zoo["best"]), "01000001"]) == 1
    err = capsys.readouterr().err
    _one_clear_line(err, "unexpected RuntimeError: something inside torch")
    assert "CIPHERLAB_DEBUG=1" in err


def test_a_damaged_training_checkpoint_is_refused(zoo, capsys):
    """16 bytes flipped inside a weight tensor of best.pt once loaded and decoded differently, exit 0."""
    assert main(["decrypt", "--checkpoint", str(zoo["damaged.pt"]), encrypt("a plain line")]) == 1
    err = capsys.readouterr().err
    _one_clear_line(err, f"{zoo['damaged.pt']}: its tensors do not match the checksum saved with them")
    assert main(["decrypt", "--checkpoint", str(zoo["best"]), encrypt("a plain line")]) == 0  # the intact one loads


def test_a_training_checkpoint_carries_the_exports_checksum(zoo):
    import torch

    from cipherlab.pipeline.checkpoint import payload_tensors, tensors_sha256

    payload = torch.load(zoo["best"], map_location="cpu", weights_only=True)  # never pickled code
    assert payload["sha256"] == tensors_sha256(payload_tensors(payload))
    assert any(name.startswith("model.") for name in payload_tensors(payload))


def test_no_module_unpickles_code():
    """torch.load appears only with weights_only=True; nothing else unpickles."""
    offenders = []
    for path in (ROOT / "cipherlab").rglob("*.py"):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#")[0]
            if ("torch.load(" in code and "weights_only=True" not in code) or "pickle.load" in code \
                    or "allow_pickle=True" in code:
                offenders.append(f"{path.relative_to(ROOT)}:{n}")
    assert offenders == []


def test_score_strips_a_byte_order_mark_and_says_so(tmp_path, capsys):
    """A perfect prediction file saved by Windows Notepad (BOM, CRLF) once scored 98.218 % bit accuracy."""
    lines = SAMPLE_LINES[:20]
    plain, pred = tmp_path / "plain.txt", tmp_path / "pred.txt"
    plain.write_text("".join(x + "\n" for x in lines))
    pred.write_bytes(UTF8_BOM + "".join(x + "\r\n" for x in lines).encode())
    out = tmp_path / "score.json"
    assert main(["score", "--pred", str(pred), "--plain", str(plain), "--json", str(out)]) == 0
    err = capsys.readouterr().err
    _one_clear_line(err, f"{pred} starts with a UTF-8 byte-order mark")
    whole = json.loads(out.read_text())["whole_lines"]
    assert whole["bit_accuracy"] == 1.0 and whole["sequence_accuracy"] == 1.0


def test_decrypt_reads_a_notepad_file_and_refuses_an_empty_one(zoo, tmp_path, capsys):
    texts = ["oral exam", "x"]
    notepad = tmp_path / "notepad.txt"
    notepad.write_bytes(UTF8_BOM + "".join(encrypt(t) + "\r\n" for t in texts).encode())
    assert main(["decrypt", "--checkpoint", str(zoo["best"]), "--input", str(notepad)]) == 0
    assert [len(line) for line in capsys.readouterr().out.splitlines()] == [len(t) for t in texts]
    assert main(["decrypt", "--checkpoint", str(zoo["best"]), "--input", str(zoo["empty.txt"])]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "the input file is empty; expected one cipher line per line" in err
    assert main(["decrypt", "--checkpoint", str(zoo["best"]), ""]) == 1
    assert "BITS: an empty cipher line" in capsys.readouterr().err


def test_train_checks_its_output_folders_before_training(zoo, monkeypatch, capsys):
    def must_not_train(*args, **kwargs):
        raise AssertionError("trained before checking where the results go")

    monkeypatch.setattr("cipherlab.cli.pipeline.train_config", must_not_train)
    code = main(["train", "--config", "c1", "--preset", "smoke", "--data-dir", str(zoo["data"]),
                 "--out", str(zoo["root"] / "t2"), "--results-dir", str(zoo["file"] / "results")])  # fmt: skip
    assert code == 1
    _one_clear_line(capsys.readouterr().err, f"--results-dir {zoo['file'] / 'results' / 'smoke'}: {zoo['file']} is a file")


def _read_only_file_system(monkeypatch):
    """Every new file fails as on a read-only disk (chmod cannot do this: the tests run as root)."""
    import tempfile

    def refuse(*args, dir=None, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(dir))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    monkeypatch.setattr(tempfile, "TemporaryFile", refuse)


def test_output_checks_name_a_read_only_file_system(zoo, monkeypatch, capsys):
    _read_only_file_system(monkeypatch)
    out = zoo["root"] / "v.html"
    assert viva_main(["view", str(ROOT / "book" / "01_task.ipynb"), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    _one_clear_line(err, f"--out {out}: cannot write in {out.parent} (read-only file system)")
    assert "writable disk" in err and not out.exists()


def test_a_read_only_data_folder_still_evaluates(zoo, tmp_path, monkeypatch, capsys):
    """splits.json is written only when missing or stale; where it cannot be, a note says so and the
    commands go on with the same split (its seed fixes it), instead of every command failing."""
    data = _data_dir(tmp_path / "ro_data")
    assert main(["data", "verify", "--data-dir", str(data)]) == 0  # writes the cipher file and the split
    saved = (data / SPLITS_FILE).read_text()
    capsys.readouterr()
    _read_only_file_system(monkeypatch)
    assert main(["data", "verify", "--data-dir", str(data)]) == 0  # up to date: nothing to write
    assert capsys.readouterr().err == ""
    (data / SPLITS_FILE).unlink()
    assert main(["evaluate", "--checkpoint", str(zoo["best"]), "--data-dir", str(data), "--device", "cpu"]) == 0
    err = capsys.readouterr().err
    assert f"cipherlab: note: cannot save the split to {data / SPLITS_FILE} (Read-only file system)" in err
    assert "Traceback" not in err and not (data / SPLITS_FILE).exists()
    monkeypatch.undo()
    assert main(["data", "verify", "--data-dir", str(data)]) == 0 and (data / SPLITS_FILE).read_text() == saved


# --------------------------------------------------------------------------- real processes


def test_the_real_entry_points_print_one_line(zoo):
    for module, argv in (("cipherbook.viva", ["view", str(zoo["missing"])]),
                         ("cipherlab", ["export", "--checkpoint", str(zoo["best"]), "--out",
                                        str(zoo["file"] / "c1.safetensors")])):
        done = subprocess.run([sys.executable, "-m", module, *argv], capture_output=True, text=True, timeout=120,
                              cwd=ROOT, env={k: v for k, v in __import__("os").environ.items()
                                             if k != "CIPHERLAB_DEBUG"})
        assert done.returncode == 1, done.stderr
        _one_clear_line(done.stderr, str(zoo["missing"]) if module == "cipherbook.viva" else str(zoo["file"]))


# --------------------------------------------------------------------------- random bytes

FUZZ = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _clear_or_fine(code: int, err: str, path: Path) -> None:
    """Exit 0, or exit 1 with one line naming ``path``; a note (a byte-order mark) may precede success."""
    assert "Traceback" not in err, err
    if code == 0:
        assert all(line.startswith("cipherlab: note: ") for line in err.splitlines()), err
    else:
        assert code == 1 and err.startswith("cipherlab: error: "), err
        _one_clear_line(err, str(path))


@FUZZ
@given(st.binary(max_size=300) | st.text(max_size=120).map(str.encode))
def test_random_bytes_as_a_data_file(tmp_path, capsys, raw):
    data = tmp_path / "fuzz_data"
    data.mkdir(exist_ok=True)
    (data / PLAIN_FILE).write_bytes(raw)
    (data / CIPHER_FILE).unlink(missing_ok=True)
    code = main(["data", "verify", "--data-dir", str(data)])
    err = capsys.readouterr().err
    _clear_or_fine(code, err, data)


@FUZZ
@given(st.binary(max_size=300) | st.text(max_size=120).map(str.encode))
def test_random_bytes_as_a_predictions_file(tmp_path, capsys, raw):
    plain, pred = tmp_path / "plain.txt", tmp_path / "pred.txt"
    plain.write_text("one line\n")
    pred.write_bytes(raw)
    code = main(["score", "--pred", str(pred), "--plain", str(plain)])
    out, err = capsys.readouterr()
    _clear_or_fine(code, err, tmp_path)
    if code == 0:  # the right answer: a prediction equal to the reference scores 100 %
        text = raw.removeprefix(UTF8_BOM).decode().removesuffix("\n").removesuffix("\r")
        assert ("exact lines         100.00 %" in out) == (text == "one line")


@FUZZ
@given(st.binary(max_size=400), st.sampled_from(["best.pt", "model.safetensors"]))
def test_random_bytes_as_a_checkpoint(tmp_path, capsys, raw, name):
    path = tmp_path / name
    path.write_bytes(raw)
    code = main(["decrypt", "--checkpoint", str(path), "01000001"])
    err = capsys.readouterr().err
    assert code == 1  # random bytes are never a model
    _clear_or_fine(code, err, path)
