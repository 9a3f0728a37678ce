"""The records of the first controlled ablation that learned the cipher (results/learn/ablation): each
seed-0 record names the model it exported, which has left the tree for the commit its folder's README
names; the random strings its numbers count are the ones the generator makes; and its README is what its
generator writes. The committed models that decode as recorded are the reference ones
(tests/test_reference_models.py)."""

import json
import re

import pytest

from cipherlab.analysis import ablation
from cipherlab.analysis.probes import random_strings
from cipherbook.viva import REPO_ROOT

FOLDER = REPO_ROOT / "results" / "learn" / "ablation"
CONFIGS = ("c1", "c2", "c3", "c4", "c5")


@pytest.mark.parametrize("name", CONFIGS)
def test_each_seed0_record_names_a_model_its_readme_says_how_to_get_back(name):
    record = json.loads((FOLDER / f"{name}-seed0.json").read_text(encoding="utf-8"))
    export = record["export"]
    assert export == f"results/learn/ablation/checkpoints/{name}.safetensors"
    assert not (REPO_ROOT / export).exists()  # the model left the tree; the README beside it says where it is
    readme = (REPO_ROOT / export).parent / "README.md"
    commit = re.search(r"\b[0-9a-f]{40}\b", readme.read_text(encoding="utf-8")).group(0)
    assert f"git show {commit}:{export} > {name}.safetensors" in readme.read_text(encoding="utf-8")
    assert f"--export {export}" in record["command"]


@pytest.mark.parametrize("name", CONFIGS)
def test_each_seed0_records_random_string_numbers_add_up_over_the_generators_strings(name):
    """The per-line counts were taken over random_strings(n), the generator the records were made with:
    a line is exact exactly when every one of its characters is right, and the pooled rate is their sum."""
    rand = json.loads((FOLDER / f"{name}-seed0.json").read_text(encoding="utf-8"))["sets"]["random_letters"]
    strings = random_strings(rand["lines"])
    right, exact = rand["right_chars_by_line"], rand["exact_by_line"]
    assert len(right) == len(exact) == len(strings) == rand["lines"]
    assert all(0 <= r <= len(s) for r, s in zip(right, strings))
    assert exact == "".join("1" if r == len(s) else "0" for r, s in zip(right, strings))
    assert exact.count("1") == rand["exact_lines"]
    assert sum(right) / sum(map(len, strings)) == pytest.approx(rand["char_accuracy"], abs=1e-12)


def test_the_ablation_readme_is_what_its_generator_writes_from_the_records():
    runs = ablation.load_learn_runs(FOLDER)
    assert {name for name, _ in runs} == set(CONFIGS) and {seed for _, seed in runs} == {0, 1}
    committed = (FOLDER / "README.md").read_text(encoding="utf-8")
    for table in ablation.learn_tables(runs):
        assert table in committed
    for path in sorted((FOLDER.parent / "bits").glob("*.json")):  # the bits-mode runs beside it
        record = json.loads(path.read_text(encoding="utf-8"))
        assert " | ".join(ablation.learn_row(record)) + " |" in committed
    # the controlled part: every run had the same changes and the same number of epochs
    assert len({r["epochs"] for r in runs.values()}) == 1
    same = ("phase_shuffle", "bit_embeddings", "phase_embedding", "select_on", "max_epochs", "chunk_chars", "lr")
    assert len({tuple(r["hyperparameters"][k] for k in same) for r in runs.values()}) == 1


def test_the_ablation_readme_says_what_the_errors_left_on_random_strings_have_in_common():
    """Every wrong character of C5's fresh random strings is a capital read as its lower-case twin, at a
    key phase whose key byte has bit 5 set: the README's paragraph, as its generator writes it."""
    import importlib.util

    from cipherlab.data.cipher import KEY

    spec = importlib.util.spec_from_file_location("learn_ablation_readme", FOLDER / "make_readme.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = FOLDER / "checkpoints" / "random_errors.json"
    assert module.errors_text(path) in (FOLDER / "README.md").read_text(encoding="utf-8")
    kept = json.loads(path.read_text(encoding="utf-8"))
    wrong = [(i, a, b) for p, r in zip(kept["predictions"], kept["strings"]) for i, (a, b) in enumerate(zip(r, p)) if a != b]
    assert wrong and all(a.isupper() and b == a.lower() for _, a, b in wrong)
    assert all(KEY[i % 8] & 0x20 for i, _, _ in wrong)
