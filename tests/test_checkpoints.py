"""Model exports (safetensors, no pickle) and the committed reference models of results/.

The committed models are the reference ones, ``results/checkpoints/c1..c5.safetensors`` (the reference
ablation's seed-0 runs), and the aligned-BPE ablation's ``results/aligned/c1..c4.safetensors``; this file
proves that they load on a CPU from the repository alone and still decrypt test lines, and that the
models that left the tree are named where they went.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from cipherlab.runner.integrity import EXPORT_FORMAT, CheckpointError
from cipherlab.runner.trained import export_checkpoint, load_trained
from cipherlab.pipeline.codec import select_lines
from cipherlab.base.config import CONFIG_NAMES, Config, config_from_dict, make_config
from cipherlab.data.corpus import load_corpus
from cipherlab.pipeline.decode import decrypt_lines
from cipherlab.pipeline.metrics import bit_accuracy
from cipherlab.runner.training import train_config
from cipherbook.runs import committed_checkpoint

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = [committed_checkpoint(name) for name in CONFIG_NAMES]  # the book's reference models, results/checkpoints
FIRST_TEST_LINES = 8
# the folders whose models left the tree, and the files each README must name
GONE = {"results/notes/checkpoints": ["c2", "c5"],
        "results/learn/ablation/checkpoints": ["c1", "c2", "c3", "c4", "c5"]}


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


def test_a_half_export_stores_float16_weights_and_loads_them_as_float32(sample_dir, tmp_path):
    """``half=True`` (``export --half``) halves the weights on disk, keeps the checksum over what is
    stored, and the loader widens them back: each weight is the float32 one rounded to float16."""
    config = make_config("c1", "smoke", max_epochs=1)
    run = train_config(config, tmp_path / "run", data_dir=sample_dir, device="cpu")
    full = export_checkpoint(run.best_checkpoint, tmp_path / "full.safetensors")
    half = export_checkpoint(run.best_checkpoint, tmp_path / "half.safetensors", half=True)
    with safe_open(str(half), framework="pt") as f:
        dtypes = {f.get_tensor(k).dtype for k in f.keys() if k.startswith("model.")}
    assert dtypes == {torch.float16}
    assert half.stat().st_size < 0.6 * full.stat().st_size
    original, _, _ = load_trained(full, "cpu")
    widened, _, config2 = load_trained(half, "cpu")
    assert config2 == config
    for (k, a), (k2, b) in zip(original.state_dict().items(), widened.state_dict().items(), strict=True):
        assert k == k2 and b.dtype == a.dtype
        assert torch.equal(b, a.half().to(a.dtype)) if a.is_floating_point() else torch.equal(a, b)


def test_a_file_that_is_not_an_export_is_refused_by_name(tmp_path):
    bad = tmp_path / "model.safetensors"
    bad.write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_trained(bad, "cpu")
    with pytest.raises(FileNotFoundError, match="missing.safetensors"):
        load_trained(tmp_path / "missing.safetensors", "cpu")
    with pytest.raises(ValueError, match="safetensors"):
        export_checkpoint(tmp_path / "best.pt", tmp_path / "model.bin")


def test_the_committed_models_are_the_reference_and_the_aligned_ones_each_with_its_whole_model_checksum():
    """Only the reference models, the aligned-BPE ablation's and the CPU-trained assignment models are
    committed, each carrying both checksums and every configuration field."""
    found = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "results").rglob("*.safetensors"))
    assert found == sorted([f"results/aligned/c{k}.safetensors" for k in range(1, 5)]
                           + [f"results/checkpoints/{name}.safetensors" for name in CONFIG_NAMES]
                           + [f"results/assignment-cpu/checkpoints/{name}.safetensors" for name in CONFIG_NAMES])
    fields = {f.name for f in dataclasses.fields(Config)} | {"recipe"}
    for path in found:
        with safe_open(str(ROOT / path), framework="pt") as f:
            metadata = f.metadata()
        assert metadata["sha256"] and metadata["model_sha256"] and set(json.loads(metadata["config"])) == fields


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.stem)
def test_committed_checkpoint_decrypts_test_lines_on_cpu(path):
    """The committed reference model loads from the repository alone and decrypts the first test lines
    on a CPU, every one exactly, as its run's record says (all of Brown's test lines exact, seed 0)."""
    torch.set_num_threads(1)
    model, codec, config = load_trained(path, "cpu")
    assert config.name == path.stem and config.recipe == "cipher" and config.seed == 0
    plain, cipher = select_lines(load_corpus(ROOT / "data"), config).lines("test")
    predictions = decrypt_lines(model, codec, cipher[:FIRST_TEST_LINES], chunk_chars=config.chunk_chars,
                                device=torch.device("cpu"), length_aware=True)
    assert predictions == plain[:FIRST_TEST_LINES], path.name
    assert bit_accuracy(predictions, cipher[:FIRST_TEST_LINES]) == 1.0


@pytest.mark.parametrize("folder", GONE)
def test_a_folder_whose_models_left_the_tree_says_where_they_were(folder):
    """Its README names the commit that last held each file and the command that gets it back; the
    models are gone from the tree, their records stay."""
    text = (ROOT / folder / "README.md").read_text(encoding="utf-8")
    commits = set(re.findall(r"\b[0-9a-f]{40}\b", text))
    assert len(commits) == 1, commits
    commit = commits.pop()
    for name in GONE[folder]:
        path = f"{folder}/{name}.safetensors"
        assert not (ROOT / path).exists(), f"{path} is back in the tree"
        assert f"git show {commit}:{path} > {name}.safetensors" in text
        try:  # the commit holds the file (unless a shallow clone lacks that history)
            known = subprocess.run(["git", "cat-file", "-e", commit], cwd=ROOT, capture_output=True).returncode == 0
            held = subprocess.run(["git", "cat-file", "-e", f"{commit}:{path}"], cwd=ROOT, capture_output=True)
        except OSError:  # no git
            continue
        assert held.returncode == 0 or not known, f"{commit} does not hold {path}"


def test_the_kept_samples_of_the_course_notes_models_are_of_the_test_lines_the_split_holds():
    """The samples stay as records (chapter 9's exercise reads one): the same test lines as at export,
    and the decryptions probes.json keeps of them agree with the sample."""
    probes = json.loads((ROOT / "results" / "notes" / "checkpoints" / "probes.json").read_text(encoding="utf-8"))
    assert sorted(probes["models"]) == ["c2", "c5"]
    for name, kept in probes["models"].items():
        config = config_from_dict(kept["config"])
        assert config.name == name and config.recipe == "notes"
        sample = json.loads((ROOT / "results" / "notes" / "checkpoints" / f"{name}.sample.json")
                            .read_text(encoding="utf-8"))["lines"]
        plain, cipher = select_lines(load_corpus(ROOT / "data"), config).lines("test")
        assert [x["cipher"] for x in sample] == cipher[: len(sample)]
        assert [x["reference"] for x in sample] == plain[: len(sample)]
        assert [x["prediction"] for x in sample] == kept["test_lines"][: len(sample)]  # one model, one decoding
        assert len(kept["test_lines"]) == 30 and kept["doctor"]["checkpoint"]["config"] == name


def test_an_old_checkpoint_is_refused_in_one_line_and_the_converter_gives_its_fields_the_values_it_meant(
        sample_dir, tmp_path, capsys):
    """A checkpoint written before some Config fields existed (or before the defaults became make_config("c1")'s)
    is refused with one line naming tools/convert_older.py; the converter writes each field it lacks with the
    value the file meant (the defaults of its time, not today's), the weights as they were; it then loads,
    resumes and exports as the run it was."""
    from cipherlab.runner.integrity import load_checkpoint
    from cipherlab.pipeline.checkpoint import save_checkpoint

    config = make_config("c1", "smoke", max_epochs=1)
    run = train_config(config, tmp_path / "run", data_dir=sample_dir, device="cpu")
    payload = load_checkpoint(run.best_checkpoint)
    lacking = ("target_tokens", "merges_on", "bpe_dropout", "substitution", "augment_val", "eval_every",
               "onset_step", "onset_accuracy")
    assert any(getattr(Config(), f) != getattr(config, f) for f in lacking)  # the old value is not today's default
    payload["config"] = {k: v for k, v in payload["config"].items() if k not in lacking}
    old = tmp_path / "old.pt"
    save_checkpoint(old, payload)
    with pytest.raises(CheckpointError, match=rf"^{old}: written by an older cipherlab \(its configuration has no "
                                              rf"target_tokens, .*\); convert it with tools/convert_older\.py from the "
                                              rf"cipherlab repository: python tools/convert_older\.py "
                                              rf"{old}$"):
        load_trained(old, "cpu")
    converter = _converter()
    assert converter.main([str(old)]) == 0 and converter.main([str(old)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{old}: converted", f"{old}: already in the current layout"]
    converted = load_checkpoint(old, config=config)  # resumes with the same configuration
    assert all(torch.equal(converted["model"][k], v) for k, v in payload["model"].items())
    assert load_trained(old, "cpu")[2] == config
    with pytest.raises(CheckpointError, match="bpe_dropout: 0.0 in the checkpoint, 0.1 now"):
        load_checkpoint(old, config=dataclasses.replace(config, bpe_dropout=0.1))
    out = export_checkpoint(old, tmp_path / "old.safetensors")
    with safe_open(str(out), framework="pt") as f:
        stored = json.loads(f.metadata()["config"])
    assert set(stored) >= {f.name for f in dataclasses.fields(Config)} and load_trained(out, "cpu")[2] == config


def _converter():
    import importlib.util

    spec = importlib.util.spec_from_file_location("convert_older", ROOT / "tools" / "convert_older.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
