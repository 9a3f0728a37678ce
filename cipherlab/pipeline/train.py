"""Training: teacher forcing, AdamW with warm-up, checkpoints you can resume exactly.

One optimisation step, line by line::

    logits = model(src, tgt[:, :-1])                     # teacher forcing: feed the answer so far
    loss = cross_entropy(logits, tgt[:, 1:], ignore pad, label_smoothing=0.1)
    optimizer.zero_grad(); loss.backward()
    clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step(); scheduler.step()

Around it, :class:`Trainer` validates every epoch (loss *without* label smoothing, and teacher-forced token
accuracy), keeps ``best.pt`` when the score named by ``Config.select_on`` improves (accuracy by default, the loss
under the ``notes`` recipe) and stops early after ``patience`` epochs without; ``last.pt`` after every epoch
(and when a time budget runs out mid-epoch) holds the model, optimizer, scheduler, every random-number generator
and the position in the epoch, so ``resume=True`` continues exactly where the run stopped -- the same losses, bit
for bit on CPU. A NaN or infinite loss stops the run before it touches the weights or the checkpoints; ``log.jsonl``
gets one JSON record per epoch; an observer (:class:`TrainingLogger`) hears of every step, validation and epoch.
:func:`train_config` puts data, codec (:mod:`cipherlab.pipeline.codec`), model and trainer together for a
``Config``, the model built by a :class:`~cipherlab.pipeline.codec.ModelBuilder` (cipherlab's own by default).

What is not the loop lives elsewhere: checkpoint files (written atomically, read with ``weights_only=True``) in
:mod:`cipherlab.pipeline.checkpoint`; progress bars, resuming's checks, why a run diverged and every message in
:mod:`cipherlab.pipeline.runs`; bf16 autocast in :func:`cipherlab.base.device.autocast`. The trainer knows nothing
about ciphers: any model called as ``model(src=..., tgt_in=..., **extra)`` on dicts with ``src`` and ``tgt`` will do.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from cipherlab.base.config import Config
from cipherlab.base.device import autocast, pick_device
from cipherlab.data.corpus import BucketBatchSampler, load_corpus, make_chunks, shuffle_chunks
from cipherlab.pipeline.checkpoint import (CHECKPOINT_FORMAT, load_checkpoint, read_log, rng_state, save_checkpoint,
                                           set_rng_state)
from cipherlab.pipeline.codec import OWN_MODEL, ModelBuilder, fit_codec, select_lines, teacher_forcing_logits
from cipherlab.pipeline.runs import (NotLearning, TrainingDiverged, TrainingLogger, announce, diverged_message, epoch_bar,
                                     not_learning_message, peak_memory_bytes, refuse_lost_best, refuse_lost_last,
                                     refuse_other_parts, trim_logs)

__all__ = ["Batches", "FitResult", "NotLearning", "RunResult", "Trainer", "TrainingDiverged", "TrainingLogger",
           "WarmupInverseSqrt", "fused_attention_on", "make_optimizer", "make_scheduler", "peak_memory_bytes",
           "seed_everything", "sequence_loss", "train_config"]


# --------------------------------------------------------------------------- reproducibility


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's generators (torch seeds CUDA too)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# --------------------------------------------------------------------------- the pieces of a step


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
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
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


@dataclass
class Batches:
    """A dataset and its batch sampler: what the trainer iterates over.

    ``sampler.epoch_batches(epoch)`` gives the epoch's batches of example indices (the same
    list every time for the same epoch: that is what makes resuming mid-epoch exact), and
    ``collate(examples)`` turns a list of examples into a dict of tensors with ``src``, ``tgt``.
    """

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
    """Trains ``model`` on ``train`` batches, validating on ``val`` batches, writing to ``out_dir``.

    ``identity`` (e.g. the tokenizer and data digests) and ``artifacts`` (plain data needed to
    rebuild the model's input pipeline, e.g. the tokenizers) are stored in every checkpoint.
    ``verbose`` prints one summary line per epoch. ``bf16=True`` trains under bf16 autocast on
    any device (the default, None, does so on CUDA only), so a CPU can run the GPU's code path.
    ``logger``: an observer told of every step, validation and epoch (:class:`TrainingLogger`); None
    (the default) tells no one. After each step, ``last_grad_norm`` and ``last_lr`` hold that step's
    gradient norm (before clipping) and learning rate.
    """

    def __init__(
        self,
        model: nn.Module,
        train: Batches,
        val: Batches,
        config: Config,
        out_dir: str | os.PathLike,
        *,
        device: torch.device,
        tgt_pad_id: int,
        identity: dict | None = None,
        artifacts: dict | None = None,
        verbose: bool = False,
        progress: bool | None = None,
        bf16: bool | None = None,
        logger: TrainingLogger | None = None,
        builder: ModelBuilder = OWN_MODEL,
    ):
        self.model = model.to(device)
        self.builder = builder  # what built the model: resuming refuses a last.pt it did not build
        self.logger = logger
        self.last_grad_norm, self.last_lr = math.nan, math.nan  # of the latest optimiser step
        self.bf16 = bf16  # bf16 autocast: None = on CUDA only (cipherlab.base.device.autocast)
        self.train_batches, self.val_batches = train, val
        self.config, self.device, self.tgt_pad_id = config, device, tgt_pad_id
        self.out_dir = Path(out_dir)
        self.identity, self.artifacts = identity or {}, artifacts or {}
        self.verbose = verbose
        self.show_progress = progress  # progress bars: None = when output is a terminal or notebook
        self.optimizer = make_optimizer(model, config)
        self.scheduler = make_scheduler(self.optimizer, config)
        self.progress = Progress()

    def _tell(self, event: str, record: dict) -> None:
        """Pass ``record`` to the logger's method ``event`` (step, validation or epoch), if it has one."""
        method = getattr(self.logger, event, None) if self.logger is not None else None
        if method is not None:
            method(record)

    # ---- paths
    @property
    def last_path(self) -> Path:
        return self.out_dir / "last.pt"

    @property
    def best_path(self) -> Path:
        return self.out_dir / "best.pt"

    @property
    def log_path(self) -> Path:
        return self.out_dir / "log.jsonl"

    @property
    def curve_path(self) -> Path:
        """``Config.eval_every``'s learning curve: one JSON record per ``eval_every`` steps."""
        return self.out_dir / "curve.jsonl"

    # ---- checkpoints
    def _payload(self, full: bool) -> dict:
        payload = {
            "format": CHECKPOINT_FORMAT,
            "config": self.config.to_dict(),
            "identity": self.identity,
            "artifacts": self.artifacts,
            "model": self.model.state_dict(),
            "progress": asdict(self.progress),
        }
        if full:  # what resuming needs on top of the weights
            payload.update(
                optimizer=self.optimizer.state_dict(),
                scheduler=self.scheduler.state_dict(),
                rng=rng_state(),
            )
        return payload

    def _restore(self) -> None:
        payload = load_checkpoint(self.last_path, config=self.config, identity=self.identity)
        refuse_other_parts(self.last_path, self.builder.refuse(payload["artifacts"].get("parts") or []))
        self.model.load_state_dict(payload["model"])
        self.optimizer.load_state_dict(payload["optimizer"])
        self.scheduler.load_state_dict(payload["scheduler"])
        set_rng_state(payload["rng"])
        self.progress = Progress(**payload["progress"])
        trim_logs(self.log_path, self.curve_path, self.progress.epoch, self.progress.step)  # no epoch logged twice
        refuse_lost_best(self.best_path, self.last_path, self.progress.best_epoch)

    # ---- validation
    @torch.no_grad()
    def validate(self, exact: bool = False):
        """(mean cross-entropy, share of target tokens predicted right) over the validation set,
        both teacher-forced, no label smoothing, padding excluded; with ``exact``, also the share
        of validation chunks whose every target token (EOS included) was predicted right."""
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

    def _curve_point(self, n_batches: int) -> None:
        """Validate mid-epoch (``Config.eval_every``) and append the point to ``curve.jsonl``. It
        changes nothing of the run: no checkpoint, no selection, no random numbers drawn."""
        p = self.progress
        started = time.perf_counter()
        val_loss, val_accuracy, exact_chunks = self.validate(exact=True)
        earlier = sum(r["seconds"] for r in read_log(self.log_path)) if self.log_path.exists() else 0.0
        record = {"step": p.step, "epoch": p.epoch + p.batch / max(n_batches, 1),
                  "val_loss": val_loss, "val_accuracy": val_accuracy, "val_exact_chunks": exact_chunks,
                  "train_seconds": earlier + p.epoch_seconds,
                  "validate_seconds": time.perf_counter() - started}
        with open(self.curve_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        self._tell("validation", record)
        self.model.train()

    def _check_onset(self) -> None:
        """Stop a run that has not started to learn by ``Config.onset_step`` (``NotLearning``), before it
        spends the rest of its budget on a flat curve; last.pt keeps the state reached."""
        p, c = self.progress, self.config
        _, accuracy = self.validate()
        self.model.train()
        if accuracy >= c.onset_accuracy:
            return
        save_checkpoint(self.last_path, self._payload(full=True))
        raise NotLearning(not_learning_message(c, accuracy, p.step))

    # ---- training
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
        raise TrainingDiverged(diverged_message(self, what, step, before))

    def fit(self, *, resume: bool = False, time_budget_s: float | None = None, max_steps: int | None = None) -> FitResult:
        """Train until early stopping, ``max_epochs``, the time budget or ``max_steps`` optimiser steps
        in all, whichever comes first (a stop at ``max_steps`` mid-epoch is saved like a time budget's).

        ``resume=True`` continues from ``out_dir/last.pt`` (when it exists) exactly where it
        stopped. ``time_budget_s`` (default: the config's) counts the seconds of this call;
        when it runs out, last.pt records the position in the epoch and fit returns.
        """
        budget = self.config.time_budget_s if time_budget_s is None else time_budget_s
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if resume and self.last_path.exists():
            self._restore()
        else:
            if resume:  # a run was here but its last.pt is gone: starting again would overwrite best.pt and the log
                refuse_lost_last(self.last_path, self.out_dir, self.best_path, self.log_path)
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

    def _steps_done(self) -> bool:
        return getattr(self, "_max_steps", None) is not None and self.progress.step >= self._max_steps

    def _train_epoch(self, started: float, budget: float | None) -> bool:
        """Train the rest of the current epoch; True if the time budget ran out before its end."""
        p = self.progress
        batches = self.train_batches.epoch(p.epoch)
        self.model.train()
        with epoch_bar(self.config.name, p.epoch, len(batches), p.batch, self.show_progress) as bar:
            while p.batch < len(batches):
                t0 = time.perf_counter()
                loss, n_tokens = self._step(self.train_batches.load(batches[p.batch], self.device))
                p.epoch_seconds += time.perf_counter() - t0
                p.epoch_loss_sum += loss * n_tokens
                p.epoch_tokens += n_tokens
                p.batch += 1
                p.step += 1
                if self.logger is not None:
                    self._tell("step", {"step": p.step, "epoch": p.epoch + p.batch / len(batches), "loss": loss,
                                        "lr": self.last_lr, "grad_norm": self.last_grad_norm, "tokens": n_tokens})
                if self.config.eval_every and p.step % self.config.eval_every == 0:
                    self._curve_point(len(batches))
                if self.config.onset_step is not None and p.step == self.config.onset_step:
                    self._check_onset()
                bar.update(1)
                bar.set_postfix(
                    loss=f"{p.epoch_loss_sum / max(p.epoch_tokens, 1):.3f}",
                    tok_s=f"{p.epoch_tokens / max(p.epoch_seconds, 1e-9):.0f}",
                )
                out_of_time = budget is not None and time.monotonic() - started >= budget
                if p.batch < len(batches) and (out_of_time or self._steps_done()):
                    save_checkpoint(self.last_path, self._payload(full=True))
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
        record = {
            "epoch": p.epoch + 1,
            "step": p.step,
            "train_loss": p.epoch_loss_sum / max(p.epoch_tokens, 1),
            "val_loss": val_loss,
            "val_accuracy": val_accuracy,
            "lr": self.scheduler.get_last_lr()[0],
            "seconds": p.epoch_seconds,
            "train_tokens": p.epoch_tokens,
            "tokens_per_s": p.epoch_tokens / max(p.epoch_seconds, 1e-9),
            "best": improved,
        }
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
        self._tell("epoch", record)
        if self.verbose:
            tqdm.write(
                f"{self.config.name} epoch {record['epoch']}: train loss {record['train_loss']:.4f}, "
                f"val loss {val_loss:.4f}, val accuracy {val_accuracy:.4f}{' (best)' if improved else ''}, "
                f"{record['seconds']:.0f} s, "
                f"{record['tokens_per_s']:.0f} tokens/s"
            )
        if improved:
            save_checkpoint(self.best_path, self._payload(full=False))
        save_checkpoint(self.last_path, self._payload(full=True))

    def _result(self, stopped: str) -> FitResult:
        p = self.progress
        return FitResult(
            stopped=stopped,
            epochs=p.epoch,
            best_epoch=p.best_epoch,
            best_val_loss=p.best_val_loss,
            history=read_log(self.log_path),
            best_val_accuracy=p.best_val_accuracy,
        )


# --------------------------------------------------------------------------- one run from a Config


@dataclass
class RunResult:
    """A finished (or paused) training run and what it cost."""

    fit: FitResult
    params: int
    peak_memory_bytes: int | None
    device: str
    best_checkpoint: Path
    parts: list[dict] = field(default_factory=list)  # what the builder recorded (ModelBuilder.records)


def fused_attention_on(device: torch.device | str, enabled: bool | None = None) -> bool:
    """Whether training on ``device`` runs attention through ``F.scaled_dot_product_attention``.

    ``enabled=None``: on CUDA only, like bf16 autocast (:func:`cipherlab.base.device.autocast`). On a
    CPU the scratch maths runs, which is what every committed CPU result was measured with.
    """
    return torch.device(device).type == "cuda" if enabled is None else enabled


def train_config(
    config: Config,
    out_dir: str | os.PathLike,
    *,
    data_dir: str | os.PathLike | None = None,
    device: torch.device | str | None = None,
    resume: bool = False,
    time_budget_s: float | None = None,
    verbose: bool = False,
    progress: bool | None = None,
    builder: ModelBuilder = OWN_MODEL,
    max_steps: int | None = None,
    logger: TrainingLogger | None = None,
) -> RunResult:
    """Everything for one configuration: data, codec, model, and :meth:`Trainer.fit`.

    ``logger``: told of every step, validation and epoch (:class:`TrainingLogger`; the command line's
    ``--wandb`` passes :class:`cipherlab.pipeline.tracking.WandbLogger`); None tells no one.

    ``builder``: what builds the model (:class:`~cipherlab.pipeline.codec.ModelBuilder`), asked first whether it
    can, before any data is read; the checkpoints record what it says of itself (``artifacts["parts"]``).
    """
    prepared = time.monotonic()
    builder.prepare(config)  # one line, before anything else, for a model it cannot build
    records = builder.records
    device = pick_device(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    seed_everything(config.seed)
    corpus = select_lines(load_corpus(data_dir), config)
    codec = fit_codec(config, corpus)

    def batches(split: str, shuffle: bool) -> Batches:
        chunks = make_chunks(corpus.plain, corpus.cipher, corpus.splits[split], config.chunk_chars)
        if split == "train" or config.augment_val:  # validation is English unless augment_val (seed + 1)
            chunks = shuffle_chunks(chunks, config.phase_shuffle, config.seed + (split != "train"), config.case_flip,
                                    config.substitution)
        dataset = codec.dataset(chunks, dropout=config.bpe_dropout if split == "train" else 0.0, seed=config.seed)
        sampler = BucketBatchSampler(
            dataset.src_lengths, config.token_budget, config.max_batch_size, shuffle=shuffle, seed=config.seed
        )
        return Batches(dataset, sampler, codec.collate)

    seed_everything(config.seed)  # the initial weights depend on the seed alone
    model = builder(config, codec, fused_attention=fused_attention_on(device))
    trainer = Trainer(
        model,
        batches("train", shuffle=True),
        batches("val", shuffle=False),
        config,
        out_dir,
        device=device,
        tgt_pad_id=codec.tgt_pad_id,
        identity={"data": corpus.sha256, **codec.identity()},
        artifacts={**codec.artifacts(), **({"parts": records} if records else {})},
        verbose=verbose,
        progress=progress,
        logger=logger,
        builder=builder,
    )
    if verbose:  # the command line: what is about to run, and progress where no bar shows (a log, `| tee`)
        announce(trainer, time.monotonic() - prepared, progress)
    fit = trainer.fit(resume=resume, time_budget_s=time_budget_s, max_steps=max_steps)
    return RunResult(
        fit=fit,
        params=sum(p.numel() for p in model.parameters()),
        peak_memory_bytes=peak_memory_bytes(device),
        device=str(device),
        best_checkpoint=trainer.best_path,
        parts=records,
    )
