"""A training run's files and words: what :mod:`cipherlab.pipeline.train` needs besides the loop.

The training loop (:class:`cipherlab.pipeline.train.Trainer`) stays a plain loop; this module holds what
makes a run usable from a command line and trustworthy on disk, none of which changes a weight:

- resuming: the log and the learning curve cut back to the checkpoint's epoch and step (:func:`trim_logs`);
- the progress bar of an epoch (:func:`epoch_bar`), the line before the first epoch and the heartbeat where no bar
  shows (:func:`announce`), the bar of ``plan`` and ``doctor`` (:class:`StepBar`);
- why a run diverged, from what the model does on the validation chunks (:func:`divergence_advice`), and the other
  one-line messages of a run that stops (:func:`diverged_message`, :func:`not_learning_message`, ...);
- the peak memory a run used (:func:`peak_memory_bytes`).

The run's lock (:class:`cipherlab.base.files.own_folder`) and the atomic writer of its files
(:func:`cipherlab.base.files.write_atomic`) are the package's one lock and one writer, in ``cipherlab.base``.
A trainer here is any object with a :class:`~cipherlab.pipeline.train.Trainer`'s attributes.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from tqdm.auto import tqdm

from cipherlab.base.device import autocast
from cipherlab.base.files import write_atomic
from cipherlab.pipeline.checkpoint import CheckpointError, read_log
from cipherlab.pipeline.codec import teacher_forcing_logits

try:  # peak resident memory on CPU; the module does not exist on Windows
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None

__all__ = ["HEARTBEAT_S", "NotLearning", "StepBar", "TrainingDiverged", "TrainingLogger", "announce",
           "divergence_advice", "diverged_message", "epoch_bar", "not_learning_message", "peak_memory_bytes",
           "refuse_lost_best", "refuse_lost_last", "refuse_other_parts", "trim_logs"]


# --------------------------------------------------------------------------- how a run stops, and who hears of it


class TrainingDiverged(RuntimeError):
    """The training loss became NaN or infinite."""


class NotLearning(RuntimeError):
    """Teacher-forced validation accuracy was still below ``Config.onset_accuracy`` at ``Config.onset_step``."""


class TrainingLogger:
    """What a :class:`Trainer` tells an observer (``Trainer(logger=...)``) while it trains: a base class
    whose methods do nothing, so that an observer overrides only what it records. Any object with
    some of these methods will do (the trainer calls those it has); each gets one plain dict.

    The trainer knows nothing of where the numbers go: an experiment tracker (Weights & Biases,
    :class:`cipherlab.pipeline.tracking.WandbLogger`), a plot in a notebook or a test's list.
    A resumed run reports from the step it resumes at; the steps before are in ``log.jsonl``.
    """

    def step(self, record: dict) -> None:
        """After each optimiser step: ``step`` (optimiser steps so far), ``epoch`` (epochs done, fractional),
        ``loss`` (the batch's mean training loss, label smoothing included), ``lr`` (the learning rate this
        step used), ``grad_norm`` (the gradient norm before clipping to ``Config.grad_clip``), ``tokens``."""

    def validation(self, record: dict) -> None:
        """After each mid-epoch validation (``Config.eval_every``): the record ``curve.jsonl`` gets (``step``,
        ``epoch``, ``val_loss``, ``val_accuracy`` teacher-forced, ``val_exact_chunks``, seconds)."""

    def epoch(self, record: dict) -> None:
        """After each epoch's validation: the record ``log.jsonl`` gets (``epoch``, ``step``, ``train_loss``,
        ``val_loss``, ``val_accuracy``, ``lr``, ``seconds``, ``train_tokens``, ``tokens_per_s``, ``best``)."""


# --------------------------------------------------------------------------- resuming a run


def trim_logs(log_path: Path, curve_path: Path, epoch: int, step: int) -> None:
    """Cut ``log.jsonl`` back to the checkpoint's ``epoch`` and ``curve.jsonl`` to its ``step``: a run killed
    between writing its log record and its checkpoint would log an epoch twice. A torn last line is dropped."""
    kept = [r for r in read_log(log_path, torn_ok=True) if r["epoch"] <= epoch]
    write_atomic(log_path, "".join(json.dumps(r) + "\n" for r in kept))
    if curve_path.exists():  # the same for the learning curve, by step
        kept = [r for r in read_log(curve_path, torn_ok=True) if r["step"] <= step]
        write_atomic(curve_path, "".join(json.dumps(r) + "\n" for r in kept))


def refuse_lost_best(best_path: Path, last_path: Path, best_epoch: int) -> None:
    """Refuse to resume a run whose best.pt is gone after an epoch chose one: last.pt holds the latest
    weights, not the best, so the best cannot be made again; the run would end without one."""
    if best_epoch > 0 and not best_path.exists():
        raise CheckpointError(
            f"{best_path}: not found, but {last_path} says epoch {best_epoch} was the best; "
            "last.pt holds the latest weights, not the best, so --resume cannot make best.pt again: put best.pt "
            "back, or pass --overwrite to train again from the start"
        )


def refuse_lost_last(last_path: Path, out_dir: Path, best_path: Path, log_path: Path) -> None:
    """Refuse ``--resume`` over a run whose last.pt is gone: starting again would overwrite best.pt and the log."""
    if traces := [f.name for f in (best_path, log_path) if f.exists()]:
        raise CheckpointError(
            f"{last_path}: not found, but {out_dir} holds a training run ({', '.join(traces)}); "
            "--resume continues only from last.pt: pass --overwrite to start again (best.pt and the log are "
            "replaced), or --out to train somewhere else"
        )


def refuse_other_parts(last_path: Path, problem: str | None) -> None:
    """Refuse to resume a run whose model builder cannot rebuild its last.pt (``problem``, from
    :meth:`~cipherlab.pipeline.codec.ModelBuilder.refuse`: other parts than it was trained with)."""
    if problem:
        raise CheckpointError(f"{last_path}: {problem} to resume it, or train into a new --out folder")


def not_learning_message(config, accuracy: float, step: int) -> str:
    """Why a run that has not started to learn by ``Config.onset_step`` stopped."""
    c = config
    return (
        f"{c.name}: teacher-forced validation accuracy is {100 * accuracy:.1f}% at step {step}, still below "
        f"{100 * c.onset_accuracy:.0f}% (onset_accuracy), where the {c.preset} preset's measured runs were well past "
        f"it (onset_step={c.onset_step} is twice the latest measured onset); training stopped so the rest of the "
        "budget is not spent on a flat curve. Compare the run's settings with the preset's (chunk_chars, src_vocab, "
        "lr, warmup_steps, token_budget), or pass --set onset_step=null to train on regardless"
    )


def diverged_message(trainer, what: str, step: int | None, before: str) -> str:
    """What diverged where, what the checkpoints still hold, and what to do (:func:`divergence_advice`)."""
    p, last = trainer.progress, trainer.last_path
    kept = f"{last} still holds the last good state" if last.exists() else "no checkpoint was written yet"
    return (f"{what} at epoch {p.epoch + 1}, step {p.step + 1 if step is None else step}; training stopped before "
            f"{before} and {kept}. {divergence_advice(trainer)}")


# --------------------------------------------------------------------------- what a run cost

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


# --------------------------------------------------------------------------- why a run diverged

_PROBE_BATCHES = 64  # validation batches a diverged run is probed on, at most


def _finite_rows(trainer, batch: dict[str, torch.Tensor]) -> list[bool]:
    """Whether the model gives finite logits on each chunk of ``batch`` (its real target positions)."""
    with autocast(trainer.device, trainer.bf16):
        logits = teacher_forcing_logits(trainer.model, batch)
    real = (batch["tgt"][:, 1:] != trainer.tgt_pad_id).unsqueeze(-1)
    return (torch.isfinite(logits.float()) | ~real).flatten(1).all(dim=1).tolist()


def _probe(trainer) -> tuple[list[tuple[int, bool]], list[tuple[int, bool]]] | None:
    """What the model as it is gives on the validation chunks (eval mode, no gradients): (length, finite)
    for each chunk, its source length padded as the model saw it, and (n, finite) for the longest batch cut
    to its first n tokens, n = 1, 2, 4, ... ; None if that fails (the run has stopped anyway)."""
    model, was_training = trainer.model, trainer.model.training
    rows, cut, longest = [], [], None
    try:
        model.eval()
        with torch.no_grad():
            for indices in trainer.val_batches.epoch(0)[:_PROBE_BATCHES]:
                batch = trainer.val_batches.load(indices, trainer.device)
                rows += [(batch["src"].size(1), ok) for ok in _finite_rows(trainer, batch)]
                if longest is None or batch["src"].size(1) > longest["src"].size(1):
                    longest = batch
            if longest is not None and set(longest) == {"src", "tgt"}:  # a BLT's batch holds more than tokens
                full, n = longest["src"].size(1), 1
                while n < full:
                    piece = {"src": longest["src"][:, :n], "tgt": longest["tgt"][:, :n + 1]}
                    cut.append((n, all(_finite_rows(trainer, piece))))
                    n *= 2
                cut.append((full, all(_finite_rows(trainer, longest))))
                finite = [n for n, ok in cut if ok]
                lo, hi = (max(finite), min(n for n, ok in cut if not ok)) if finite and not cut[-1][1] else (0, 0)
                while hi - lo > 1 and lo < hi:  # finite up to lo, NaN from hi: find where it turns
                    mid = (lo + hi) // 2
                    piece = {"src": longest["src"][:, :mid], "tgt": longest["tgt"][:, :mid + 1]}
                    ok = all(_finite_rows(trainer, piece))
                    cut.append((mid, ok))
                    lo, hi = (mid, hi) if ok else (lo, mid)
    except Exception:
        return None
    finally:
        model.train(was_training)
    return rows, cut


def divergence_advice(trainer) -> str:
    """What to do about a NaN or infinite loss, chosen from what the model as it is does on the validation
    chunks (:func:`_probe`): lower the learning rate only when nothing points elsewhere. Finite on short
    inputs and NaN on long ones, or on some chunks and not others, is a computation that fails on some
    inputs (a part NaN only on long ones), not the learning rate; before any update, it is the model as built."""
    parts = trainer.artifacts.get("parts") or []
    yours = " or ".join(f"your {r['part']} ({r['class']} of {r['file']})" for r in parts)
    culprit = yours or "a layer of the model"
    lr = f"Lower lr (now {trainer.config.lr}) or raise warmup_steps and train again"
    rows, cut = _probe(trainer) or ([], [])
    short, long = [n for n, ok in cut if ok], [n for n, ok in cut if not ok]
    if short and long and min(long) > max(short):
        return (f"Not the learning rate: the model as it is gives finite values on the first {max(short)} source "
                f"tokens of the validation chunks and NaN from {min(long)} on; {culprit} fails on longer inputs "
                "(e.g. a mask, a table of positions or a sum that overflows): try it on inputs that long")
    bad, good = [n for n, ok in rows if not ok], [n for n, ok in rows if ok]
    if bad and good:
        return (f"Not the learning rate: the model as it is gives NaN on {len(bad)} of {len(rows)} validation chunks "
                f"and finite values on the others; {culprit} fails on some inputs: try it on those")
    if trainer.progress.step == 0:
        return ("Not the learning rate: no update was made yet, so the model as built gives it; "
                + (f"{yours} is the likely cause" if yours else "check the settings (--set) and the data"))
    return lr + (f"; if that does not help, look at {yours}" if yours else "")


# --------------------------------------------------------------------------- progress on the command line

HEARTBEAT_S = 60.0
"""Seconds between two progress lines of a verbose run whose output is not a terminal (no bar there)."""


def epoch_bar(name: str, epoch: int, total: int, done: int, show: bool | None) -> tqdm:
    """The progress bar of one epoch's ``total`` batches, ``done`` of them already. ``show`` None: no bar when
    output is not a terminal or a notebook (CI, logs), and none when the environment sets TQDM_DISABLE (tqdm's
    own switch; notebooks whose outputs are stored use it)."""
    disable = None if show is None else not show
    if show is None and os.environ.get("TQDM_DISABLE"):
        disable = True
    return tqdm(total=total, initial=done, desc=f"{name} epoch {epoch + 1}", unit="batch", disable=disable, leave=False)


def announce(trainer, seconds: float, progress: bool | None) -> None:
    """One line before the first epoch: its batches, the model, the device and the limits. Where no bar will
    show (stderr not a terminal, ``progress`` not forced on), a progress line every :data:`HEARTBEAT_S` too."""
    config = trainer.config
    steps = len(trainer.train_batches.epoch(trainer.progress.epoch))
    params = sum(p.numel() for p in trainer.model.parameters())
    budget = f", a time budget of {config.time_budget_s / 60:.0f} min" if config.time_budget_s else ""
    print(f"{config.name}: ready in {seconds:.0f} s; {len(trainer.train_batches.dataset):,} training chunks in "
          f"{steps:,} batches an epoch, {params:,} parameters, on {trainer.device}; at most {config.max_epochs} "
          f"epoch{'s' if config.max_epochs != 1 else ''}{budget}", flush=True)
    if progress is None and not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty()):
        trainer.train_batches = _Heartbeat(trainer.train_batches, trainer)


class _Heartbeat:
    """Training batches that print where the epoch is every ``every_s`` seconds (the bar's job on a terminal)."""

    def __init__(self, batches, trainer, every_s: float = HEARTBEAT_S):
        self._batches, self._trainer, self._every = batches, trainer, every_s
        self._last, self._steps = time.monotonic(), 0

    def __getattr__(self, name: str):
        return getattr(self._batches, name)

    def epoch(self, epoch: int) -> list[list[int]]:
        batches = self._batches.epoch(epoch)
        self._steps = len(batches)
        return batches

    def load(self, indices: Sequence[int], device: torch.device) -> dict[str, torch.Tensor]:
        now = time.monotonic()
        if now - self._last >= self._every:
            self._last, p = now, self._trainer.progress
            left = (f", train loss {p.epoch_loss_sum / max(p.epoch_tokens, 1):.3f}, about "
                    f"{p.epoch_seconds / p.batch * (self._steps - p.batch) / 60:.1f} min left in the epoch"
                    if p.batch else "")
            print(f"{self._trainer.config.name} epoch {p.epoch + 1}: batch {p.batch:,}/{self._steps:,}{left}",
                  flush=True)
        return self._batches.load(indices, device)


class StepBar:
    """``with StepBar(total, "plan", first_line) as step:`` ... ``step(name)`` before each of ``total`` steps:
    ``first_line`` on stderr at the first step, then a bar on a terminal or in a notebook that counts the steps
    done and names the current one (the progress of ``plan`` and ``doctor``, whose stdout is their report)."""

    def __init__(self, total: int, desc: str, first_line: str):
        self.desc, self.first_line, self.done = desc, first_line, -1
        self.bar = tqdm(total=total, desc=desc, unit="step", disable=None, leave=False, file=sys.stderr)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()

    def __call__(self, name: str) -> None:
        if self.done < 0:  # the first line once the inputs are read: a bad one is still a one-line error
            self.bar.write(self.first_line, file=sys.stderr)
        else:
            self.bar.update(1)
        self.done += 1
        self.bar.set_description(f"{self.desc}: {name}")
