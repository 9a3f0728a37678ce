"""Where the reference models still err, and what length-aware greedy decoding changes.

    python results/analysis.py                      # every runs/cpu*/c*/best.pt -> results/notes/cpu/errors.json

For each trained configuration it decrypts the test lines again, greedy as the results do, both
freely and length-aware (EOS exactly at the length the cipher fixes; metrics of both), and counts, over the predictions whose length is right, the wrong characters at each position
of the 32-character chunk and at each key phase (position mod 8); the exact-line rate by line
length; and the share of chunks decoded exactly. A model limited by exposure bias errs more
late in a chunk; one hurt by chunk boundaries errs at chunk starts; one that has not learned
some key byte errs at one phase. The test split is only read here, never used to choose anything.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import torch

from cipherlab.data.corpus import load_corpus, make_chunks
from cipherlab.pipeline.decode import decrypt_lines
from cipherlab.runner.trained import load_trained
from cipherlab.pipeline.metrics import compute_metrics
from cipherlab.pipeline.codec import select_lines
from cipherlab.runner.record import git_commit, versions

ROOT = Path(__file__).resolve().parents[1]
LENGTH_BINS = [(0, 100), (100, 200), (200, 400), (400, 800), (800, 10**6)]


def analyse(checkpoint: Path, data_dir: Path | None = None) -> dict:
    model, codec, config = load_trained(checkpoint, "cpu")
    corpus = select_lines(load_corpus(data_dir), config)
    plain, cipher = corpus.lines("test")
    kwargs = dict(chunk_chars=config.chunk_chars, device=torch.device("cpu"))
    predictions = decrypt_lines(model, codec, cipher, length_aware=False, **kwargs)
    aware = decrypt_lines(model, codec, cipher, length_aware=True, **kwargs)
    tokenised = codec.kind == "bpe"
    n = config.chunk_chars
    by_pos, seen_pos = [0] * n, [0] * n
    by_phase, seen_phase = [0] * 8, [0] * 8
    wrong_length = 0
    for pred, ref in zip(predictions, plain, strict=True):
        if len(pred) != len(ref):
            wrong_length += 1
            continue
        for i, (a, b) in enumerate(zip(pred, ref)):
            by_pos[i % n] += a != b
            seen_pos[i % n] += 1
            by_phase[i % 8] += a != b
            seen_phase[i % 8] += 1
    bins = []
    for lo, hi in LENGTH_BINS:
        pairs = [(p, r) for p, r in zip(predictions, plain) if lo <= len(r) < hi]
        bins.append({"chars": [lo, hi], "lines": len(pairs),
                     "exact": sum(p == r for p, r in pairs) / len(pairs) if pairs else None})
    truth = make_chunks(plain, cipher, range(len(plain)), n)
    # the prediction cut at the same characters as its reference line
    exact_chunks = sum(predictions[c.line][c.part * n:(c.part + 1) * n] == plain[c.line][c.part * n:(c.part + 1) * n]
                       for c in truth)
    return {
        "checkpoint": str(checkpoint),
        "test_free": compute_metrics(predictions, plain, cipher, tokenised=tokenised),
        "test_length_aware": compute_metrics(aware, plain, cipher, tokenised=tokenised),
        "lines": len(plain),
        "lines_with_wrong_length": wrong_length,
        "char_error_by_chunk_position": [e / s if s else None for e, s in zip(by_pos, seen_pos)],
        "char_error_by_key_phase": [e / s if s else None for e, s in zip(by_phase, seen_phase)],
        "exact_lines_by_length": bins,
        "chunks": len(truth),
        "exact_chunks": exact_chunks / len(truth),
        "errors": [{"line": i, "reference": r, "prediction": p} for i, (p, r) in enumerate(zip(predictions, plain))
                   if p != r][:5],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs-dir", default="runs")
    parser.add_argument("--pattern", default="cpu*/c*/best.pt", help="which checkpoints under --runs-dir")
    parser.add_argument("--out", default=str(ROOT / "results" / "notes" / "cpu" / "errors.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    report = {"about": {"command": shlex.join(["python", "results/analysis.py", *(sys.argv[1:] if argv is None else argv)]),
                        "git_commit": git_commit(), "versions": versions()}}
    for best in sorted(Path(args.runs_dir).glob(args.pattern)):
        key = f"{best.parent.parent.name}/{best.parent.name}"
        report[key] = analyse(best)
        r = report[key]
        print(f"{key}: bit acc free {r['test_free']['bit_accuracy']:.4f} / length-aware "
              f"{r['test_length_aware']['bit_accuracy']:.4f}, exact lines {r['test_free']['sequence_accuracy']:.3f} / "
              f"{r['test_length_aware']['sequence_accuracy']:.3f}; exact chunks {r['exact_chunks']:.4f}, "
              f"wrong-length lines {r['lines_with_wrong_length']}, "
              f"by length {[b['exact'] for b in r['exact_lines_by_length']]}", flush=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
