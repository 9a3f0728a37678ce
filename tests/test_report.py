"""``python -m cipherlab report``: the results chapter's tables for anyone's runs. On the committed reference runs it
reproduces the results chapter's main table cell for cell; on prediction files it finds the errors where they are; bad
input is one line naming the file and the fix; it never writes inside the committed ``results/``."""

import json
import shutil
from pathlib import Path

import pytest

from cipherlab.base.config import RECIPE_KNOWLEDGE, make_config
from cipherlab.data.cipher import encrypt
from cipherlab.pipeline.metrics import compute_metrics
from cipherlab.runner.record import make_record, read_record, set_metrics

from cipherlab.analysis import report

from cipherlab.analysis import ablation
from cipherlab.runner.errors import run_command
from cipherlab.cli import report as report_cli
from cipherlab.cli.common import OneLineParser

RESULTS = ablation.REPO_RESULTS_DIR
REFERENCE = RESULTS / "reference"
NOTES = RESULTS / "notes" / "cpu"


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("CIPHERLAB_DEBUG", raising=False)  # the debug switch would show tracebacks


def _run(*argv: str) -> int:
    """``report ARGV`` through the parser its register_cli builds, as ``python -m cipherlab`` runs commands."""
    parser = OneLineParser(prog="cipherlab")
    report_cli.register_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["report", *argv])
    return run_command("cipherlab", args.func, args)


def _tables(markdown: str) -> list[list[list[str]]]:
    """Every Markdown table of a text as rows of cells (the header row first, the |---| row left out)."""
    tables, rows = [], []
    for line in [*markdown.splitlines(), ""]:
        if line.startswith("|"):
            if not set(line) <= set("|-"):
                rows.append(line.strip()[2:-2].split(" | "))
        elif rows:
            tables.append(rows)
            rows = []
    return tables


def _table_with_header(text: str, header: list[str]) -> list[list[str]]:
    found = [t for t in _tables(text) if t[0] == header]
    assert len(found) == 1, f"{len(found)} tables with the header {header}"
    return found[0]


def _only_tables_and_figures(text: str) -> None:
    """report.md holds headings, captions, tables and figure links, and one comment that asks for the
    student's findings first: no sentences of its own."""
    assert f"# cipherlab report\n\n## Findings\n\n{report.FINDINGS_PROMPT}\n" in text
    for line in text.splitlines():
        assert not line or line.startswith(("#", "|", "*Table ", "*Figure ", "![Figure ", "<!-- ")), line
        if line.startswith("*"):
            assert line.endswith("*"), line


@pytest.fixture(scope="module")
def reference_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference") / "report"
    assert _run(str(REFERENCE), "--out", str(out)) == 0
    return out


# --------------------------------------------------------------------------- the reference runs: the chapter's tables


def test_the_reference_report_has_chapter_9s_main_table_cell_for_cell(reference_report):
    text = (reference_report / report.REPORT_FILE).read_text(encoding="utf-8")
    # what the results chapter calls
    chapter, _goals = ablation.reference_tables(ablation.load_learn_runs(REFERENCE))
    expected = _tables(chapter)[0]
    got = _table_with_header(text, expected[0])
    assert len(got) == len(expected) == 11  # the header and ten runs
    for row_got, row_expected in zip(got, expected):
        assert row_got == row_expected


def test_the_reference_report_has_chapter_9s_paired_tests_and_goals(reference_report):
    text = (reference_report / report.REPORT_FILE).read_text(encoding="utf-8")
    runs = ablation.load_learn_runs(REFERENCE)
    rows = ablation.paired_rows(runs)
    paired = _tables(ablation.paired_table(rows))[0]
    assert _table_with_header(text, paired[0]) == paired
    goals = _tables(ablation.reference_tables(runs)[1])[0]
    assert _table_with_header(text, goals[0]) == goals
    summary = _table_with_header(text, ["tests", "p < 0.05", "Bonferroni threshold (0.05 / tests)", "p below it",
                                        "lowest p", "where"])
    assert summary[1][:2] == [str(len(rows)), "1"] and summary[1][-1] == "C2, seed 1, docstrings"  # section 9.2


