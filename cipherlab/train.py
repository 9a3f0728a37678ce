"""Training: teacher forcing, AdamW with warm-up, checkpoints you can resume exactly (chapter 8).

One optimisation step is the loop of the course notes, line by line::

    logits = model(src, tgt[:, :-1])                     # teacher forcing: feed the answer so far
    loss = cross_entropy(logits, tgt[:, 1:], ignore pad, label_smoothing=0.1)
    optimizer.zero_grad(); loss.backward()
    clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step(); scheduler.step()

Everything else here is what makes a long run trustworthy:

- validation loss (*without* label smoothing, so it measures prediction quality) and teacher-forced
  token accuracy every epoch;
- ``best.pt`` whenever the validation score named by ``Config.select_on`` improves (loss by
  default), early stopping after ``patience`` epochs without;
- ``last.pt`` after every epoch (and when a time budget runs out mid-epoch) holding the model,
  optimizer, scheduler, every random-number generator and the position in the epoch, so
  ``resume=True`` continues exactly where the run stopped -- the same losses, bit for bit on CPU;
- checkpoints written atomically (temporary file, then ``os.replace``) and loaded with
  ``torch.load(weights_only=True)``: a checkpoint holds tensors and plain Python values only,
  so loading one never runs code from the file;
- a NaN or infinite loss stops the run before it can touch the weights or the checkpoints;
- ``log.jsonl``: one JSON record per epoch.

The module has three parts:

1. :class:`Trainer`, which knows nothing about ciphers: it takes any model called as
   ``model(src=..., tgt_in=..., **extra)`` and batches that are dicts with ``src`` and ``tgt``;
2. the *codecs*, everything between strings and tensors for one configuration:
   :class:`SubwordCodec` (C1-C4: source and target BPE, ``Seq2SeqTransformer``) and
   :class:`ByteCodec` (C5: bytes, entropy patches, ``BLTModel``);
3. :func:`train_config`, which puts data, codec, model and trainer together for a ``Config``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from cipherlab.cipher import bits_to_bytes
from cipherlab.config import Config
from cipherlab.data import (
    BucketBatchSampler,
    ByteChunkDataset,
    SubwordChunkDataset,
    collate,
    load_corpus,
    make_chunks,
    shuffle_chunks,
)
from cipherlab.device import pick_device
from cipherlab.models import Seq2SeqTransformer
from cipherlab.models.blt import BLTModel, ByteEntropyModel, collate_bytes, collate_source, greedy_decode_blt
from cipherlab.tokenizers import BPETokenizer, get_tokenizers
from cipherlab.tokenizers.bytes import BOS_ID, EOS_ID, PAD_ID, ByteTokenizer

try:  # peak resident memory on CPU; the module does not exist on Windows
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None

__all__ = [
    "CHECKPOINT_FORMAT",
    "Batches",
    "ByteCodec",
    "CheckpointError",
    "Codec",
    "FitResult",
    "RunResult",
    "SubwordCodec",
    "Trainer",
    "TrainingDiverged",
    "WarmupInverseSqrt",
    "autocast",
    "codec_from_artifacts",
    "fit_codec",
    "load_checkpoint",
    "make_optimizer",
    "make_scheduler",
    "peak_memory_bytes",
    "read_log",
    "rng_state",
    "save_checkpoint",
    "seed_everything",
    "select_lines",
    "sequence_loss",
    "set_rng_state",
    "teacher_forcing_logits",
    "train_config",
]

CHECKPOINT_FORMAT = "cipherlab-checkpoint-1"
# Config fields a resumed run may change: budgets, not the model or the data. Raising max_epochs
# continues a finished run, e.g. to bring every configuration to the same number of epochs.
_RUNTIME_FIELDS = ("time_budget_s", "max_epochs")


class CheckpointError(ValueError):
    """A checkpoint that is unreadable, or was made with another configuration or tokenizer."""


class TrainingDiverged(RuntimeError):
    """The training loss became NaN or infinite."""


# --------------------------------------------------------------------------- reproducibility


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's generators (torch seeds CUDA too)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_state() -> dict:
    """Every generator's state, as tensors (so ``torch.load(weights_only=True)`` can read it)."""
    version, mt, gauss_next = random.getstate()
    _, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    state = {
        "python": torch.tensor([version, *mt], dtype=torch.int64),
        "python_gauss": torch.tensor(math.nan if gauss_next is None else gauss_next, dtype=torch.float64),
        "numpy": torch.from_numpy(np_keys.astype(np.int64)),
        "numpy_extra": torch.tensor([np_pos, np_has_gauss, np_gauss], dtype=torch.float64),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    if torch.backends.mps.is_available():
        state["mps"] = torch.mps.get_rng_state()
    return state


def set_rng_state(state: dict) -> None:
    """Inverse of :func:`rng_state`."""
    version, *mt = state["python"].tolist()
    gauss = state["python_gauss"].item()
    random.setstate((version, tuple(mt), None if math.isnan(gauss) else gauss))
    pos, has_gauss, gauss = state["numpy_extra"].tolist()
    np.random.set_state(("MT19937", state["numpy"].numpy().astype(np.uint32), int(pos), int(has_gauss), gauss))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "mps" in state and torch.backends.mps.is_available():
        torch.mps.set_rng_state(state["mps"])


# --------------------------------------------------------------------------- the pieces of a step


def autocast(device: torch.device):
    """bf16 autocast on CUDA; a no-op (full fp32) on CPU and MPS."""
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


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


def teacher_forcing_logits(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """``model(src=src, tgt_in=tgt[:, :-1], **extra)``: predict each target token from those before it.

    ``extra`` is every other tensor of the batch, e.g. the BLT's ``src_member``/``tgt_member``.
    """
    extra = {key: value for key, value in batch.items() if key not in ("src", "tgt")}
    return model(src=batch["src"], tgt_in=batch["tgt"][:, :-1], **extra)  # (B, Lt-1, V)


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


def peak_memory_bytes(device: torch.device) -> int | None:
    """Peak memory of this process: CUDA ``max_memory_allocated`` on a GPU, else peak RSS.

    Peak RSS (``resource.getrusage``) is a high-water mark of the whole process since it
    started, so it only measures one configuration when the process runs only that one.
    None where it cannot be measured (Windows).
    """
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    if resource is None:  # pragma: no cover - Windows
        return None
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024  # macOS reports bytes, Linux KiB


# --------------------------------------------------------------------------- checkpoints


def save_checkpoint(path: str | os.PathLike, payload: dict) -> None:
    """Write ``payload`` to ``path`` atomically: a reader sees the old file or the new one, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        torch.save(payload, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_checkpoint(
    path: str | os.PathLike, *, config: Config | None = None, identity: dict | None = None
) -> dict:
    """Read a checkpoint safely (``weights_only=True``) and check it fits ``config`` and ``identity``.

    Raises FileNotFoundError for a missing file and CheckpointError for a file that is not a
    cipherlab checkpoint or that was made with another configuration or tokenizer.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such checkpoint; pass the path of a best.pt or last.pt")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # any unpickling failure means "not a checkpoint we can trust"
        first = (str(e).strip().splitlines() or [""])[0]  # torch's unpickling messages run to many lines
        raise CheckpointError(f"{path}: not a readable cipherlab checkpoint ({type(e).__name__}: {first})") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: not a cipherlab checkpoint (expected format {CHECKPOINT_FORMAT!r})")
    if config is not None:
        saved, now = payload["config"], config.to_dict()
        # A field the checkpoint does not know was added to Config after it was written; the
        # run goes on with that field's value now (its default reproduces the old behaviour).
        diffs = [
            f"{key}: {saved.get(key)!r} in the checkpoint, {now[key]!r} now"
            for key in now
            if key in saved and key not in _RUNTIME_FIELDS and _plain(saved[key]) != _plain(now[key])
        ]
        if diffs:
            raise CheckpointError(
                f"{path} was made with another configuration ({'; '.join(diffs)}); use the same "
                "--config and --preset to resume, or train into a new --out folder"
            )
    if identity is not None:
        diffs = [
            f"{key}: {payload['identity'].get(key)} in the checkpoint, {value} now"
            for key, value in identity.items()
            if payload["identity"].get(key) != value
        ]
        if diffs:
            raise CheckpointError(
                f"{path} was made with another tokenizer or data ({'; '.join(diffs)}); "
                "train into a new --out folder"
            )
    return payload


def _plain(value):
    """Tuples and lists compare equal after a round trip through a checkpoint."""
    return list(value) if isinstance(value, tuple) else value


# --------------------------------------------------------------------------- the trainer


@dataclass
class Batches:
    """A dataset and its batch sampler: what the trainer iterates over.

    ``sampler.epoch_batches(epoch)`` gives the epoch's batches of example indices (the same
    list every time for the same epoch: that is what makes resuming mid-epoch exact), and
    ``collate(examples)`` turns a list of examples into a dict of tensors with ``src``, ``tgt``.
    """

    dataset: Sequence
    sampler: object  # cipherlab.data.BucketBatchSampler or anything with epoch_batches(epoch)
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

    stopped: str  # "early stopping", "max_epochs" or "time budget"
    epochs: int  # epochs completed (over all runs of this out_dir)
    best_epoch: int
    best_val_loss: float
    history: list[dict]  # the records of log.jsonl, all runs
    best_val_accuracy: float = -1.0


class Trainer:
    """Trains ``model`` on ``train`` batches, validating on ``val`` batches, writing to ``out_dir``.

    ``identity`` (e.g. the tokenizer and data digests) and ``artifacts`` (plain data needed to
    rebuild the model's input pipeline, e.g. the tokenizers) are stored in every checkpoint.
    ``verbose`` prints one summary line per epoch.
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
    ):
        self.model = model.to(device)
        self.train_batches, self.val_batches = train, val
        self.config, self.device, self.tgt_pad_id = config, device, tgt_pad_id
        self.out_dir = Path(out_dir)
        self.identity, self.artifacts = identity or {}, artifacts or {}
        self.verbose = verbose
        self.show_progress = progress  # progress bars: None = when output is a terminal or notebook
        self.optimizer = make_optimizer(model, config)
        self.scheduler = make_scheduler(self.optimizer, config)
        self.progress = Progress()

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
        self.model.load_state_dict(payload["model"])
        self.optimizer.load_state_dict(payload["optimizer"])
        self.scheduler.load_state_dict(payload["scheduler"])
        set_rng_state(payload["rng"])
        self.progress = Progress(**payload["progress"])
        # A run killed between writing its log record and its checkpoint would log an epoch twice.
        kept = [r for r in read_log(self.log_path) if r["epoch"] <= self.progress.epoch]
        self.log_path.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")

    # ---- validation
    def validation_loss(self) -> float:
        """Mean cross-entropy per target token over the validation set, no label smoothing."""
        return self.validate()[0]

    @torch.no_grad()
    def validate(self) -> tuple[float, float]:
        """(mean cross-entropy, share of target tokens predicted right) over the validation set,
        both teacher-forced, no label smoothing, padding excluded."""
        self.model.eval()
        total, tokens, right = 0.0, 0, 0
        for indices in self.val_batches.epoch(0):
            batch = self.val_batches.load(indices, self.device)
            with autocast(self.device):
                logits = teacher_forcing_logits(self.model, batch)
            gold = batch["tgt"][:, 1:]
            loss, n = sequence_loss(logits, gold, self.tgt_pad_id)
            total, tokens = total + loss.item() * n, tokens + n
            right += ((logits.argmax(-1) == gold) & (gold != self.tgt_pad_id)).sum().item()
        return total / max(tokens, 1), right / max(tokens, 1)

    # ---- training
    def _step(self, batch: dict[str, torch.Tensor]) -> tuple[float, int]:
        """One optimiser step on one batch: (mean training loss, target tokens)."""
        with autocast(self.device):
            logits = teacher_forcing_logits(self.model, batch)
        loss, n_tokens = sequence_loss(logits, batch["tgt"][:, 1:], self.tgt_pad_id, self.config.label_smoothing)
        if not torch.isfinite(loss):
            self._diverged(f"the training loss became {loss.item()}")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        if not torch.isfinite(grad_norm):
            self._diverged(f"the gradient norm became {grad_norm.item()}")
        self.optimizer.step()
        self.scheduler.step()
        return loss.item(), n_tokens

    def _diverged(self, what: str) -> None:
        p = self.progress
        kept = (
            f"{self.last_path} still holds the last good state"
            if self.last_path.exists()
            else "no checkpoint was written yet"
        )
        raise TrainingDiverged(
            f"{what} at epoch {p.epoch + 1}, step {p.step + 1}; training stopped before updating the "
            f"weights and {kept}. Lower lr (now {self.config.lr}) or raise warmup_steps and train again"
        )

    def fit(self, *, resume: bool = False, time_budget_s: float | None = None) -> FitResult:
        """Train until early stopping, ``max_epochs`` or the time budget, whichever comes first.

        ``resume=True`` continues from ``out_dir/last.pt`` (when it exists) exactly where it
        stopped. ``time_budget_s`` (default: the config's) counts the seconds of this call;
        when it runs out, last.pt records the position in the epoch and fit returns.
        """
        budget = self.config.time_budget_s if time_budget_s is None else time_budget_s
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if resume and self.last_path.exists():
            self._restore()
        else:
            self.log_path.unlink(missing_ok=True)
        started = time.monotonic()
        p = self.progress
        if p.finished == "max_epochs" and p.epoch < self.config.max_epochs:
            p.finished = ""  # resumed with a larger max_epochs: train on
        elif not p.finished and p.epoch >= self.config.max_epochs:
            p.finished = "max_epochs"  # resumed with max_epochs already reached: nothing to train
        while not p.finished:
            if self._train_epoch(started, budget):
                return self._result("time budget")
            self._end_epoch()
            if not p.finished and budget is not None and time.monotonic() - started >= budget:
                return self._result("time budget")
        return self._result(p.finished)

    def _train_epoch(self, started: float, budget: float | None) -> bool:
        """Train the rest of the current epoch; True if the time budget ran out before its end."""
        p = self.progress
        batches = self.train_batches.epoch(p.epoch)
        self.model.train()
        bar = tqdm(
            total=len(batches),
            initial=p.batch,
            desc=f"{self.config.name} epoch {p.epoch + 1}",
            unit="batch",
            # None: no bar when output is not a terminal or a notebook (CI, logs); False: never
            disable=None if self.show_progress is None else not self.show_progress,
            leave=False,
        )
        with bar:
            while p.batch < len(batches):
                t0 = time.perf_counter()
                loss, n_tokens = self._step(self.train_batches.load(batches[p.batch], self.device))
                p.epoch_seconds += time.perf_counter() - t0
                p.epoch_loss_sum += loss * n_tokens
                p.epoch_tokens += n_tokens
                p.batch += 1
                p.step += 1
                bar.update(1)
                bar.set_postfix(
                    loss=f"{p.epoch_loss_sum / max(p.epoch_tokens, 1):.3f}",
                    tok_s=f"{p.epoch_tokens / max(p.epoch_seconds, 1e-9):.0f}",
                )
                if p.batch < len(batches) and budget is not None and time.monotonic() - started >= budget:
                    save_checkpoint(self.last_path, self._payload(full=True))
                    return True
        return False

    def _end_epoch(self) -> None:
        """Validate, log, checkpoint, decide whether to stop."""
        p = self.progress
        val_loss, val_accuracy = self.validate()
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


def read_log(path: str | os.PathLike) -> list[dict]:
    """The records of a log.jsonl, oldest first (empty when there is none yet)."""
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# --------------------------------------------------------------------------- codecs: text <-> ids


class SubwordCodec:
    """C1-C4: the cipher through the source BPE, the plaintext through the target BPE.

    A codec is everything between strings and tensors for one configuration: datasets and
    batches for training, source ids and target text for decoding, and what a checkpoint
    must carry to do the same later (``artifacts``) and to recognise itself (``identity``).
    """

    kind = "bpe"

    def __init__(self, src_tokenizer, tgt_tokenizer):
        self.src, self.tgt = src_tokenizer, tgt_tokenizer
        self.src_pad_id, self.tgt_pad_id = src_tokenizer.pad_id, tgt_tokenizer.pad_id
        self.bos_id, self.eos_id = tgt_tokenizer.bos_id, tgt_tokenizer.eos_id

    @classmethod
    def fit(cls, config: Config, corpus) -> SubwordCodec:
        """Train (or load from the corpus cache) both tokenizers on the training split only."""
        return cls(*get_tokenizers(corpus, config.source_mode, config.src_vocab, config.tgt_vocab))

    def build_model(self, config: Config) -> nn.Module:
        return Seq2SeqTransformer(
            self.src.vocab_size,
            self.tgt.vocab_size,
            **config.model_hyperparameters(),
            pos_encoding=config.pos_encoding,
            attn_type=config.attn_type,
            n_kv_heads=config.n_kv_heads if config.attn_type == "gqa" else None,
            norm=config.norm,
            rope_cross_attention=config.rope_cross_attention,
            src_pad_id=self.src_pad_id,
            tgt_pad_id=self.tgt_pad_id,
            src_codes=self.codes(self.src) if config.bit_embeddings else None,
            tgt_codes=self.codes(self.tgt) if config.bit_embeddings else None,
            phase_embedding=config.phase_embedding,
        )

    @staticmethod
    def codes(tokenizer) -> list[int | None]:
        """Each id's byte (a source token of exactly one 8-bit group) or character code (a
        one-character target token), None for specials and multi-unit tokens: the features of
        ``Config.bit_embeddings``."""
        codes = []
        for i in range(tokenizer.vocab_size):
            if i in (tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id, tokenizer.unk_id):
                codes.append(None)
                continue
            if tokenizer.unit == "char":
                text = tokenizer.decode([i])
                codes.append(ord(text) if len(text) == 1 and ord(text) < 256 else None)
            else:  # source tokens are strings of bits
                token = tokenizer._id_to_token[i]
                codes.append(int(token, 2) if tokenizer.unit == "byte8" and len(token) == 8 else None)
        return codes

    def dataset(self, chunks):
        return SubwordChunkDataset(chunks, self.src, self.tgt)

    def collate(self, examples) -> dict[str, torch.Tensor]:
        return collate(examples, self.src_pad_id, self.tgt_pad_id)

    def encode_source(self, bits: str) -> list[int]:
        return self.src.encode(bits)

    def collate_sources(self, sources: list[list[int]]) -> dict[str, torch.Tensor]:
        return {"src": collate([(s, []) for s in sources], self.src_pad_id, self.tgt_pad_id)["src"]}

    def greedy_decode(self, model: nn.Module, batch: dict[str, torch.Tensor], max_len: int, step_hook=None) -> torch.Tensor:
        return model.greedy_decode(batch["src"], self.bos_id, self.eos_id, max_len, use_cache=True, step_hook=step_hook)

    def token_chars(self) -> list[int]:
        """Plaintext characters of each target id (0 for <pad>/<bos>/<eos>, 1 for <unk>); computed once."""
        if getattr(self, "_token_chars", None) is None:
            self._token_chars = [len(self.tgt.decode([i])) for i in range(self.tgt.vocab_size)]
        return self._token_chars

    def decode_target(self, ids: Sequence[int]) -> str:
        return self.tgt.decode(ids)

    def artifacts(self) -> dict:
        """Both tokenizers as the text of their files: a checkpoint can then decrypt on its own."""
        return {"src_tokenizer": _tokenizer_text(self.src), "tgt_tokenizer": _tokenizer_text(self.tgt)}

    @classmethod
    def from_artifacts(cls, artifacts: dict, config: Config) -> SubwordCodec:
        return cls(_tokenizer_from_text(artifacts["src_tokenizer"]), _tokenizer_from_text(artifacts["tgt_tokenizer"]))

    def identity(self) -> dict:
        return {key: _sha256(text) for key, text in self.artifacts().items()}


class ByteCodec:
    """C5: cipher bytes and plaintext bytes, no vocabulary; source patches from an entropy model.

    The entropy model is counted on the training split's cipher bytes only; its tables and the
    threshold (a percentile of the training entropies) travel in the checkpoint.
    """

    kind = "blt"

    def __init__(self, entropy_model, threshold: float, config: Config):
        self.entropy_model, self.threshold = entropy_model, threshold
        self.max_patch, self.patch_tgt = config.blt_max_patch, config.blt_patch_tgt
        self.src_pad_id = self.tgt_pad_id = PAD_ID
        self.bos_id, self.eos_id = BOS_ID, EOS_ID
        self.bytes = ByteTokenizer()

    @classmethod
    def fit(cls, config: Config, corpus) -> ByteCodec:
        _, cipher = corpus.lines("train")
        model = ByteEntropyModel().fit(bits_to_bytes(bits) for bits in cipher)
        return cls(model, model.threshold_at(config.blt_entropy_percentile), config)

    def build_model(self, config: Config) -> nn.Module:
        return BLTModel(
            **config.model_hyperparameters(),
            local_layers=config.blt_local_layers,
            window=config.blt_window,
            patch_tgt=config.blt_patch_tgt,
            source_memory=config.blt_source_memory,
            bit_embeddings=config.bit_embeddings,
            phase_embedding=config.phase_embedding,
        )

    def dataset(self, chunks):
        return ByteChunkDataset(chunks)

    def collate(self, examples) -> dict[str, torch.Tensor]:
        return collate_bytes(
            examples, self.entropy_model, self.threshold, max_patch=self.max_patch, patch_tgt=self.patch_tgt
        )

    def encode_source(self, bits: str) -> list[int]:
        return self.bytes.encode_cipher(bits)

    def collate_sources(self, sources: list[list[int]]) -> dict[str, torch.Tensor]:
        src, src_member = collate_source(sources, self.entropy_model, self.threshold, self.max_patch)
        return {"src": src, "src_member": src_member}

    def greedy_decode(self, model: nn.Module, batch: dict[str, torch.Tensor], max_len: int, step_hook=None) -> torch.Tensor:
        return greedy_decode_blt(model, batch["src"], batch["src_member"], max_len, self.bos_id, self.eos_id,
                                 step_hook=step_hook)

    def token_chars(self) -> list[int]:
        """Plaintext characters of each target id: 1 for a byte, 0 for PAD/BOS/EOS."""
        return [1 if i < 256 else 0 for i in range(max(PAD_ID, BOS_ID, EOS_ID) + 1)]

    def decode_target(self, ids: Sequence[int]) -> str:
        return self.bytes.decode(ids)

    def artifacts(self) -> dict:
        m = self.entropy_model
        return {
            "min_count": m.min_count,
            "unigram_entropy": m.unigram_entropy,
            "bigram_table": torch.from_numpy(m.bigram_table),
            "trigram_table": torch.from_numpy(m.trigram_table),
            "threshold": self.threshold,
        }

    @classmethod
    def from_artifacts(cls, artifacts: dict, config: Config) -> ByteCodec:
        model = ByteEntropyModel(min_count=artifacts["min_count"])
        model.unigram_entropy = artifacts["unigram_entropy"]
        model.bigram_table = artifacts["bigram_table"].numpy()
        model.trigram_table = artifacts["trigram_table"].numpy()
        return cls(model, artifacts["threshold"], config)

    def identity(self) -> dict:
        m = self.entropy_model
        digest = hashlib.sha256(repr((m.min_count, m.unigram_entropy, self.threshold)).encode())
        digest.update(m.bigram_table.tobytes())
        digest.update(m.trigram_table.tobytes())
        return {"entropy_model": digest.hexdigest()}


Codec = SubwordCodec | ByteCodec
_CODECS = {"bpe": SubwordCodec, "blt": ByteCodec}


def fit_codec(config: Config, corpus) -> Codec:
    """The codec of ``config``, learned from the training split of ``corpus``."""
    return _CODECS[config.tokenization].fit(config, corpus)


def codec_from_artifacts(config: Config, artifacts: dict) -> Codec:
    """The codec a checkpoint was trained with, rebuilt from the checkpoint alone."""
    return _CODECS[config.tokenization].from_artifacts(artifacts, config)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _tokenizer_text(tokenizer) -> str:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tokenizer.json"
        tokenizer.save(path)
        return path.read_text(encoding="utf-8")


def _tokenizer_from_text(text: str):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tokenizer.json"
        path.write_text(text, encoding="utf-8")
        return BPETokenizer.load(path)


# --------------------------------------------------------------------------- one run from a Config


def select_lines(corpus, config: Config):
    """The corpus limited to the first ``max_train_lines`` training and ``max_eval_lines`` val/test lines.

    Fewer training lines make a different training set: it gets its own digest, so tokenizers
    and entropy models learned from it are never mistaken for the full corpus's. The val/test
    limits change nothing that is learned, so they keep the digest.
    """
    limits = {"train": config.max_train_lines, "val": config.max_eval_lines, "test": config.max_eval_lines}
    splits = {name: ids[: limits[name]] for name, ids in corpus.splits.items()}
    digest = corpus.sha256
    if config.max_train_lines is not None:
        digest = _sha256(f"{corpus.sha256}:train[:{config.max_train_lines}]")
    return dataclasses.replace(corpus, splits=splits, sha256=digest)


@dataclass
class RunResult:
    """A finished (or paused) training run and what it cost."""

    fit: FitResult
    params: int
    peak_memory_bytes: int | None
    device: str
    best_checkpoint: Path


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
) -> RunResult:
    """Everything for one configuration: data, codec, model, and :meth:`Trainer.fit`."""
    device = pick_device(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    seed_everything(config.seed)
    corpus = select_lines(load_corpus(data_dir), config)
    codec = fit_codec(config, corpus)

    def batches(split: str, shuffle: bool) -> Batches:
        chunks = make_chunks(corpus.plain, corpus.cipher, corpus.splits[split], config.chunk_chars)
        if split == "train":  # validation stays English: best.pt is chosen on real text
            chunks = shuffle_chunks(chunks, config.phase_shuffle, config.seed)
        dataset = codec.dataset(chunks)
        sampler = BucketBatchSampler(
            dataset.src_lengths, config.token_budget, config.max_batch_size, shuffle=shuffle, seed=config.seed
        )
        return Batches(dataset, sampler, codec.collate)

    seed_everything(config.seed)  # the initial weights depend on the seed alone
    model = codec.build_model(config)
    trainer = Trainer(
        model,
        batches("train", shuffle=True),
        batches("val", shuffle=False),
        config,
        out_dir,
        device=device,
        tgt_pad_id=codec.tgt_pad_id,
        identity={"data": corpus.sha256, **codec.identity()},
        artifacts=codec.artifacts(),
        verbose=verbose,
        progress=progress,
    )
    fit = trainer.fit(resume=resume, time_budget_s=time_budget_s)
    return RunResult(
        fit=fit,
        params=sum(p.numel() for p in model.parameters()),
        peak_memory_bytes=peak_memory_bytes(device),
        device=str(device),
        best_checkpoint=trainer.best_path,
    )
