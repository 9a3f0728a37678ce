"""Training: teacher forcing, AdamW with warm-up, checkpoints you can resume exactly.

One optimisation step, line by line::

    logits = model(src, tgt[:, :-1])                     # teacher forcing: feed the answer so far
    loss = cross_entropy(logits, tgt[:, 1:], ignore pad, label_smoothing=0.1)
    optimizer.zero_grad(); loss.backward()
    clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step(); scheduler.step()

Around it, :class:`Trainer` validates every epoch, keeps ``best.pt`` when the score named by ``Config.select_on``
improves, stops early after ``patience`` epochs without, and saves ``last.pt`` (weights, optimiser, scheduler,
every random-number generator, the position in the epoch) so that ``resume=True`` continues bit for bit. It
knows nothing of ciphers, nor of the run around it: it asks that of its :class:`Hooks` (:mod:`cipherlab.runner`).
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from cipherlab.base.config import Config
from cipherlab.base.device import autocast
from cipherlab.pipeline.checkpoint import CHECKPOINT_FORMAT, read_log, rng_state, save_checkpoint, set_rng_state
from cipherlab.pipeline.codec import teacher_forcing_logits

__all__ = ["Batches", "FitResult", "Hooks", "Trainer", "TrainingDiverged", "WarmupInverseSqrt", "make_optimizer",
           "make_scheduler", "seed_everything", "sequence_loss"]


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's generators (torch seeds CUDA too)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def sequence_loss(
    logits: torch.Tensor, target: torch.Tensor, pad_id: int, label_smoothing: float = 0.0
) -> tuple[torch.Tensor, int]:
    """(mean cross-entropy over non-pad target tokens, number of those tokens).

    logits (B, L, V), target (B, L). Computed in fp32 even under bf16 autocast.
    """
    loss = F.cross_entropy(
        logits.float().reshape(-1, logits.size(-1)),  # (B*L, V)
        target.reshape(-1),  # (B*L,)
        ignore_index=pad_id,
        label_smoothing=label_smoothing,
        reduction="sum",
    )
    n_tokens = int((target != pad_id).sum())
    return loss / max(n_tokens, 1), n_tokens


def make_optimizer(model: nn.Module, config: Config) -> torch.optim.AdamW:
    """AdamW; weight decay on matrices (weights, embeddings) but not on biases and norm gains."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=config.lr, betas=config.betas)


class WarmupInverseSqrt:
    """Learning-rate factor: linear warm-up to 1 over ``warmup_steps``, then 1/sqrt decay.

    The decay (Vaswani et al. 2017) needs no total step count, which early stopping and a
    wall-clock budget make unknowable in advance. An object, not a lambda, so that
    ``LambdaLR.state_dict()`` stays plain data.
    """

    def __init__(self, warmup_steps: int):
        self.warmup_steps = max(warmup_steps, 1)

    def __call__(self, step: int) -> float:
        step += 1  # LambdaLR calls with 0 for the first step
        return min(step / self.warmup_steps, math.sqrt(self.warmup_steps / step))


def make_scheduler(optimizer: torch.optim.Optimizer, config: Config) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, WarmupInverseSqrt(config.warmup_steps))


# --------------------------------------------------------------------------- the trainer


class TrainingDiverged(RuntimeError):
    """The training loss (or the validation scores) became NaN or infinite."""


class Hooks:
    """What a :class:`Trainer` asks of, and tells, the code that runs it; these defaults are the bare loop's."""

    def resume(self, trainer: Trainer) -> dict:
        """The payload of ``trainer.last_path``; unchecked here (RunHooks checks its checksum and its run)."""
        return torch.load(trainer.last_path, map_location="cpu", weights_only=True)

    def start_over(self, trainer: Trainer) -> None:
        """Called when ``resume=True`` finds no last.pt, before the run starts from scratch."""

    def after_step(self, trainer: Trainer, record: dict) -> None:
        """After each optimiser step: ``step``, ``epoch`` (fractional), ``loss``, ``lr``, ``grad_norm``, ``tokens``."""

    def after_epoch(self, trainer: Trainer, record: dict) -> None:
        """After each epoch's validation, the record ``log.jsonl`` got, before the checkpoints are saved."""

    def diverged(self, trainer: Trainer, message: str) -> str:
        """The message of :class:`TrainingDiverged`, given what diverged where."""
        return message