def test_the_reference_report_holds_only_tables_and_figures_and_says_what_is_missing(reference_report):
    text = (reference_report / report.REPORT_FILE).read_text(encoding="utf-8")
    _only_tables_and_figures(text)
    for title in ("## What the recipe hands the model", "## Results", "## Paired comparisons",
                  "## Random-string probe", "## Free or length-aware", "## Training curves", "## Not available"):
        assert title in text
    recipe = _table_with_header(text, ["part", "value", "what it knows"])
    assert ["`phase_embedding`", "True", RECIPE_KNOWLEDGE["phase_embedding"]] in recipe
    assert "## Where the errors are" not in text  # the records keep no per-character errors
    missing = _table_with_header(text, ["section", "input", "lacks"])
    assert [row[0] for row in missing[1:]] == ["Where the errors are"]
    assert (reference_report / report.CURVES_FILE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "](curves.png)" in text
    free = _table_with_header(text, ["config", "seed", "lines", "free: bit acc %", "length-aware: bit acc %",
                                     "free: characters %", "length-aware: characters %", "free: exact",
                                     "length-aware: exact", "length-aware vs free"])
    assert ["C4", "1", "500"] == free[8][:3] and free[8][-3:] == ["499 of 500", "500 of 500", "+1 −0, p = 1"]


def test_the_learn_ablation_gets_chapter_9s_table_of_it(tmp_path):
    folder = RESULTS / "learn" / "ablation"
    assert _run(str(folder), "--out", str(tmp_path / "out")) == 0
    text = (tmp_path / "out" / report.REPORT_FILE).read_text(encoding="utf-8")
    expected = _tables(ablation.learn_tables(ablation.load_learn_runs(folder))[0])[0]
    assert _table_with_header(text, expected[0]) == expected


# --------------------------------------------------------------------------- train/ablate records


def test_train_records_get_the_comparison_table_curves_and_errors_json(tmp_path, capsys):
    assert _run(str(NOTES), "--out", str(tmp_path / "out")) == 0
    assert "report.md: " in capsys.readouterr().out
    text = (tmp_path / "out" / report.REPORT_FILE).read_text(encoding="utf-8")
    _only_tables_and_figures(text)
    expected = _tables(ablation.comparison_table(NOTES))[0]
    assert _table_with_header(text, expected[0]) == expected
    decoding = _tables(ablation.decoding_table(ablation.load_errors(NOTES)))[0]
    assert _table_with_header(text, decoding[0]) == decoding
    assert "worst key phase: × mean" in text and "line length, characters" in text
    assert (tmp_path / "out" / report.CURVES_FILE).is_file()
    missing = [row[0] for row in _table_with_header(text, ["section", "input", "lacks"])[1:]]
    # the notes records keep no exact_by_line; the recipe's fields they hold are the notes' recipe
    assert missing == ["Paired comparisons against the baseline", "Random-string probe"]
    assert "| `phase_shuffle` | 0.0 |" in text and "| `select_on` | val_loss |" in text
    assert "exact lines: reading" in text  # the unpaired comparison of the results chapter instead


LINES = ["The first line.", "A second one, 1961.", "Third", "and the fourth line here"]
LOG = [{"epoch": 1, "step": 10, "train_loss": 2.0, "val_loss": 0.5, "seconds": 60.0, "train_tokens": 1000},
       {"epoch": 2, "step": 20, "train_loss": 1.0, "val_loss": 0.25, "seconds": 50.0, "train_tokens": 1000}]


def _scored(wrong=(), decoding="length-aware greedy", lines=LINES) -> dict:
    """One set of a record (set_metrics): ``lines`` decoded with the first character of those at ``wrong`` wrong."""
    pred = [("#" + line[1:]) if i in wrong else line for i, line in enumerate(lines)]
    metrics = compute_metrics(pred, lines, [encrypt(line) for line in lines])
    return set_metrics(pred, lines, metrics, decoding=decoding, seconds=0.5)


def _write_record(folder: Path, file: str, config: str, sets: dict, seed: int = 0, log=LOG) -> None:
    """A record as train/ablate and results/learn/probe.py write it (make_record), as ``folder/file``."""
    fit = {"epochs": len(log), "best_epoch": len(log), "best_val_loss": 0.25, "best_val_accuracy": 0.99,
           "stopped": "max_epochs", "params": 1000}
    record = make_record(make_config(config, "smoke", seed=seed), fit=fit, log=log, sets=sets)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / file).write_text(json.dumps(record), encoding="utf-8")


