"""``export --hub``: a Hugging Face model folder that loads back, with a card whose scores are the record's.

Everything here runs without a network: the folder, its card and the loader. The upload (``--push``) is the one
call the tests cannot make; what they check is that without a token or the package it says so in one line and
leaves the folder whole.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import pytest
import torch
import yaml

from cipherlab.__main__ import main
from cipherlab.data.cipher import encrypt
from cipherlab.runner.integrity import CheckpointError
from cipherlab.runner.trained import load_trained
from cipherlab.pipeline.decode import decrypt_lines
from cipherlab.runner.hub import CARD_METRICS, export_model_folder

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = ROOT / "results" / "assignment-cpu"
LINES = ["The cat sat on the mat.", "Hello, World!"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A smoke-preset C1 run trained by the CLI in the default layout: runs/smoke/c1/best.pt and runs/smoke/c1.json."""
    from samples import SAMPLE_LINES

    root = tmp_path_factory.mktemp("hub")
    data = root / "data"
    data.mkdir()
    (data / "brown_plain.txt").write_text("".join(x + "\n" for x in SAMPLE_LINES), encoding="latin-1")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["train", "--config", "c1", "--preset", "smoke", "--data-dir", str(data), "--device", "cpu",
                     "--out", str(root / "runs" / "smoke" / "c1"), "--results-dir", str(root / "runs")]) == 0
    return root / "runs" / "smoke" / "c1" / "best.pt", root / "runs" / "smoke" / "c1.json"


def _decode(path, lines=LINES):
    model, codec, config = load_trained(path, "cpu")
    return decrypt_lines(model, codec, [encrypt(x) for x in lines], chunk_chars=config.chunk_chars,
                         device=torch.device("cpu"))


def test_a_folder_exported_from_best_pt_loads_and_decodes_as_the_checkpoint(trained, tmp_path, capsys):
    best, record_path = trained
    assert main(["export", "--checkpoint", str(best), "--hub", str(tmp_path / "c1")]) == 0
    printed = capsys.readouterr().out
    assert str(record_path) in printed  # the record found beside the run folder, and said
    folder = tmp_path / "c1"
    assert {p.name for p in folder.iterdir()} == {"model.safetensors", "config.json", "README.md",
                                                  "src_tokenizer.json", "tgt_tokenizer.json"}
    assert _decode(folder) == _decode(best)
    record = json.loads(record_path.read_text(encoding="utf-8"))
    card = (folder / "README.md").read_text(encoding="utf-8")
    meta = yaml.safe_load(card.split("---")[1])
    assert meta["library_name"] == "cipherlab" and "c1" in meta["tags"] and meta["datasets"] == ["brown"]
    assert record["command"] in card
    metrics = meta["model-index"][0]["results"][0]["metrics"]
    test = record["sets"]["test"]
    expected = [(f"{label}, {test['decoding']} decoding", test[key]) for key, _, label in CARD_METRICS
                if isinstance(test.get(key), (int, float))]
    assert [(m["name"], m["value"]) for m in metrics] == expected and len(expected) >= 8


def test_a_committed_model_and_its_record_make_a_folder_that_decodes_as_the_file(tmp_path):
    model = ASSIGNMENT / "checkpoints" / "c2.safetensors"
    folder = export_model_folder(model, tmp_path / "c2", record=ASSIGNMENT / "c2-seed0.json")
    assert (folder / "model.safetensors").read_bytes() == model.read_bytes()  # the export travels as it is
    assert _decode(folder) == _decode(model)
    assert "assignment preset" in (folder / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("edit, named", [("config.json", "config.json"), ("src_tokenizer.json", "src_tokenizer.json")])
def test_a_copy_beside_the_model_that_disagrees_with_it_is_refused_by_name(trained, tmp_path, edit, named):
    folder = export_model_folder(trained[0], tmp_path / "m")
    path = folder / edit
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('"d_model": 32', '"d_model": 64').replace('"version": 1', '"version": 2'),
                    encoding="utf-8")
    assert path.read_text(encoding="utf-8") != text
    with pytest.raises(CheckpointError, match=f"{named}: .*export the folder again"):
        load_trained(folder, "cpu")


def test_a_record_of_another_model_is_refused(tmp_path):
    with pytest.raises(ValueError, match="a record of another model \\(name is 'c1' there, 'c5' in the model\\)"):
        export_model_folder(ASSIGNMENT / "checkpoints" / "c5.safetensors", tmp_path / "c5",
                            record=ASSIGNMENT / "c1-seed0.json")
    assert not (tmp_path / "c5").exists()  # refused before anything was written


@pytest.mark.parametrize("argv, message", [
    (["--hub", "{tmp}/a", "--out", "{tmp}/a.safetensors"], "--out and --hub each name where the model goes"),
    (["--out", "{tmp}/a.safetensors", "--push", "me/x"], "--push goes with --hub DIR"),
    ([], "pass --out FILE.safetensors for one model file, or --hub DIR"),
    (["--hub", str(ROOT / "results" / "hub-c1")], "inside the repository's committed results"),
])
def test_export_options_that_do_not_go_together_get_one_line(trained, tmp_path, capsys, argv, message):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(["export", "--checkpoint", str(trained[0]), *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (ROOT / "results" / "hub-c1").exists()


def test_a_folder_that_is_not_empty_is_not_written_into(trained, tmp_path, capsys):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine", encoding="utf-8")
    assert main(["export", "--checkpoint", str(trained[0]), "--hub", str(tmp_path / "full")]) == 1
    assert "not an empty folder" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["notes.txt"]


def test_push_without_a_token_says_what_to_do_and_keeps_the_folder(trained, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no stored login
    assert main(["export", "--checkpoint", str(trained[0]), "--hub", str(tmp_path / "c1"), "--push", "me/c1"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no Hugging Face token" in err and "hf auth login" in err
    assert (tmp_path / "c1" / "model.safetensors").exists() and _decode(tmp_path / "c1")


def test_push_without_the_package_names_the_extra(trained, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails as if it were not installed
    assert main(["export", "--checkpoint", str(trained[0]), "--hub", str(tmp_path / "c1"), "--push", "me/c1"]) == 1
    assert "pip install 'cipherlab[hub]'" in capsys.readouterr().err
