"""The codecs, the one model builder, and the one-way flow of the package's imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cipherlab.codec import build_model
from cipherlab.config import CONFIG_NAMES, make_config
from cipherlab.data import make_chunks
from cipherlab.models import Seq2SeqTransformer
from cipherlab.models.blt import BLTModel
from cipherlab.tokenizers.bytes import PAD_ID, VOCAB_SIZE

PACKAGE = Path(__file__).resolve().parents[1] / "cipherlab"

# The way a line of data travels, first to last. A module may import modules of its own stage
# or of an earlier one, never of a later one. (The codec builds the models, so the models come
# first; data and tokenizers import each other's constants.)
FLOW = [
    {"cipherlab", "cipherlab.cipher", "cipherlab.config", "cipherlab.device", "cipherlab.brown",
     "cipherlab.letters", "cipherlab.docstrings", "cipherlab.tables", "cipherlab.errors"},
    {"cipherlab.data", "cipherlab.tokenizers"},
    {"cipherlab.models"},
    {"cipherlab.codec", "cipherlab.parts"},
    {"cipherlab.checkpoint"},
    {"cipherlab.train", "cipherlab.plan"},
    {"cipherlab.decode"},
    {"cipherlab.metrics", "cipherlab.evaluate", "cipherlab.score", "cipherlab.probes"},
    {"cipherlab.results", "cipherlab.attention_maps", "cipherlab.broken", "cipherlab.explorers",
     "cipherlab.doctor", "cipherlab.cli", "cipherlab.viva", "cipherlab.__main__",
     "cipherlab.check", "cipherlab.report"},
]


def _stage_of(module: str) -> str:
    """The FLOW entry a module belongs to: ``cipherlab.models.blt`` -> ``cipherlab.models``."""
    return ".".join(module.split(".")[:2])


def _imports(path: Path) -> set[str]:
    """Every cipherlab module ``path`` imports, at the top or inside a function, absolute or relative."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = parts if path.name == "__init__.py" else parts[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # from cipherlab import train
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m == "cipherlab" or m.startswith("cipherlab.")}


def test_the_package_imports_flow_one_way():
    stage = {name: i for i, names in enumerate(FLOW) for name in names}
    backwards, unplaced = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        module = _stage_of(".".join(p for p in parts if p != "__init__"))
        if module not in stage:
            unplaced.append(module)
            continue
        for imported in _imports(path):
            target = _stage_of(imported)
            if target in stage and stage[target] > stage[module]:
                backwards.append(f"{path.relative_to(PACKAGE.parent)} imports {imported}")
    assert not unplaced, f"modules with no place in tests/test_codec.py FLOW: {sorted(set(unplaced))}"
    assert not backwards, "imports against the flow of the package:\n" + "\n".join(backwards)


@pytest.mark.parametrize("name", ["decode", "evaluate", "metrics", "results"])
def test_nothing_after_training_imports_the_training_module(name):
    imported = _imports(PACKAGE / f"{name}.py")
    assert not {m for m in imported if m == "cipherlab.train" or m.startswith("cipherlab.train.")}


@pytest.mark.parametrize("name", CONFIG_NAMES)
def test_build_model_builds_each_configuration_from_its_config(name):
    config = make_config(name, "smoke", recipe="notes")  # free embedding rows: no codec needed
    model = build_model(config, vocab_sizes=(VOCAB_SIZE, VOCAB_SIZE), pad_id=PAD_ID)
    assert isinstance(model, BLTModel if config.tokenization == "blt" else Seq2SeqTransformer)
    if name == "c3":
        assert model.encoder.layers[0].self_attn.n_kv_heads == config.n_kv_heads


def test_build_model_without_a_codec_needs_the_vocabulary():
    with pytest.raises(ValueError, match="vocab_sizes"):
        build_model(make_config("c1", "smoke"))
    with pytest.raises(ValueError, match="bit_embeddings"):
        build_model(make_config("c1", "smoke", bit_embeddings=True), vocab_sizes=(VOCAB_SIZE, VOCAB_SIZE), pad_id=0)


def test_make_chunks_cuts_a_cipher_alone_as_it_cuts_a_pair():
    plain = ["", "abcdefghijklmnopq", "x" * 16]
    cipher = ["", "01" * 68, "10" * 64]
    paired = make_chunks(plain, cipher, range(3), 8)
    alone = make_chunks(None, cipher, range(3), 8)
    assert [(c.line, c.part, c.cipher) for c in alone] == [(c.line, c.part, c.cipher) for c in paired]
    assert all(c.plain == "" for c in alone)