@dataclass
class Batches:
    """A dataset and its batch sampler: ``sampler.epoch_batches(epoch)`` gives the epoch's batches of indices (the
    same every time for the same epoch: resuming mid-epoch is exact), ``collate`` makes a dict with ``src``, ``tgt``."""

    dataset: Sequence
    sampler: object  # cipherlab.data.corpus.BucketBatchSampler or anything with epoch_batches(epoch)
    collate: Callable[[list], dict[str, torch.Tensor]]

    def epoch(self, epoch: int) -> list[list[int]]:
        return self.sampler.epoch_batches(epoch)

    def load(self, indices: Sequence[int], device: torch.device) -> dict[str, torch.Tensor]:
        batch = self.collate([self.dataset[i] for i in indices])
        return {key: value.to(device) for key, value in batch.items()}


@dataclass
class Progress:
    """Where a run is; saved in last.pt so that a resumed run continues from exactly here."""
    epoch: int = 0  # the epoch being trained (0-based)
    batch: int = 0  # batches of that epoch already done
    step: int = 0  # optimiser steps so far
    epoch_loss_sum: float = 0.0  # sum over this epoch's batches of (mean loss x tokens)
    epoch_tokens: int = 0  # target tokens seen this epoch
    epoch_seconds: float = 0.0  # training time spent in this epoch
    best_val_loss: float = math.inf  # the validation loss of best.pt's epoch
    best_val_accuracy: float = -1.0  # the validation accuracy of best.pt's epoch (-1: none yet)
    best_epoch: int = 0  # 1-based epoch of best.pt (0: none yet)
    bad_epochs: int = 0  # epochs since the selected validation score last improved
    finished: str = ""  # why training ended: "early stopping" or "max_epochs" ("" while running)


@dataclass
class FitResult:
    """What a call to :meth:`Trainer.fit` did."""

    stopped: str  # "early stopping", "max_epochs", "time budget" or "max steps"
    epochs: int  # epochs completed (over all runs of this out_dir)
    best_epoch: int
    best_val_loss: float
    history: list[dict]  # the records of log.jsonl, all runs
    best_val_accuracy: float = -1.0


