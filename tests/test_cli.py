"""Tests for the train / evaluate / decrypt / ablate commands of `python -m cipherlab`."""

import json

import pytest

from cipherlab.__main__ import main
from cipherlab.cipher import encrypt

RESULT_KEYS = {
    "config", "preset", "test", "params", "peak_memory_bytes", "seconds_per_epoch",
    "train_tokens_per_s", "epochs", "device", "torch_version", "git_commit", "seed",
}  # fmt: skip
TEST_KEYS = {"bit_accuracy", "sequence_accuracy", "levenshtein", "bleu", "chrf", "rouge1", "rouge2", "rougeL"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One smoke-preset C1 run on the little sample corpus: (data dir, run dir, results dir)."""
    from samples import SAMPLE_LINES  # what the (function-scoped) sample_dir fixture writes

    root = tmp_path_factory.mktemp("cli")
    data = root / "data"
    data.mkdir()
    (data / "brown_plain.txt").write_text("".join(x + "\n" for x in SAMPLE_LINES), encoding="latin-1")
    code = main(["train", "--config", "c1", "--preset", "smoke", "--data-dir", str(data), "--device", "cpu",
                 "--out", str(root / "run"), "--results-dir", str(root / "results")])  # fmt: skip
    assert code == 0
    return data, root / "run", root / "results"


def test_train_writes_results_with_the_documented_keys_and_a_table(trained):
    _, run, results = trained
    record = json.loads((results / "smoke" / "c1.json").read_text())
    assert RESULT_KEYS <= set(record) and TEST_KEYS <= set(record["test"])
    assert record["config"] == "c1" and record["preset"] == "smoke" and record["device"] == "cpu"
    assert (results / "smoke" / "table.md").exists() and (results / "smoke" / "table.csv").exists()
    assert {p.name for p in run.iterdir()} >= {"best.pt", "last.pt", "log.jsonl"}


def test_evaluate_reproduces_the_metrics_logged_by_training(trained, capsys):
    data, run, results = trained
    logged = json.loads((results / "smoke" / "c1.json").read_text())["test"]
    capsys.readouterr()
    assert main(["evaluate", "--checkpoint", str(run / "best.pt"), "--data-dir", str(data), "--device", "cpu"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert {k: again[k] for k in TEST_KEYS} == {k: logged[k] for k in TEST_KEYS}


def test_decrypt_prints_one_line_per_cipher_line(trained, tmp_path, capsys):
    _, run, _ = trained
    capsys.readouterr()
    assert main(["decrypt", "--checkpoint", str(run / "best.pt"), encrypt("Hi there")]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
    (tmp_path / "in.txt").write_text(encrypt("one") + "\n" + encrypt("two two") + "\n")
    assert main(["decrypt", "--checkpoint", str(run / "best.pt"), "--input", str(tmp_path / "in.txt")]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_training_into_a_folder_that_holds_a_run_needs_resume_or_overwrite(trained, capsys):
    data, run, results = trained
    code = main(["train", "--config", "c1", "--preset", "smoke", "--data-dir", str(data), "--out", str(run),
                 "--results-dir", str(results)])  # fmt: skip
    assert code != 0 and "pass --resume to continue it" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--config", "c9", "--preset", "smoke"], "unknown configuration 'c9': choose one of c1, c2, c3, c4, c5"),
        (["train", "--config", "c1", "--preset", "huge"], "unknown preset 'huge'"),
        (["ablate", "--preset", "smoke", "--configs", "c1,c7"], "unknown configuration 'c7'"),
        (["evaluate", "--checkpoint", "no/such/best.pt"], "no/such/best.pt: no such checkpoint"),
        (["decrypt", "--checkpoint", "no/such/best.pt", "01000001"], "no/such/best.pt: no such checkpoint"),
        (["decrypt", "--checkpoint", "x.pt", "--input", "no/such/file.txt"], "no/such/file.txt: no such input file"),
        (["decrypt", "--checkpoint", "x.pt", "0100000a"], "BITS: character 'a' at position 7 is not a bit"),
        (["decrypt", "--checkpoint", "x.pt", "0100000"], "BITS: cipher length 7 is not a multiple of 8"),
    ],
)
def test_bad_input_gets_a_one_line_error_and_a_nonzero_exit(argv, message, capsys):
    code = main(argv)
    err = capsys.readouterr().err
    assert code != 0
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_bad_line_in_an_input_file_is_named(tmp_path, capsys):
    path = tmp_path / "in.txt"
    path.write_text("01000001\n0100 0001\n")
    assert main(["decrypt", "--checkpoint", "x.pt", "--input", str(path)]) != 0
    assert f"{path}, line 2: character ' ' at position 4 is not a bit" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["train", "evaluate", "decrypt", "ablate"])
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0 and "usage:" in capsys.readouterr().out


def test_ablate_trains_each_configuration_in_its_own_process_and_writes_the_table(trained, tmp_path):
    data, _, _ = trained
    code = main(["ablate", "--preset", "smoke", "--configs", "c4", "--data-dir", str(data), "--device", "cpu",
                 "--runs-dir", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "results")])  # fmt: skip
    assert code == 0
    table = (tmp_path / "results" / "smoke" / "table.md").read_text()
    assert "| c4 | norm=rmsnorm |" in table
