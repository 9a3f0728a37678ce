"""The search for the ``assignment`` preset's schedule, at the assignment's model sizes on this CPU.

    python benchmarks/assignment_search.py          # benchmarks/results/assignment_search/README.md from the runs

Each ``benchmarks/results/assignment_search/*.json`` is one ``benchmarks/assignment_steps.py`` run (its
``command``): d_model 256, 8 heads (2 key/value heads for C3), 4+4 layers, FFN 1024, the default recipe, one
torch thread, validated every 100 steps on the first 40 validation lines. This writes the README beside them:
each run's curve as the steps at which teacher-forced validation accuracy first reached 25 % (it has left the
unigram level, a few per cent) and 99 %, and its measured seconds per step. :func:`onset_steps` is what
``cipherlab.base.config.ONSET_STEP`` is checked against (tests/test_config.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cipherlab.analysis.ablation import first_step  # noqa: E402
from cipherlab.base.config import ONSET_STEP, make_config  # noqa: E402
from cipherlab.base.markdown import markdown_table  # noqa: E402

FOLDER = ROOT / "benchmarks" / "results" / "assignment_search"
LEFT_UNIGRAM = 0.25  # Config.onset_accuracy's default: a curve at or above it has left the unigram level
LEARNED = 0.99
SCHEDULE = ("chunk_chars", "src_vocab", "lr", "warmup_steps", "token_budget")

INTRO = """# The assignment preset's schedule, measured at the assignment's sizes on a CPU

The `assignment` preset keeps the course notes' model sizes (d_model 256, 8 heads, 2 key/value heads for
C3, 4+4 layers, FFN 1024) and the aligned BPE of chapter 6 (phase-tagged cipher bytes, 1,021 merges
learned on the training chunks). Every other setting was chosen by these runs. Each file here is one
`benchmarks/assignment_steps.py` run (its `command`), the default recipe, one torch thread, validated
every 100 steps on the first 40 validation lines, on a shared 2-core CPU; the seconds per step are that
machine's under that load. `python benchmarks/assignment_search.py` writes this README from them.

Columns: the settings that differ between runs; the first validation at which teacher-forced token
accuracy reached 25 % (the curve has left the unigram level of a few per cent) and 99 %; the accuracy
and the share of validation chunks exact at the last step.
"""

NOTES_TOKEN_BUDGET = 8192  # the course notes' source tokens a batch (their assignment schedule)

OUTSIDE = """
Measured the same way outside this folder (the project's shared measurements, commit 6439827): whole
cipher bytes with no merges behaved alike, at the unigram level throughout with 256-character chunks
and learned within a few hundred steps with 32-character ones. The chunk length, not the merges, kept
the notes' setting flat at these sizes within the steps a CPU can afford.

## What the preset takes

{chunk}-character chunks, lr {lr:g} after {warmup} warm-up steps, {budget:,} source tokens a batch (the course
notes' {notes_budget:,} cut by {cut} for CPU time; a GPU run keeps the batch that was measured), and the
aligned BPE's {vocab:,}-token source vocabulary (a smaller one learned as fast: the table). `onset_step`
is twice the latest step at which a configuration's run at the preset passed 25 %: a run still below
it there stops with one line instead of training a flat curve.
"""


def runs() -> list[dict]:
    """Every run of the folder's files, each with its file's name and overrides."""
    found = []
    for path in sorted(FOLDER.glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        for run in record["runs"]:
            found.append({**run, "file": path.name, "overrides": record["overrides"]})
    return found


def at_preset(run: dict) -> bool:
    """Whether a run's schedule and tokenisation are the assignment preset's own."""
    preset = make_config(run["config"], "assignment")
    return all(run["hyperparameters"][field] == getattr(preset, field) for field in SCHEDULE)


def onset_steps() -> dict[str, int | None]:
    """{configuration: first step at or above LEFT_UNIGRAM} over the runs at the preset's own settings."""
    return {run["config"]: first_step(run["curve"], "val_accuracy", LEFT_UNIGRAM) for run in runs() if at_preset(run)}


def table() -> str:
    rows = []
    for run in runs():
        h, last = run["hyperparameters"], run["curve"][-1]
        settings = ", ".join(f"{field} {h[field]}" for field in SCHEDULE)
        steps = [first_step(run["curve"], "val_accuracy", level) for level in (LEFT_UNIGRAM, LEARNED)]
        rows.append([run["file"], run["config"].upper(), settings, "yes" if at_preset(run) else "no",
                     *(str(s) if s is not None else "not reached" for s in steps),
                     f"{100 * last['val_accuracy']:.2f} % / {100 * last['val_exact_chunks']:.1f} % at {last['step']}",
                     f"{run['seconds_per_step']:.2f}"])
    return markdown_table(["file", "config", "settings", "the preset's", "25 % at step", "99 % at step",
                           "last: accuracy / exact chunks", "s / step"], rows)


def readme() -> str:
    onsets = onset_steps()
    latest = max(onsets.values())
    line = (f"\nAt the preset the latest onset is step {latest} ({', '.join(f'{c.upper()} {s}' for c, s in onsets.items())});"
            f" `ONSET_STEP` is {ONSET_STEP}.\n")
    c = make_config("c1", "assignment")
    notes_budget = NOTES_TOKEN_BUDGET
    return INTRO + "\n" + table() + "\n" + line + OUTSIDE.format(
        chunk=c.chunk_chars, lr=c.lr, warmup=c.warmup_steps, budget=c.token_budget, notes_budget=notes_budget,
        cut=notes_budget // c.token_budget, vocab=c.src_vocab)


def main() -> int:
    text = readme()
    (FOLDER / "README.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
