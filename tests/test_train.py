"""Tests for cipherlab.pipeline.train: the trainer core, on a tiny stand-in model and synthetic batches."""

import functools
import math
import random

import pytest
import torch
from torch import nn

from cipherlab.base.config import make_config
from cipherlab.data.corpus import BucketBatchSampler, collate
from cipherlab.runner.integrity import CheckpointError, load_checkpoint
from cipherlab.pipeline.checkpoint import rng_state, save_checkpoint, set_rng_state
from cipherlab.pipeline.train import (Batches, Trainer, TrainingDiverged, WarmupInverseSqrt, seed_everything,
                                      sequence_loss)
from cipherlab.runner.hooks import NotLearning, RunHooks

PAD, BOS, EOS, VOCAB = 0, 1, 2, 12


class StandIn(nn.Module):
    """The smallest model with the trainer's interface: model(src, tgt_in) -> (B, Lt, V) logits."""

    def __init__(self, d=16):
        super().__init__()
        self.src_emb = nn.Embedding(VOCAB, d)
        self.tgt_emb = nn.Embedding(VOCAB, d)
        self.drop = nn.Dropout(0.1)  # uses the torch RNG, so resuming must restore it
        self.out = nn.Linear(d, VOCAB)
        self.poisoned = False

    def forward(self, src, tgt_in):
        memory = self.src_emb(src).mean(dim=1, keepdim=True)  # (B, 1, d)
        logits = self.out(self.drop(self.tgt_emb(tgt_in) + memory))  # (B, Lt, V)
        return logits * math.nan if self.poisoned else logits


def batches(n, seed, shuffle=True):
    rng = random.Random(seed)
    examples = []
    for _ in range(n):
        src = [rng.randrange(3, VOCAB) for _ in range(rng.randint(2, 6))]
        examples.append((src, [BOS, *src, EOS]))
    sampler = BucketBatchSampler([len(s) for s, _ in examples], token_budget=24, max_batch_size=4, shuffle=shuffle)
    return Batches(examples, sampler, functools.partial(collate, src_pad_id=PAD, tgt_pad_id=PAD))


def make_trainer(out_dir, seed=0, **overrides):
    config = make_config("c1", "smoke", **{"lr": 1e-2, "warmup_steps": 2, "max_epochs": 3, **overrides})
    seed_everything(seed)
    return Trainer(
        StandIn(),
        batches(24, seed=1),
        batches(8, seed=2, shuffle=False),
        config,
        out_dir,
        device=torch.device("cpu"),
        tgt_pad_id=PAD,
        identity={"tokenizer": "stand-in"},
        hooks=RunHooks(),
    )


def test_training_lowers_the_loss_and_logs_every_epoch(tmp_path):
    result = make_trainer(tmp_path).fit()
    assert result.stopped == "max_epochs" and result.epochs == 3
    assert [r["epoch"] for r in result.history] == [1, 2, 3]
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]
    assert result.history[-1]["val_loss"] < result.history[0]["val_loss"]
    assert (tmp_path / "best.pt").exists() and (tmp_path / "last.pt").exists()


def test_stop_and_resume_gives_the_losses_of_an_uninterrupted_run(tmp_path):
    straight = make_trainer(tmp_path / "straight").fit()
    assert len(straight.history) == 3
    # A zero time budget stops after one step (mid-epoch) or at the end of an epoch.
    stopped = make_trainer(tmp_path / "stopped").fit(time_budget_s=0)
    assert stopped.stopped == "time budget" and stopped.history == []
    for _ in range(7):  # crosses the end of epoch 1 (6 batches per epoch)
        make_trainer(tmp_path / "stopped", seed=123).fit(resume=True, time_budget_s=0)
    resumed_trainer = make_trainer(tmp_path / "stopped", seed=456)
    resumed = resumed_trainer.fit(resume=True)
    for a, b in zip(straight.history, resumed.history, strict=True):
        assert (a["epoch"], a["step"], a["train_loss"], a["val_loss"]) == (b["epoch"], b["step"], b["train_loss"], b["val_loss"])
    final = load_checkpoint(tmp_path / "straight" / "last.pt")["model"]
    for name, value in resumed_trainer.model.state_dict().items():
        assert torch.equal(value, final[name]), name


def test_resuming_a_finished_run_trains_nothing(tmp_path):
    make_trainer(tmp_path).fit()
    result = make_trainer(tmp_path).fit(resume=True)
    assert result.stopped == "max_epochs" and len(result.history) == 3


