"""One record layout for every run (cipherlab.runner.record) and the conversion of the older ones
(tools/convert_older.py)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from cipherlab.base.config import make_config
from cipherlab.runner.record import RECORD_FIELDS, SCHEMA, check_record, make_record, read_record, set_metrics
from cipherbook.viva import REPO_ROOT

RESULTS = REPO_ROOT / "results"


def _converter():
    spec = importlib.util.spec_from_file_location("convert_older", REPO_ROOT / "tools" / "convert_older.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _committed_records() -> list:
    """Every JSON file under results/ that is a run record of any layout (it has hyperparameters, or a
    test set)."""
    found = []
    for path in sorted(RESULTS.rglob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and any(isinstance(data.get(k), dict) for k in ("hyperparameters", "test",
                                                                                  "brown_test")):
            found.append(path)
    return found


def test_every_committed_run_record_is_in_the_one_layout_and_reads():
    found = _committed_records()
    assert len(found) >= 100  # reference, learn, aligned, merges, nophase, recipe, notes, smoke
    for path in found:
        record = read_record(path)
        assert list(record)[: len(RECORD_FIELDS)] == list(RECORD_FIELDS), path
        assert "test" in record["sets"], path  # every run decrypted its preset's test lines
    assert not list(RESULTS.rglob("*.log.jsonl"))  # every log is inside its record


def test_the_notes_records_test_lines_were_decoded_freely_as_their_conversion_says():
    """Records written before the ``decoding`` field were free greedy: their bit accuracy is errors.json's
    ``test_free`` of the same model, not its length-aware figure."""
    errors = json.loads((RESULTS / "notes" / "cpu" / "errors.json").read_text(encoding="utf-8"))
    for config in ("c1", "c2", "c3", "c4", "c5"):
        test = read_record(RESULTS / "notes" / "cpu" / f"{config}.json")["sets"]["test"]
        assert test["decoding"] == "free greedy"
        assert test["bit_accuracy"] == errors[f"cpu/{config}"]["test_free"]["bit_accuracy"]
        assert test["bit_accuracy"] != errors[f"cpu/{config}"]["test_length_aware"]["bit_accuracy"]
        assert test["exact_lines"] == round(test["sequence_accuracy"] * test["lines"])


def _a_set(lines=4, exact="1101"):
    return set_metrics(["ab", "cd", "xx", "gh"][:lines], ["ab", "cd", "ef", "gh"][:lines],
                       {"bit_accuracy": 0.9, "sequence_accuracy": exact.count("1") / lines, "char_error_rate": 0.1},
                       decoding="length-aware greedy", seconds=1.0)


def test_set_metrics_counts_each_line():
    scored = _a_set()
    assert (scored["lines"], scored["exact_lines"], scored["exact_by_line"]) == (4, 3, "1101")
    assert scored["char_accuracy"] == pytest.approx(6 / 8) and scored["right_chars_by_line"] == [2, 2, 0, 2]


def _record(sets=None, **fields):
    return make_record(make_config("c2", "smoke"), fit={"epochs": 2, "best_epoch": 2, "stopped": "max_epochs"},
                       log=[{"epoch": 1, "seconds": 2.0, "train_tokens": 30},
                            {"epoch": 2, "seconds": 4.0, "train_tokens": 30}],
                       sets=sets or {"test": _a_set()}, **fields)


def test_a_made_record_has_every_field_and_checks():
    record = _record(command="python -m cipherlab train --config c2")
    assert list(record) == list(RECORD_FIELDS) and record["schema"] == SCHEMA
    assert (record["train_seconds"], record["seconds_per_epoch"], record["train_tokens_per_s"]) == (6.0, 3.0, 10.0)
    assert record["components"]["pos_encoding"] == "rope" and record["params"] is None
    assert check_record(json.loads(json.dumps(record)), "x.json") is not None
    with pytest.raises(ValueError, match="make_record: colour is no field"):
        _record(colour="blue")


@pytest.mark.parametrize("damage, message", [
    (lambda r: r.pop("schema"), r"x.json: written by an older cipherlab \(no schema field, not a cipherlab-record/1 "
                                r"record\); convert it with tools/convert_older.py from the cipherlab repository: "
                                r"python tools/convert_older.py x.json"),
    (lambda r: r.update(schema="cipherlab-record/0"), "x.json: schema 'cipherlab-record/0'"),
    (lambda r: r.pop("versions"), r"x.json: missing field\(s\) versions"),
    (lambda r: r.update(sets={}), "x.json: 'sets' holds no decrypted set"),
    (lambda r: r["sets"]["test"].pop("decoding"), "x.json: set test lacks decoding"),
    (lambda r: r["sets"]["test"].update(exact_by_line="11"), "x.json: sets.test.exact_by_line is not one 0/1 per line"),
    (lambda r: r.update(log={"epoch": 1}), "x.json: 'log' is not the list"),
])
def test_a_damaged_record_is_refused_naming_the_file_and_what_is_wrong(damage, message):
    record = _record()
    damage(record)
    with pytest.raises(ValueError, match=message):
        check_record(record, "x.json")
    with pytest.raises(ValueError, match="x.json: holds a JSON list"):
        check_record([], "x.json")


def test_a_file_that_is_not_json_is_one_line_naming_it(tmp_path):
    path = tmp_path / "c1.json"
    path.write_text('{"schema": ', encoding="utf-8")
    with pytest.raises(ValueError, match=r"c1\.json: not valid JSON"):
        read_record(path)


def test_both_older_layouts_convert_into_the_one_record_and_a_second_run_changes_nothing(tmp_path, capsys):
    """Each is refused with one line naming the converter, which converts it (its hyperparameters, written before
    some fields existed, given the values they meant then)."""
    converter = _converter()
    made = _record()
    old_hyper = {k: v for k, v in made["hyperparameters"].items() if k not in ("onset_step", "onset_accuracy")}
    versions = made["versions"]
    train = {"config": "c2", "preset": "smoke", "components": made["components"], "source_mode": "bytes",
             "test": {k: v for k, v in made["sets"]["test"].items() if k not in ("decoding", "char_accuracy",
                                                                                  "exact_lines")},
             "params": 10, "peak_memory_bytes": 5, "seconds_per_epoch": 3.0, "train_tokens_per_s": 7.0,
             "decode_lines_per_s": 4.0, "epochs": 2, "best_epoch": 2, "best_val_loss": 0.5, "stopped": "max_epochs",
             "device": "cpu", "torch_version": versions["torch"], "versions": versions, "git_commit": "abc",
             "seed": 0, "hyperparameters": old_hyper}
    probe = {"name": "p-c2-seed0", "config": "c2", "preset": "smoke", "overrides": {"seed": 0}, "command": "probe",
             "seed": 0, "wall_seconds": 9.0, "epochs": 2, "best_epoch": 2, "stopped": "max_epochs",
             "best_val_loss": 0.5, "best_val_accuracy": 0.9, "params": 10, "log": made["log"], "train_seconds": 6.0,
             "recipe": "cipher", "recipe_caveats": [], "random_strings": _a_set(), "stdlib": _a_set(),
             "brown_test": _a_set(), "brown_test_free": _a_set(), "hyperparameters": old_hyper,
             **versions, "export": "results/checkpoints/c2.safetensors"}
    (tmp_path / "c2.json").write_text(json.dumps(train))
    (tmp_path / "c2.log.jsonl").write_text("".join(json.dumps(row) + "\n" for row in made["log"]))
    (tmp_path / "p-c2-seed0.json").write_text(json.dumps(probe))
    for name in ("c2.json", "p-c2-seed0.json"):
        with pytest.raises(ValueError, match=rf"^{tmp_path / name}: written by an older cipherlab \(no schema field"
                                             rf".*; convert it with tools/convert_older\.py from the cipherlab repository: "
                                             rf"python tools/convert_older\.py {tmp_path / name}$"):
            read_record(tmp_path / name)
    assert converter.main([str(tmp_path / "c2.json"), str(tmp_path / "p-c2-seed0.json")]) == 0
    converted_train, converted_probe = read_record(tmp_path / "c2.json"), read_record(tmp_path / "p-c2-seed0.json")
    assert not (tmp_path / "c2.log.jsonl").exists() and converted_train["log"] == made["log"]
    assert converted_train["sets"]["test"]["decoding"] == "free greedy"
    converted_test = converted_train["sets"]["test"]
    assert converted_test["exact_lines"] == 3 and converted_test["char_accuracy"] is None
    assert (converted_train["train_seconds"], converted_train["name"]) == (6.0, "c2")
    assert set(converted_probe["sets"]) == {"random_letters", "stdlib", "test", "test_free"}
    assert converted_probe["sets"]["test"] == probe["brown_test"] and converted_probe["versions"] == versions
    assert converted_probe["components"] == made["components"] and converted_probe["seconds_per_epoch"] == 3.0
    assert converted_probe["export"] == probe["export"]
    assert "converted" in converted_probe["updates"][-1] and "converted" in converted_train["updates"][-1]
    for converted in (converted_train, converted_probe):  # the fields added since: the values they meant then
        assert converted["hyperparameters"] == json.loads(json.dumps({**made["hyperparameters"], "onset_step": None}))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    capsys.readouterr()
    assert converter.main([str(p) for p in sorted(tmp_path.iterdir())]) == 0
    assert capsys.readouterr().out.count("already in the current layout") == 2
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_record_whose_hyperparameters_lack_a_field_is_refused_naming_the_converter(tmp_path):
    record = _record()
    del record["hyperparameters"]["onset_step"]
    path = tmp_path / "c2.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{path}: written by an older cipherlab \(its hyperparameters have no "
                                         rf"onset_step\); convert it with tools/convert_older\.py from the cipherlab "
                                         rf"repository: python tools/convert_older\.py {path}$"):
        read_record(path)
    assert _converter().main([str(path)]) == 0 and read_record(path)["hyperparameters"]["onset_step"] is None


def test_a_record_made_by_train_and_one_made_for_the_probes_share_every_field():
    """Both writers go through make_record: the same fields, in the same order, whatever the sets."""
    train = _record()
    probe = _record(name="ref-c2-seed0", overrides={"seed": 0}, sets={k: _a_set() for k in ("test", "stdlib")})
    assert list(train) == list(probe) == list(RECORD_FIELDS)
    assert train["sets"].keys() <= probe["sets"].keys()
