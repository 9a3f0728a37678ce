"""Where the committed aligned-BPE models (C1, C3, C4, seed 0) go wrong on the 200 random strings of
their records: each wrong character's key phase, its place in its 32-character chunk, and the length
of the source token that covers it. Prints only; writes nothing. About a minute on one CPU thread.

    python results/aligned/where_errors.py
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from cipherlab.checkpoint import load_trained  # noqa: E402
from cipherlab.cipher import PERIOD, encrypt  # noqa: E402
from cipherlab.decode import decrypt_lines  # noqa: E402
from cipherlab.probes import probe_sets  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    for name in ("c1", "c3", "c4"):
        model, codec, config = load_trained(HERE / f"{name}.safetensors", "cpu")
        plain = probe_sets(config, n_random=200)["random_letters"]
        with torch.inference_mode():
            pred = decrypt_lines(model, codec, [encrypt(t) for t in plain], chunk_chars=config.chunk_chars,
                                 device=torch.device("cpu"), length_aware=True)
        phase, place, token = Counter(), Counter(), Counter()
        for guess, truth in zip(pred, plain):
            for start in range(0, len(truth), config.chunk_chars):
                ids = codec.encode_source(encrypt(truth[start:start + config.chunk_chars]))
                at = start
                for n in codec.source_chars(torch.tensor([ids]))[0].tolist():
                    for k in range(n):
                        if guess[at + k: at + k + 1] != truth[at + k]:
                            phase[(at + k) % PERIOD] += 1
                            place[(at + k) % config.chunk_chars] += 1
                            token[n] += 1
                    at += n
        print(f"{name.upper()}: {sum(phase.values())} wrong characters in {sum(p != t for p, t in zip(pred, plain))} "
              f"of {len(plain)} lines; by key phase {dict(sorted(phase.items()))}; by place in the chunk "
              f"{dict(sorted(place.items()))}; by length of the covering source token {dict(sorted(token.items()))}")


if __name__ == "__main__":
    main()
