"""One checksum over the whole model (issue 40, item 2): a saved model's configuration, tokenizers and
records are checked with its tensors, and a stored configuration is checked before any weight is built.

Before, the checksum covered the tensors only: one bit flipped in ``best.pt``'s stored configuration
(``chunk_chars`` 32 -> 48) or another model's configuration in a ``.safetensors`` file decoded silently
to other numbers, and a crafted ``d_model`` was allocated before anything was checked.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from cipherlab.__main__ import main
from cipherlab.runner.integrity import CheckpointError, export_sha256, load_checkpoint
from cipherlab.runner.trained import export_checkpoint, load_trained
from cipherlab.pipeline.checkpoint import payload_sha256, tensors_sha256
from cipherlab.data.cipher import encrypt
from cipherlab.base.config import make_config
from cipherlab.runner.training import train_config

ROOT = Path(__file__).resolve().parents[1]
COMMITTED_C1 = ROOT / "results" / "checkpoints" / "c1.safetensors"
COMMITTED_C2 = ROOT / "results" / "checkpoints" / "c2.safetensors"


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("CIPHERLAB_DEBUG", raising=False)  # the debug switch would show tracebacks


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """One smoke epoch of C1 (chunk_chars 32) and its export."""
    from samples import SAMPLE_LINES

    from cipherlab.data.corpus import CIPHER_FILE, PLAIN_FILE

    root = tmp_path_factory.mktemp("tiny")
    data = root / "data"
    data.mkdir()
    (data / PLAIN_FILE).write_text("".join(x + "\n" for x in SAMPLE_LINES), encoding="latin-1")
    (data / CIPHER_FILE).write_text("".join(encrypt(x) + "\n" for x in SAMPLE_LINES), encoding="latin-1")
    config = make_config("c1", "smoke", max_epochs=1)
    assert config.chunk_chars == 32
    run = train_config(config, root / "run", data_dir=data, device="cpu")
    export = export_checkpoint(run.best_checkpoint, root / "c1.safetensors")
    return {"best": run.best_checkpoint, "export": export, "root": root}


def _copy(path: Path, tmp_path: Path, name: str | None = None) -> Path:
    target = tmp_path / (name or path.name)
    shutil.copyfile(path, target)
    return target


def _one_line(err: str, names: str) -> None:
    assert "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert names in err, (names, err)


def _rewrite_export(source: Path, target: Path, *, config=None, metadata=None) -> dict:
    """``source``'s tensors saved to ``target`` with its metadata changed (checksums as they were)."""
    with safe_open(str(source), framework="pt") as f:
        meta = dict(f.metadata())
        tensors = {key: f.get_tensor(key) for key in f.keys()}
    if config is not None:
        meta["config"] = config
    meta.update(metadata or {})
    save_file(tensors, str(target), metadata=meta)
    return meta


def test_a_flipped_bit_in_a_checkpoints_stored_configuration_is_refused(tiny, tmp_path, capsys):
    """chunk_chars 32 -> 48 (0x20 -> 0x30 in the pickle; torch does not check the zip's CRC)."""
    best = _copy(tiny["best"], tmp_path, "best.pt")
    raw = bytearray(best.read_bytes())
    at = raw.find(b"chunk_chars")
    value = raw.find(b"K\x20", at, at + 24)  # pickle BININT1 32
    assert at > 0 and value > 0
    raw[value + 1] ^= 0x10
    best.write_bytes(bytes(raw))
    assert torch.load(best, weights_only=True)["config"]["chunk_chars"] == 48  # the file still reads
    with pytest.raises(CheckpointError, match="configuration or tokenizers do not match the checksum"):
        load_trained(best, "cpu")
    assert main(["decrypt", "--checkpoint", str(best), encrypt("a plain line")]) == 1
    _one_line(capsys.readouterr().err, f"{best}: its configuration or tokenizers do not match the checksum")


def test_a_changed_tokenizer_or_record_in_a_checkpoint_is_refused(tiny, tmp_path):
    payload = torch.load(tiny["best"], weights_only=True)
    payload["identity"]["data"] = "0" * 64  # another data digest, the tensors' checksum intact
    torch.save(payload, tmp_path / "best.pt")
    with pytest.raises(CheckpointError, match=r"best\.pt: its configuration or tokenizers do not match"):
        load_checkpoint(tmp_path / "best.pt")


def test_a_new_checkpoint_and_export_carry_the_whole_model_checksum(tiny):
    payload = torch.load(tiny["best"], weights_only=True)
    assert payload["model_sha256"] == payload_sha256(payload)
    with safe_open(str(tiny["export"]), framework="pt") as f:
        meta = f.metadata()
    assert meta["model_sha256"] == export_sha256(meta, meta["sha256"])