class Trainer:
    """Trains ``model`` on ``train`` batches, validating on ``val``, writing to ``out_dir``; ``identity`` (e.g. data
    digests) and ``artifacts`` (what rebuilds the input pipeline) go into every checkpoint. ``bf16``: autocast (None:
    CUDA only); ``progress``: a bar per epoch; ``last_grad_norm`` (before clipping), ``last_lr``: the last step's."""

    def __init__(self, model: nn.Module, train: Batches, val: Batches, config: Config, out_dir: str | os.PathLike,
                 *, device: torch.device, tgt_pad_id: int, identity: dict | None = None,
                 artifacts: dict | None = None, progress: bool | None = None, bf16: bool | None = None,
                 hooks: Hooks | None = None):
        self.model = model.to(device)
        self.train_batches, self.val_batches = train, val
        self.config, self.device, self.tgt_pad_id, self.bf16 = config, device, tgt_pad_id, bf16
        self.out_dir = Path(out_dir)
        self.identity, self.artifacts = identity or {}, artifacts or {}
        self.show_progress, self.hooks = progress, hooks or Hooks()
        self.optimizer = make_optimizer(model, config)
        self.scheduler = make_scheduler(self.optimizer, config)
        self.progress = Progress()
        self.last_grad_norm, self.last_lr, self._max_steps = math.nan, math.nan, None
        self.last_path, self.best_path = self.out_dir / "last.pt", self.out_dir / "best.pt"
        self.log_path, self.curve_path = self.out_dir / "log.jsonl", self.out_dir / "curve.jsonl"

    def _payload(self, full: bool) -> dict:
        payload = {"format": CHECKPOINT_FORMAT, "config": self.config.to_dict(), "identity": self.identity,
                   "artifacts": self.artifacts, "model": self.model.state_dict(), "progress": asdict(self.progress)}
        if full:  # what resuming needs on top of the weights
            payload.update(optimizer=self.optimizer.state_dict(), scheduler=self.scheduler.state_dict(),
                           rng=rng_state())
        return payload

    def save_last(self) -> None:  # last.pt: the weights and all that resuming needs
        save_checkpoint(self.last_path, self._payload(full=True))

    def _restore(self) -> None:
        payload = self.hooks.resume(self)
        self.model.load_state_dict(payload["model"])
        self.optimizer.load_state_dict(payload["optimizer"])
        self.scheduler.load_state_dict(payload["scheduler"])
        set_rng_state(payload["rng"])
        self.progress = Progress(**payload["progress"])

    @torch.no_grad()
    def validate(self, exact: bool = False):
        """(mean cross-entropy, share of target tokens predicted right) over the validation set, teacher-forced,
        no label smoothing, padding excluded; ``exact``: also the share of chunks with every target token right."""
        self.model.eval()
        total, tokens, right, chunks, whole = 0.0, 0, 0, 0, 0
        for indices in self.val_batches.epoch(0):
            batch = self.val_batches.load(indices, self.device)
            with autocast(self.device, self.bf16):
                logits = teacher_forcing_logits(self.model, batch)
            gold = batch["tgt"][:, 1:]
            loss, n = sequence_loss(logits, gold, self.tgt_pad_id)
            total, tokens = total + loss.item() * n, tokens + n
            hits = (logits.argmax(-1) == gold) | (gold == self.tgt_pad_id)
            right += (hits & (gold != self.tgt_pad_id)).sum().item()
            chunks, whole = chunks + gold.size(0), whole + hits.all(dim=1).sum().item()
        scores = total / max(tokens, 1), right / max(tokens, 1)
        return (*scores, whole / max(chunks, 1)) if exact else scores

    def _step(self, batch: dict[str, torch.Tensor]) -> tuple[float, int]:
        """One optimiser step on one batch: (mean training loss, target tokens). The step's gradient norm
        (before clipping) and learning rate are left in ``last_grad_norm`` and ``last_lr``."""
        with autocast(self.device, self.bf16):
            logits = teacher_forcing_logits(self.model, batch)
        loss, n_tokens = sequence_loss(logits, batch["tgt"][:, 1:], self.tgt_pad_id, self.config.label_smoothing)
        if not torch.isfinite(loss):
            self._diverged(f"the training loss became {loss.item()}")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        if not torch.isfinite(grad_norm):
            self._diverged(f"the gradient norm became {grad_norm.item()}")
        self.last_grad_norm, self.last_lr = grad_norm.item(), self.optimizer.param_groups[0]["lr"]
        self.optimizer.step()
        self.scheduler.step()
        return loss.item(), n_tokens

    def _diverged(self, what: str, step: int | None = None, before: str = "updating the weights") -> None:
        p = self.progress
        message = (f"{what} at epoch {p.epoch + 1}, step {p.step + 1 if step is None else step}; "
                   f"training stopped before {before}")
        raise TrainingDiverged(self.hooks.diverged(self, message))

    def fit(self, *, resume: bool = False, time_budget_s: float | None = None, max_steps: int | None = None) -> FitResult:
        """Train until early stopping, ``max_epochs``, the time budget (default: the config's; the seconds of this
        call) or ``max_steps`` optimiser steps in all, whichever comes first; a stop mid-epoch saves last.pt with
        the position in the epoch. ``resume=True`` continues from ``out_dir/last.pt`` (when it exists)."""
        budget = self.config.time_budget_s if time_budget_s is None else time_budget_s
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if resume and self.last_path.exists():
            self._restore()
        else:
            if resume:
                self.hooks.start_over(self)
            self.log_path.unlink(missing_ok=True)
            self.curve_path.unlink(missing_ok=True)
        started = time.monotonic()
        p = self.progress
        if p.finished == "max_epochs" and p.epoch < self.config.max_epochs:
            p.finished = ""  # resumed with a larger max_epochs: train on
        elif not p.finished and p.epoch >= self.config.max_epochs:
            p.finished = "max_epochs"  # resumed with max_epochs already reached: nothing to train
        self._max_steps = max_steps
        while not p.finished:
            if self._train_epoch(started, budget):
                return self._result("max steps" if self._steps_done() else "time budget")
            self._end_epoch()
            if not p.finished and self._steps_done():
                return self._result("max steps")
            if not p.finished and budget is not None and time.monotonic() - started >= budget:
                return self._result("time budget")
        return self._result(p.finished)

    def _steps_done(self) -> bool:  # max_steps optimiser steps done
        return self._max_steps is not None and self.progress.step >= self._max_steps

    def _train_epoch(self, started: float, budget: float | None) -> bool:
        """Train the rest of the current epoch; True if the time budget ran out before its end."""
        p = self.progress
        batches = self.train_batches.epoch(p.epoch)
        self.model.train()
        show = self.show_progress  # None: a bar where output is a terminal or notebook, none under TQDM_DISABLE
        disable = (True if os.environ.get("TQDM_DISABLE") else None) if show is None else not show
        with tqdm(total=len(batches), initial=p.batch, desc=f"{self.config.name} epoch {p.epoch + 1}", unit="batch",
                  disable=disable, leave=False) as bar:
            while p.batch < len(batches):
                t0 = time.perf_counter()
                loss, n_tokens = self._step(self.train_batches.load(batches[p.batch], self.device))
                p.epoch_seconds += time.perf_counter() - t0
                p.epoch_loss_sum += loss * n_tokens
                p.epoch_tokens += n_tokens
                p.batch += 1
                p.step += 1
                self.hooks.after_step(self, {"step": p.step, "epoch": p.epoch + p.batch / len(batches), "loss": loss,
                                             "lr": self.last_lr, "grad_norm": self.last_grad_norm, "tokens": n_tokens})
                bar.update(1)
                bar.set_postfix(loss=f"{p.epoch_loss_sum / max(p.epoch_tokens, 1):.3f}",
                                tok_s=f"{p.epoch_tokens / max(p.epoch_seconds, 1e-9):.0f}")
                out_of_time = budget is not None and time.monotonic() - started >= budget
                if p.batch < len(batches) and (out_of_time or self._steps_done()):
                    self.save_last()
                    return True
        return False

    def _end_epoch(self) -> None:
        """Validate, log, checkpoint, decide whether to stop."""
        p = self.progress
        val_loss, val_accuracy = self.validate()
        for name, value in (("loss", val_loss), ("accuracy", val_accuracy)):
            if not math.isfinite(value):  # else a NaN loss beside a better accuracy is picked as best.pt
                self._diverged(f"the validation {name} became {value}", step=p.step,
                               before="logging the epoch or saving a checkpoint")
        if self.config.select_on == "val_accuracy":
            improved = val_accuracy > p.best_val_accuracy
        else:
            improved = val_loss < p.best_val_loss
        record = {"epoch": p.epoch + 1, "step": p.step, "train_loss": p.epoch_loss_sum / max(p.epoch_tokens, 1),
                  "val_loss": val_loss, "val_accuracy": val_accuracy, "lr": self.scheduler.get_last_lr()[0],
                  "seconds": p.epoch_seconds, "train_tokens": p.epoch_tokens,
                  "tokens_per_s": p.epoch_tokens / max(p.epoch_seconds, 1e-9), "best": improved}
        if improved:
            p.best_val_loss, p.best_val_accuracy, p.best_epoch, p.bad_epochs = val_loss, val_accuracy, p.epoch + 1, 0
        else:
            p.bad_epochs += 1
        if p.bad_epochs >= self.config.patience:
            p.finished = "early stopping"
        elif p.epoch + 1 >= self.config.max_epochs:
            p.finished = "max_epochs"
        p.epoch, p.batch = p.epoch + 1, 0
        p.epoch_loss_sum, p.epoch_tokens, p.epoch_seconds = 0.0, 0, 0.0
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        self.hooks.after_epoch(self, record)
        if improved:
            save_checkpoint(self.best_path, self._payload(full=False))
        save_checkpoint(self.last_path, self._payload(full=True))

    def _result(self, stopped: str) -> FitResult:
        p = self.progress
        return FitResult(stopped=stopped, epochs=p.epoch, best_epoch=p.best_epoch, best_val_loss=p.best_val_loss,
                         history=read_log(self.log_path), best_val_accuracy=p.best_val_accuracy)
