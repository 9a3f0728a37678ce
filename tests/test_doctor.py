"""`python -m cipherlab doctor`: cipher or corpus, where the errors are, stopping, cross-attention."""

import contextlib
import io
import json
import shutil
from types import SimpleNamespace

import pytest

from cipherlab.__main__ import main
from cipherlab.analysis.doctor import (CIPHER_MIN_KEPT_SHARE, CLASSES, LEARNED_MIN_CHAR_ACCURACY, PARTLY_MIN_KEPT_SHARE,
                              char_class, diagnose_checkpoint, error_breakdown, probe, random_strings, report,
                              training_alphabet, verdict)
from cipherlab.data.cipher import encrypt
from cipherbook.runs import committed_checkpoint

C2 = committed_checkpoint("c2")
FAST = ["--lines", "12", "--random", "4", "--attention-chunks", "2"]


def test_char_classes():
    assert [char_class(c) for c in "aZ 7,\xe9"] == list(CLASSES)


def test_random_strings_are_seeded_over_the_alphabet_and_never_start_or_end_with_a_space():
    alphabet = list("ab ")
    a, b = random_strings(alphabet, 20, seed=1), random_strings(alphabet, 20, seed=1)
    assert a == b and a != random_strings(alphabet, 20, seed=2)
    assert all(40 <= len(s) <= 120 and set(s) <= set(alphabet) and s[0] != " " != s[-1] for s in a)


def test_the_alphabet_of_a_byte_model_comes_from_its_training_lines():
    byte_codec = SimpleNamespace(kind="blt")  # no target vocabulary
    assert training_alphabet(byte_codec, ["ba c", "a\tb!"]) == [" ", "!", "a", "b", "c"]  # the tab is not printable


def test_probe_and_breakdown_count_position_by_position():
    plain = ["abcdefghij", "XY"]
    pred = ["abcdefghiX", "X"]  # one wrong character at position 9 (phase 1), one missing at position 1
    p = probe(pred, plain, [encrypt(t) for t in plain])
    assert p["char_accuracy"] == pytest.approx(10 / 12) and p["exact_lines"] == 0
    assert (p["wrong_length"], p["too_short"], p["too_long"]) == (1, 1, 0)
    e = error_breakdown(pred, plain, chunk_chars=8)
    assert e["key_phase"]["1"]["errors"] == 2 and e["key_phase"]["1"]["chars"] == 3  # positions 1, 9 and 1
    assert e["chunk_position"]["1"]["errors"] == 2  # 9 mod 8 = 1
    assert e["char_class"]["lower"]["errors"] == 1 and e["char_class"]["upper"]["errors"] == 1
    assert e["line_length"]["1-50"] | {} == {"chars": 12, "errors": 2, "error_rate": 2 / 12, "lines": 2, "exact_lines": 0}


@pytest.fixture(scope="module")
def c2_run(tmp_path_factory):
    """The command on the committed (reference) C2 with FAST settings: (what it printed, the JSON it wrote, the JSON's path)."""
    out = tmp_path_factory.mktemp("doctor") / "doctor.json"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["doctor", "--checkpoint", str(C2), "--json", str(out), *FAST]) == 0
    return printed.getvalue(), json.loads(out.read_text()), out


def test_doctor_on_the_committed_c2_model(c2_run):
    printed, result, _ = c2_run
    for heading in ("(a) cipher or corpus?", "(b) character error rate", "(c) stopping", "(d) decoder cross-attention"):
        assert heading in printed
    a = result["cipher_or_corpus"]
    assert (a["random_strings"]["lines"], a["outside_english"]["lines"], a["test"]["lines"]) == (4, 12, 12)
    assert a["verdict"] in printed
    test = a["test"]
    assert f"{test['exact_lines']}/12" in printed and 0.9 < test["char_accuracy"] <= 1.0
    assert set(result["alphabet"]) >= set("abcXYZ 0123.,")
    assert result["stopping"]["length-aware greedy"]["wrong_length"] == 0  # the constraint always hits the length
    assert sum(v["chars"] for v in result["errors"]["key_phase"].values()) == test["chars"]
    x = result["cross_attention"]
    assert x["last_layer"] == 1 and len(x["diagonal_per_head"]) == 8 and x["chunks"] == 2
    assert 0.0 <= x["diagonal_mean"] <= x["diagonal_best"] <= x["within_one_best"] <= 1.0 + 1e-6
    assert result["checkpoint"]["config"] == "c2" and result["checkpoint"]["params"] == 930_176  # the reference C2


def test_the_report_states_the_verdict_and_its_thresholds(c2_run):
    printed, result, _ = c2_run
    a = result["cipher_or_corpus"]
    assert a["learned"] in ("cipher", "corpus") and a["verdict"] in printed
    assert a["thresholds"] == {"learned_min_char_accuracy": LEARNED_MIN_CHAR_ACCURACY,
                               "cipher_min_kept_share": CIPHER_MIN_KEPT_SHARE,
                               "partly_min_kept_share": PARTLY_MIN_KEPT_SHARE}
    assert "thresholds: neither if test char acc < 50%; else the cipher if random strings keep >= 95%" in printed


