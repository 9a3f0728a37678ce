"""C5 (the Byte Latent Transformer) against C1 on the same text, at the same sizes (not a test).

Measures, on the CPU it runs on, for the training split of the embedded corpus cut into
CHUNK_CHARS-character chunks:
1. sequence lengths: source bytes and entropy patches (C5) against source BPE tokens
   (C1, "bits" mode), target bytes and target patches against target BPE tokens; the
   distribution of patch lengths; how long the entropy model takes to fit and to place
   every boundary;
2. one training step (forward + backward + AdamW step) of each model on the same batch
   of chunks, interleaved round-robin so machine load hits both alike; median of --iters
   after --warmup; and how many attention scores each forward computes (counted with
   hooks on every ScaledDotProductAttention call);
3. peak memory of one training step: the peak resident set size (VmHWM) minus the
   resident set size just before the step, each model in a fresh Python process. It
   includes the gradients and the AdamW state created by that first step (3 x the
   parameter bytes, reported alongside) and allocator overhead.

    python benchmarks/bench_blt.py > /tmp/bench_blt.log 2>&1    # a few minutes on 2 cores

writes benchmarks/results/blt.json.
"""

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from cipherlab.data.cipher import bits_to_bytes
from cipherlab.pipeline.codec import collate_bytes
from cipherlab.base.config import Config
from cipherlab.data.corpus import CHUNK_CHARS, SubwordChunkDataset, collate, load_corpus, make_chunks
from cipherlab.models.attention import ScaledDotProductAttention
from cipherlab.models.blt import BLTArgs, BLTModel, ByteEntropyModel
from cipherlab.models.transformer import ModelArgs, Seq2SeqTransformer
from cipherlab.data.tokenizers.bytes import BOS_ID, EOS_ID, PAD_ID, SPECIAL_IDS
from cipherlab.data.tokenizers.cipher_task import get_tokenizers

RESULTS = Path(__file__).parent / "results" / "blt.json"
SIZES = dict(d_model=256, n_heads=8, enc_layers=4, dec_layers=4, ffn_dim=1024, dropout=0.1)


def mean(values) -> float:
    return float(np.mean(values))


