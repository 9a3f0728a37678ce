"""Edit distance at library speed: cipherlab.pipeline.metrics.edit_distance (rapidfuzz) against the taught levenshtein.

    .venv/bin/python benchmarks/bench_metrics.py                 # -> benchmarks/results/metrics.json
    .venv/bin/python benchmarks/bench_metrics.py --out /tmp/metrics.json

For line pairs of several lengths (a random line of letters and spaces, and a copy of it with 1 %
of its characters replaced), times :func:`cipherlab.pipeline.metrics.levenshtein` (the plain-Python
dynamic programme the book teaches, O(n*m)) and :func:`cipherlab.pipeline.metrics.edit_distance`
(rapidfuzz, what ``compute_metrics`` uses), checks that they agree, and records the median of
``--repeats`` calls. The longest pair (50,000 characters) is timed on the fast path only: the
taught table would fill 2.5e9 cells. Not a test: the tests check the numbers, never the time.
The JSON records the command, the machine and its load average (read ratios on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cipherlab.pipeline.metrics import edit_distance, levenshtein  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "metrics.json"
TAUGHT_LENGTHS = (100, 500, 2600)  # 2600: about the longest Brown line (2670 characters)
FAST_ONLY_LENGTHS = (50_000,)
TARGETS = {"speedup_at_2600_characters": ">= 100x"}


def line_pair(n: int, rng: random.Random) -> tuple[str, str]:
    """A random line of ``n`` letters and spaces, and a copy with 1 % of its characters replaced."""
    alphabet = "abcdefghijklmnopqrstuvwxyz "
    reference = [rng.choice(alphabet) for _ in range(n)]
    prediction = list(reference)
    for i in rng.sample(range(n), max(1, n // 100)):
        prediction[i] = rng.choice([c for c in alphabet if c != reference[i]])
    return "".join(prediction), "".join(reference)


def seconds(function, a: str, b: str, repeats: int) -> tuple[float, int]:
    """(median seconds of ``repeats`` calls, the distance)."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        distance = function(a, b)
        times.append(time.perf_counter() - started)
    return statistics.median(times), distance


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="calls of the taught levenshtein per length")
    parser.add_argument("--fast-repeats", type=int, default=100, help="calls of edit_distance per length")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    rng = random.Random(0)
    out = {"command": " ".join(["python", *sys.argv]), "targets": TARGETS,
           "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(),
                       "python": sys.version.split()[0],
                       "load_average_1_5_15min_at_start": [round(x, 2) for x in os.getloadavg()]},
           "pairs": []}
    for n in (*TAUGHT_LENGTHS, *FAST_ONLY_LENGTHS):
        a, b = line_pair(n, rng)
        fast, distance = seconds(edit_distance, a, b, args.fast_repeats)
        row = {"characters": n, "distance": distance, "edit_distance_s": fast}
        if n in TAUGHT_LENGTHS:
            taught, reference = seconds(levenshtein, a, b, args.repeats)
            if reference != distance:
                raise SystemExit(f"{n} characters: levenshtein {reference} but edit_distance {distance}")
            row.update(levenshtein_s=taught, speedup=taught / fast)
        else:
            row["levenshtein_s"] = f"not run: {n * n:.1e} table cells"
        out["pairs"].append(row)
        print(json.dumps(row), flush=True)
    out["machine"]["load_average_1_5_15min_at_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