def test_an_export_with_another_configurations_metadata_is_refused(tiny, tmp_path, capsys):
    with safe_open(str(tiny["export"]), framework="pt") as f:
        config = json.loads(f.metadata()["config"])
    bad = tmp_path / "c1.safetensors"
    _rewrite_export(tiny["export"], bad, config=json.dumps({**config, "chunk_chars": 48}))
    assert main(["decrypt", "--checkpoint", str(bad), encrypt("a plain line")]) == 1
    _one_line(capsys.readouterr().err, f"{bad}: its configuration or tokenizers do not match the checksum")


def test_a_committed_model_with_another_models_configuration_is_refused(tmp_path):
    """The committed exports carry their whole-model checksum (converted once by tools/convert_older.py)."""
    with safe_open(str(COMMITTED_C2), framework="pt") as f:
        c2_config = f.metadata()["config"]
    bad = tmp_path / "c1.safetensors"
    meta = _rewrite_export(COMMITTED_C1, bad, config=c2_config)
    assert meta["model_sha256"]
    with pytest.raises(CheckpointError, match="configuration or tokenizers do not match the checksum"):
        load_trained(bad, "cpu")


def test_the_committed_models_load_checked_without_a_note(capsys):
    for path in (COMMITTED_C1, COMMITTED_C2):
        load_trained(path, "cpu")
    assert capsys.readouterr().err == ""


def test_an_older_export_is_refused_in_one_line_and_the_converter_makes_it_load_as_it_was(tiny, tmp_path, capsys):
    """An export written before the whole-model checksum (or before some configuration fields existed): one line
    naming tools/convert_older.py; converted, it is the same model with both checksums."""
    import importlib.util

    old = tmp_path / "old.safetensors"
    with safe_open(str(tiny["export"]), framework="pt") as f:
        meta = {key: value for key, value in f.metadata().items() if key != "model_sha256"}
        tensors = {key: f.get_tensor(key) for key in f.keys()}
    meta["config"] = json.dumps({k: v for k, v in json.loads(meta["config"]).items() if k != "onset_accuracy"})
    save_file(tensors, str(old), metadata=meta)
    assert main(["decrypt", "--checkpoint", str(old), encrypt("a plain line")]) == 1
    _one_line(capsys.readouterr().err, f"{old}: written by an older cipherlab (no checksum over the whole model); "
                                       f"convert it with tools/convert_older.py from the cipherlab repository: "
                                       f"python tools/convert_older.py {old}")
    spec = importlib.util.spec_from_file_location("convert_older", ROOT / "tools" / "convert_older.py")
    converter = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(converter)
    assert converter.main([str(old)]) == 0
    with safe_open(str(old), framework="pt") as f:
        assert f.metadata()["model_sha256"] and all(torch.equal(f.get_tensor(k), t) for k, t in tensors.items())
    assert load_trained(old, "cpu")[2] == load_trained(tiny["export"], "cpu")[2]
    capsys.readouterr()
    assert main(["decrypt", "--checkpoint", str(old), encrypt("a plain line")]) == 0
    assert main(["decrypt", "--checkpoint", str(tiny["export"]), encrypt("a plain line")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == out[1]


def _crafted_export(tiny, tmp_path: Path, **changes) -> Path:
    """The tiny export with its configuration changed and both checksums made again to fit (a crafted file)."""
    with safe_open(str(tiny["export"]), framework="pt") as f:
        meta = dict(f.metadata())
        tensors = {key: f.get_tensor(key) for key in f.keys()}
    meta["config"] = json.dumps({**json.loads(meta["config"]), **changes})
    meta["sha256"] = tensors_sha256(tensors)
    meta["model_sha256"] = export_sha256(meta, meta["sha256"])
    path = tmp_path / "crafted.safetensors"
    save_file(tensors, str(path), metadata=meta)
    return path


def test_a_crafted_configuration_is_refused_before_any_weight_is_allocated(tiny, tmp_path, monkeypatch):
    import cipherlab.pipeline.codec as codec  # what load_trained's default builder (OWN_MODEL) calls

    def no_real_model(*args, **kwargs):
        assert torch.empty(0).device.type == "meta", "a model was built outside the meta device"
        return real(*args, **kwargs)

    real = codec.build_model
    monkeypatch.setattr(codec, "build_model", no_real_model)
    huge = _crafted_export(tiny, tmp_path, d_model=8192, n_heads=8)
    with pytest.raises(CheckpointError, match=r"larger model than cipherlab builds from a file \(d_model=8192, "
                                              r"at most 4096\)"):
        load_trained(huge, "cpu")
    wider = _crafted_export(tiny, tmp_path, d_model=64, ffn_dim=128)  # in range, but not these weights
    with pytest.raises(CheckpointError, match=r"crafted\.safetensors: its configuration, tokenizers and weights "
                                              r"do not fit together \(.*from the configuration"):
        load_trained(wider, "cpu")


def test_a_crafted_configuration_out_of_range_is_refused_naming_the_file(tiny, tmp_path):
    bad = _crafted_export(tiny, tmp_path, chunk_chars=-32)
    with pytest.raises(CheckpointError, match=r"crafted\.safetensors: .*chunk_chars=-32"):
        load_trained(bad, "cpu")