def patch_statistics(args, chunks):
    """Fit the entropy model on the training chunks, patch every one of them, and time both."""
    sources = [bits_to_bytes(c.cipher) for c in chunks]
    start = time.perf_counter()
    entropy = ByteEntropyModel().fit(sources)
    threshold = entropy.threshold_at(args.percentile)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    boundaries = [entropy.patch_boundaries(s, threshold, args.max_patch) for s in sources]
    boundaries_s = time.perf_counter() - start
    lengths = np.concatenate([np.diff(b + [len(s)]) for b, s in zip(boundaries, sources) if s])
    target_bytes = [len(c.plain) + 1 for c in chunks]  # decoder input: BOS + plain
    stats = {
        "chunks": len(chunks),
        "source_bytes_total": int(sum(map(len, sources))),
        "entropy_percentile": args.percentile,
        "threshold_bits": threshold,
        "max_patch": args.max_patch,
        "entropy_fit_and_threshold_s": fit_s,
        "boundaries_all_chunks_s": boundaries_s,
        "source_patches_total": int(lengths.size),
        "mean_source_patch_bytes": float(lengths.mean()),
        "source_patch_length_histogram": {int(k): int(v) for k, v in zip(*np.unique(lengths, return_counts=True))},
        "share_of_patches_of_max_patch_bytes": float(np.mean(lengths == args.max_patch)),
        "per_chunk_mean": {
            "source_bytes": mean([len(s) for s in sources]),
            "source_patches": mean([len(b) for b in boundaries]),
            "target_bytes_with_bos": mean(target_bytes),
            "target_global_slots": mean([n // args.patch_tgt + 1 for n in target_bytes]),
        },
        "patch_tgt": args.patch_tgt,
    }
    return stats


def bpe_statistics(args, corpus, chunks):
    """Source and target BPE tokens per chunk, C1's tokenizers ("bits" mode), on a chunk sample."""
    start = time.perf_counter()
    src_tok, tgt_tok = get_tokenizers(corpus, "bits", args.src_vocab, args.tgt_vocab)
    load_s = time.perf_counter() - start
    sample = random.Random(0).sample(chunks, min(args.bpe_sample, len(chunks)))
    src = [len(src_tok.encode(c.cipher)) for c in sample]
    tgt = [len(tgt_tok.encode(c.plain)) for c in sample]
    stats = {
        "mode": "bits", "src_vocab": src_tok.vocab_size, "tgt_vocab": tgt_tok.vocab_size,
        "tokenizers_load_or_train_s": load_s, "sample_chunks": len(sample),
        "per_chunk_mean": {
            "source_tokens": mean(src), "target_tokens": mean(tgt),
            "source_bytes": mean([len(c.plain) for c in sample]),
        },
    }
    return stats


class ScoreCounter:
    """Counts the attention scores (B * H * Lq * Lk) of every ScaledDotProductAttention call."""

    def __init__(self, model):
        self.total = 0
        self.handles = [m.register_forward_hook(self._hook) for m in model.modules()
                        if isinstance(m, ScaledDotProductAttention)]

    def _hook(self, module, inputs, output):
        q, k = inputs[0], inputs[1]
        self.total += q.shape[0] * q.shape[1] * q.shape[2] * k.shape[2]

    def remove(self):
        for h in self.handles:
            h.remove()


def build(args, which, corpus, chunks):
    """The model, a step function and the batch for C1 or C5 on the first --batch full-length chunks."""
    batch_chunks = [c for c in chunks if len(c.plain) == CHUNK_CHARS][: args.batch]
    torch.manual_seed(0)
    if which == "c1":
        src_tok, tgt_tok = get_tokenizers(corpus, "bits", args.src_vocab, args.tgt_vocab)
        data = SubwordChunkDataset(batch_chunks, src_tok, tgt_tok)
        batch = collate([data[i] for i in range(len(data))], src_tok.pad_id, tgt_tok.pad_id)
        model = Seq2SeqTransformer(ModelArgs(src_tok.vocab_size, tgt_tok.vocab_size, **SIZES, src_pad_id=src_tok.pad_id,
                                             tgt_pad_id=tgt_tok.pad_id))
        pad = tgt_tok.pad_id

        def forward():
            return model(batch["src"], batch["tgt"][:, :-1])
    else:
        sources = [bits_to_bytes(c.cipher) for c in chunks]
        entropy = ByteEntropyModel().fit(sources)
        pairs = [(bits_to_bytes(c.cipher), [BOS_ID, *c.plain.encode("latin-1"), EOS_ID]) for c in batch_chunks]
        batch = collate_bytes(pairs, entropy, entropy.threshold_at(args.percentile), max_patch=args.max_patch,
                              patch_tgt=args.patch_tgt)
        model = BLTModel(BLTArgs(**SIZES, window=args.window, patch_tgt=args.patch_tgt,
                                 local_layers=Config.blt_local_layers, source_memory=Config.blt_source_memory,
                                 **SPECIAL_IDS))
        pad = PAD_ID

        def forward():
            return model(batch["src"], batch["src_member"], batch["tgt"][:, :-1], batch["tgt_member"])

    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    target = batch["tgt"][:, 1:]

    def step():
        logits = forward()
        loss = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=pad)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    shapes = {k: list(v.shape) for k, v in batch.items()}
    return model, forward, step, shapes


def bench_steps(args, corpus, chunks):
    built = {name: build(args, name, corpus, chunks) for name in ("c1", "c5")}
    result = {"batch": args.batch, "chunk_chars": CHUNK_CHARS, "warmup": args.warmup, "iters": args.iters,
              "window": args.window}
    result["batch_shapes"] = {name: b[3] for name, b in built.items()}
    result["params"] = {name: b[0].num_params() for name, b in built.items()}
    scores = {}
    for name, (model, forward, _, _) in built.items():
        counter = ScoreCounter(model)
        model.eval()
        with torch.no_grad():
            forward()
        counter.remove()
        scores[name] = counter.total
    result["attention_scores_per_forward"] = scores
    times = {name: [] for name in built}
    for it in range(args.warmup + args.iters):
        for name, (model, _, step, _) in built.items():
            model.train()
            start = time.perf_counter()
            step()
            if it >= args.warmup:
                times[name].append(time.perf_counter() - start)
        print(f"step {it}: " + ", ".join(f"{n} {t[-1]:.3f}s" for n, t in times.items() if t), flush=True)
    result["step_times_s"] = times
    result["median_step_s"] = {name: statistics.median(t) for name, t in times.items()}
    result["step_time_ratio_c5_over_c1"] = result["median_step_s"]["c5"] / result["median_step_s"]["c1"]
    return result


def _status_kib(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}; the memory probe needs Linux")


def memory_probe(args, which):
    """Run in a fresh process: peak RSS growth over one training step of one model."""
    corpus = load_corpus()
    chunks = make_chunks(corpus.plain, corpus.cipher, corpus.splits["train"])
    model, _, step, _ = build(args, which, corpus, chunks)
    before = _status_kib("VmRSS")
    step()
    peak = _status_kib("VmHWM")
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    print(json.dumps({"rss_before_step_mib": before / 1024, "peak_rss_mib": peak / 1024,
                      "peak_rss_delta_mib": (peak - before) / 1024,
                      "grads_plus_adamw_state_mib": 3 * param_bytes / 2**20}))


def bench_memory(args):
    result = {}
    for which in ("c1", "c5"):
        command = [sys.executable, __file__, "--memory-probe", which, "--batch", str(args.batch),
                   "--threads", str(args.threads), "--window", str(args.window),
                   "--patch-tgt", str(args.patch_tgt), "--max-patch", str(args.max_patch),
                   "--percentile", str(args.percentile), "--src-vocab", str(args.src_vocab),
                   "--tgt-vocab", str(args.tgt_vocab)]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        result[which] = json.loads(out.strip().splitlines()[-1])
        print(f"memory {which}: {result[which]}", flush=True)
    return result


def machine_info():
    return {
        "platform": platform.platform(), "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
        "python": sys.version.split()[0], "torch": torch.__version__, "numpy": np.__version__,
        "load_average_1_5_15min_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16, help="full-length training chunks per step")
    parser.add_argument("--window", type=int, default=128, help="BLT local attention window")
    parser.add_argument("--patch-tgt", type=int, default=Config.blt_patch_tgt)
    parser.add_argument("--max-patch", type=int, default=Config.blt_max_patch)
    parser.add_argument("--percentile", type=float, default=Config.blt_entropy_percentile)
    parser.add_argument("--src-vocab", type=int, default=1024)
    parser.add_argument("--tgt-vocab", type=int, default=8000)
    parser.add_argument("--bpe-sample", type=int, default=1000, help="chunks sampled for BPE lengths")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--iters", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads; 1 by default: on a shared machine more threads mostly add noise")
    parser.add_argument("--memory-probe", choices=("c1", "c5"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.memory_probe:
        memory_probe(args, args.memory_probe)
        return

    info = machine_info()
    corpus = load_corpus()
    chunks = make_chunks(corpus.plain, corpus.cipher, corpus.splits["train"])
    patches = patch_statistics(args, chunks)
    print(json.dumps(patches, indent=2), flush=True)
    bpe = bpe_statistics(args, corpus, chunks)
    print(json.dumps(bpe, indent=2), flush=True)
    steps = bench_steps(args, corpus, chunks)
    memory = bench_memory(args)
    info["load_average_1_5_15min_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report = {
        "command": "python " + " ".join(sys.argv),
        "machine": info,
        "note": ("CPU wall-clock times. If the load average exceeds cpu_count the machine was shared with "
                 "other jobs during the run, which inflates and scatters the times; the round-robin order "
                 "spreads that load over both models. Memory is the peak RSS growth over one training step "
                 "in a fresh process (VmHWM - VmRSS before the step), not a torch allocator statistic."),
        "sizes": SIZES,
        "patches": patches,
        "bpe": bpe,
        "training_step": steps,
        "peak_memory": memory,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"step_time_ratio_c5_over_c1": steps["step_time_ratio_c5_over_c1"],
                      "mean_source_patch_bytes": patches["mean_source_patch_bytes"]}, indent=2))


if __name__ == "__main__":
    main()