def test_train_records_that_keep_per_line_outcomes_get_mcnemar(tmp_path):
    runs = tmp_path / "runs"
    for name, wrong in (("c1", (2,)), ("c2", (0, 1, 2))):
        _write_record(runs, f"{name}.json", name, {"test": _scored(wrong, "free greedy")})
    built = report.build_report(runs)
    text = built.markdown()
    assert "3 → 1 of 4 (+0 −2, p = 0.5)" in text
    assert [row[0] for row in built.missing] == ["Where the errors are", "Random-string probe",
                                                 "Free or length-aware decoding"]
    assert "| C2 | 0 | test lines, free greedy | free greedy | 4 |" in text  # every unit, chrF and all:
    _table_with_header(text, ["config", "seed", "set", "decoding", "lines", "bit acc %", "characters %", "CER %",
                              "exact lines", "exact lines %", "Levenshtein", "chrF", "BLEU", "ROUGE-1", "ROUGE-2",
                              "ROUGE-L"])


def test_train_and_probe_records_go_through_one_path(tmp_path, monkeypatch):
    """A folder written by train/ablate (c1.json, one test set) and one written by results/learn/probe.py
    (<name>-c1-seed0.json, several sets, two seeds) are read by one loader into the same sections."""
    train, probe = tmp_path / "train", tmp_path / "probe"
    for name, wrong in (("c1", ()), ("c2", (1,)), ("c3", (0, 1))):
        _write_record(train, f"{name}.json", name, {"test": _scored(wrong, "free greedy")})
        for seed in (0, 1):
            _write_record(probe, f"mine-{name}-seed{seed}.json", name, seed=seed,
                          log=LOG if (name, seed) != ("c3", 1) else [],
                          sets={"random_letters": _scored(wrong, lines=["qzx wvk", "jjj"]), "stdlib": _scored(),
                                "test": _scored(wrong), "test_free": _scored(wrong, "free greedy")})
    calls = []
    monkeypatch.setattr(report, "_paired", lambda *a, _f=report._paired: calls.append(a[-1]) or _f(*a))
    built = {folder.name: report.build_report(folder) for folder in (train, probe)}
    assert calls == [train, probe]
    for got in built.values():
        assert dict(got.inputs)["kind"] == "run records (cipherlab-record/1)"
        assert [b.caption.split(" ")[0] for b in got.sections[report.PAIRED]] == ["Exact", "McNemar's"]
        assert got.sections[report.RESULTS] and got.sections[report.CURVES]
    assert "4 → 3 of 4 (+0 −1, p = 1)" in built["train"].markdown()
    text = built["probe"].markdown()
    # random letters, docstrings (every line right in both), Brown free: each set all records hold
    assert "| C2 | 1 | 2 → 1 of 2 (+0 −1, p = 1) | 4 → 4 of 4 (+0 −0, p = 1) | 4 → 3 of 4 (+0 −1, p = 1) |" in text
    assert [row[0] for row in built["probe"].missing] == ["Where the errors are", "Training curves"]
    assert built["probe"].missing[-1][2].endswith("in C3 seed 1")  # its record kept no log
    assert built["probe"].sections[report.RANDOM] and built["probe"].sections[report.DECODING]


# --------------------------------------------------------------------------- prediction files

REFS = ["The Quick brown fox jumps over the lazy dog, 1961.", "Short line.", "a" * 120, "Another Line here",
        "x" * 250]


@pytest.fixture
def predictions(tmp_path):
    """c1.txt exact; c2.txt with a capital read as lower case at position 4 (key phase 4) and a line cut after
    10 of its 17 characters ("Another Li|ne here")."""
    folder = tmp_path / "preds"
    folder.mkdir()
    refs = tmp_path / "plain.txt"
    refs.write_text("\n".join(REFS) + "\n", encoding="utf-8")
    (folder / "c1.txt").write_text("\n".join(REFS) + "\n", encoding="utf-8")
    wrong = list(REFS)
    wrong[0] = wrong[0][:4] + "q" + wrong[0][5:]
    wrong[3] = wrong[3][:10]
    (folder / "c2.txt").write_text("\n".join(wrong), encoding="utf-8")  # no final newline: fine
    return folder, refs


