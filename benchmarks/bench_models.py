"""Speed of the from-scratch model against torch.nn.Transformer, and of the KV cache (not a test).

Measures, on the CPU it runs on:
1. one training step (forward + backward + AdamW step) of the C1 Seq2SeqTransformer,
   scratch and fused attention, against torch.nn.Transformer of the same sizes wrapped
   with the same embeddings, positions and tied head; steps interleaved round-robin so
   machine load hits every model alike; median of --iters after --warmup;
2. greedy decoding of --gen-tokens tokens with and without the KV cache.

    python benchmarks/bench_models.py > /tmp/bench_models.log 2>&1

writes benchmarks/results/models.json. Targets: scratch <= 1.3x and fused <= 1.0x the
nn.Transformer step; KV cache >= 3x faster at 256 tokens.
"""

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from cipherlab.pipeline.decode import greedy_decode
from cipherlab.models import ModelArgs, Seq2SeqTransformer, SinusoidalPositionalEncoding, causal_mask

PAD, BOS = 0, 1
RESULTS = Path(__file__).parent / "results" / "models.json"


class TorchTransformerBaseline(nn.Module):
    """torch.nn.Transformer (Pre-LN, GELU) inside the same embeddings, positions and tied head as C1."""

    def __init__(self, src_vocab, tgt_vocab, d_model, n_heads, layers, ffn_dim, dropout):
        super().__init__()
        self.d_model = d_model
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.pos_enc = SinusoidalPositionalEncoding(d_model, 4096, dropout)
        self.transformer = nn.Transformer(d_model, n_heads, layers, layers, ffn_dim, dropout, activation="gelu",
                                          batch_first=True, norm_first=True)

    def forward(self, src, tgt_in):
        scale = math.sqrt(self.d_model)
        src_pad, tgt_pad = src == PAD, tgt_in == PAD  # (B, L) True = ignore
        h = self.transformer(self.pos_enc(self.src_embed(src) * scale), self.pos_enc(self.tgt_embed(tgt_in) * scale),
                             tgt_mask=causal_mask(tgt_in.size(1))[0, 0], src_key_padding_mask=src_pad,
                             tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad, tgt_is_causal=True)
        return F.linear(h, self.tgt_embed.weight)


def make_batch(batch, length, src_vocab, tgt_vocab, generator):
    src = torch.randint(3, src_vocab, (batch, length), generator=generator)
    tgt = torch.randint(3, tgt_vocab, (batch, length + 1), generator=generator)
    lengths = torch.randint(length // 2, length + 1, (batch,), generator=generator)
    src[torch.arange(length)[None] >= lengths[:, None]] = PAD  # ragged rows, as after bucketing
    return src, tgt


def train_step(model, optimizer, src, tgt):
    logits = model(src, tgt[:, :-1])
    loss = F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=PAD)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def bench_training(args, sizes):
    generator = torch.Generator().manual_seed(0)
    src, tgt = make_batch(args.batch, args.seq_len, args.src_vocab, args.tgt_vocab, generator)
    torch.manual_seed(0)
    models = {
        "nn.Transformer": TorchTransformerBaseline(args.src_vocab, args.tgt_vocab, sizes["d_model"], sizes["n_heads"],
                                                   sizes["enc_layers"], sizes["ffn_dim"], sizes["dropout"]),
        "cipherlab C1 scratch": Seq2SeqTransformer(ModelArgs(args.src_vocab, args.tgt_vocab, **sizes)),
        "cipherlab C1 fused": Seq2SeqTransformer(ModelArgs(args.src_vocab, args.tgt_vocab, **sizes,
                                                           fused_attention=True)),
    }
    optimizers = {name: torch.optim.AdamW(m.parameters(), lr=3e-4) for name, m in models.items()}
    times = {name: [] for name in models}
    for it in range(args.warmup + args.iters):
        for name, model in models.items():
            model.train()
            start = time.perf_counter()
            train_step(model, optimizers[name], src, tgt)
            if it >= args.warmup:
                times[name].append(time.perf_counter() - start)
        print(f"train iteration {it}: " + ", ".join(f"{n} {t[-1]:.3f}s" for n, t in times.items() if t), flush=True)
    medians = {name: statistics.median(t) for name, t in times.items()}
    base = medians["nn.Transformer"]
    return {
        "batch": args.batch, "seq_len": args.seq_len, "warmup": args.warmup, "iters": args.iters,
        "params": {name: sum(p.numel() for p in m.parameters()) for name, m in models.items()},
        "median_step_s": medians,
        "min_max_step_s": {name: [min(t), max(t)] for name, t in times.items()},
        "step_times_s": times,
        "ratio_vs_nn_transformer": {name: medians[name] / base for name in models},
    }


