"""Write results/nophase/README.md from the run records beside it (every number read from a file).

    python results/nophase/make_readme.py
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from cipherlab.base.config import RECIPE_KNOWLEDGE  # noqa: E402
from cipherlab.analysis.ablation import learning_curve_table, load_learn_runs, paired_rows, paired_table, recipe_comparison, reference_tables  # noqa: E402

REFERENCE = ROOT / "results" / "reference"  # the same ablation with the key-phase embedding

INTRO = """# The reference ablation without the key-phase embedding

The default recipe hands every configuration the cipher's period: a learned vector per key phase,
position mod 8, added to the embeddings (`phase_embedding`; {knows}). With it all five reach the
ceiling (`results/reference`), so the ablation cannot tell them apart. Here the same runs are
made with that one part off: the model must find the period from the positions it is given
(sinusoidal in C1, C3, C4; RoPE's relative offsets in C2; C5's byte positions). Each record is one
run of `results/learn/probe.py` (its `command` field; `run.sh` reruns them): the `cpu` preset,
whole bytes and no merges, 4 epochs, seeds 0 and 1 side by side, one torch thread each, every
probe set of the reference ablation, and a validation every 50 steps (the learning curve).
Configurations not listed below were not run.
"""


def main() -> None:
    runs = load_learn_runs(HERE)
    every, goals = reference_tables(runs)
    text = INTRO.format(knows=RECIPE_KNOWLEDGE["phase_embedding"])
    text += "\n## Every run\n\nCharacters % / exact lines of each probe set (as in `results/reference`).\n\n"
    text += every + "\n\n## The goals\n\nA goal is met when every seed meets it.\n\n" + goals + "\n"
    text += ("\n## How fast they learned\n\nTeacher-forced validation on the 200 validation lines every 50 "
             "steps (`curve` in each record): the first step at which the token accuracy, and the share of "
             "validation chunks with every token right, reached each level.\n\n" + learning_curve_table(runs) + "\n")
    if ("c1", 0) in runs and len({c for c, _ in runs}) > 1:
        text += ("\n## Each configuration against C1, on the same lines\n\nExact lines of C1 → the configuration "
                 "(same seed), the lines only the configuration got right (+) and only C1 got right (−), and "
                 "McNemar's exact test on those paired outcomes.\n\n" + paired_table(paired_rows(runs)) + "\n")
    reference = {key: r for key, r in load_learn_runs(REFERENCE).items() if key in runs}
    if reference:
        text += ("\n## What the key-phase embedding was worth\n\nThe same lines decoded with the embedding "
                 "(`results/reference`, before) and without it (after), configuration by configuration and seed by "
                 "seed: exact lines, the lines only the run without it got right (+) and only the run with it got "
                 "right (−), and McNemar's exact test.\n\n" + recipe_comparison(reference, runs) + "\n")
    (HERE / "README.md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