def test_prediction_files_are_scored_compared_and_their_errors_located(predictions, tmp_path):
    folder, refs = predictions
    assert _run(str(folder), "--references", str(refs), "--out", str(tmp_path / "out")) == 0
    text = (tmp_path / "out" / report.REPORT_FILE).read_text(encoding="utf-8")
    _only_tables_and_figures(text)
    whole = _table_with_header(text, ["predictions", "lines", "bit acc %", "characters %", "CER %", "exact lines",
                                      "exact lines %", "wrong length", "Levenshtein", "chrF", "BLEU", "ROUGE-L"])
    assert whole[1][:2] == ["C1", "5"] and whole[1][5] == "5 of 5" and whole[2][5] == "3 of 5"
    assert whole[2][7] == "1"  # one line of the wrong length
    assert "5 → 3 of 5 (+0 −2, p = 0.5)" in text  # McNemar's exact test against C1
    phases = _table_with_header(text, ["key phase", "C1: error % (wrong)", "C2: error % (wrong)"])
    wrong_by_phase = [int(row[2].split("(")[1].rstrip(")")) for row in phases[1:]]
    assert sum(wrong_by_phase) == 1 + 7 and phases[5][2].endswith("(2)")  # phase 4: the capital and one cut char
    classes = _table_with_header(text, ["class", "characters", "C1: error % (wrong)", "C2: error % (wrong)"])
    assert classes[1][0] == "capital" and classes[1][3].endswith("(1)")  # the Q; the cut line keeps its L
    assert classes[2][0] == "lowercase" and classes[2][3].endswith("(6)")  # "nehere" cut off
    lengths = _table_with_header(text, ["line length, characters", "lines", "C1: exact % (independent %)",
                                        "C2: exact % (independent %)"])
    assert [row[:2] for row in lengths[1:]] == [["0–99", "3"], ["100–199", "1"], ["200–399", "1"]]
    missing = [row[0] for row in _table_with_header(text, ["section", "input", "lacks"])[1:]]
    assert missing == ["Random-string probe", "Free or length-aware decoding", "Training curves"]


def test_the_references_file_may_sit_among_the_predictions(predictions, tmp_path):
    folder, refs = predictions
    shutil.copy(refs, folder / "plain.txt")
    built = report.build_report(folder, folder / "plain.txt")
    assert [row[1] for row in built.inputs if row[0] == "prediction files"] == ["c1.txt, c2.txt"]


# --------------------------------------------------------------------------- bad input: one line each