def bench_decoding(args, sizes):
    torch.manual_seed(0)
    model = Seq2SeqTransformer(ModelArgs(args.src_vocab, args.tgt_vocab, **sizes)).eval()
    generator = torch.Generator().manual_seed(1)
    src, _ = make_batch(args.decode_batch, args.seq_len, args.src_vocab, args.tgt_vocab, generator)
    never = -1  # an EOS id argmax cannot produce: every row decodes exactly gen_tokens tokens
    result = {"batch": args.decode_batch, "src_len": args.seq_len, "gen_tokens": args.gen_tokens}
    outputs = {}
    for use_cache in (True, False):
        start = time.perf_counter()
        outputs[use_cache] = greedy_decode(model, src, BOS, never, args.gen_tokens, use_cache=use_cache)
        seconds = time.perf_counter() - start
        key = "with_cache" if use_cache else "without_cache"
        result[key] = {"seconds": seconds, "tokens_per_s": args.decode_batch * args.gen_tokens / seconds}
        print(f"greedy {key}: {seconds:.2f}s", flush=True)
    result["same_tokens"] = bool(torch.equal(outputs[True], outputs[False]))
    result["speedup"] = result["without_cache"]["seconds"] / result["with_cache"]["seconds"]
    return result


def machine_info():
    load = os.getloadavg()
    return {
        "platform": platform.platform(), "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
        "python": sys.version.split()[0], "torch": torch.__version__,
        "load_average_1_5_15min_at_start": [round(x, 2) for x in load],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--src-vocab", type=int, default=1024)
    parser.add_argument("--tgt-vocab", type=int, default=8000)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--iters", type=int, default=8)
    parser.add_argument("--decode-batch", type=int, default=4)
    parser.add_argument("--gen-tokens", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads; 1 by default because on a shared, oversubscribed machine "
                             "OpenMP threads spin at barriers and small ops become erratic")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sizes = dict(d_model=256, n_heads=8, enc_layers=4, dec_layers=4, ffn_dim=1024, dropout=0.1)
    info = machine_info()
    training = bench_training(args, sizes)
    decoding = bench_decoding(args, sizes)
    info["load_average_1_5_15min_at_end"] = [round(x, 2) for x in os.getloadavg()]
    peak_load = max(info["load_average_1_5_15min_at_start"] + info["load_average_1_5_15min_at_end"])
    shared = peak_load > info["cpu_count"]
    ratios = training["ratio_vs_nn_transformer"]
    report = {
        "command": "python " + " ".join(sys.argv),
        "machine": info,
        "shared_with_other_jobs": shared,
        "note": (f"Wall-clock times on a CPU with {args.threads} torch thread(s). "
                 + (f"The machine was shared with other jobs during this run (load average up to {peak_load} "
                    f"on {info['cpu_count']} CPUs): absolute times are inflated and scattered (see "
                    "min_max_step_s); the models ran interleaved round-robin so the load hit them alike, "
                    "and ratios of medians are the numbers to read, to about +-10%."
                    if shared else "The machine was not otherwise loaded during this run.")),
        "sizes": sizes,
        "training_step": training,
        "greedy_decoding": decoding,
        "targets": {
            "scratch_step_le_1.3x_nn_transformer": ratios["cipherlab C1 scratch"] <= 1.3,
            "fused_step_le_1.0x_nn_transformer": ratios["cipherlab C1 fused"] <= 1.0,
            "kv_cache_ge_3x_faster_at_256_tokens": decoding["speedup"] >= 3.0,
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"ratios": ratios, "kv_speedup": decoding["speedup"], "targets": report["targets"]}, indent=2))


if __name__ == "__main__":
    main()
