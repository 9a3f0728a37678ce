"""The assignment preset trained on this CPU (``results/assignment-cpu``): each record is the preset at its
own sizes with learned merges for C1-C4 and a learning curve; each committed float16 model decodes what
its record says, line by line; and the README is what its generator writes from the records."""

import dataclasses
import json

import pytest
import torch

from cipherlab.base.config import CONFIG_NAMES, config_from_dict, make_config
from cipherlab.runner.trained import load_trained
from cipherbook.viva import REPO_ROOT
from recorded import assert_decodes_as_recorded, assert_readme_is_generated  # tests/ is on sys.path under pytest

FOLDER = REPO_ROOT / "results" / "assignment-cpu"
MODELS = sorted((FOLDER / "checkpoints").glob("c*.safetensors"))
FIRST = {"random_letters": 3, "stdlib": 3}
BROWN_LINES = 3


def test_the_records_are_the_assignment_preset_at_its_own_sizes_with_learned_merges_and_curves():
    records = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(FOLDER.glob("*-seed*.json"))]
    assert sorted((r["config"], r["seed"]) for r in records) == [("c1", 0), ("c1", 1), *((c, 0) for c in CONFIG_NAMES[1:])]
    for r in records:
        preset = make_config(r["config"], "assignment", seed=r["seed"])
        stored = config_from_dict(r["hyperparameters"])
        # only the run's length and its validation cadence differ from the preset
        assert dataclasses.replace(stored, max_epochs=100, time_budget_s=None, eval_every=None, max_eval_lines=None) == preset
        assert r["curve"] and r["sets"]["test"]["lines"] == 500
        if r["config"] != "c5":
            assert r["tokens"]["source_merges"] > 0


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_each_committed_float16_model_decodes_as_recorded(path):
    record = json.loads((FOLDER / f"{path.stem}-seed0.json").read_text(encoding="utf-8"))
    torch.set_num_threads(1)
    model, codec, config = load_trained(path, "cpu")
    assert config == config_from_dict(record["hyperparameters"])
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert_decodes_as_recorded(model, codec, config, record, FIRST, BROWN_LINES)


def test_the_readme_is_generated(tmp_path, monkeypatch):
    assert_readme_is_generated(FOLDER, tmp_path, monkeypatch)
