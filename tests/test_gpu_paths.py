"""The code paths training takes on a GPU, run on the CPU.

On CUDA, :class:`cipherlab.pipeline.train.Trainer` steps under bf16 autocast (``cipherlab.base.device.autocast``);
no GPU runs in CI, so here the same trainer steps under ``torch.autocast("cpu", dtype=torch.bfloat16)``
(``bf16=True``) and is compared with the fp32 step. On CUDA the model is also built with the fused
attention kernel (``F.scaled_dot_product_attention``, :func:`cipherlab.base.device.fused_attention_on`):
here the decision is checked and one fused step of each configuration is compared with the scratch
maths. Then one step of the ``assignment`` preset's full-size C1 and C5, the models the GPU script
(``benchmarks/gpu_run.py``) trains. One thread (tests/conftest.py).
"""

from __future__ import annotations

import copy
import functools
import json
import math

import pytest
import torch

import cipherlab.runner.training
from cipherlab.pipeline.codec import ByteCodec, build_model, fit_codec, select_lines
from cipherlab.base.config import CONFIG_NAMES, make_config
from cipherlab.data.corpus import BucketBatchSampler, load_corpus, make_chunks
from cipherlab.base.device import autocast
from cipherlab.models import ScaledDotProductAttention
from cipherlab.models.blt import BLTArgs, BLTModel
from cipherlab.pipeline.train import Batches, Trainer, seed_everything
from cipherlab.base.device import fused_attention_on
from cipherbook.experiments.blt import c5_model
from cipherbook.experiments.mha import SRC_VOCAB, TGT_VOCAB
from cipherbook.experiments.mha import model as chapter3_model


def test_autocast_is_bf16_on_cuda_only_unless_asked():
    with autocast("cpu"):
        assert not torch.is_autocast_enabled("cpu")
    with autocast(torch.device("cpu"), enabled=True):
        assert torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16


def _trainer(model, codec, config, chunks, tmp_path, bf16):
    dataset = codec.dataset(chunks)
    sampler = BucketBatchSampler(dataset.src_lengths, config.token_budget, config.max_batch_size, shuffle=False)
    batches = Batches(dataset, sampler, codec.collate)
    return Trainer(model, batches, batches, config, tmp_path, device=torch.device("cpu"),
                   tgt_pad_id=codec.tgt_pad_id, bf16=bf16), batches


def _one_step(trainer, batches):
    """(loss of one optimiser step on the first batch, largest weight change it made)."""
    before = [p.detach().clone() for p in trainer.model.parameters()]
    loss, n_tokens = trainer._step(batches.load(batches.epoch(0)[0], torch.device("cpu")))
    assert n_tokens > 0
    moved = max((p.detach() - b).abs().max().item() for p, b in zip(trainer.model.parameters(), before))
    return loss, moved


@functools.cache
def _smoke(name):
    """(config without dropout, codec, 16 lines of training chunks) of one configuration's smoke run."""
    config = make_config(name, "smoke", dropout=0.0)
    corpus = select_lines(load_corpus(), config)
    chunks = make_chunks(corpus.plain, corpus.cipher, corpus.splits["train"][:16], config.chunk_chars)
    return config, fit_codec(config, corpus), chunks


@pytest.mark.parametrize("name", CONFIG_NAMES)
def test_one_bf16_training_step_of_each_configuration_is_finite_and_close_to_fp32(name, tmp_path):
    config, codec, chunks = _smoke(name)
    seed_everything(config.seed)
    model = build_model(config, codec)
    losses = {}
    for bf16 in (False, True):
        trainer, batches = _trainer(copy.deepcopy(model), codec, config, chunks, tmp_path / str(bf16), bf16)
        losses[bf16], moved = _one_step(trainer, batches)
        assert math.isfinite(losses[bf16]) and moved > 0
        assert all(torch.isfinite(p).all() for p in trainer.model.parameters())
    assert losses[True] == pytest.approx(losses[False], rel=0.02), losses


def test_training_runs_the_fused_attention_kernel_on_cuda_only_unless_asked():
    assert fused_attention_on("cuda") and fused_attention_on(torch.device("cuda:1"))
    assert not fused_attention_on("cpu") and not fused_attention_on("mps")
    assert fused_attention_on("cpu", enabled=True) and not fused_attention_on("cuda", enabled=False)


class _Built(Exception):
    """Raised by the stand-in build_model: train_config got as far as building its model."""


