"""Where a reference model's remaining errors sit: every wrong character of the lines its record
marks as missed, with its position in the line, its key phase, its place in its chunk, the length
of that chunk and the bits that differ (not a test).

    .venv/bin/python results/reference/where_errors.py --record results/reference/ref-c2-seed0.json \
        --checkpoint results/checkpoints/c2.safetensors

Only the seed-0 models are committed; for seed 1, train and export it first with the record's own
command plus ``--export`` (the run repeats bit for bit on this machine), e.g.

    .venv/bin/python results/learn/probe.py --config c2 --recipe cipher --minutes 30 --epochs 4 --seed 1 \
        --name rerun-c2-seed1 --out /tmp/c2s1 --random 200 --all-test --more-sets --export /tmp/c2s1/c2.safetensors
"""

import argparse
from pathlib import Path

import torch

from cipherlab.runner.trained import load_trained
from cipherlab.data.cipher import KEY, encrypt
from cipherlab.pipeline.decode import decrypt_lines
from cipherlab.analysis.probes import probe_sets
from cipherlab.runner.record import read_record

SETS = ("random_letters", "random_alphabet", "stdlib", "stdlib_upper", "stdlib_long")  # the record's sets.<name>


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", type=Path, required=True)
    parser.add_argument("--checkpoint", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    record = read_record(args.record)
    model, codec, config = load_trained(args.checkpoint, "cpu")
    sets = probe_sets(config)
    n = config.chunk_chars
    print(f"{'set':15} {'line':>5} {'chars':>6} {'pos':>6} {'phase':>5} {'in chunk':>8} {'chunk chars':>11} "
          f"{'true':>4} {'got':>4} {'bits differing':>14}")
    for name in SETS:
        missed = [i for i, ok in enumerate(record["sets"][name]["exact_by_line"]) if ok == "0"]
        lines = [sets[name][i] for i in missed]
        decoded = decrypt_lines(model, codec, [encrypt(line) for line in lines], chunk_chars=n,
                                device=torch.device("cpu"), length_aware=True)
        for i, line, got in zip(missed, lines, decoded):
            for pos, (a, b) in enumerate(zip(line, got)):
                if a != b:
                    start = pos - pos % n
                    print(f"{name:15} {i:>5} {len(line):>6} {pos:>6} {pos % len(KEY):>5} {pos % n:>8} "
                          f"{min(n, len(line) - start):>11} {a!r:>4} {b!r:>4} {ord(a) ^ ord(b):>14_b}")


if __name__ == "__main__":
    main()
