"""One training run from a :class:`~cipherlab.base.config.Config`: :func:`train_config` reads the corpus, fits
the codec (:mod:`cipherlab.pipeline.codec`), builds the model with a
:class:`~cipherlab.pipeline.codec.ModelBuilder` (cipherlab's own by default) and trains it with a
:class:`~cipherlab.pipeline.train.Trainer` whose hooks are the run's (:class:`~cipherlab.runner.hooks.RunHooks`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from cipherlab.base.config import Config
from cipherlab.base.device import fused_attention_on, pick_device
from cipherlab.data.corpus import BucketBatchSampler, load_corpus, make_chunks, shuffle_chunks
from cipherlab.pipeline.codec import OWN_MODEL, ModelBuilder, fit_codec, select_lines
from cipherlab.pipeline.train import Batches, FitResult, Trainer, seed_everything
from cipherlab.runner.hooks import RunHooks, announce, peak_memory_bytes

__all__ = ["RunResult", "train_config"]


@dataclass
class RunResult:
    """A finished (or paused) training run and what it cost."""

    fit: FitResult
    params: int
    peak_memory_bytes: int | None
    device: str
    best_checkpoint: Path
    parts: list[dict] = field(default_factory=list)  # what the builder recorded (ModelBuilder.records)


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
    logger: object | None = None,
) -> RunResult:
    """Everything for one configuration: data, codec, model, and :meth:`Trainer.fit`.

    ``logger``: told of every step, validation and epoch (:class:`~cipherlab.runner.hooks.TrainingLogger`; the
    command line's ``--wandb`` passes :class:`cipherlab.runner.tracking.WandbLogger`); None tells no one.

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
        progress=progress,
        hooks=RunHooks(builder, [logger], verbose),
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
