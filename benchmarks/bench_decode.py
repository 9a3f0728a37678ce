"""Decoding speed: the caches of both model families, batched beam search, lines per second (not a test).

Measures, on the CPU it runs on, with the five committed cpu-preset reference models
(``results/checkpoints/c1..c5.safetensors``, the reference ablation's seed-0 runs):

1. **C5's decoder cache.** Greedy decoding of ``--cache-bytes`` target bytes (EOS never chosen, so
   every row decodes them all) from random source bytes, with the cache
   (``BLTModel.decode_step``: one byte per step through the local decoder, a global slot per
   completed patch) and without it (the decoder recomputed over the whole prefix at every step).
   Both must give the same bytes. C1 is measured the same way beside it.
2. **Batched beam search.** Beam ``--beam`` on the first ``--beam-lines`` test lines, decoded by
   :func:`cipherlab.pipeline.decode.decrypt_lines` as the evaluation does (length-bucketed batches of
   chunks), against the same call with ``max_batch_size=1``, one chunk at a time. Both must give
   the same lines.
3. **Lines per second** of each configuration on the first ``--lines`` test lines: free greedy,
   length-aware greedy and beam ``--beam``, batched.
4. **Autograd off.** Length-aware greedy decoding of the first ``--lines`` test lines by C1 and C5,
   each in a fresh process, as shipped (``cipherlab.pipeline.decode`` runs under ``torch.inference_mode()``)
   and with autograd on as before (the undecorated functions, under ``torch.enable_grad()``):
   seconds, the peak resident memory, and what decoding adds to it (the high-water mark is reset
   to the resident memory just before decoding, through ``/proc/self/clear_refs``, so loading the
   corpus does not hide it), ``--repeats`` processes of each, interleaved. ``--only autograd``
   re-measures this section alone and keeps the others of ``--out``.

Each timing is the median of ``--repeats`` runs. The runs of one comparison are interleaved, so
machine load hits both alike; the JSON records the load average, and ratios are what to read.

    .venv/bin/python benchmarks/bench_decode.py > /tmp/bench_decode.log 2>&1

writes benchmarks/results/decode.json.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from cipherlab.runner.trained import load_trained
from cipherlab.pipeline.codec import select_lines
from cipherlab.data.corpus import load_corpus
from cipherlab.pipeline.decode import decrypt_lines, greedy_decode

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINTS = ROOT / "results" / "checkpoints"  # the reference ablation's seed-0 models
RESULTS = Path(__file__).resolve().parent / "results" / "decode.json"
TARGETS = {"c5_cache_speedup": 3.0, "batched_beam_speedup": 3.0}


def machine_info():
    return {
        "platform": platform.platform(), "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
        "python": sys.version.split()[0], "torch": torch.__version__,
        "load_average_1_5_15min_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def timed(fn, repeats):
    """(median seconds, last result) over ``repeats`` calls."""
    seconds, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), out


def interleaved(fns: dict, repeats: int):
    """{name: (median seconds, last result)} with the calls of the functions taken in turn."""
    seconds = {name: [] for name in fns}
    outs = {}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            outs[name] = fn()
            seconds[name].append(time.perf_counter() - start)
    return {name: (statistics.median(seconds[name]), outs[name]) for name in fns}


def cache_benchmark(model, codec, n_bytes, batch, repeats):
    """Greedy decoding of n_bytes target tokens with and without the cache, from random source ids."""
    generator = torch.Generator().manual_seed(0)
    never = -1  # an EOS id argmax cannot produce: every row decodes all n_bytes
    if codec.kind == "blt":
        sources = torch.randint(0, 256, (batch, n_bytes), generator=generator).tolist()
    else:  # the model's own source tokens of random cipher bits
        bits = ["".join(str(b) for b in torch.randint(0, 2, (8 * n_bytes,), generator=generator).tolist())
                for _ in range(batch)]
        sources = [codec.encode_source(b) for b in bits]
    inputs = codec.collate_sources(sources)
    member = inputs.get("src_member")

    def run(use_cache):
        return lambda: greedy_decode(model, inputs["src"], codec.bos_id, never, n_bytes, src_member=member,
                                     use_cache=use_cache)

    res = interleaved({"with_cache": run(True), "without_cache": run(False)}, repeats)
    return {
        "batch": batch, "target_tokens": n_bytes, "source_tokens": int(inputs["src"].size(1)),
        "with_cache_s": res["with_cache"][0], "without_cache_s": res["without_cache"][0],
        "speedup": res["without_cache"][0] / res["with_cache"][0],
        "same_tokens": bool(torch.equal(res["with_cache"][1], res["without_cache"][1])),
    }


_ONE_RUN = """
import gc, json, resource, sys, time, torch
import cipherlab.pipeline.decode as D
from cipherlab.runner.trained import load_trained
from cipherlab.pipeline.codec import select_lines
from cipherlab.data.corpus import load_corpus
torch.set_num_threads(1)
checkpoint, lines, autograd = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
model, codec, config = load_trained(checkpoint, "cpu")
cipher = select_lines(load_corpus(), config).lines("test")[1][:lines]
if autograd:  # decoding as it was before: no inference mode, autograd recording every step
    D.greedy_decode, D.beam_search = D.greedy_decode.__wrapped__, D.beam_search.__wrapped__


