"""Model exports (safetensors, no pickle) and the committed reference checkpoints of results/.

The committed C2 and C5 models are the ones the results chapter explores; this file proves
that they load on a CPU from the repository alone and still decrypt test lines.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from cipherlab.pipeline.checkpoint import EXPORT_FORMAT, CheckpointError, export_checkpoint, load_trained
from cipherlab.pipeline.codec import select_lines
from cipherlab.base.config import make_config
from cipherlab.data.corpus import load_corpus
from cipherlab.pipeline.decode import decrypt_lines
from cipherlab.pipeline.metrics import bit_accuracy
from cipherlab.pipeline.train import train_config

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = sorted((ROOT / "results" / "notes" / "checkpoints").glob("*.safetensors"))


@pytest.mark.parametrize("name", ["c2", "c5"])
def test_an_export_decrypts_exactly_as_its_checkpoint(name, sample_dir, tmp_path):
    config = make_config(name, "smoke", max_epochs=1)
    run = train_config(config, tmp_path / "run", data_dir=sample_dir, device="cpu")
    out = export_checkpoint(run.best_checkpoint, tmp_path / f"{name}.safetensors")
    with safe_open(str(out), framework="pt") as f:  # tensors and JSON strings only
        assert f.metadata()["format"] == EXPORT_FORMAT
        assert json.loads(f.metadata()["config"])["name"] == name
    original, codec, _ = load_trained(run.best_checkpoint, "cpu")
    exported, codec2, config2 = load_trained(out, "cpu")
    assert config2 == config
    for (k, a), (k2, b) in zip(original.state_dict().items(), exported.state_dict().items(), strict=True):
        assert k == k2 and torch.equal(a, b)
    _, cipher = select_lines(load_corpus(sample_dir), config).lines("val")
    kwargs = dict(chunk_chars=config.chunk_chars, device=torch.device("cpu"))
    assert decrypt_lines(original, codec, cipher[:3], **kwargs) == decrypt_lines(exported, codec2, cipher[:3], **kwargs)


def test_a_file_that_is_not_an_export_is_refused_by_name(tmp_path):
    bad = tmp_path / "model.safetensors"
    bad.write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_trained(bad, "cpu")
    with pytest.raises(FileNotFoundError, match="missing.safetensors"):
        load_trained(tmp_path / "missing.safetensors", "cpu")
    with pytest.raises(ValueError, match="safetensors"):
        export_checkpoint(tmp_path / "best.pt", tmp_path / "model.bin")


@pytest.mark.skipif(not COMMITTED, reason="no committed checkpoints under results/notes/checkpoints")
@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.stem)
def test_committed_checkpoint_decrypts_test_lines_on_cpu(path):
    """The committed model loads from the repository alone and decrypts the first test lines as
    recorded when it was exported (results/extras.py), most of them exactly right."""
    model, codec, config = load_trained(path, "cpu")
    sample = json.loads(path.with_name(f"{path.stem}.sample.json").read_text(encoding="utf-8"))["lines"]
    plain, cipher = select_lines(load_corpus(ROOT / "data"), config).lines("test")
    assert [x["cipher"] for x in sample] == cipher[: len(sample)]  # the same test lines as at export
    assert [x["reference"] for x in sample] == plain[: len(sample)]
    predictions = decrypt_lines(model, codec, cipher[: len(sample)], chunk_chars=config.chunk_chars,
                                device=torch.device("cpu"), length_aware=True)
    assert predictions == [x["prediction"] for x in sample]
    exact = sum(p == t for p, t in zip(predictions, plain, strict=False))
    assert exact >= len(sample) // 2, (path.name, exact)
    assert bit_accuracy(predictions, cipher[: len(sample)]) >= 0.99


def test_an_old_checkpoint_without_some_fields_exports_every_field_with_its_legacy_value(sample_dir, tmp_path):
    """A checkpoint written before some Config fields existed (or before the defaults became
    make_config("c1")'s) loads, resumes and exports with those fields' LEGACY_DEFAULTS values; the export
    writes every field, so it no longer depends on any default."""
    import dataclasses

    from cipherlab.base.config import LEGACY_DEFAULTS, Config
    from cipherlab.pipeline.checkpoint import load_checkpoint, save_checkpoint

    config = make_config("c1", "smoke", max_epochs=1)
    run = train_config(config, tmp_path / "run", data_dir=sample_dir, device="cpu")
    payload = load_checkpoint(run.best_checkpoint)
    lacking = ("target_tokens", "merges_on", "bpe_dropout", "substitution", "augment_val", "eval_every")
    assert all(getattr(config, f) == LEGACY_DEFAULTS[f] for f in lacking)  # what the old file meant
    assert any(getattr(Config(), f) != LEGACY_DEFAULTS[f] for f in lacking)  # ... which is not today's default
    payload["config"] = {k: v for k, v in payload["config"].items() if k not in lacking}
    old = tmp_path / "old.pt"
    save_checkpoint(old, payload)
    assert load_trained(old, "cpu")[2] == config
    load_checkpoint(old, config=config)  # resumes with the same configuration
    with pytest.raises(CheckpointError, match="bpe_dropout: 0.0 in the checkpoint, 0.1 now"):
        load_checkpoint(old, config=dataclasses.replace(config, bpe_dropout=0.1))
    out = export_checkpoint(old, tmp_path / "old.safetensors")
    with safe_open(str(out), framework="pt") as f:
        stored = json.loads(f.metadata()["config"])
    assert set(stored) >= {f.name for f in dataclasses.fields(Config)} and load_trained(out, "cpu")[2] == config
