"""The five committed models (``results/checkpoints``, the reference ablation's seed-0 runs,
``results/reference``) decode what their records say, on every set of ``cipherlab.analysis.probes`` and on
Brown's test lines, line by line; and the reference README is what its generator writes."""

import json

import pytest
import torch

from cipherlab.analysis import ablation
from cipherlab.runner.trained import load_trained
from cipherlab.base.config import CONFIG_NAMES, config_from_dict, make_config
from cipherbook.viva import REPO_ROOT
from recorded import assert_decodes_as_recorded, assert_readme_is_generated  # tests/ is on sys.path under pytest

FOLDER = REPO_ROOT / "results" / "reference"
CHECKPOINTS = REPO_ROOT / "results" / "checkpoints"
FIRST = {"random_letters": 6, "random_alphabet": 6, "stdlib": 6, "stdlib_upper": 4, "stdlib_long": 1}
BROWN_LINES = 6


def _record(name: str) -> dict:
    matches = sorted(FOLDER.glob(f"*{name}-seed0.json"))
    assert len(matches) == 1, f"one seed-0 record of {name} in {FOLDER}"
    return json.loads(matches[0].read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", CONFIG_NAMES)
def test_each_committed_model_decodes_every_probe_set_as_recorded(name):
    record = _record(name)
    torch.set_num_threads(1)
    model, codec, config = load_trained(CHECKPOINTS / f"{name}.safetensors", "cpu")
    # the committed model is the record's, trained by the default recipe
    assert config == config_from_dict(record["hyperparameters"]) and config.recipe == "cipher"
    assert config == make_config(name, "cpu", time_budget_s=config.time_budget_s, max_epochs=config.max_epochs)
    assert_decodes_as_recorded(model, codec, config, record, FIRST, BROWN_LINES)


def test_the_reference_readme_is_what_its_generator_writes_from_the_records(tmp_path, monkeypatch):
    runs = ablation.load_learn_runs(FOLDER)
    assert {name for name, _ in runs} == set(CONFIG_NAMES) and {seed for _, seed in runs} == {0, 1}
    assert all(r["recipe"] == "cipher" for r in runs.values())
    assert len({r["epochs"] for r in runs.values()}) == 1  # the same epochs for all: a controlled ablation
    assert_readme_is_generated(FOLDER, tmp_path, monkeypatch)


def test_mcnemar_is_exact_on_the_discordant_lines():
    assert ablation.mcnemar("1111", "1111") == (0, 0, 1.0)
    only_a, only_b, p = ablation.mcnemar("1" * 10 + "0", "0" * 10 + "1")
    assert (only_a, only_b) == (10, 1) and p == pytest.approx(2 * 12 / 2 ** 11)
    with pytest.raises(ValueError, match="same lines"):
        ablation.mcnemar("10", "1")


def test_every_record_kept_for_the_course_notes_recipe_is_that_recipe():
    records = sorted((REPO_ROOT / "results" / "notes").rglob("c[1-5].json"))
    assert len(records) >= 5 + 4 + 5 + 2  # cpu, cpu-bits, equal-epochs/cpu, extended/cpu
    for path in records:
        hyper = json.loads(path.read_text(encoding="utf-8"))["hyperparameters"]
        assert config_from_dict(hyper).recipe == "notes", path
    # the course notes' C2 and C5 left the tree; the configurations their records keep are that recipe's too
    probes = json.loads((REPO_ROOT / "results" / "notes" / "checkpoints" / "probes.json").read_text(encoding="utf-8"))
    assert sorted(probes["models"]) == ["c2", "c5"]
    for name, kept in probes["models"].items():
        assert config_from_dict(kept["config"]).recipe == "notes", name
        assert kept["doctor"]["checkpoint"]["path"] == f"results/notes/checkpoints/{name}.safetensors"