@pytest.mark.parametrize(
    "test_acc, random_acc, learned, starts",
    [
        (0.17, 0.02, "neither", "it learned neither the cipher nor the corpus: under 50%"),  # an untrained model
        (0.49, 0.49, "neither", "it learned neither"),
        (0.99, 0.98, "cipher", "it learned the cipher"),
        (0.99, 0.70, "corpus", "partly the cipher"),
        (0.99, 0.10, "corpus", "it leans on the corpus"),
    ],
)
def test_three_verdicts_cipher_corpus_or_neither(test_acc, random_acc, learned, starts):
    """An untrained model that gets 17 % of its own test characters (about what writing spaces gets)
    was once told it "leans on the corpus"; it learned neither."""
    kept, said_learned, said = verdict({"char_accuracy": random_acc}, {"char_accuracy": test_acc}, chance=0.01)
    assert (said_learned, said.startswith(starts)) == (learned, True), said
    assert kept == pytest.approx((random_acc - 0.01) / (test_acc - 0.01))


@pytest.mark.parametrize("name", ["c1", "c5"])
def test_an_untrained_model_learned_neither(name, sample_dir, tmp_path):
    """C1: a BPE over bits whose target vocabulary lacks some of the sample's characters (an <unk>
    token covers one character, not the five of its text: the attention map stays square)."""
    from cipherlab.base.config import make_config
    from cipherlab.runner.training import train_config

    run = train_config(make_config(name, "smoke", max_epochs=1), tmp_path / "run", data_dir=sample_dir, device="cpu")
    result = diagnose_checkpoint(run.best_checkpoint, data_dir=sample_dir, outside=sample_dir, device="cpu",
                                 lines=12, n_random=4, attention_chunks=1)
    a = result["cipher_or_corpus"]
    assert a["test"]["char_accuracy"] < LEARNED_MIN_CHAR_ACCURACY
    assert a["learned"] == "neither" and a["verdict"].startswith("it learned neither")


def test_the_function_behind_the_command_prints_what_the_command_prints(c2_run):
    """The results chapter runs ``print(report(diagnose_checkpoint(CK)))`` and says it is the command's report."""
    printed, written, out = c2_run
    result = diagnose_checkpoint(C2, lines=12, n_random=4, attention_chunks=2)
    assert result | {"seconds": 0} == written | {"seconds": 0}  # the same numbers, but for the time taken
    lines = printed.splitlines()
    assert report(result).splitlines()[:-1] == lines[:-2]  # less the timing line, and "wrote OUT"
    assert lines[-1] == f"wrote {out}"


def test_doctor_help(capsys):
    with pytest.raises(SystemExit) as e:
        main(["doctor", "--help"])
    assert e.value.code == 0
    assert "--checkpoint" in capsys.readouterr().out


def _damaged_copy(tmp_path):
    path = tmp_path / "c2.safetensors"
    shutil.copy(C2, path)
    data = bytearray(path.read_bytes())
    data[-100] ^= 0xFF  # one byte of a tensor
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize(
    "make, extra, message",
    [
        (lambda tmp: tmp / "missing.safetensors", [], "no such model file"),
        (lambda tmp: tmp / "missing.pt", [], "no such checkpoint"),
        (_damaged_copy, [], "the file is damaged"),
        (lambda tmp: (tmp / "junk.safetensors").write_bytes(b"not a model") and tmp / "junk.safetensors", [],
         "not a readable safetensors file"),
        (lambda tmp: (tmp / "best.pt").write_bytes(b"PK\x03\x04 cut short") and tmp / "best.pt", [],
         "not a readable cipherlab checkpoint"),
        (lambda tmp: (tmp / "cut.safetensors").write_bytes(C2.read_bytes()[:3000]) and tmp / "cut.safetensors", [],
         "not a readable safetensors file"),
        (lambda tmp: C2, ["--lines", "0"], "--lines 0: must be at least 1"),
        (lambda tmp: C2, ["--data-dir", "DATA"], "was trained on other data"),
        (lambda tmp: C2, ["--outside", "NOWHERE"], "no plaintext file"),
    ],
)
def test_bad_input_is_one_line(make, extra, message, tmp_path, sample_dir, capsys, monkeypatch):
    monkeypatch.delenv("CIPHERLAB_DEBUG", raising=False)
    path = make(tmp_path)
    extra = [str(sample_dir) if x == "DATA" else str(tmp_path / "nowhere") if x == "NOWHERE" else x for x in extra]
    assert main(["doctor", "--checkpoint", str(path), *FAST, *extra]) == 1
    err = capsys.readouterr().err
    assert err.startswith("cipherlab: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_text_file_as_checkpoint_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("CIPHERLAB_DEBUG", raising=False)
    path = tmp_path / "best.pt"
    path.write_text("not a checkpoint")
    assert main(["doctor", "--checkpoint", str(path), *FAST]) == 1
    err = capsys.readouterr().err
    assert "not a readable cipherlab checkpoint" in err and err.count("\n") == 1
