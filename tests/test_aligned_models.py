"""The committed aligned-BPE models (``results/aligned/c*.safetensors``, the seed-0 runs of
``results/aligned``) decode what their records say, line by line; and the README is what its
generator writes from the records."""

import json

import pytest
import torch

from cipherlab.analysis import ablation
from cipherlab.runner.trained import load_trained
from cipherlab.base.config import TOKENIZATIONS, config_from_dict, tokenization_of
from cipherbook.viva import REPO_ROOT
from recorded import assert_decodes_as_recorded, assert_readme_is_generated  # tests/ is on sys.path under pytest

FOLDER = REPO_ROOT / "results" / "aligned"
MODELS = sorted(FOLDER.glob("c*.safetensors"))
FIRST = {"random_letters": 4, "random_alphabet": 4, "stdlib": 4}
BROWN_LINES = 4


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_each_committed_aligned_model_decodes_as_recorded(path):
    record = json.loads((FOLDER / f"aligned-{path.stem}-seed0.json").read_text(encoding="utf-8"))
    torch.set_num_threads(1)
    model, codec, config = load_trained(path, "cpu")
    assert config == config_from_dict(record["hyperparameters"]) and tokenization_of(config) == "aligned"
    assert codec.aligned and len(codec.src.merges) == record["tokens"]["source_merges"] > 0
    assert_decodes_as_recorded(model, codec, config, record, FIRST, BROWN_LINES)


def test_the_aligned_records_are_one_controlled_ablation_and_their_readme_is_generated(tmp_path, monkeypatch):
    runs = ablation.load_learn_runs(FOLDER)
    assert {seed for _, seed in runs} == {0, 1} and len({r["epochs"] for r in runs.values()}) == 1
    assert all(r["recipe"] == "cipher" and r["hyperparameters"]["bpe_dropout"] == TOKENIZATIONS["aligned"]["bpe_dropout"]
               for r in runs.values())
    assert all(r["curve"] for r in runs.values())  # every run has its learning curve
    assert_readme_is_generated(FOLDER, tmp_path, monkeypatch, subfolders=("long",))
