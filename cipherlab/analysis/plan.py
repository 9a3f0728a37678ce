"""Plan a GPU run before paying for it: ``python -m cipherlab plan --preset assignment --gpu T4``
(what it costs, measured).

For each configuration this module *measures* on the CPU what one training step costs and
*estimates* from that what an epoch costs on a GPU:

1. FLOPs: one teacher-forced forward pass, the loss and the backward pass of the real model,
   counted by ``torch.utils.flop_counter.FlopCounterMode`` (matrix multiplications, which are
   nearly all the arithmetic), for one chunk of a quarter, a half and the whole chunk length.
   FLOPs are exactly linear in the batch size, and a quadratic through the three lengths gives
   every other length (the attention terms are quadratic, the rest linear).
2. Bytes: the tensors saved for the backward pass, measured with
   ``torch.autograd.graph.saved_tensors_hooks`` in the same pass (fp32, as on a CPU), plus
   16 bytes per parameter for fp32 AdamW training (weights, gradients, two moments).
3. Work per epoch: the training split cut into the preset's chunks, their token lengths (bytes
   for C5; for C1-C4 the BPEs' tokens per character, measured on a sample of training chunks),
   batched by the trainer's own ``BucketBatchSampler``; every batch costs its rows times the
   FLOPs of its longest chunk (padding is computed too), plus a forward pass over validation.
4. The FLOP term of the time: FLOPs divided by the GPU's published peak dense bf16/fp16 tensor
   rate times an assumed utilisation (``--mfu``, default 30 %). This is a floor: what the
   arithmetic alone costs.
5. The per-step term: what a step costs besides its arithmetic. The kernels one training step
   launches are *counted* on the real model (every operator PyTorch dispatches in the forward pass
   under bf16 autocast, the loss, the backward pass, the gradient clip and a foreach AdamW step;
   views launch nothing and are not counted), and each is charged an assumed CPU-side cost
   (``--launch-us``, default 10 microseconds: eager PyTorch's dispatch and launch of one CUDA
   kernel, which a model this small cannot hide behind its arithmetic). Collating a batch is
   *measured* on this CPU, as the trainer does it on the GPU machine's CPU.

The estimate of an epoch is the sum of the two terms (the trainer reads the loss after every
step, which makes the CPU wait for the GPU, so the two overlap little), and the report says which
term dominates. All of this is an ESTIMATE until the same run is measured on the GPU; evaluation
decoding is not counted. The report also sets C1's estimate beside the one public measurement of
this assignment (:data:`PUBLIC_MEASUREMENT`).

The command, ``python -m cipherlab plan``, is :mod:`cipherlab.cli.plan`: its flags (a GPU of :data:`GPUS`
by name, or any by its rate and memory), their checks, its progress bar and the ``--json`` file. What it
runs is :func:`plan_preset`, and what it prints is :func:`report` of the plan.
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from cipherlab.base.config import CONFIG_NAMES, DEFAULT_RECIPE, Config, make_config
from cipherlab.data.corpus import BucketBatchSampler, Chunk, load_corpus, make_chunks
from cipherlab.pipeline.codec import ByteCodec, SubwordCodec, fit_codec, select_lines, teacher_forcing_logits
from cipherlab.base.device import autocast
from cipherlab.pipeline.train import make_optimizer, seed_everything, sequence_loss

__all__ = ["GPUS", "GPU", "PUBLIC_MEASUREMENT", "collate_seconds", "count_kernels", "gpu_estimate", "measure_step",
           "memory_advice", "plan_config", "plan_preset"]


@dataclass(frozen=True)
class GPU:
    """A GPU's published peak dense (no sparsity) bf16/fp16 tensor-core rate and its memory."""

    name: str
    tflops: float  # TFLOP/s, dense
    memory_gb: float
    note: str = ""


# NVIDIA's data sheets, dense tensor-core rates (the sparsity figures are twice these).
GPUS = {
    "T4": GPU("NVIDIA T4", 65.0, 16.0, "fp16 tensor cores only: no bf16, which cipherlab's CUDA autocast uses, so "
              "expect much less than this rate on a T4 (measure it)"),
    "L4": GPU("NVIDIA L4", 121.0, 24.0),
    "A100": GPU("NVIDIA A100 40GB", 312.0, 40.0),
    "A100-80GB": GPU("NVIDIA A100 80GB", 312.0, 80.0),
    "H100": GPU("NVIDIA H100 SXM", 989.0, 80.0),
    "H100-PCIE": GPU("NVIDIA H100 PCIe", 756.0, 80.0),
    "RTX2080TI": GPU("NVIDIA GeForce RTX 2080 Ti", 53.8, 11.0,
                     "Turing: fp16 tensor cores with fp32 accumulation at half the fp16-accumulate rate (107.6), and "
                     "no bf16, which cipherlab's CUDA autocast uses"),
}
# The one public measurement of this assignment's training time: one team's code and batches.
PUBLIC_MEASUREMENT = {"gpu": "RTX2080TI", "config": "c1", "preset": "assignment", "epochs": 40, "minutes": 129.0,
                      "source": "the best public whole-line results for this assignment (one team's code, data "
                                "and batches)"}