def _copy_reference(folder: Path, *names: str, edit=lambda name, record: None) -> None:
    """Copies of committed reference records, each changed by ``edit(name, record)``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        record = read_record(REFERENCE / name)
        edit(name, record)
        (folder / name).write_text(json.dumps(record), encoding="utf-8")


def _smoke(name: str, record: dict) -> None:
    if name == "ref-c2-seed0.json":
        record["preset"] = "smoke"


def _fewer_lines(name: str, record: dict) -> None:
    if name == "ref-c2-seed0.json":
        stdlib = record["sets"]["stdlib"]
        outcomes = stdlib["exact_by_line"][:499]  # its totals agree with its lines: a record whole, only shorter
        stdlib.update(lines=499, exact_by_line=outcomes, exact_lines=outcomes.count("1"),
                      sequence_accuracy=outcomes.count("1") / 499)


def _old_layout(name: str, record: dict) -> None:
    """The layout before cipherlab-record/1: each set a top-level field under its old name, no schema."""
    if name == "ref-c2-seed0.json":
        old = {"random_letters": "random_strings", "test": "brown_test", "test_free": "brown_test_free"}
        for key, scored in record.pop("sets").items():
            record[old.get(key, key)] = scored
        record.pop("schema")
        record.update(record.pop("versions"))


def _bad_inputs(tmp: Path) -> dict[str, tuple[list[str], list[str]]]:
    """name -> (command line after 'report', words its one-line error must hold)."""
    out = str(tmp / "out")
    (tmp / "empty").mkdir()
    _copy_reference(tmp / "presets", "ref-c1-seed0.json", "ref-c2-seed0.json", edit=_smoke)
    _copy_reference(tmp / "two-runs", "ref-c1-seed0.json")
    shutil.copy(REFERENCE / "ref-c1-seed0.json", tmp / "two-runs" / "learn-c1-seed0.json")
    _copy_reference(tmp / "kinds", "ref-c1-seed0.json")
    shutil.copy(NOTES / "c1.json", tmp / "kinds" / "c1.json")
    _copy_reference(tmp / "broken", "ref-c1-seed0.json")
    (tmp / "broken" / "ref-c2-seed0.json").write_text('{"config": "c2", "seed": 0,', encoding="utf-8")
    _copy_reference(tmp / "lines", "ref-c1-seed0.json", "ref-c2-seed0.json", edit=_fewer_lines)
    _copy_reference(tmp / "old", "ref-c1-seed0.json", "ref-c2-seed0.json", edit=_old_layout)
    (tmp / "preds").mkdir()
    (tmp / "plain.txt").write_text("one\ntwo\nthree\n", encoding="utf-8")
    (tmp / "preds" / "c1.txt").write_text("one\ntwo\n", encoding="utf-8")
    return {
        "missing folder": ([str(tmp / "nowhere"), "--out", out], ["nowhere: no such folder"]),
        "empty folder": ([str(tmp / "empty"), "--out", out], ["empty: no run records", "c1.json"]),
        "mixed presets": ([str(tmp / "presets"), "--out", out], ["different presets", "ref-c2-seed0.json: smoke"]),
        "two runs": ([str(tmp / "two-runs"), "--out", out], ["learn-c1-seed0.json and ref-c1-seed0.json",
                                                             "C1 seed 0", "own folder"]),
        "one model by two writers": ([str(tmp / "kinds"), "--out", out], ["c1.json and ref-c1-seed0.json",
                                                                          "C1 seed 0", "own folder"]),
        "malformed JSON": ([str(tmp / "broken"), "--out", out], ["ref-c2-seed0.json: not valid JSON", "line 1"]),
        "different lines": ([str(tmp / "lines"), "--out", out], ["different numbers of docstrings lines"]),
        "old layout": ([str(tmp / "old"), "--out", out], ["ref-c2-seed0.json: written by an older cipherlab",
                                                          "convert it with tools/convert_older.py from the cipherlab repository: "
                                                          "python tools/convert_older.py"]),
        "short predictions": ([str(tmp / "preds"), "--references", str(tmp / "plain.txt"), "--out", out],
                              ["c1.txt: 2 lines but", "plain.txt has 3", "one predicted line per reference line"]),
        "no predictions": ([str(tmp / "empty"), "--references", str(tmp / "plain.txt"), "--out", out],
                           ["no prediction files"]),
        "predictions without references": ([str(tmp / "preds"), "--out", out], ["--references"]),
    }


BAD = ["missing folder", "empty folder", "mixed presets", "two runs", "one model by two writers", "malformed JSON",
       "different lines", "old layout", "short predictions", "no predictions", "predictions without references"]


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_line_naming_the_file_and_the_fix(case, tmp_path, capsys):
    argv, words = _bad_inputs(tmp_path)[case]
    assert _run(*argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("cipherlab: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, (word, err)
    assert not (tmp_path / "out").exists()  # nothing written


def test_bad_input_raises_for_callers_too(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such folder"):
        report.build_report(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no run records"):
        report.build_report(tmp_path / "empty")


# --------------------------------------------------------------------------- where the report may go


def test_the_committed_results_folder_is_never_written(capsys):
    out = REFERENCE / "my-report"
    assert not out.exists()
    assert _run(str(REFERENCE), "--out", str(out), "--force") == 1
    err = capsys.readouterr().err
    assert "inside the repository's committed results folder" in err and err.count("\n") == 1
    assert not out.exists()
    with pytest.raises(ValueError, match="committed results"):
        report.check_out(RESULTS)


def test_a_folder_that_is_not_empty_needs_force(reference_report, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n", encoding="utf-8")
    assert _run(str(REFERENCE), "--out", str(out)) == 1
    assert "not empty" in capsys.readouterr().err and not (out / report.REPORT_FILE).exists()
    assert _run(str(REFERENCE), "--out", str(out), "--force") == 0
    assert (out / report.REPORT_FILE).read_text(encoding="utf-8") == \
        (reference_report / report.REPORT_FILE).read_text(encoding="utf-8")
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine\n"  # only the report's own files written


def test_register_cli_adds_the_report_command_like_check():
    parser = OneLineParser(prog="cipherlab")
    report_cli.register_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["report", "runs/cpu", "--out", "/tmp/x"])
    assert args.func is report_cli._cmd_report and args.references is None and args.baseline == "c1"
    assert args.chunk_chars == report.DEFAULT_CHUNK_CHARS and not args.force
