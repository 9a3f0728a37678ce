"""Write results/aligned/README.md from the run records beside it (every number read from a file).

    python results/aligned/make_readme.py
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from cipherlab.base.config import TOKENIZATIONS  # noqa: E402
from cipherlab.analysis.ablation import learning_curve_table, load_learn_runs, recipe_comparison, reference_tables  # noqa: E402
from cipherlab.base.markdown import markdown_table  # noqa: E402

REFERENCE = ROOT / "results" / "reference"  # the same ablation with no merges

INTRO = """# The reference ablation with a BPE that learns merges

Each record here is one run of `results/learn/probe.py` (its `command` field; `run.sh` reruns
them): C1-C4 of the `cpu` preset, the default recipe, 4 epochs, seeds 0 and 1 side by side (one
torch thread each), with the aligned BPE (`--tokens aligned`, what the `assignment` preset trains):

{tokens}

- the cipher is cut into 8-bit groups, each tagged with its key phase (position mod 8): 2,048
  base symbols, so that a token stands for one plaintext string wherever it occurs;
- the source BPE learns its merges on the training chunks as the recipe shows them to the model
  (phase-shuffled and case-flipped), so every merged token is frequent in training;
- target token i is the plaintext of source token i: the target's merges are the plaintext of
  the source's, and token i of both sides covers the same characters.

`results/merges` shows how this was chosen against the alternatives. Everything else is the
reference ablation's (`results/reference`, no merges): the same preset, recipe, epochs, seeds,
probe sets and decoding. The seed-0 models are `c1.safetensors` ... `c4.safetensors` here.
"""


def token_table(runs: dict) -> str:
    rows = []
    for (config, seed), r in runs.items():
        t = r.get("tokens") or {}
        rows.append([config.upper(), str(seed), str(t.get("source_merges", "–")), str(t.get("target_merges", "–")),
                     str(t.get("target_vocab", "–")), f"{t['chars_per_source_token']:.3f}" if t else "–"])
    return markdown_table(["config", "seed", "source merges", "target merges", "target tokens",
                           "Brown test characters per token"], rows)


def main() -> None:
    runs = load_learn_runs(HERE)
    every, goals = reference_tables(runs)
    tokens = "\n".join(f"    {field}={value!r}" for field, value in TOKENIZATIONS["aligned"].items())
    text = INTRO.format(tokens=tokens)
    text += "\n## The tokenisations\n\n" + token_table(runs) + "\n"
    text += "\n## Every run\n\nCharacters % / exact lines of each probe set (as in `results/reference`).\n\n"
    text += every + "\n\n## The goals\n\nA goal is met when every seed meets it.\n\n" + goals + "\n"
    text += ("\n## How fast they learned\n\nTeacher-forced validation on the 200 validation lines every 50 "
             "steps (`curve` in each record): the first step at which the token accuracy, and the share of "
             "validation chunks with every token right, reached each level.\n\n" + learning_curve_table(runs) + "\n")
    long_runs = sorted((HERE / "long").glob("*-seed*.json"))
    if long_runs:
        longer = load_learn_runs(HERE / "long")
        every_long, goals_long = reference_tables(longer)
        text += ("\n## Trained longer\n\nThe 4-epoch runs above resumed (`long/run.sh`) up to 12 epochs, within "
                 "the 30 minutes of training the goals allow; the same probe sets.\n\n" + every_long + "\n\n"
                 + goals_long + "\n\n" + learning_curve_table(longer) + "\n")
    reference = {key: r for key, r in load_learn_runs(REFERENCE).items() if key in runs}
    if reference:
        text += ("\n## Against the same ablation without merges\n\nThe same lines decoded by the no-merge "
                 "reference model (before) and the aligned-BPE model (after) of each configuration and seed: "
                 "exact lines, the lines only the aligned model got right (+) and only the reference got right "
                 "(−), and McNemar's exact test on those paired outcomes.\n\n")
        text += recipe_comparison(reference, runs) + "\n"
    (HERE / "README.md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