# The assignment preset trained for one epoch on a CPU (one thread of a shared 2-core machine): each record's
# first epoch gives the steps an epoch really took and the seconds a step. Read when the repository is at hand.
CPU_RECORDS = Path(__file__).resolve().parents[2] / "results" / "assignment-cpu"
_SELECTED = {"val_accuracy": "validation accuracy", "val_loss": "validation loss"}  # Config.select_on
DISPATCH_REPEATS = 9  # timed tiny forward + backward passes, for the CPU cost of one operator
TINY_CHARS = 8  # characters of the tiny batch those passes use
COLLATE_REPEATS = 5
DEFAULT_MFU = 0.30
DEFAULT_HOURS = 4.0
RATIO_SAMPLE = 200  # training chunks tokenized to measure the BPEs' tokens per character
STANDIN_LINES = 400  # training lines a stand-in BPE is learned from when the real one is not cached
ADAM_BYTES_PER_PARAM = 16  # fp32 weights, gradients, exp_avg, exp_avg_sq
AUTOCAST_BYTES_PER_PARAM = 2  # the bf16 copies of the weights autocast keeps during a step


# --------------------------------------------------------------------------- measuring one step


def _param_storages(model) -> set[int]:
    return {p.untyped_storage().data_ptr() for p in model.parameters()}


def measure_step(model, batch: dict[str, torch.Tensor], pad_id: int, label_smoothing: float = 0.1) -> dict:
    """FLOPs of the forward pass (with the loss) and of the backward pass of one training step on
    ``batch``, and the bytes of the tensors saved for backward (parameters excluded), as the trainer
    computes them (``teacher_forcing_logits`` then ``sequence_loss``)."""
    model.train()
    params = _param_storages(model)
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor):
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    with FlopCounterMode(display=False) as forward, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logits = teacher_forcing_logits(model, batch)
        loss, _ = sequence_loss(logits, batch["tgt"][:, 1:], pad_id, label_smoothing)
    with FlopCounterMode(display=False) as backward:
        loss.backward()
    model.zero_grad(set_to_none=True)
    return {"forward_flops": forward.get_total_flops(), "backward_flops": backward.get_total_flops(),
            "activation_bytes": sum(saved.values())}


class _KernelCounter(TorchDispatchMode):
    """Counts the operators PyTorch dispatches that compute something (a view launches no kernel)."""

    _FREE = {torch.ops.aten.detach.default, torch.ops.aten.lift_fresh.default,
             torch.ops.aten.empty.memory_format, torch.ops.aten.empty_strided.default}

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view and func not in self._FREE:
            self.count += 1
        return func(*args, **(kwargs or {}))


def count_kernels(model, batch: dict[str, torch.Tensor], pad_id: int, config: Config) -> dict:
    """The operators one training step dispatches, as the trainer runs it on a GPU: the forward pass
    under bf16 autocast and the loss, the backward pass, and the gradient clip with a foreach AdamW
    step (what CUDA uses); and the forward pass alone, as validation runs it. On a GPU each is
    about one kernel launch. The model is left as it was (its weights are restored)."""
    model.train()
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = make_optimizer(model, config)
    for group in optimizer.param_groups:
        group["foreach"] = True
    for _ in range(2):  # the first step also creates AdamW's moments: count the second, a steady one
        with _KernelCounter() as forward:
            with autocast(torch.device("cpu"), True):
                logits = teacher_forcing_logits(model, batch)
            loss, _ = sequence_loss(logits, batch["tgt"][:, 1:], pad_id, config.label_smoothing)
        with _KernelCounter() as backward:
            loss.backward()
        with _KernelCounter() as update:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip, foreach=True)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    counts = {"forward": forward.count, "backward": backward.count, "optimizer": update.count}
    model.load_state_dict(saved)
    return {**counts, "train_step": sum(counts.values()), "validation_step": forward.count}


