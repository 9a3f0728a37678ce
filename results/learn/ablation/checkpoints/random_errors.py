"""Where the controlled ablation's weakest model errs on random strings, kept as a record.

    python results/learn/ablation/checkpoints/random_errors.py

Of the seed-0 models this ablation exported (`checkpoints/c1..c5.safetensors`, each record's `export`
field), the one whose record has the lowest random-string character accuracy (`sets.random_letters`)
decodes 200 fresh random strings of letters and spaces (spaces six times as likely;
`cipherlab.analysis.doctor.random_strings(LETTERS, 200, seed=7)`), encrypted with the key, with
length-aware greedy decoding. The appendix (the course notes' recipe) reads each wrong character off
the predictions. The models are no longer in the tree: this script needs them back from the commit
that last held them (README.md beside it says which, and how). It writes `random_errors.json` beside it.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))

from cipherlab.analysis.ablation import load_learn_runs, section  # noqa: E402
from cipherlab.analysis.doctor import random_strings  # noqa: E402
from cipherlab.data.cipher import encrypt  # noqa: E402
from cipherlab.runner.trained import load_trained  # noqa: E402
from cipherlab.pipeline.decode import decrypt_lines  # noqa: E402
from cipherlab.runner.record import git_commit, versions  # noqa: E402

HERE = Path(__file__).resolve().parent
LETTERS = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") + [" "] * 6  # as results/learn/probe.py
N_STRINGS, SEED = 200, 7


def main() -> int:
    torch.set_num_threads(1)
    runs = load_learn_runs(HERE.parent)
    worst = min((r for (_, seed), r in runs.items() if seed == 0), key=lambda r: section(r, "random_letters")["char_accuracy"])
    path = ROOT / worst["export"]
    model, codec, config = load_trained(path, "cpu")
    strings = random_strings(LETTERS, N_STRINGS, seed=SEED)
    predictions = decrypt_lines(model, codec, [encrypt(s) for s in strings], chunk_chars=config.chunk_chars,
                                device=torch.device("cpu"), length_aware=True)
    record = {"about": {"command": shlex.join(["python", "results/learn/ablation/checkpoints/random_errors.py"]),
                        "git_commit": git_commit(), "versions": versions(), "decoding": "greedy, length-aware",
                        "strings": f"random_strings(LETTERS, {N_STRINGS}, seed={SEED}), LETTERS = a-z, A-Z and six "
                                   "spaces",
                        "model": "the seed-0 export with the lowest random-string character accuracy in its record"},
              "config": worst["config"], "seed": worst["seed"], "file": worst["export"],
              "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
              "strings": strings, "predictions": predictions}
    out = HERE / "random_errors.json"
    out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"{worst['config']} seed {worst['seed']}: wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