@pytest.mark.parametrize("device, fused", [("cuda", True), ("cpu", False)])
def test_train_config_builds_the_fused_model_on_cuda_and_the_scratch_one_on_cpu(device, fused, monkeypatch, tmp_path):
    """What a CUDA run builds, without CUDA: the device is a stand-in, training stops at the model."""
    asked = {}

    def build(config, codec, **kwargs):
        asked.update(kwargs)
        raise _Built

    monkeypatch.setattr(cipherlab.runner.training, "pick_device", lambda preference: torch.device(device))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device: None)
    monkeypatch.setattr(cipherlab.runner.training, "load_corpus", lambda data_dir: None)  # no data needed to get there
    monkeypatch.setattr(cipherlab.runner.training, "select_lines", lambda corpus, config: None)
    monkeypatch.setattr(cipherlab.runner.training, "fit_codec", lambda config, corpus: None)
    monkeypatch.setattr(cipherlab.pipeline.codec, "build_model", build)  # what the default builder calls
    with pytest.raises(_Built):
        cipherlab.runner.training.train_config(make_config("c1", "smoke"), tmp_path, device=device)
    assert asked == {"fused_attention": fused}  # cipherlab's own model (OWN_MODEL): no student's class


def _kernels(model) -> set[bool]:
    """The ``fused`` flags of every attention kernel in ``model``."""
    kernels = [m for m in model.modules() if isinstance(m, ScaledDotProductAttention)]
    assert kernels
    return {m.fused for m in kernels}


@pytest.mark.parametrize("name", CONFIG_NAMES)
def test_one_fused_training_step_of_each_configuration_matches_the_scratch_maths(name, tmp_path):
    """The step a CUDA run takes (fused kernel, then also bf16) against the CPU's scratch fp32 step."""
    config, codec, chunks = _smoke(name)
    models, losses, grads = {}, {}, {}
    for fused in (False, True):
        seed_everything(config.seed)
        models[fused] = build_model(config, codec, fused_attention=fused)
        assert _kernels(models[fused]) == {fused}
    for a, b in zip(models[False].parameters(), models[True].parameters()):
        assert torch.equal(a, b)  # the same weights: the flag changes only the kernel
    for fused, bf16 in ((False, False), (True, False), (True, True)):
        trainer, batches = _trainer(copy.deepcopy(models[fused]), codec, config, chunks, tmp_path / f"{fused}{bf16}",
                                    bf16)
        losses[fused, bf16], _ = _one_step(trainer, batches)
        grads[fused, bf16] = [p.grad for p in trainer.model.parameters()]
    assert losses[True, False] == pytest.approx(losses[False, False], rel=1e-5)
    for scratch, fused in zip(grads[False, False], grads[True, False]):
        torch.testing.assert_close(fused, scratch, rtol=1e-3, atol=1e-6)
    assert math.isfinite(losses[True, True]) and losses[True, True] == pytest.approx(losses[False, False], rel=0.02)


def _short_batch(codec, corpus, lines=2, chars=32):
    """A batch of ``lines`` chunks of ``chars`` characters: a short stand-in for a full batch."""
    chunks = make_chunks(corpus.plain, corpus.cipher, corpus.splits["train"][:lines], chars)[:lines]
    dataset = codec.dataset(chunks)
    return codec.collate([dataset[i] for i in range(len(dataset))])


def test_one_bf16_step_of_the_full_size_c1_has_chapter_3s_parameter_count(tmp_path):
    config = make_config("c1", "assignment", recipe="notes")  # free embedding rows: no codec needed
    model = build_model(config, vocab_sizes=(SRC_VOCAB, TGT_VOCAB), pad_id=0)
    assert model.num_params() == chapter3_model("C1").num_params()
    src = torch.randint(4, SRC_VOCAB, (2, 64))
    tgt = torch.randint(4, TGT_VOCAB, (2, 17))
    _full_size_step(model, config, {"src": src, "tgt": tgt}, 0, tmp_path)


def test_one_bf16_step_of_the_full_size_c5_has_chapter_7s_parameter_count(tmp_path):
    config = make_config("c5", "assignment", recipe="notes")  # free byte rows, as the BLT chapter counts them
    smoke = make_config("c5", "smoke", recipe="notes")
    corpus = select_lines(load_corpus(), smoke)  # the entropy model does not change the model's size
    codec = ByteCodec.fit(config, corpus)
    model = build_model(config, codec)
    assert model.num_params() == c5_model("assignment").num_params()
    # not through build_model: an independent count
    by_hand = BLTModel(BLTArgs(**config.model_hyperparameters(), local_layers=config.blt_local_layers,
                               window=config.blt_window, patch_tgt=config.blt_patch_tgt,
                               source_memory=config.blt_source_memory, pad_id=256, bos_id=257, eos_id=258))
    assert model.num_params() == by_hand.num_params()
    _full_size_step(model, config, _short_batch(codec, corpus), codec.tgt_pad_id, tmp_path)


