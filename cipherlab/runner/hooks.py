"""A training run's hooks, files and words: what :class:`cipherlab.pipeline.train.Trainer` asks of the run around it.

The training loop stays a plain loop; :class:`RunHooks` (its :class:`~cipherlab.pipeline.train.Hooks`) holds what
makes a run usable from a command line and trustworthy on disk, none of which changes a weight:

- resuming: last.pt checked (:func:`cipherlab.runner.integrity.load_checkpoint`, the builder's parts), the log and the
  learning curve cut back to its epoch and step (:func:`trim_logs`), a lost best.pt or last.pt refused;
- mid-epoch validation (``Config.eval_every``, ``curve.jsonl``) and the onset check (``Config.onset_step``);
- the loggers told of every step, validation and epoch (:class:`TrainingLogger`), the line of each epoch;
- why a run diverged, from what the model does on the validation chunks (:func:`divergence_advice`);
- the line before the first epoch and the heartbeat where no bar shows (:func:`announce`), the bar of ``plan``
  and ``doctor`` (:class:`StepBar`), the peak memory a run used (:func:`peak_memory_bytes`).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from tqdm.auto import tqdm

from cipherlab.base.device import autocast
from cipherlab.base.files import write_atomic
from cipherlab.pipeline.checkpoint import read_log
from cipherlab.pipeline.codec import OWN_MODEL, ModelBuilder, teacher_forcing_logits
from cipherlab.pipeline.train import Hooks
from cipherlab.runner.integrity import CheckpointError, load_checkpoint, read_log_torn

try:  # peak resident memory on CPU; the module does not exist on Windows
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None

__all__ = ["HEARTBEAT_S", "NotLearning", "RunHooks", "StepBar", "TrainingLogger", "announce", "divergence_advice",
           "not_learning_message", "peak_memory_bytes", "refuse_lost_best", "refuse_lost_last", "trim_logs"]


# --------------------------------------------------------------------------- how a run stops, and who hears of it


class NotLearning(RuntimeError):
    """Teacher-forced validation accuracy was still below ``Config.onset_accuracy`` at ``Config.onset_step``."""


class TrainingLogger:
    """What a run tells an observer (``train_config(logger=...)``, :class:`RunHooks`) while it trains: a base class
    whose methods do nothing, so that an observer overrides only what it records. Any object with
    some of these methods will do (those it has are called); each gets one plain dict.

    The trainer knows nothing of where the numbers go: an experiment tracker (Weights & Biases,
    :class:`cipherlab.runner.tracking.WandbLogger`), a plot in a notebook or a test's list.
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
    kept = [r for r in (read_log_torn(log_path) if log_path.exists() else []) if r["epoch"] <= epoch]
    write_atomic(log_path, "".join(json.dumps(r) + "\n" for r in kept))
    if curve_path.exists():  # the same for the learning curve, by step
        kept = [r for r in read_log_torn(curve_path) if r["step"] <= step]
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


# --------------------------------------------------------------------------- the run's hooks


class RunHooks(Hooks):
    """What a run adds around :class:`~cipherlab.pipeline.train.Trainer` (this module's list). ``builder``: what
    built the model (resuming refuses a last.pt it did not build); ``loggers``: told of every step, validation and
    epoch (:class:`TrainingLogger`); ``verbose``: one summary line per epoch."""

    def __init__(self, builder: ModelBuilder = OWN_MODEL, loggers: Sequence = (), verbose: bool = False):
        self.builder, self.loggers, self.verbose = builder, [x for x in loggers if x is not None], verbose

    def _tell(self, event: str, record: dict) -> None:
        for logger in self.loggers:
            method = getattr(logger, event, None)
            if method is not None:
                method(record)

    def resume(self, trainer) -> dict:
        last = trainer.last_path
        payload = load_checkpoint(last, config=trainer.config, identity=trainer.identity)
        problem = self.builder.refuse(payload["artifacts"].get("parts") or [])
        if problem:  # other parts than it was trained with
            raise CheckpointError(f"{last}: {problem} to resume it, or train into a new --out folder")
        progress = payload["progress"]
        trim_logs(trainer.log_path, trainer.curve_path, progress["epoch"], progress["step"])  # no epoch logged twice
        refuse_lost_best(trainer.best_path, last, progress["best_epoch"])
        return payload

    def start_over(self, trainer) -> None:  # a run was here but its last.pt is gone
        refuse_lost_last(trainer.last_path, trainer.out_dir, trainer.best_path, trainer.log_path)

    def after_step(self, trainer, record: dict) -> None:
        self._tell("step", record)
        config, step = trainer.config, record["step"]
        if config.eval_every and step % config.eval_every == 0:
            self._curve_point(trainer, record["epoch"])
        if config.onset_step is not None and step == config.onset_step:
            self._check_onset(trainer)

    def _curve_point(self, trainer, epoch: float) -> None:
        """Validate mid-epoch (``Config.eval_every``) and append the point to ``curve.jsonl``. It
        changes nothing of the run: no checkpoint, no selection, no random numbers drawn."""
        p = trainer.progress
        started = time.perf_counter()
        val_loss, val_accuracy, exact_chunks = trainer.validate(exact=True)
        earlier = sum(r["seconds"] for r in read_log(trainer.log_path))
        record = {"step": p.step, "epoch": epoch, "val_loss": val_loss, "val_accuracy": val_accuracy,
                  "val_exact_chunks": exact_chunks, "train_seconds": earlier + p.epoch_seconds,
                  "validate_seconds": time.perf_counter() - started}
        with open(trainer.curve_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        self._tell("validation", record)
        trainer.model.train()

    def _check_onset(self, trainer) -> None:
        """Stop a run that has not started to learn by ``Config.onset_step`` (``NotLearning``), before it
        spends the rest of its budget on a flat curve; last.pt keeps the state reached."""
        _, accuracy = trainer.validate()
        trainer.model.train()
        if accuracy < trainer.config.onset_accuracy:
            trainer.save_last()
            raise NotLearning(not_learning_message(trainer.config, accuracy, trainer.progress.step))

    def after_epoch(self, trainer, record: dict) -> None:
        self._tell("epoch", record)
        if self.verbose:
            tqdm.write(f"{trainer.config.name} epoch {record['epoch']}: train loss {record['train_loss']:.4f}, "
                       f"val loss {record['val_loss']:.4f}, val accuracy {record['val_accuracy']:.4f}"
                       f"{' (best)' if record['best'] else ''}, {record['seconds']:.0f} s, "
                       f"{record['tokens_per_s']:.0f} tokens/s")

    def diverged(self, trainer, message: str) -> str:
        """What diverged where, what the checkpoints still hold, and what to do (:func:`divergence_advice`)."""
        last = trainer.last_path
        kept = f"{last} still holds the last good state" if last.exists() else "no checkpoint was written yet"
        return f"{message} and {kept}. {divergence_advice(trainer)}"


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