def test_early_stopping_after_patience_epochs_without_improvement(tmp_path):
    trainer = make_trainer(tmp_path, patience=1, max_epochs=10)
    trainer.validate = lambda: (1.0, 0.5)  # the same scores every epoch: never better after the first
    result = trainer.fit()
    assert result.stopped == "early stopping"
    assert result.epochs == 2 and result.best_epoch == 1


def test_nan_loss_stops_with_a_clear_message_and_keeps_the_last_checkpoint(tmp_path):
    trainer = make_trainer(tmp_path)
    trainer.fit(time_budget_s=0)
    before = (tmp_path / "last.pt").read_bytes()
    trainer.model.poisoned = True
    with pytest.raises(TrainingDiverged, match=r"training loss became nan at epoch 1, step 2.*last good state"):
        trainer.fit(resume=True)
    assert (tmp_path / "last.pt").read_bytes() == before


def test_a_run_still_at_chance_by_the_onset_step_stops_with_one_line_and_keeps_its_state(tmp_path):
    trainer = make_trainer(tmp_path, onset_step=3, onset_accuracy=0.9)
    calls = []
    trainer.validate = lambda exact=False: calls.append(trainer.progress.step) or (2.3, 0.08)  # a flat curve
    with pytest.raises(NotLearning) as stopped:
        trainer.fit()
    message = str(stopped.value)
    assert calls == [3] and "\n" not in message
    assert "8.0% at step 3" in message and "below 90%" in message and "onset_step=null" in message
    assert (tmp_path / "last.pt").exists()


def test_a_run_past_the_onset_level_by_the_onset_step_trains_on(tmp_path):
    trainer = make_trainer(tmp_path, onset_step=3, onset_accuracy=0.25)
    real = trainer.validate
    seen = []

    def validate(exact=False):
        scores = real(exact)
        seen.append(trainer.progress.step)
        return scores[:1] + (0.5,) + scores[2:]  # a curve that has left chance
    trainer.validate = validate
    result = trainer.fit()
    assert result.stopped == "max_epochs" and 3 in seen


@pytest.mark.parametrize("select_on", ["val_loss", "val_accuracy"])
@pytest.mark.parametrize("score", ["loss", "accuracy"])
def test_a_nan_validation_score_stops_the_run_instead_of_being_picked_as_best(tmp_path, select_on, score):
    trainer = make_trainer(tmp_path, max_epochs=2, select_on=select_on)
    trainer.fit(max_steps=6)  # epoch 1 (6 batches): validated, best.pt and last.pt written
    best, last = (tmp_path / "best.pt").read_bytes(), (tmp_path / "last.pt").read_bytes()
    good = trainer.validate
    trainer.validate = lambda: (math.nan, good()[1]) if score == "loss" else (good()[0], math.nan)
    with pytest.raises(TrainingDiverged, match=rf"validation {score} became nan at epoch 2, step 12.*"
                                               "before logging the epoch or saving a checkpoint.*last good state"):
        trainer.fit(resume=True)
    assert (tmp_path / "best.pt").read_bytes() == best and (tmp_path / "last.pt").read_bytes() == last
    assert len((tmp_path / "log.jsonl").read_text().splitlines()) == 1  # the NaN epoch is not logged


def test_checkpoint_loads_with_weights_only_and_carries_config_and_identity(tmp_path):
    make_trainer(tmp_path, max_epochs=1).fit()
    payload = torch.load(tmp_path / "best.pt", weights_only=True)
    assert payload["config"]["name"] == "c1" and payload["identity"] == {"tokenizer": "stand-in"}
    assert "optimizer" not in payload  # best.pt is weights only; last.pt has the resume state
    assert {"optimizer", "scheduler", "rng"} <= set(torch.load(tmp_path / "last.pt", weights_only=True))


def test_checkpoint_from_another_config_or_tokenizer_is_refused(tmp_path):
    make_trainer(tmp_path, max_epochs=1).fit()
    with pytest.raises(CheckpointError, match=r"another configuration \(lr: 0.01 in the checkpoint, 0.02 now"):
        make_trainer(tmp_path, max_epochs=1, lr=2e-2).fit(resume=True)
    with pytest.raises(CheckpointError, match="another tokenizer"):
        load_checkpoint(tmp_path / "last.pt", identity={"tokenizer": "other"})


