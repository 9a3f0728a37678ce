"""Where the committed aligned-BPE models (C1, C3, C4, seed 0) go wrong on the 200 random strings of
their records: each wrong character's key phase, its place in its 32-character chunk, and the length
of the source token that covers it (``cipherlab.analysis.ablation.random_string_errors``). Prints only; writes
nothing. About a minute on one CPU thread.

    python results/aligned/where_errors.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from cipherlab.analysis.ablation import random_string_errors  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    for name in ("c1", "c3", "c4"):
        e = random_string_errors(HERE / f"{name}.safetensors")
        print(f"{name.upper()}: {e['wrong_chars']} wrong characters in {e['wrong_lines']} of {e['lines']} lines; "
              f"by key phase {dict(sorted(e['phase'].items()))}; by place in the chunk "
              f"{dict(sorted(e['place'].items()))}; by length of the covering source token "
              f"{dict(sorted(e['token_chars'].items()))}")


if __name__ == "__main__":
    main()
