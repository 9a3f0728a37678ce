"""`python -m cipherlab score`: anyone's predictions, the book's metrics, in the units others report."""

import json

import pytest

from cipherlab.__main__ import main
from cipherlab.data.cipher import encrypt
from cipherlab.analysis.score import read_text_lines, score_predictions

PLAIN = ["the quick brown fox jumps over the lazy dog " * 3, "a short line", "x" * 70]


@pytest.fixture
def refs(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("".join(line + "\n" for line in PLAIN))
    cipher = tmp_path / "cipher.txt"
    cipher.write_text("".join(encrypt(line) + "\n" for line in PLAIN))
    return plain, cipher


def test_exact_predictions_score_perfectly_in_every_unit():
    result = score_predictions(PLAIN, PLAIN, first=[16], chunks=[32])
    assert result["whole_lines"]["bit_accuracy"] == 1.0 and result["whole_lines"]["sequence_accuracy"] == 1.0
    assert result["first_chars"]["16"]["exact"] == 1.0 and result["chunks"]["32"]["exact"] == 1.0


def test_one_wrong_character_costs_a_whole_line_but_one_chunk_only():
    wrong = [PLAIN[0][:100] + "#" + PLAIN[0][101:], PLAIN[1], PLAIN[2]]
    result = score_predictions(wrong, PLAIN, first=[64], chunks=[32])
    assert result["whole_lines"]["sequence_accuracy"] == pytest.approx(2 / 3)
    assert result["first_chars"]["64"]["exact"] == 1.0  # the error is past character 64
    chunks = result["chunks"]["32"]
    # line 0 has 132 characters: 5 chunks; line 1: 1; line 2: 3 -> 9 chunks, one of them wrong
    assert chunks["chunks"] == 9 and chunks["exact"] == pytest.approx(8 / 9)
    assert chunks["full_chunks"] == 6 and chunks["exact_full_chunks_only"] == pytest.approx(5 / 6)


def test_a_prediction_that_runs_on_is_wrong_in_its_last_chunk():
    result = score_predictions([PLAIN[1] + " and more"], [PLAIN[1]], first=[5], chunks=[32])
    assert result["chunks"]["32"]["exact"] == 0.0 and result["first_chars"]["5"]["exact"] == 1.0


def test_the_command_prints_a_report_and_writes_json(refs, tmp_path, capsys):
    plain, cipher = refs
    pred = tmp_path / "pred.txt"
    pred.write_text("\n".join(PLAIN))  # no trailing newline: not an error
    out = tmp_path / "score.json"
    assert main(["score", "--pred", str(pred), "--cipher", str(cipher), "--json", str(out)]) == 0
    report = capsys.readouterr().out
    assert "exact lines         100.00 %" in report and "chunks of 32 characters" in report
    assert json.loads(out.read_text())["whole_lines"]["lines"] == 3


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "the prediction file is empty"),
        (b"one line\n", "has 1 lines but"),
        (b"ok\nbad \xff byte\nok\n", "line 2: byte 0xff is not UTF-8 text"),
        (b"ok\nok\n\x00\x01\x02\n", "line 3: a NUL byte; this is not a text file"),
    ],
)
def test_bad_prediction_files_get_a_one_line_error_naming_the_file(refs, tmp_path, capsys, content, message):
    plain, _ = refs
    pred = tmp_path / "pred.txt"
    pred.write_bytes(content)
    assert main(["score", "--pred", str(pred), "--plain", str(plain)]) == 1
    err = capsys.readouterr().err
    assert str(pred) in err and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_references_that_disagree_are_refused(refs, tmp_path, capsys):
    plain, cipher = refs
    other = tmp_path / "other.txt"
    other.write_text("".join(line.upper() + "\n" for line in PLAIN))
    pred = tmp_path / "pred.txt"
    pred.write_text("".join(line + "\n" for line in PLAIN))
    assert main(["score", "--pred", str(pred), "--plain", str(other), "--cipher", str(cipher)]) == 1
    assert "line 1: not the encryption of line 1" in capsys.readouterr().err


def test_read_text_lines_keeps_empty_predictions_and_crlf(tmp_path):
    path = tmp_path / "p.txt"
    path.write_bytes(b"a\r\n\r\nc")
    assert read_text_lines(path) == ["a", "", "c"]


def test_default_references_are_the_data_folders_test_split(capsys, tmp_path):
    from cipherlab.data.corpus import load_corpus

    plain, _ = load_corpus().lines("test")
    pred = tmp_path / "pred.txt"
    pred.write_text("".join(line + "\n" for line in plain))
    assert main(["score", "--pred", str(pred)]) == 0
    assert f"{len(plain)} lines" in capsys.readouterr().out
