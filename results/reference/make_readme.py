"""Write results/reference/README.md from the run records beside it (every number read from a file).

    python results/reference/make_readme.py
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from cipherlab.base.config import RECIPES  # noqa: E402
from cipherlab.analysis.ablation import load_learn_runs, recipe_comparison, reference_tables  # noqa: E402

SHUFFLES = ROOT / "results" / "learn" / "ablation"  # the same ablation with the recipe before it
EXPERIMENTS = ROOT / "results" / "learn" / "recipe"  # single runs that tried one change each

INTRO = """# The reference ablation: the recipe that learns the cipher

Each record here is one run of `results/learn/probe.py` (its `command` field): the `cpu` preset of
one configuration trained with the default recipe, `cipher` (`RECIPES` in `cipherlab/base/config.py`,
what `make_config` and `python -m cipherlab train` give unless told otherwise), for 4 epochs
with two seeds, one torch thread per run, two runs side by side on a 2-core machine. `run.sh`
reruns it. The recipe is the same for all five configurations:

{recipe}

- `phase_shuffle`: every training chunk is replaced by a *phase-preserving shuffle*, its
  characters permuted among positions with the same index mod 8 and its cipher bytes alike, so
  every pair is still a valid cipher pair but the text is no longer English;
- `case_flip`: each letter of a shuffled chunk has its case flipped with this probability, and
  bit 5 of its cipher byte with it (`(p ^ 0x20) ^ k == (p ^ k) ^ 0x20`: no key is needed);
- `source_eos`: every cipher sequence ends with an end-of-source token, so the decoder's EOS
  lines up with a token instead of with the absence of one;
- `bit_embeddings`, `phase_embedding`: embeddings (and, through the tied head, logits) linear
  in the 8 bits, and a learned vector per key phase;
- `select_on`: `best.pt` is the epoch with the best teacher-forced validation token accuracy.

Every run is decoded (greedy; length-aware unless it says free) on sets that no model here was
trained on, made by `cipherlab/analysis/probes.py`:

- **random letters**: {n_letters} strings of 40-120 characters over a-z, A-Z and space;
- **random alphabet**: {n_alphabet} strings of 40-120 characters drawn uniformly from every character
  of the Brown training lines (letters, digits, punctuation);
- **docstrings**: the {n_stdlib} letters-and-spaces lines of Python's docstrings (`data/stdlib`);
- **upper case**: the first {n_upper} of them in upper case;
- **long lines**: those lines joined and cut into {n_long} lines of 2,600 characters;
- **Brown**: all {n_brown} test lines of the split, free (EOS where the model puts it) and
  length-aware.

The seed-0 models are committed as `results/checkpoints/c1.safetensors` ... `c5.safetensors`
(a test decodes lines of every set with each and checks the numbers recorded here).
"""


def recipe_text() -> str:
    return "\n".join(f"    {field}={value!r}" for field, value in RECIPES["cipher"].items())


def main() -> None:
    runs = load_learn_runs(HERE)
    first = next(iter(runs.values()))
    every, goals = reference_tables(runs)
    n = {name: first["sets"][key]["lines"] for name, key in (
        ("n_letters", "random_letters"), ("n_alphabet", "random_alphabet"), ("n_stdlib", "stdlib"),
        ("n_upper", "stdlib_upper"), ("n_long", "stdlib_long"), ("n_brown", "test_free"))}
    text = INTRO.format(recipe=recipe_text(), **n)
    text += "\n## Every run\n\n" + every + "\n\n## The goals\n\nA goal is met when every seed meets it.\n\n"
    text += goals + "\n"
    if SHUFFLES.is_dir():
        text += ("\n## What the last two parts of the recipe changed\n\n"
                 "The same ablation with the recipe before case flips and the end-of-source token "
                 "(`results/learn/ablation`, the `shuffles` recipe: same preset, epochs, seeds and lines). "
                 "Exact lines before → after, the lines only the new model got right (+) and only the old "
                 "one got right (−), and McNemar's exact test on those paired outcomes:\n\n")
        text += recipe_comparison(load_learn_runs(SHUFFLES), runs) + "\n"
    (HERE / "README.md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
