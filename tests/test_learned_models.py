"""The committed models of the first controlled ablation that learned the cipher (results/learn/ablation) decode what their
records say they decode: random strings (which only a model that learned the cipher can decrypt) and
English from outside Brown (Python's docstrings), line by line, with length-aware greedy decoding."""

import json

import pytest
import torch

from cipherlab.data.cipher import encrypt
from cipherlab.data.corpus import load_pairs
from cipherlab.pipeline.decode import decrypt_lines
from cipherlab.analysis import ablation
from cipherlab.pipeline.checkpoint import load_trained
from cipherlab.analysis.probes import random_strings
from cipherbook.viva import REPO_ROOT

FOLDER = REPO_ROOT / "results" / "learn" / "ablation"
CONFIGS = ("c1", "c2", "c3", "c4", "c5")
STDLIB_LINES = 12  # the first lines of data/stdlib, checked one by one against the record


def _decode(model, codec, config, cipher):
    return decrypt_lines(model, codec, cipher, chunk_chars=config.chunk_chars, device=torch.device("cpu"),
                         token_budget=config.token_budget, max_batch_size=config.max_batch_size, length_aware=True)


def _per_line(pred, plain):
    return "".join("1" if p == r else "0" for p, r in zip(pred, plain)), [
        sum(a == b for a, b in zip(p, r)) for p, r in zip(pred, plain)]


@pytest.mark.parametrize("name", CONFIGS)
def test_each_committed_model_decodes_random_strings_and_stdlib_lines_as_recorded(name):
    record = json.loads((FOLDER / f"{name}-seed0.json").read_text(encoding="utf-8"))
    assert record["export"] == f"results/learn/ablation/checkpoints/{name}.safetensors"
    torch.set_num_threads(1)
    model, codec, config = load_trained(REPO_ROOT / record["export"], "cpu")
    assert (config.phase_shuffle, config.bit_embeddings, config.phase_embedding) == (1.0, True, True)
    assert config.select_on == "val_accuracy" and config.seed == 0

    rand = record["random_strings"]
    strings = random_strings(rand["lines"])  # the generator the records were made with
    exact, right = _per_line(_decode(model, codec, config, [encrypt(s) for s in strings]), strings)
    assert (exact, right) == (rand["exact_by_line"], rand["right_chars_by_line"])
    assert sum(right) / sum(map(len, strings)) == pytest.approx(rand["char_accuracy"], abs=1e-12)

    plain, cipher = load_pairs(REPO_ROOT / "data" / "stdlib")
    std = record["stdlib"]
    exact, right = _per_line(_decode(model, codec, config, cipher[:STDLIB_LINES]), plain[:STDLIB_LINES])
    assert exact == std["exact_by_line"][:STDLIB_LINES]
    assert right == std["right_chars_by_line"][:STDLIB_LINES]


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