def dispatch_microseconds(model, batch: dict[str, torch.Tensor], pad_id: int, config: Config,
                          repeats: int = DISPATCH_REPEATS) -> float:
    """CPU microseconds per operator of eager PyTorch on this machine: the shortest time of a forward
    and backward pass on ``batch`` (one row of a few tokens, so the arithmetic is negligible)
    divided by the operators it dispatches. A GPU run pays this on its host CPU for every kernel."""
    model.train()
    counted = count_kernels(model, batch, pad_id, config)
    ops = counted["forward"] + counted["backward"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny pass gains nothing from threads, and idle ones spin on a busy machine
    seconds = []
    try:
        for _ in range(repeats + 2):  # two warm-up passes
            start = time.perf_counter()
            with autocast(torch.device("cpu"), True):
                logits = teacher_forcing_logits(model, batch)
            loss, _ = sequence_loss(logits, batch["tgt"][:, 1:], pad_id, config.label_smoothing)
            loss.backward()
            seconds.append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
        model.zero_grad(set_to_none=True)
    return 1e6 * min(seconds[2:]) / ops  # the fastest pass: what the machine can do, less others' load


def collate_seconds(codec, chunks: list[Chunk], rows: int, repeats: int = COLLATE_REPEATS) -> float:
    """Median seconds this CPU takes to collate ``rows`` of ``chunks`` into one batch, as the trainer does."""
    data = codec.dataset(chunks[:rows])
    examples = [data[i] for i in range(len(data))]
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        codec.collate(examples)
        seconds.append(time.perf_counter() - start)
    return float(np.median(seconds))


def _bpe_batch(codec: SubwordCodec, src_len: int, tgt_len: int, rows: int = 1) -> dict[str, torch.Tensor]:
    """Token ids of the given lengths (values do not change the FLOPs): src (rows, Ls), tgt (rows, Lt+2)."""
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, codec.src.vocab_size, (rows, src_len), generator=g)
    body = torch.randint(4, codec.tgt.vocab_size, (rows, tgt_len), generator=g)
    tgt = torch.cat([torch.full((rows, 1), codec.bos_id), body, torch.full((rows, 1), codec.eos_id)], dim=1)
    return {"src": src, "tgt": tgt}


def _blt_batch(codec: ByteCodec, chunk: Chunk, n: int, rows: int = 1) -> dict[str, torch.Tensor]:
    """The first ``n`` characters of a real chunk, collated with its entropy patches, ``rows`` times."""
    piece = Chunk(chunk.line, chunk.part, chunk.plain[:n], chunk.cipher[: 8 * n])
    data = codec.dataset([piece])
    return codec.collate([data[0]] * rows)


# --------------------------------------------------------------------------- tokens per character


def _cached_bpe(corpus, config: Config) -> bool:
    """Whether both BPEs of ``config`` are already in the corpus cache (so loading them takes no time)."""
    from cipherlab.data.tokenizers import BPETokenizer

    def found(name: str, size) -> bool:
        for path in sorted(corpus.cache_dir.glob(f"bpe_{name}_{'base' if size is None else size}_*.json")):
            try:
                meta = BPETokenizer.load(path).metadata
            except (OSError, ValueError):
                continue
            if meta.get("corpus_sha256") == corpus.sha256 and meta.get("vocab_size") == size:
                return True
        return False

    target = config.target_tokens == "aligned" or found("target", config.tgt_vocab)  # aligned: from the source
    return found(f"source-{config.source_mode}", config.src_vocab) and target


def _bpe_codec(corpus, config: Config, tokenize: bool) -> tuple[SubwordCodec, str]:
    """(the codec of C1-C4, how its tokenizers were obtained)."""
    train_chars = sum(len(corpus.plain[i]) for i in corpus.splits["train"])
    quick = train_chars < 200_000 or (config.src_vocab is None and config.tgt_vocab is None)  # seconds to learn
    if tokenize or quick or _cached_bpe(corpus, config):
        how = "the configuration's own BPEs" + ("" if tokenize else " (cached or quick to learn)")
        return fit_codec(config, corpus), how
    from cipherlab.data.tokenizers import BPETokenizer
    from cipherlab.data.tokenizers.cipher_task import SOURCE_MODES, TARGET_SETTINGS, aligned_target

    ids = corpus.splits["train"][:STANDIN_LINES]
    src = BPETokenizer.train([corpus.cipher[i] for i in ids], config.src_vocab, **SOURCE_MODES[config.source_mode])
    aligned = config.target_tokens == "aligned"
    tgt = (aligned_target(src, [corpus.plain[i] for i in ids], [corpus.cipher[i] for i in ids]) if aligned else
           BPETokenizer.train([corpus.plain[i] for i in ids], config.tgt_vocab, **TARGET_SETTINGS))
    how = (f"STAND-IN BPEs learned from the first {len(ids)} training lines (the real ones are not cached; "
           "--tokenize learns and caches them, about a minute)")
    return SubwordCodec(src, tgt, aligned=aligned), how