def mib(field):  # VmRSS (now) or VmHWM (the high-water mark) of this process, MiB
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field)) / 1024


gc.collect()
with open("/proc/self/clear_refs", "w") as f:  # reset the high-water mark to the RSS now: loading
    f.write("5")                               # the corpus must not hide what decoding takes
before = mib("VmRSS:")
started = time.perf_counter()
with torch.enable_grad() if autograd else torch.inference_mode():
    out = D.decrypt_lines(model, codec, cipher, chunk_chars=config.chunk_chars, device="cpu", length_aware=True)
seconds = time.perf_counter() - started
peak = mib("VmHWM:")
print(json.dumps({"seconds": seconds, "rss_before_mib": before, "peak_rss_mib": peak, "decoding_mib": peak - before,
                  "lines_per_s": len(cipher) / seconds, "output": out}))
"""


def autograd_benchmark(name: str, lines: int, repeats: int) -> dict:
    """Seconds and peak RSS of length-aware greedy decoding with autograd on and under inference mode."""
    import subprocess

    runs = {"autograd_on": [], "inference_mode": []}
    for _ in range(repeats):
        for label, flag in (("autograd_on", "1"), ("inference_mode", "0")):
            done = subprocess.run([sys.executable, "-c", _ONE_RUN, str(CHECKPOINTS / f"{name}.safetensors"),
                                   str(lines), flag], capture_output=True, text=True, check=True, cwd=ROOT)
            runs[label].append(json.loads(done.stdout.strip().splitlines()[-1]))
    summary = {label: {"seconds_median": statistics.median(r["seconds"] for r in rs),
                       "peak_rss_mib_median": statistics.median(r["peak_rss_mib"] for r in rs),
                       "decoding_mib_median": statistics.median(r["decoding_mib"] for r in rs),
                       "lines_per_s_median": statistics.median(r["lines_per_s"] for r in rs)}
               for label, rs in runs.items()}
    on, off = summary["autograd_on"], summary["inference_mode"]
    return {"lines": lines, "processes_each": repeats, **summary,
            "slowdown_with_autograd": on["seconds_median"] / off["seconds_median"],
            "memory_ratio_with_autograd": on["peak_rss_mib_median"] / off["peak_rss_mib_median"],
            "decoding_memory_ratio_with_autograd": on["decoding_mib_median"] / off["decoding_mib_median"],
            "same_lines": all(r["output"] == runs["inference_mode"][0]["output"] for rs in runs.values() for r in rs)}


def only_autograd(args) -> None:
    """Re-measure section 4 alone into the existing ``args.out``, with the command and machine of this run."""
    out = json.loads(args.out.read_text(encoding="utf-8"))
    out.setdefault("updates", []).append({"command": " ".join(["python", *sys.argv]), "machine": machine_info()})
    for name in ("c1", "c5"):
        out["configurations"][name]["autograd"] = autograd_benchmark(name, args.lines, args.repeats)
        print(name, "autograd", out["configurations"][name]["autograd"], flush=True)
    out["updates"][-1]["machine"]["load_average_1_5_15min_at_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print("wrote", args.out, flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-bytes", type=int, default=256)
    parser.add_argument("--cache-batch", type=int, default=4)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--beam-lines", type=int, default=50)
    parser.add_argument("--lines", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads; 1 by default, so a shared machine's other jobs disturb it least")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--only", choices=["autograd"],
                        help="re-measure this section alone, keeping the rest of --out as it is")
    args = parser.parse_args()
    if args.only:
        return only_autograd(args)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    out = {"command": " ".join(["python", *sys.argv]), "machine": machine_info(), "targets": TARGETS,
           "checkpoints": str(CHECKPOINTS.relative_to(ROOT)), "configurations": {}}
    device = torch.device("cpu")
    for name in ("c1", "c2", "c3", "c4", "c5"):
        model, codec, config = load_trained(CHECKPOINTS / f"{name}.safetensors", device)
        corpus = select_lines(load_corpus(), config)
        _, cipher = corpus.lines("test")
        record = {}
        if name in ("c1", "c5"):
            record["cache"] = cache_benchmark(model, codec, args.cache_bytes, args.cache_batch, args.repeats)
            print(name, "cache", record["cache"], flush=True)
        kwargs = dict(chunk_chars=config.chunk_chars, device=device, token_budget=config.token_budget)
        beam_lines = cipher[: args.beam_lines]
        res = interleaved({
            "batched": lambda: decrypt_lines(model, codec, beam_lines, beam_size=args.beam,
                                             max_batch_size=config.max_batch_size, **kwargs),
            "one_at_a_time": lambda: decrypt_lines(model, codec, beam_lines, beam_size=args.beam,
                                                   max_batch_size=1, **kwargs),
        }, args.repeats)
        record["beam"] = {
            "beam_size": args.beam, "lines": len(beam_lines),
            "batched_s": res["batched"][0], "one_at_a_time_s": res["one_at_a_time"][0],
            "speedup": res["one_at_a_time"][0] / res["batched"][0],
            "same_lines": res["batched"][1] == res["one_at_a_time"][1],
        }
        print(name, "beam", record["beam"], flush=True)
        lines = cipher[: args.lines]
        speeds = {}
        for label, options in (("greedy", {"length_aware": False}), ("greedy_length_aware", {"length_aware": True}),
                               (f"beam{args.beam}", {"beam_size": args.beam})):
            seconds, _ = timed(lambda: decrypt_lines(model, codec, lines, max_batch_size=config.max_batch_size,
                                                     **options, **kwargs), args.repeats)
            speeds[label] = {"seconds": seconds, "lines_per_s": len(lines) / seconds}
        record["lines_per_second"] = {"lines": len(lines), **speeds}
        print(name, "speed", speeds, flush=True)
        if name in ("c1", "c5"):
            record["autograd"] = autograd_benchmark(name, args.lines, args.repeats)
            print(name, "autograd", {k: v for k, v in record["autograd"].items()}, flush=True)
        out["configurations"][name] = record
    c5 = out["configurations"]["c5"]
    out["met"] = {
        "c5_cache_speedup": c5["cache"]["speedup"] >= TARGETS["c5_cache_speedup"] and c5["cache"]["same_tokens"],
        "batched_beam_speedup": all(r["beam"]["speedup"] >= TARGETS["batched_beam_speedup"] and r["beam"]["same_lines"]
                                    for r in out["configurations"].values()),
    }
    out["machine"]["load_average_1_5_15min_at_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print("wrote", args.out, out["met"], flush=True)


if __name__ == "__main__":
    main()
