"""Tests for the train / evaluate / decrypt / ablate commands of `python -m cipherlab`."""

import json

import pytest

from cipherlab.__main__ import main
from cipherlab.data.cipher import encrypt

from cipherlab.runner.record import RECORD_FIELDS, SCHEMA

RESULT_KEYS = set(RECORD_FIELDS)
TEST_KEYS = {"bit_accuracy", "sequence_accuracy", "levenshtein", "bleu", "chrf", "rouge1", "rouge2", "rougeL"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One smoke-preset C1 run on the little sample corpus: (data dir, run dir, results dir, what train printed)."""
    import contextlib
    import io

    from samples import SAMPLE_LINES  # what the (function-scoped) sample_dir fixture writes

    root = tmp_path_factory.mktemp("cli")
    data = root / "data"
    data.mkdir()
    (data / "brown_plain.txt").write_text("".join(x + "\n" for x in SAMPLE_LINES), encoding="latin-1")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["train", "--config", "c1", "--preset", "smoke", "--data-dir", str(data), "--device", "cpu",
                     "--out", str(root / "run"), "--results-dir", str(root / "results")])  # fmt: skip
    assert code == 0
    return data, root / "run", root / "results", printed.getvalue()


def test_train_writes_results_with_the_documented_keys_and_a_table(trained):
    _, run, results, _ = trained
    record = json.loads((results / "smoke" / "c1.json").read_text())
    assert RESULT_KEYS <= set(record) and TEST_KEYS <= set(record["sets"]["test"]) and record["schema"] == SCHEMA
    assert record["config"] == "c1" and record["preset"] == "smoke" and record["device"] == "cpu"
    assert [row["epoch"] for row in record["log"]] == list(range(1, record["epochs"] + 1))  # the log, inline
    assert (results / "smoke" / "table.md").exists() and (results / "smoke" / "table.csv").exists()
    assert {p.name for p in run.iterdir()} >= {"best.pt", "last.pt", "log.jsonl"}


def test_evaluate_reproduces_the_metrics_logged_by_training(trained, capsys):
    data, run, results, _ = trained
    logged = json.loads((results / "smoke" / "c1.json").read_text())["sets"]["test"]
    capsys.readouterr()
    assert main(["evaluate", "--checkpoint", str(run / "best.pt"), "--data-dir", str(data), "--device", "cpu"]) == 0
    printed = capsys.readouterr().out
    again = json.loads(printed)
    assert {k: again[k] for k in TEST_KEYS} == {k: logged[k] for k in TEST_KEYS}
    assert f'"right_chars_by_line": {json.dumps(logged["right_chars_by_line"])}' in printed  # one line, not one per line
    assert again["decoding"] == logged["decoding"] == "length-aware greedy"  # one default for both commands


def test_train_and_evaluate_print_one_figure_per_measure_labelled_with_its_decoding(trained, capsys):
    """Train and evaluate once printed different bit accuracies for one checkpoint (free vs length-aware
    greedy) without saying which; now both print the same line, naming its decoding."""
    data, run, _, train_printed = trained
    capsys.readouterr()
    assert main(["evaluate", "--checkpoint", str(run / "best.pt"), "--data-dir", str(data), "--device", "cpu"]) == 0
    summary = capsys.readouterr().err.strip()
    assert summary.startswith("test lines, length-aware greedy decoding: bit accuracy ")
    assert summary in train_printed  # train's last line is the same figures, the same label
    assert main(["evaluate", "--checkpoint", str(run / "best.pt"), "--data-dir", str(data), "--device", "cpu",
                 "--free"]) == 0  # fmt: skip
    assert capsys.readouterr().err.startswith("test lines, free greedy decoding: bit accuracy ")


def test_decrypt_says_which_decoding_on_stderr_and_prints_only_plaintext_on_stdout(trained, capsys):
    _, run, _, _ = trained
    capsys.readouterr()
    assert main(["decrypt", "--checkpoint", str(run / "best.pt"), encrypt("Hi there")]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 1 and err.startswith("cipherlab: length-aware greedy decoding (")
    assert main(["decrypt", "--checkpoint", str(run / "best.pt"), "--free", encrypt("Hi there")]) == 0
    assert capsys.readouterr().err.startswith("cipherlab: free greedy decoding (")


def test_evaluate_places_eos_where_the_cipher_says_unless_free(trained, capsys):
    data, run, _, _ = trained
    capsys.readouterr()
    assert main(["evaluate", "--checkpoint", str(run / "best.pt"), "--data-dir", str(data), "--device", "cpu"]) == 0
    assert json.loads(capsys.readouterr().out)["decoding"] == "length-aware greedy"


def test_decrypt_stops_each_line_at_the_length_its_cipher_fixes(trained, tmp_path, capsys):
    """An untrained smoke model decodes garbage, but of exactly the right length by default."""
    _, run, _, _ = trained
    texts = ["oral exam", "a line that does not end in a full stop", "x"]
    (tmp_path / "in.txt").write_text("".join(encrypt(t) + "\n" for t in texts))
    capsys.readouterr()
    assert main(["decrypt", "--checkpoint", str(run / "best.pt"), "--input", str(tmp_path / "in.txt")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [len(line) for line in lines] == [len(t) for t in texts]


def test_decrypt_prints_one_line_per_cipher_line(trained, tmp_path, capsys):
    _, run, _, _ = trained
    capsys.readouterr()
    assert main(["decrypt", "--checkpoint", str(run / "best.pt"), encrypt("Hi there")]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
    (tmp_path / "in.txt").write_text(encrypt("one") + "\n" + encrypt("two two") + "\n")
    assert main(["decrypt", "--checkpoint", str(run / "best.pt"), "--input", str(tmp_path / "in.txt")]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_training_into_a_folder_that_holds_a_run_needs_resume_or_overwrite(trained, capsys):
    data, run, results, _ = trained
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
        (["train", "--config", "c1", "--preset", "smoke", "--set", "d_model=abc"],
         "--set d_model=abc: d_model takes a whole number, not 'abc'"),
        (["train", "--config", "c1", "--preset", "smoke", "--set", "lr=fast"], "--set lr=fast: lr takes a number"),
        (["train", "--config", "c1", "--preset", "smoke", "--set", "no_such=1"], "unknown Config field 'no_such'"),
        (["train", "--config", "c1", "--preset", "smoke", "--set", "rope_cross_attention=perhaps"],
         "rope_cross_attention takes true or false"),
        (["train", "--config", "c1", "--preset", "smoke", "--set", "max_epochs=0"],
         "max_epochs=0: must be at least 1"),
        (["decrypt", "--checkpoint", "x.pt", "--beam", "0", "01000001"], "--beam 0: the beam size is at least 1"),
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
    data, _, _, _ = trained
    code = main(["ablate", "--preset", "smoke", "--configs", "c4", "--data-dir", str(data), "--device", "cpu",
                 "--runs-dir", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "results")])  # fmt: skip
    assert code == 0
    table = (tmp_path / "results" / "smoke" / "table.md").read_text()
    assert "| c4 | norm=rmsnorm |" in table


def test_user_runs_write_results_under_runs_not_into_the_committed_results():
    from cipherlab.__main__ import build_parser

    parser = build_parser()
    assert parser.parse_args(["train", "--config", "c1"]).results_dir == "runs"
    assert parser.parse_args(["ablate"]).results_dir == "runs"
    assert parser.parse_args(["train", "--config", "c1", "--results-dir", "results"]).results_dir == "results"


def test_typed_set_values_reach_the_config():
    from cipherlab.base.config import parse_field

    assert parse_field("src_vocab", "null") is None and parse_field("src_vocab", "512") == 512
    assert parse_field("lr", "1e-3") == 1e-3 and parse_field("rope_cross_attention", "false") is False
    assert parse_field("betas", "0.9,0.98") == (0.9, 0.98) and parse_field("pos_encoding", "rope") == "rope"


def _flip_last_byte(path):
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # inside the last tensor's data, after the JSON header
    path.write_bytes(bytes(data))


def test_a_damaged_export_is_refused_with_a_clear_error(tmp_path, capsys):
    from cipherbook.viva import REPO_ROOT

    damaged = tmp_path / "c2.safetensors"
    damaged.write_bytes((REPO_ROOT / "results" / "checkpoints" / "c2.safetensors").read_bytes())
    _flip_last_byte(damaged)
    assert main(["decrypt", "--checkpoint", str(damaged), encrypt("Hi")]) == 1
    err = capsys.readouterr().err
    assert f"{damaged}: its tensors do not match the checksum" in err and "Traceback" not in err


def test_an_export_without_a_checksum_is_refused(tmp_path, capsys):
    from safetensors import safe_open
    from safetensors.torch import save_file

    from cipherbook.viva import REPO_ROOT

    with safe_open(str(REPO_ROOT / "results" / "checkpoints" / "c2.safetensors"), framework="pt") as f:
        meta = {k: v for k, v in f.metadata().items() if k != "sha256"}
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    old = tmp_path / "old.safetensors"
    save_file(tensors, str(old), metadata=meta)
    assert main(["decrypt", "--checkpoint", str(old), encrypt("Hi")]) == 1
    assert "no tensor checksum" in capsys.readouterr().err


def test_decrypt_help_names_the_exported_models_the_readme_passes(capsys):
    with pytest.raises(SystemExit):
        main(["decrypt", "--help"])
    assert ".safetensors" in capsys.readouterr().out


def test_train_that_has_not_left_chance_by_the_onset_step_stops_with_one_line(sample_dir, tmp_path, capsys):
    """A run whose validation accuracy is still below onset_accuracy at onset_step stops there (what keeps a
    GPU hour from training a flat curve), exit 1, one line naming the step, the accuracy and the way out."""
    code = main(["train", "--config", "c1", "--preset", "smoke", "--data-dir", str(sample_dir), "--device", "cpu",
                 "--out", str(tmp_path / "run"), "--results-dir", str(tmp_path / "results"),
                 "--set", "onset_step=2", "--set", "onset_accuracy=0.99"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1, err
    assert err[0].startswith("cipherlab: error: c1: teacher-forced validation accuracy is ") and "at step 2" in err[0]
    assert "onset_step=null" in err[0] and "Traceback" not in err[0]
    assert (tmp_path / "run" / "last.pt").exists() and not (tmp_path / "results" / "smoke" / "c1.json").exists()