def test_missing_or_foreign_checkpoint_gives_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such checkpoint"):
        load_checkpoint(tmp_path / "nope.pt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "foreign.pt")
    with pytest.raises(CheckpointError, match="not a cipherlab checkpoint"):
        load_checkpoint(tmp_path / "foreign.pt")
    (tmp_path / "garbage.pt").write_bytes(b"not a zip file")
    with pytest.raises(CheckpointError, match="not a readable cipherlab checkpoint"):
        load_checkpoint(tmp_path / "garbage.pt")


def test_save_checkpoint_replaces_the_file_atomically(tmp_path):
    path = tmp_path / "x.pt"
    save_checkpoint(path, {"a": torch.ones(1)})
    save_checkpoint(path, {"a": torch.zeros(1)})
    assert [p.name for p in tmp_path.iterdir()] == ["x.pt"]  # no temporary file left behind
    assert torch.load(path, weights_only=True)["a"].item() == 0


def test_rng_state_round_trips_through_a_weights_only_checkpoint(tmp_path):
    import numpy as np

    seed_everything(3)
    save_checkpoint(tmp_path / "rng.pt", {"rng": rng_state()})
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    seed_everything(99)
    set_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True)["rng"])
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


def test_learning_rate_warms_up_linearly_then_decays_as_inverse_sqrt():
    factor = WarmupInverseSqrt(4)
    assert [factor(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert factor(15) == pytest.approx(0.5)  # sqrt(4 / 16)


def test_sequence_loss_ignores_padding():
    logits = torch.randn(1, 3, 5)
    target = torch.tensor([[3, 4, PAD]])
    loss, n = sequence_loss(logits, target, PAD)
    expected = nn.functional.cross_entropy(logits[0, :2], target[0, :2])
    assert n == 2 and loss.item() == pytest.approx(expected.item())


@pytest.mark.parametrize("name", ["c1", "c2", "c3", "c4", "c5"])
def test_smoke_training_of_each_configuration_lowers_the_loss(name, sample_dir, tmp_path):
    from cipherlab.runner.training import train_config

    config = make_config(name, "smoke", warmup_steps=4, max_epochs=4)
    run = train_config(config, tmp_path / name, data_dir=sample_dir, device="cpu")
    losses = [r["train_loss"] for r in run.fit.history]
    assert len(losses) == 4 and losses[-1] < losses[0]
    assert run.best_checkpoint.exists() and run.params > 0


def test_fewer_training_lines_make_a_different_corpus_but_fewer_eval_lines_do_not(sample_dir):
    from cipherlab.data.corpus import load_corpus
    from cipherlab.pipeline.codec import select_lines

    corpus = load_corpus(sample_dir)
    limited = select_lines(corpus, make_config("c1", "smoke", max_train_lines=10, max_eval_lines=2))
    assert len(limited.splits["train"]) == 10 and len(limited.splits["test"]) == 2
    assert limited.sha256 != corpus.sha256  # tokenizers cached for it are its own
    eval_only = select_lines(corpus, make_config("c1", "smoke", max_train_lines=None, max_eval_lines=2))
    assert eval_only.sha256 == corpus.sha256 and eval_only.splits["train"] == corpus.splits["train"]


def test_progress_false_shows_no_bar_and_raising_max_epochs_continues_a_finished_run(tmp_path, capsys):
    trainer = make_trainer(tmp_path, max_epochs=2)
    trainer.show_progress = False
    first = trainer.fit()
    assert first.stopped == "max_epochs" and "epoch" not in capsys.readouterr().err
    more = make_trainer(tmp_path, max_epochs=3)
    assert more.fit(resume=True).epochs == 3


def test_val_accuracy_is_the_teacher_forced_share_of_target_tokens_right(tmp_path):
    trainer = make_trainer(tmp_path)
    loss, accuracy = trainer.validate()
    right = tokens = 0
    with torch.no_grad():
        for indices in trainer.val_batches.epoch(0):
            batch = trainer.val_batches.load(indices, trainer.device)
            gold = batch["tgt"][:, 1:]
            pred = trainer.model(batch["src"], batch["tgt"][:, :-1]).argmax(-1)
            keep = gold != PAD
            right += (pred[keep] == gold[keep]).sum().item()
            tokens += keep.sum().item()
    assert accuracy == pytest.approx(right / tokens)


@pytest.mark.parametrize("select_on", ["val_loss", "val_accuracy"])
def test_best_checkpoint_is_the_epoch_with_the_best_selected_score(tmp_path, select_on):
    result = make_trainer(tmp_path, select_on=select_on, max_epochs=4).fit()
    history = result.history
    if select_on == "val_accuracy":
        best = max(history, key=lambda r: (r["val_accuracy"], -r["epoch"]))
    else:
        best = min(history, key=lambda r: (r["val_loss"], r["epoch"]))
    assert result.best_epoch == best["epoch"] and result.best_val_accuracy == best["val_accuracy"]
    assert [r["best"] for r in history].count(True) >= 1
    saved = load_checkpoint(tmp_path / "best.pt")
    assert saved["progress"]["best_epoch"] == best["epoch"]