def _full_size_step(model, config, batch, pad_id, tmp_path):
    """One bf16 optimiser step of ``model`` on ``batch``: a finite loss, and the weights move."""
    batches = Batches([None], None, lambda examples: batch)
    trainer = Trainer(model, batches, batches, config, tmp_path, device=torch.device("cpu"),
                      tgt_pad_id=pad_id, bf16=True)
    before = [p.detach().clone() for p in model.parameters()]
    loss, _ = trainer._step(batch)
    assert math.isfinite(loss)
    assert any((p.detach() != b).any() for p, b in zip(model.parameters(), before))


# --------------------------------------------------------------------------- benchmarks/gpu_run.py


def _gpu_run():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_run.py"
    spec = importlib.util.spec_from_file_location("gpu_run", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_run_splits_its_budget_across_the_configurations(capsys):
    gpu_run = _gpu_run()
    assert gpu_run.main(["--plan", "--budget-minutes", "10", "--overhead", "30"]) == 0
    shares = json.loads(capsys.readouterr().out)
    assert [s["config"] for s in shares] == list(CONFIG_NAMES)
    assert sum(s["train_s"] + s["overhead_s"] for s in shares) == pytest.approx(600)
    args = gpu_run.parse_args(["--configs", "c1,c5"])
    assert args.configs == ["c1", "c5"] and args.budget_minutes == 13.0
    assert gpu_run.training_seconds(100, 2, 20) == 30 and gpu_run.training_seconds(10, 2, 20) == 0


@pytest.mark.parametrize("argv, message", [
    (["--configs", "c1,c9"], "c9"),
    (["--device", "cpu"], "CUDA device"),
    (["--budget-minutes", "1"], "too short"),
    (["--eval-lines", "0"], "at least 1"),
])
def test_gpu_run_refuses_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit):
        _gpu_run().parse_args(argv)
    assert message in capsys.readouterr().err


def test_gpu_run_refuses_to_start_without_cuda(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _gpu_run().main([]) == 2
    assert "CUDA is not available" in capsys.readouterr().err


def test_gpu_run_commands_are_ones_cipherlab_accepts():
    from cipherlab.__main__ import build_parser

    gpu_run = _gpu_run()
    args = gpu_run.parse_args(["--data-dir", "data"])
    parsed = build_parser().parse_args(gpu_run.train_command(args, "c5", 90.0)[3:])  # after "python -m cipherlab"
    assert (parsed.config, parsed.preset, parsed.time_budget, parsed.device) == ("c5", "assignment", 90.0, "cuda")
    assert parsed.set == [f"max_eval_lines={args.eval_lines}"]


def test_gpu_run_runs_end_to_end_on_a_cpu_with_the_recipe(tmp_path):
    """--cpu-check: every step of the script (each configuration's train process, its record, the
    summary with epoch times), tiny sizes on the CPU, so that a first GPU run cannot fail on a typo."""
    gpu_run = _gpu_run()
    argv = ["--cpu-check", "--budget-minutes", "20", "--overhead", "20",
            "--results-dir", str(tmp_path / "results"), "--runs-dir", str(tmp_path / "runs")]
    assert gpu_run.main(argv) == 0
    summary = json.loads((tmp_path / "results" / "assignment" / "gpu_run.json").read_text())
    assert summary["recipe"] == "cipher" and summary["cpu_check"] and summary["device_name"].startswith("cpu")
    assert [r["config"] for r in summary["runs"]] == list(CONFIG_NAMES)
    for run in summary["runs"]:
        assert run["returncode"] == 0 and run["record"] and len(run["epoch_seconds"]) == 1
        record = json.loads((tmp_path / "results" / "assignment" / f"{run['config']}.json").read_text())
        assert record["recipe"] == "cipher" and record["preset"] == "assignment"
        assert record["hyperparameters"]["phase_shuffle"] == 1.0 and record["hyperparameters"]["source_eos"]
        assert record["recipe_caveats"] == []  # the aligned BPE takes all of the recipe
        assert record["config"] == "c5" or record["hyperparameters"]["target_tokens"] == "aligned"