def _token_ratios(codec: SubwordCodec, chunks: list[Chunk], seed: int = 0) -> tuple[float, float, int]:
    """(source tokens per character, target tokens per character, chunks sampled)."""
    sample = random.Random(seed).sample(chunks, min(RATIO_SAMPLE, len(chunks)))
    chars = sum(len(c.plain) for c in sample)
    src = sum(len(codec.src.encode(c.cipher)) for c in sample)
    # aligned targets (Config.target_tokens) have one token per source token
    tgt = src if codec.aligned else sum(len(codec.tgt.encode(c.plain)) for c in sample)
    return src / chars, tgt / chars, len(sample)


# --------------------------------------------------------------------------- one configuration


def _fit(xs: list[int], ys: list[float]):
    """The quadratic through three points, as a function of the chunk length in characters."""
    coeffs = np.polyfit(np.asarray(xs, dtype=float), np.asarray(ys, dtype=float), deg=min(2, len(xs) - 1))
    return lambda n: max(float(np.polyval(coeffs, n)), 0.0)


def plan_config(config: Config, corpus, *, codec=None, tokens_how: str = "", ratios=None) -> dict:
    """Measured step costs and estimated epoch work of one configuration (no GPU figures yet)."""
    seed_everything(config.seed)
    codec = codec or fit_codec(config, corpus)
    model = codec.build_model(config)
    params = sum(p.numel() for p in model.parameters())
    train = make_chunks(corpus.plain, corpus.cipher, corpus.splits["train"], config.chunk_chars)
    val = make_chunks(corpus.plain, corpus.cipher, corpus.splits["val"], config.chunk_chars)
    c = config.chunk_chars
    full_chunks = [ch for ch in train if len(ch.plain) == c] or train  # chunks of the whole length
    points = sorted({max(c // 4, 1), max(c // 2, 1), c})
    if codec.kind == "bpe":
        rs, rt, sampled = ratios or _token_ratios(codec, train)

        def src_len(n: int) -> int:
            return max(1, round(rs * n))

        def tgt_len(n: int) -> int:
            return max(1, round(rt * n)) + 2  # + BOS and EOS

        batches = [_bpe_batch(codec, src_len(n), tgt_len(n) - 2) for n in points]
        pair = _bpe_batch(codec, src_len(c), tgt_len(c) - 2, rows=2)
        units = (f"{tokens_how}: {rs:.3f} source and {rt:.3f} target tokens per character, measured on "
                 f"{sampled} training chunks")
    else:
        example = max(full_chunks, key=lambda ch: len(ch.plain))

        def src_len(n: int) -> int:
            return n

        def tgt_len(n: int) -> int:
            return n + 2

        batches = [_blt_batch(codec, example, n) for n in points]
        pair = _blt_batch(codec, example, c, rows=2)
        units = "bytes (one per character), entropy patches of a real training chunk"
    steps = [measure_step(model, b, codec.tgt_pad_id, config.label_smoothing) for b in batches]
    # Not all of a step grows with its rows: C1-C4's bit-factored embeddings build their whole table once a
    # batch. Two rows of the longest chunk against one split each quantity into a per-batch part (taken as
    # independent of the length: a table's size is its vocabulary's) and a per-row part.
    two = measure_step(model, pair, codec.tgt_pad_id, config.label_smoothing)
    one = steps[-1]

    def split(key) -> tuple[float, list[float]]:
        once = max(2 * key(one) - key(two), 0.0)
        return once, [max(key(s) - once, 0.0) for s in steps]

    once_forward, forward_rows = split(lambda s: s["forward_flops"])
    once_step, step_rows = split(lambda s: s["forward_flops"] + s["backward_flops"])
    once_saved, saved_rows = split(lambda s: s["activation_bytes"])
    forward_row, step_row, saved_row = _fit(points, forward_rows), _fit(points, step_rows), _fit(points, saved_rows)

    def forward(rows: int, n: int) -> float:
        return once_forward + rows * forward_row(n)

    def step_flops(rows: int, n: int) -> float:
        return once_step + rows * step_row(n)

    def activations(rows: int, n: int) -> float:
        return once_saved + rows * saved_row(n)

    def epoch(chunks: list[Chunk]) -> dict:
        chars = [len(ch.plain) for ch in chunks]
        lengths = [src_len(n) for n in chars]
        sampler = BucketBatchSampler(lengths, config.token_budget, config.max_batch_size, shuffle=False)
        work = []
        for batch in sampler.batches:
            n = max(chars[i] for i in batch)
            work.append((len(batch), n))
        return {"chunks": len(chunks), "characters": sum(chars), "steps": len(work),
                "source_tokens": sum(lengths), "target_tokens": sum(tgt_len(n) - 1 for n in chars),
                "train_flops": sum(step_flops(b, n) for b, n in work),
                "forward_flops": sum(forward(b, n) for b, n in work),
                "max_activation_bytes": max(activations(b, n) for b, n in work)}

    typical_rows = min(config.max_batch_size, max(config.token_budget // src_len(c), 1))
    kernels = count_kernels(model, batches[-1], codec.tgt_pad_id, config)
    tiny = (_bpe_batch(codec, src_len(TINY_CHARS), tgt_len(TINY_CHARS) - 2) if codec.kind == "bpe"
            else _blt_batch(codec, example, TINY_CHARS))
    dispatch_us = dispatch_microseconds(model, tiny, codec.tgt_pad_id, config)
    return {
        "config": config.name,
        "components": config.components(),
        "params": params,
        "units": units,
        "measured": [{"chunk_chars": n, "source_tokens": src_len(n), "target_tokens": tgt_len(n), **s}
                     for n, s in zip(points, steps)],
        "typical_batch": {"rows": typical_rows, "source_tokens": typical_rows * src_len(c),
                          "target_tokens": typical_rows * (tgt_len(c) - 1), "chunk_chars": c,
                          "flops": step_flops(typical_rows, c), "activation_bytes": activations(typical_rows, c)},
        "per_batch": {"flops": once_step, "activation_bytes": once_saved},  # not multiplied by the rows
        "train_epoch": epoch(train),
        "validation": epoch(val),
        "per_step": {"kernels": kernels, "collate_seconds": collate_seconds(codec, full_chunks, typical_rows),
                     "collate_rows": typical_rows, "dispatch_us_measured": dispatch_us},
        "state_bytes": ADAM_BYTES_PER_PARAM * params,
        "autocast_bytes": AUTOCAST_BYTES_PER_PARAM * params,
    }


def gpu_estimate(record: dict, gpu: GPU, mfu: float, hours: float, max_epochs: int,
                 launch_us: float | None = None) -> dict:
    """Seconds per epoch and per typical step, peak bytes and epochs in a ``hours`` session of one
    configuration's ``plan_config`` record on ``gpu`` at utilisation ``mfu`` (an estimate).

    ``flop_epoch_seconds`` is the FLOP term alone, a floor; ``overhead_epoch_seconds`` the per-step
    term (kernels x ``launch_us`` + collation, every training and validation step; ``launch_us``
    None: the CPU cost per operator measured on this machine, ``dispatch_microseconds``);
    ``epoch_seconds`` their sum, the estimate; ``dominant`` names the larger term."""
    rate = gpu.tflops * 1e12 * mfu
    train_s = record["train_epoch"]["train_flops"] / rate
    val_s = record["validation"]["forward_flops"] / rate
    per = record["per_step"]
    launch_us = per["dispatch_us_measured"] if launch_us is None else launch_us
    train_step_overhead = per["kernels"]["train_step"] * launch_us * 1e-6 + per["collate_seconds"]
    val_step_overhead = per["kernels"]["validation_step"] * launch_us * 1e-6 + per["collate_seconds"]
    overhead_s = (record["train_epoch"]["steps"] * train_step_overhead
                  + record["validation"]["steps"] * val_step_overhead)
    flop_s = train_s + val_s
    epoch_s = flop_s + overhead_s
    peak = record["state_bytes"] + record["autocast_bytes"] + record["train_epoch"]["max_activation_bytes"]
    return {"train_seconds": train_s, "validation_seconds": val_s, "flop_epoch_seconds": flop_s,
            "overhead_epoch_seconds": overhead_s, "epoch_seconds": epoch_s,
            "dominant": "per-step" if overhead_s > flop_s else "FLOPs",
            "flop_step_seconds": record["typical_batch"]["flops"] / rate, "step_overhead_seconds": train_step_overhead,
            "step_seconds": record["typical_batch"]["flops"] / rate + train_step_overhead,
            "launch_us": launch_us,
            "epochs_in_session": int(hours * 3600 // epoch_s) if epoch_s > 0 else None,
            "hours_for_max_epochs": max_epochs * epoch_s / 3600,
            "peak_bytes": peak, "fits": peak < gpu.memory_gb * 1e9}


def public_comparison(plan: dict) -> dict | None:
    """C1's estimate on the GPU of :data:`PUBLIC_MEASUREMENT` beside that measurement, for a plan of its
    preset that includes C1 (None otherwise): the floor, the estimate and how far each is from it."""
    m = PUBLIC_MEASUREMENT
    record = next((r for r in plan["configs"] if r["config"] == m["config"]), None)
    if record is None or plan["preset"] != m["preset"]:
        return None
    est = gpu_estimate(record, GPUS[m["gpu"]], plan["mfu"], plan["hours"], plan["sizes"]["max_epochs"],
                       plan["launch_us"])
    measured = 60 * m["minutes"] / m["epochs"]
    return {**m, "measured_epoch_seconds": measured, "floor_epoch_seconds": est["flop_epoch_seconds"],
            "estimate_epoch_seconds": est["epoch_seconds"], "overhead_epoch_seconds": est["overhead_epoch_seconds"],
            "measured_over_floor": measured / est["flop_epoch_seconds"],
            "measured_over_estimate": measured / est["epoch_seconds"]}


def cpu_measurement(plan: dict, folder: Path = CPU_RECORDS) -> dict | None:
    """Each planned configuration's seed-0 run of the assignment preset on a CPU (``folder``, one record per
    configuration and seed, ``<config>-seed0.json``) beside the plan: steps in its first epoch, seconds a
    step, and the plan's own steps an epoch. None for another preset, a plan with overrides, or no records."""
    if plan["preset"] != "assignment" or plan.get("overrides") or not folder.is_dir():
        return None
    rows = {}
    for r in plan["configs"]:
        path = folder / f"{r['config']}-seed0.json"
        if not path.is_file():
            continue
        first = json.loads(path.read_text(encoding="utf-8"))["log"][0]
        rows[r["config"]] = {"steps": first["step"], "seconds_per_step": first["seconds"] / first["step"],
                             "plan_steps": r["train_epoch"]["steps"], "record": str(path)}
    shown = folder.relative_to(CPU_RECORDS.parents[1]) if folder.is_relative_to(CPU_RECORDS.parents[1]) else folder
    return {"folder": shown.as_posix(), "configs": rows} if rows else None


def plan_preset(preset: str, gpu: GPU, *, mfu: float = DEFAULT_MFU, hours: float = DEFAULT_HOURS,
                configs=CONFIG_NAMES, data_dir=None, tokenize: bool = False, recipe: str = DEFAULT_RECIPE,
                launch_us: float | None = None, overrides: dict | None = None, progress=None) -> dict:
    """The planner's estimate for every configuration of ``preset`` on ``gpu``, trained by ``recipe``,
    with ``overrides`` (Config fields, e.g. ``TOKENIZATIONS["notes"]``) for all of them. ``progress``, if
    given, is called with each configuration's name before it is measured (the command line's bar)."""
    overrides = dict(overrides or {})
    base = make_config(configs[0], preset, recipe, **overrides)
    corpus = select_lines(load_corpus(data_dir), base)
    shared: dict[tuple, tuple] = {}  # C1-C4 share one pair of BPEs: learn and measure it once
    records = []
    for name in configs:
        if progress is not None:
            progress(name)
        config = make_config(name, preset, recipe, **overrides)
        extra = {}
        if config.tokenization == "bpe":
            key = (config.source_mode, config.src_vocab, config.tgt_vocab, config.target_tokens)
            if key not in shared:
                codec, how = _bpe_codec(corpus, config, tokenize)
                train = make_chunks(corpus.plain, corpus.cipher, corpus.splits["train"], config.chunk_chars)
                shared[key] = (codec, how, _token_ratios(codec, train))
            codec, how, ratios = shared[key]
            extra = {"codec": codec, "tokens_how": how, "ratios": ratios}
        records.append(plan_config(config, corpus, **extra))
    # The CPU cost of one operator is the host's, not a configuration's: charge every configuration the least
    # measured (the machine least disturbed by others' load), so that a busy moment does not rank them.
    shared_us = launch_us if launch_us is not None else min(r["per_step"]["dispatch_us_measured"] for r in records)
    for record, name in zip(records, configs):
        record["gpu"] = gpu_estimate(record, gpu, mfu, hours, make_config(name, preset, recipe, **overrides).max_epochs,
                                     shared_us)
    plan = {
        "estimate": True,
        "preset": preset,
        "gpu": dataclasses.asdict(gpu),
        "mfu": mfu,
        "launch_us": launch_us,
        "hours": hours,
        "sizes": {k: getattr(base, k) for k in ("d_model", "n_heads", "enc_layers", "dec_layers", "ffn_dim",
                                                "chunk_chars", "token_budget", "max_batch_size", "max_epochs",
                                                "patience", "select_on", "source_mode", "src_vocab",
                                                "tgt_vocab")},
        "data": str(corpus.data_dir),
        "torch": torch.__version__,
        "configs": records,
    }
    if overrides:
        plan["overrides"] = {k: str(v) for k, v in overrides.items()}
    plan["public"] = public_comparison(plan)
    plan["cpu"] = cpu_measurement(plan)
    return plan


# --------------------------------------------------------------------------- the report


def _gb(x: float) -> str:
    return f"{x / 1e9:.2f}"


def _flops(x: float) -> str:
    """FLOPs with an SI prefix, three significant digits: 1.23 TFLOP."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= scale:
            return f"{x / scale:.3g} {prefix}"
    return f"{x:.3g} "


def _epochs(n: int | None) -> str:
    return "-" if n is None else f"{n:,}" if n < 100_000 else "> 99,999"


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{1000 * seconds:.1f} ms" if seconds < 0.1 else f"{1000 * seconds:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _by_units(records: list[dict]) -> dict[str, list[str]]:
    """{how the token lengths were found: the configurations found that way}."""
    out: dict[str, list[str]] = {}
    for r in records:
        out.setdefault(r["units"], []).append(r["config"])
    return out


def report(plan: dict) -> str:
    g, s = plan["gpu"], plan["sizes"]
    rate = g["tflops"] * plan["mfu"]
    session = f"epochs in {plan['hours']:g} h"
    rows = [
        f"ESTIMATE, not a measurement: preset {plan['preset']} on an {g['name']}",
        f"  peak {g['tflops']:g} TFLOP/s (dense bf16/fp16 tensor, NVIDIA's data sheet) x {100 * plan['mfu']:.0f} % "
        f"utilisation = {rate:.1f} TFLOP/s; {g['memory_gb']:g} GB",
        f"  d_model {s['d_model']}, {s['n_heads']} heads, {s['enc_layers']}+{s['dec_layers']} layers, ffn "
        f"{s['ffn_dim']}; chunks of {s['chunk_chars']} characters; at most {s['token_budget']} source tokens "
        f"and {s['max_batch_size']} chunks per batch",
        "",
    ]
    header = ["config", "params", "steps/ep", "src tok/ep", "tgt tok/ep", "FLOP/step", "kernels/step", "epoch: floor",
              "estimate", "dominant", "peak GB", session]
    cells = []
    for r in plan["configs"]:
        e, est = r["train_epoch"], r["gpu"]
        cells.append([r["config"], f"{r['params']:,}", f"{e['steps']:,}", f"{e['source_tokens']:,}",
                      f"{e['target_tokens']:,}", _flops(r["typical_batch"]["flops"]),
                      f"{r['per_step']['kernels']['train_step']:,}", _duration(est["flop_epoch_seconds"]),
                      _duration(est["epoch_seconds"]), est["dominant"],
                      _gb(est["peak_bytes"]) + ("" if est["fits"] else " (!)"), _epochs(est["epochs_in_session"])])
    rows += _columns([header, *cells])
    advice = memory_advice(plan)
    if advice:
        rows.append(advice)
    first = plan["configs"][0]
    t = first["typical_batch"]
    slowest = max(plan["configs"], key=lambda r: r["gpu"]["epoch_seconds"])
    rows += [
        "",
        f"  FLOP/step: a full batch of {t['rows']} chunks of {t['chunk_chars']} characters ({first['config']}: "
        f"{t['source_tokens']:,} source, {t['target_tokens']:,} target tokens), forward + loss + backward; "
        f"{_duration(first['gpu']['step_seconds'])} a step",
        f"  epoch: every training batch (rows x FLOPs of its longest chunk) and a forward pass over "
        f"{first['validation']['chunks']:,} validation chunks; floor = the FLOP term alone, estimate = floor + "
        f"the per-step term ({first['per_step']['kernels']['train_step']:,} kernels x {first['gpu']['launch_us']:.0f} us + "
        f"{_duration(first['per_step']['collate_seconds'])} collation = "
        f"{_duration(first['gpu']['step_overhead_seconds'])} a step for {first['config']})",
        f"  max_epochs {s['max_epochs']} (early stopping after {s['patience']} epochs without a better "
        f"{_SELECTED.get(s.get('select_on'), 'validation score')}) would take {slowest['gpu']['hours_for_max_epochs']:.1f} h for the slowest ({slowest['config']})",
        "",
        "How it is estimated",
        "  FLOPs: torch FlopCounterMode on the real model (matrix multiplications only) for one chunk of "
        + ", ".join(str(m["chunk_chars"]) for m in first["measured"])
        + " characters on the CPU, and for two rows of the longest: a per-batch part (C1-C4's bit-factored embedding"
        " tables, built once a batch) plus the rest x rows, quadratic in the chunk length between",
        "  peak memory: 16 B/parameter (fp32 weights, gradients, AdamW's two moments) + 2 B/parameter (bf16 copies)"
        " + the tensors saved for backward of the largest batch, measured in fp32 (bf16 autocast keeps many in 2 bytes);"
        " not counted: the CUDA context (a few hundred MB) and allocator fragmentation; (!) = over the GPU's memory",
        *(f"  tokens, {', '.join(names)}: {units}" for units, names in _by_units(plan["configs"]).items()),
        "  kernels/step: the operators one training step dispatches, counted on the real model on this CPU (forward"
        " under bf16 autocast, loss, backward, gradient clip, foreach AdamW; views not counted), each about one CUDA"
        " kernel launch, each charged the CPU time one operator takes here"
        + (f" (--launch-us {plan['launch_us']:g})" if plan["launch_us"] is not None else
           " (measured: a forward and backward pass of one row of "
           f"{TINY_CHARS} characters, where the arithmetic is negligible, over its operators; the least of the "
           "configurations' measurements, charged to all of them; a faster host CPU pays less)")
        + "; collation measured on this CPU",
        "  not counted: the final decoding of the test lines, checkpoint writes; the two terms are added because the"
        " trainer waits for each step's loss (little overlap); measure an epoch on the GPU and compare",
        f"  a Colab session: --hours {plan['hours']:g}; the free tier's up-to-12 h is not guaranteed (sessions end"
        " when idle or when GPUs are scarce): train with checkpoints and --resume",
    ]
    if g["note"]:
        rows.append(f"  {g['name']}: {g['note']}")
    if plan.get("public"):
        p = plan["public"]
        rows += [
            "",
            f"Beside a measurement: {p['source']}: {p['config'].upper()}, {p['epochs']} epochs in {p['minutes']:g} min on "
            f"an {GPUS[p['gpu']].name}, {_duration(p['measured_epoch_seconds'])} an epoch.",
            f"  This plan for {p['config'].upper()} on that GPU: floor {_duration(p['floor_epoch_seconds'])}, estimate "
            f"{_duration(p['estimate_epoch_seconds'])} an epoch; the measurement is {p['measured_over_floor']:.0f}x the "
            f"floor and {p['measured_over_estimate']:.1f}x the estimate (their batches, data and code are not these)",
        ]
    if plan.get("cpu"):
        measured = plan["cpu"]["configs"]
        rows += [
            "",
            f"Beside this CPU's measurement ({plan['cpu']['folder']}: one epoch each, one thread of a shared 2-core CPU):",
            *(f"  {name}: {m['steps']:,} steps in the epoch ("
              + ("as this plan counts" if m["steps"] == m["plan_steps"] else
                 f"this plan counts {m['plan_steps']:,}; it tokenises without the BPE dropout training uses")
              + f"), {m['seconds_per_step']:.2f} s a step on that CPU" for name, m in measured.items()),
            "  Which to trust: for steps an epoch, the CPU run's count (the same code and batches); for a GPU's time a "
            "step, this estimate until your own first epoch is timed (the CPU's seconds say nothing of a GPU, and the "
            "public measurement is another team's code and batches); then trust your epoch.",
        ]
    return "\n".join(rows)


def _columns(table: list[list[str]]) -> list[str]:
    """Rows of cells as text columns two spaces apart, each as wide as its widest cell: the first left-aligned,
    the others right-aligned (a long cell widens its column instead of running into the next one)."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
            .rstrip() for row in table]


CUDA_CONTEXT_BYTES = 0.5e9  # what the CUDA context and the allocator take besides the estimate (a few hundred MB)


def memory_advice(plan: dict) -> str:
    """One line for a plan with a configuration over the GPU's memory: what to change, with the ``--set``
    that fits (the batch halved until it does: activations are linear in the rows), or "" when all fit."""
    over = [r for r in plan["configs"] if not r["gpu"]["fits"]]
    if not over:
        return ""
    g, s = plan["gpu"], plan["sizes"]
    worst = max(over, key=lambda r: r["gpu"]["peak_bytes"])
    fixed = worst["state_bytes"] + worst["autocast_bytes"]
    activations = worst["train_epoch"]["max_activation_bytes"]
    room = g["memory_gb"] * 1e9 - CUDA_CONTEXT_BYTES
    names = ", ".join(r["config"].upper() for r in over)
    head = (f"  (!) {names} need{'s' if len(over) == 1 else ''} up to {_gb(worst['gpu']['peak_bytes'])} GB, over the "
            f"{g['memory_gb']:g} GB of the {g['name']}: ")
    if fixed >= room:
        return head + ("the weights and AdamW's state alone do not fit: a smaller model (--set d_model=..., "
                       "--set enc_layers=... --set dec_layers=...) or a larger GPU")
    share = 1.0
    while fixed + activations * share > room and share > 1 / 64:
        share /= 2
    fix = [f"--set token_budget={max(int(s['token_budget'] * share), 1)}"]
    rows = worst["typical_batch"]["rows"]
    if rows >= s["max_batch_size"] and s["max_batch_size"] * share >= 1:  # the row limit binds: halve it too
        fix.append(f"--set max_batch_size={max(int(s['max_batch_size'] * share), 1)}")
    return head + (f"train with a smaller batch, {' '.join(fix)} (about {_gb(fixed + activations * share)} GB; "
                   f"plan again with the same --set to check), or shorter chunks (--set chunk_chars="
                   f"{max(s['chunk_chars'] // 2, 1)}); activations are counted in fp32 here and bf16 autocast keeps "
                   "many in half that, so the first steps measured on the GPU may fit as they are")
