"""Write results/recipe/README.md, and a README in each part's folder, from the run records (every
number read from a file). It reads and writes the results folder that cipherlab reads
(``$CIPHERLAB_RESULTS_DIR``, else the repository's ``results/``).

    python results/recipe/make_readme.py
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "book"))  # the book's runs: which folder holds each part

from cipherlab.base.config import RECIPE_KNOWLEDGE, RECIPES  # noqa: E402
from cipherlab.analysis.ablation import (RECIPE_OFF, learning_curve_table, load_learn_runs,  # noqa: E402
                               load_recipe_runs, recipe_comparison, recipe_cost_table, reference_tables, results_dir)
from cipherbook.runs import RECIPE_FOLDERS, REFERENCE_RUN  # noqa: E402

INTRO = """# The recipe, part by part

The default recipe (`cipher`) trains all five configurations the same way. Each of its parts is
taken out here, one at a time, from C1 and C2 of the reference ablation (`results/reference`, every
part on), with everything else as there: the `cpu` preset, whole bytes and no merges, 4 epochs,
seeds 0 and 1, one torch thread each, every probe set, and a validation every 50 steps (the
learning curve). Each record is one run of `results/learn/probe.py` (its `command` field; `run.sh`
reruns them). The key-phase embedding off is `results/nophase`, which ran all five configurations.
Parts whose folder is missing below were not run, and a part run for C1 alone shows C1's rows alone.
"""


def part_section(field: str, runs: dict, reference: dict) -> str:
    folder, changes = RECIPE_FOLDERS[field], RECIPE_OFF[field]
    every, goals = reference_tables(runs)
    changed = ", ".join(f"`{name}` {RECIPES['cipher'][name]!r} → {value!r}" for name, value in changes.items())
    return (f"## {changed} (`results/{folder}/`)\n\n"
            f"What it knows: {RECIPE_KNOWLEDGE[field]}.\n\n"
            "Exact lines with all of the recipe (before) and without this part (after), on the same lines, "
            "configuration by configuration and seed by seed: the lines only the run without it got right (+), "
            "only the run with it (−), and McNemar's exact test.\n\n"
            + recipe_comparison(reference, runs) + "\n\n"
            "Characters % / exact lines of each probe set:\n\n" + every + "\n\n"
            "The reference goals (met when every seed meets them):\n\n" + goals + "\n\n"
            "How fast they learned (teacher-forced validation every 50 steps, `curve` in each record):\n\n"
            + learning_curve_table(runs) + "\n")


def main() -> None:
    root = results_dir()
    reference_all = load_learn_runs(REFERENCE_RUN)  # the same runs with all of the recipe
    ablations = {part: {key: r for key, r in runs.items() if key[0] in ("c1", "c2")}
                 for part, runs in load_recipe_runs(RECIPE_FOLDERS).items()}
    text = INTRO + ("\n## Every part at a glance\n\nExact lines with every part (`results/reference`) → without "
                    "this one, seed by seed, with McNemar's exact p-value of the paired outcomes:\n\n"
                    + recipe_cost_table(reference_all, ablations) + "\n")
    for part, runs in ablations.items():
        reference = {key: r for key, r in reference_all.items() if key in runs}
        section = part_section(part, runs, reference)
        text += "\n" + section
        folder = RECIPE_FOLDERS[part]
        if folder.startswith("recipe/"):
            (root / folder / "README.md").write_text(
                f"# The recipe without `{part}`\n\nPart of the recipe ablation: see `results/recipe/README.md` "
                "for how these runs were made.\n\n" + section.split("\n", 2)[2], encoding="utf-8")
    (root / "recipe" / "README.md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
