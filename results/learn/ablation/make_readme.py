"""Write results/learn/ablation/README.md from the run records beside it (every number read from a file).

    python results/learn/ablation/make_readme.py
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from cipherlab.results import LEARN_GOALS as GOALS  # noqa: E402
from cipherlab.results import learn_goal_values, load_learn_runs  # noqa: E402

CONFIGS = ("c1", "c2", "c3", "c4", "c5")

INTRO = """# Learning the cipher, not the corpus: the controlled ablation

Each record here is one run of `results/learn/probe.py` (its `command` field): the `cpu` preset of
one configuration with the same three changes to the shared data pipeline and embeddings for all
five, trained for the same number of epochs with two seeds, one torch thread per run, two runs side
by side on a 2-core machine. The changes (issue 16; `cipherlab/config.py`):

- `phase_shuffle=1.0`: every training chunk is replaced by a *phase-preserving shuffle* -- its
  characters permuted among positions with the same index mod 8 and its cipher bytes alike, drawn
  once with the run's seed (every epoch sees the same copies) -- so every pair is still a valid cipher pair but the text is no longer English;
- `bit_embeddings=true`: every byte's and character's embedding row (and, through the tied head,
  its logit) is a learned linear function of its 8 bits;
- `phase_embedding=true`: a learned vector per key phase (position mod 8) added to the embeddings,
  which gives RoPE's C2 the absolute phase that its offset-only scores cannot see;
- `select_on=val_accuracy`: `best.pt` is the epoch with the best teacher-forced validation token
  accuracy (a logit linear in the bits cannot spread probability like a language model, so the
  validation loss is the wrong signal here).

Every run is decoded on
- **random strings**: {n_random} strings of 40-120 characters over a-z, A-Z and space (spaces six
  times as likely), encrypted with the key: a model that learned the cipher decodes them, a language
  model does not (length-aware greedy decoding);
- **stdlib**: the 500 letters-and-spaces lines of Python's docstrings (`data/stdlib`), English
  that no Brown-trained model has seen (length-aware greedy);
- **Brown test**: all {n_brown} whole test lines of the split, free greedy decoding (EOS where the
  model puts it) and length-aware greedy.

The seed-0 model of each configuration is committed in `checkpoints/` (safetensors; a test decodes
random strings and stdlib lines with each and checks the numbers recorded here).
"""


def pct(x: float, digits: int = 2) -> str:
    return f"{100 * x:.{digits}f}"


def records() -> dict[tuple[str, int], dict]:
    return load_learn_runs(HERE)


def row(r: dict) -> list[str]:
    rand, std, free, aware = r["random_strings"], r["stdlib"], r["brown_test_free"], r["brown_test"]
    return [
        r["config"].upper(), str(r["seed"]), str(r["epochs"]), str(r["best_epoch"]),
        f"{r['train_seconds'] / 60:.1f}", pct(r["best_val_accuracy"], 3),
        f"{pct(rand['char_accuracy'])} / {rand['exact_lines']} of {rand['lines']}",
        f"{pct(std['bit_accuracy'], 3)} / {std['exact_lines']} of {std['lines']}",
        f"{pct(free['bit_accuracy'], 3)} / {free['exact_lines']} of {free['lines']}",
        f"{pct(aware['bit_accuracy'], 3)} / {aware['exact_lines']} of {aware['lines']}",
    ]


def goal_row(runs: dict, goal: tuple) -> list[str]:
    least, label = goal[2], goal[3]
    values = learn_goal_values(runs, goal)
    cells = []
    for name in CONFIGS:
        if name not in values:
            cells.append("not run")
            continue
        met = "met" if all(v >= least for v in values[name]) else "not met"
        cells.append(" / ".join(pct(v) for v in values[name]) + f" ({met})")
    return [label, f"≥ {pct(least, 1)}", *cells]


def main() -> None:
    runs = records()
    first = next(iter(runs.values()))
    lines = [INTRO.format(n_random=first["random_strings"]["lines"], n_brown=first["brown_test_free"]["lines"])]
    headers = ["config", "seed", "epochs", "best epoch", "training minutes", "val token accuracy %",
               "random strings: characters % / exact", "stdlib: bit % / exact", "Brown test, free: bit % / exact",
               "Brown test, length-aware: bit % / exact"]
    lines += ["## Every run", "", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row(runs[key])) + " |" for key in sorted(runs)]
    headers = ["goal (issue 16)", "target", *(name.upper() + ": seed 0 / seed 1" for name in CONFIGS)]
    lines += ["", "## The goals", "", "A goal is met when every seed meets it. Percentages.", "",
              "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(goal_row(runs, goal)) + " |" for goal in GOALS]
    lines.append("")
    (HERE / "README.md").write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    main()
