"""What the appendix (the course notes' recipe) measured on the course notes' C2 and C5, kept as a record.

    python results/notes/checkpoints/probes.py

The models were `results/notes/checkpoints/c2.safetensors` and `c5.safetensors`. They are no longer in
the tree: this script needs them back from the commit that last held them (README.md beside it says
which, and how). It writes `probes.json` beside it, which the appendix reads instead of the models:

- `random_strings`: each model's length-aware greedy decryption of 30 random strings of letters and
  spaces (spaces six times as likely; `cipherlab.analysis.doctor.random_strings(LETTERS, 30, seed=2026)`),
  encrypted with the key, and of its first 30 test lines (`test_lines`). The appendix scores them;
- `doctor`: `cipherlab.analysis.doctor.diagnose_checkpoint` on each model with the appendix's settings
  (20 test and stdlib lines, 30 random strings, 4 attention chunks): what `python -m cipherlab doctor`
  computes, every number of its report.

The record also holds each model's configuration and file digest, the command, commit and versions.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from cipherlab.analysis.doctor import diagnose_checkpoint, random_strings  # noqa: E402
from cipherlab.data.cipher import encrypt  # noqa: E402
from cipherlab.data.corpus import load_corpus  # noqa: E402
from cipherlab.runner.trained import load_trained  # noqa: E402
from cipherlab.pipeline.codec import select_lines  # noqa: E402
from cipherlab.pipeline.decode import decrypt_lines  # noqa: E402
from cipherlab.runner.record import git_commit, versions  # noqa: E402

HERE = Path(__file__).resolve().parent
CONFIGS = ("c2", "c5")
LETTERS = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") + [" "] * 6  # as results/learn/probe.py
N_RANDOM, RANDOM_SEED, TEST_LINES = 30, 2026, 30
DOCTOR = {"lines": 20, "n_random": 30, "attention_chunks": 4}  # the appendix's settings (the command's are larger)


def main() -> int:
    os.chdir(ROOT)  # the doctor records the path it was given: results/notes/checkpoints/<config>.safetensors
    torch.set_num_threads(1)
    strings = random_strings(LETTERS, N_RANDOM, seed=RANDOM_SEED)
    record = {"about": {"command": shlex.join(["python", "results/notes/checkpoints/probes.py"]),
                        "git_commit": git_commit(), "versions": versions(),
                        "decoding": "greedy, length-aware",
                        "random_strings": f"random_strings(LETTERS, {N_RANDOM}, seed={RANDOM_SEED}), LETTERS = a-z, "
                                          "A-Z and six spaces", "test_lines": f"the first {TEST_LINES} test lines",
                        "doctor": DOCTOR},
              "models": {}}
    for name in CONFIGS:
        path = HERE / f"{name}.safetensors"
        model, codec, config = load_trained(path, "cpu")
        _, test_cipher = select_lines(load_corpus(), config).lines("test")

        def decode(cipher, model=model, codec=codec, config=config):
            return decrypt_lines(model, codec, cipher, chunk_chars=config.chunk_chars, device=torch.device("cpu"),
                                 length_aware=True)

        record["models"][name] = {
            "file": path.relative_to(ROOT).as_posix(), "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "config": config.to_dict(),
            "random_strings": decode([encrypt(s) for s in strings]),
            "test_lines": decode(test_cipher[:TEST_LINES]),
            "doctor": diagnose_checkpoint(path.relative_to(ROOT).as_posix(), device="cpu", **DOCTOR),
        }
        print(f"{name}: decoded and diagnosed", flush=True)
    out = HERE / "probes.json"
    out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
