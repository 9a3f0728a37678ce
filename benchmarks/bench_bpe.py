"""How fast is BPE from scratch? Writes benchmarks/results/bpe.json. A benchmark, not a test.

The tokenisation chapter quotes these numbers. On the training split of the embedded corpus it
times, for the source side (1024 ids, "bits" and "bytes" modes) and the target side (8000 ids):

- the fast learner, timed in full as ``BPETokenizer.train`` (pre-tokenization included);
- the naive learner (``method="naive"``), which would take far too long in full. It is measured
  to the end on the first lines of the split (where fast is measured too, and both must learn
  the same merges), then EXTRAPOLATED to the full split: a naive merge rescans every live
  symbol, so its time is taken as proportional to the symbols it scans, which a fast run on the
  full split counts (through the private ``_LinkedCorpus``, sampled every few merges);
- the Rust trainer of HuggingFace ``tokenizers`` on the same text, as a yardstick (skipped, with
  the reason recorded, when the package cannot be imported; it is never a cipherlab dependency);
- encoding throughput of ``BPETokenizer.encode``.

Usage (install the yardstick outside the project's environment first):

    pip install --target /tmp/hftok tokenizers
    .venv/bin/python benchmarks/bench_bpe.py --hf-path /tmp/hftok > /tmp/bench_bpe.log 2>&1 &
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # the Rust trainer on one thread, like Python

from cipherlab.data.corpus import load_corpus  # noqa: E402
from cipherlab.data.tokenizers.bpe import BPETokenizer, learn_merges, text_sequences  # noqa: E402
from cipherlab.data.tokenizers.bpe.fast import _LinkedCorpus  # noqa: E402
from cipherlab.data.tokenizers.cipher_task import SOURCE_MODES, TARGET_SETTINGS, boundary_straddle_rate  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "bpe.json"
SIDES = {  # name -> (settings, vocabulary size)
    "source_bits": (SOURCE_MODES["bits"], 1024),
    "source_bytes": (SOURCE_MODES["bytes"], 1024),
    "target_plain": (TARGET_SETTINGS, 8000),
}
# The naive learner runs to the end on a subset: (first lines of the split, at most this many merges).
NAIVE_SUBSET = {"source_bits": (100, 1019), "source_bytes": (100, 765), "target_plain": (100, 1000)}
SAMPLE_EVERY = 10  # merges between two samples of the live-symbol trajectory
ENCODE_LINES = 300  # cipher lines encoded for the throughput figure


def clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> dict:
    wall, cpu = clock()
    return {"wall_s": round(wall - start[0], 3), "cpu_s": round(cpu - start[1], 3)}


def symbol_steps(sequences: dict, n: int) -> int:
    """Symbols the naive learner scans over ``n`` merges: the live symbols before each merge, summed.

    Read off a fast run, sampled every SAMPLE_EVERY merges (array.count runs in C, so sampling is
    cheap) and summed with the trapezoid rule between samples.
    """
    corpus = _LinkedCorpus(sequences)
    points = []
    for k in range(n + 1):
        if k % SAMPLE_EVERY == 0 or k == n:
            points.append((k, len(corpus.sym) - corpus.sym.count(-1)))
        if k == n or (best := corpus.pop_best()) is None:
            break
        corpus.merge(best[0])
    if points[-1][0] != k:
        points.append((k, len(corpus.sym) - corpus.sym.count(-1)))
    return round(sum((s0 + s1) / 2 * (k1 - k0) for (k0, s0), (k1, s1) in zip(points, points[1:])))


def naive_vs_fast(sequences: dict, n: int, subset: dict, subset_merges: int, fast_cpu_s: float) -> dict:
    """Measure naive and fast on ``subset`` (up to ``subset_merges`` merges); extrapolate naive to
    ``n`` merges on ``sequences``, whose fast learner took ``fast_cpu_s``.

    Each naive merge rescans every live symbol (pair_counts, then merge_symbols), so its time is
    taken as proportional to the symbols it scans; the seconds per symbol come from the subset.
    """
    start = clock()
    fast = learn_merges(subset, subset_merges, method="fast")
    fast_time = since(start)
    start = clock()
    naive = learn_merges(subset, subset_merges, method="naive")
    naive_time = since(start)
    subset_steps = symbol_steps(subset, len(naive))
    full_steps = symbol_steps(sequences, n)
    per_step = naive_time["cpu_s"] / subset_steps
    estimate = per_step * full_steps
    return {
        "subset": {
            "sequences": len(subset),
            "merges": len(naive),
            "identical_merges": fast == naive,
            "fast": fast_time,
            "naive": naive_time,
            "speedup_measured": round(naive_time["cpu_s"] / fast_time["cpu_s"], 1),
            "symbols_scanned_by_naive": subset_steps,
        },
        "full": {
            "label": "naive EXTRAPOLATED from the subset: cpu seconds per scanned symbol x symbols it would scan",
            "naive_us_per_scanned_symbol": round(per_step * 1e6, 3),
            "symbols_scanned_by_naive": full_steps,
            "naive_estimated_cpu_s": round(estimate, 1),
            "speedup_estimated": round(estimate / fast_cpu_s, 1),
            "why": (
                f"naive scans {full_steps:.3g} symbols at {per_step * 1e6:.2f} us each; fast visits each of "
                f"the {sum(map(len, sequences)):.3g} symbols of the linked array once or twice, at "
                f"{fast_cpu_s / sum(map(len, sequences)) * 1e6:.2f} us per symbol. The ratio grows with how "
                "little the corpus shrinks while merging (naive rescans what is left)"
            ),
        },
    }


def import_hf(hf_path: str | None):
    """The HuggingFace ``tokenizers`` package, or the reason it is unavailable."""
    if hf_path:
        sys.path.append(hf_path)  # appended: the project's own packages keep precedence
    try:
        import tokenizers
    except ImportError as err:
        return None, f"HuggingFace tokenizers not importable ({err}); pip install --target /tmp/hftok tokenizers"
    return tokenizers, None


def hf_train(hf, side: str, texts: list[str], vocab: int) -> dict:
    """Train the Rust BPE on the same text; compare its merges with ours."""
    from tokenizers import Regex, models, pre_tokenizers, trainers

    specials = ["<pad>", "<bos>", "<eos>"]
    if side == "source_bytes":  # each 8-bit group as one character, so the base symbols agree
        texts = ["".join(chr(0x100 + int(t[j : j + 8], 2)) for j in range(0, len(t), 8)) for t in texts]
        alphabet = [chr(0x100 + v) for v in range(256)]
    else:
        alphabet = ["0", "1"] if side == "source_bits" else []
    tokenizer = hf.Tokenizer(models.BPE(unk_token="<unk>" if side == "target_plain" else None))
    if side == "target_plain":
        specials.append("<unk>")
        tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"\s*\S+|\s+"), behavior="isolated")
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=specials, initial_alphabet=alphabet, show_progress=False
    )
    start = clock()
    tokenizer.train_from_iterator(texts, trainer)
    timing = since(start)
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]
    return {"timing": timing, "vocab_size": tokenizer.get_vocab_size(), "merges": merges}


def merge_agreement(ours: list, theirs: list, side: str) -> dict:
    if side == "source_bytes":  # back from the one-character-per-group spelling
        theirs = [tuple("".join(format(ord(ch) - 0x100, "08b") for ch in part) for part in m) for m in theirs]
    first_difference = next((k for k, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    built_ours = {a + b for a, b in ours}
    built_theirs = {a + b for a, b in theirs}
    return {
        "identical_prefix_merges": first_difference,
        "token_overlap": round(len(built_ours & built_theirs) / max(1, len(built_ours)), 3),
    }


def encode_throughput(tokenizer: BPETokenizer, texts: list[str], label: str) -> dict:
    start = clock()
    n_tokens = sum(len(tokenizer.encode(t)) for t in texts)
    timing = since(start)
    return {
        "texts": label,
        "chars": sum(map(len, texts)),
        "tokens": n_tokens,
        **timing,
        "tokens_per_s": round(n_tokens / timing["cpu_s"]),
        "chars_per_s": round(sum(map(len, texts)) / timing["cpu_s"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hf-path", help="folder holding HuggingFace tokenizers (pip install --target)")
    parser.add_argument("--note", default="", help="anything a reader should know, e.g. a shared machine")
    args = parser.parse_args()

    hf, hf_reason = import_hf(args.hf_path)
    load_before = os.getloadavg()
    corpus = load_corpus()
    plain, cipher = corpus.lines("train")
    _, val_cipher = corpus.lines("val")
    texts = {"source_bits": cipher, "source_bytes": cipher, "target_plain": plain}
    report: dict = {"sides": {}}

    for side, (settings, vocab) in SIDES.items():
        print(f"[{side}] training", flush=True)
        start = clock()
        tokenizer = BPETokenizer.train(texts[side], vocab, **settings)
        fast = since(start)
        n = len(tokenizer.merges)
        sequences = text_sequences(texts[side], pretokenizer=settings["pretokenizer"], unit=settings["unit"])
        print(f"[{side}] fast {fast}; naive on a subset", flush=True)
        lines, merges = NAIVE_SUBSET[side]
        subset = text_sequences(texts[side][:lines], pretokenizer=settings["pretokenizer"], unit=settings["unit"])
        entry = {
            "vocab_size": tokenizer.vocab_size,
            "merges": n,
            "symbols_in_linked_array": sum(map(len, sequences)),
            "fast_train": fast,
            "fast_us_per_symbol": round(fast["cpu_s"] / sum(map(len, sequences)) * 1e6, 2),
            "naive": {"subset_lines": lines, **naive_vs_fast(sequences, n, subset, min(n, merges), fast["cpu_s"])},
        }
        if hf is None:
            entry["hf_tokenizers"] = {"skipped": hf_reason}
        else:
            print(f"[{side}] HuggingFace tokenizers", flush=True)
            theirs = hf_train(hf, side, texts[side], vocab)
            entry["hf_tokenizers"] = {
                "version": hf.__version__,
                "threads": os.environ["RAYON_NUM_THREADS"],
                **theirs["timing"],
                "vocab_size": theirs["vocab_size"],
                "fast_over_hf_cpu": round(fast["cpu_s"] / theirs["timing"]["cpu_s"], 2),
                **merge_agreement(tokenizer.merges, theirs["merges"], side),
            }
        if side == "target_plain":
            entry["encode_cold_cache"] = encode_throughput(tokenizer, plain, "training split, empty cache")
            entry["encode_warm_cache"] = encode_throughput(tokenizer, plain, "training split, warm cache")
        else:
            entry["encode"] = encode_throughput(tokenizer, cipher[:ENCODE_LINES], f"first {ENCODE_LINES} training lines")
            entry["encode"]["whole_training_split_cpu_s_extrapolated"] = round(
                entry["encode"]["cpu_s"] * sum(map(len, cipher)) / entry["encode"]["chars"], 1
            )
            entry["boundary_straddle_rate_val"] = round(boundary_straddle_rate(tokenizer, val_cipher), 4)
        report["sides"][side] = entry
        print(json.dumps(entry, indent=1), flush=True)

    import torch  # only for its version string

    report["targets"] = {
        "fast_at_least_100x_naive_cipher_side": {
            side: report["sides"][side]["naive"]["full"]["speedup_estimated"] >= 100
            for side in ("source_bits", "source_bytes")
        },
        "fast_within_20x_of_rust": None
        if hf is None
        else {side: e["hf_tokenizers"]["fast_over_hf_cpu"] <= 20 for side, e in report["sides"].items()},
    }
    report["data"] = {
        "corpus_sha256": corpus.sha256,
        "train_lines": len(plain),
        "train_plain_chars": sum(map(len, plain)),
        "train_cipher_bits": sum(map(len, cipher)),
    }
    report["machine"] = {
        "platform": platform.platform(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "note": args.note,
    }
    report["python"] = platform.python_version()
    report["torch"] = torch.__version__
    report["command"] = " ".join([os.path.relpath(sys.executable), *sys.argv])
    report["timings"] = "cpu_s is process CPU time (fair on a shared machine); wall_s is elapsed time"
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
