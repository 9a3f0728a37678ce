"""Write results/learn/README.md from the probe records beside it (every number read from a file).

    python results/learn/make_readme.py
"""

from __future__ import annotations

import json
from pathlib import Path

from cipherlab.base.markdown import markdown_table
from cipherlab.runner.record import read_record

HERE = Path(__file__).resolve().parent

INTRO = """# Learning the cipher, not the corpus: first probes

Each record here is one run of `results/learn/probe.py`: the `cpu` preset of one configuration,
one seed, trained for a wall-clock budget on a shared 2-core machine (one torch thread, beside
other jobs, so the epochs each run got vary), then decoded with length-aware greedy decoding on

- **random strings**: 30 strings of 40-120 characters over a-z, A-Z and space, encrypted with the
  key. A model that learned the cipher decodes them; a model that learned English does not;
- **stdlib**: the 500 letters-and-spaces lines of Python's docstrings (`data/stdlib`), English that
  no Brown-trained model has seen;
- **Brown test**: the `cpu` preset's 200 test lines (also decoded freely, last column).

The two changes probed (`Config.phase_shuffle`, `Config.bit_embeddings`):
*phase-preserving shuffles* replace every training chunk by a copy whose characters are permuted
among positions with the same index mod 8 (its cipher bytes permuted alike), so every pair is still
a valid cipher pair but the text is no longer English; *bit-factored embeddings* make every byte's
and character's embedding row (and so, through the tied head, its logit) a learned linear function
of its 8 bits. Runs named `-phase` add a third change (`Config.phase_embedding`): a learned vector
per key phase (position mod 8) added to the embeddings, which gives RoPE's C2 the absolute phase its
offset-only scores cannot see. For comparison, the course notes' C2 and C5 (`results/notes/extended/cpu`, trained on
Brown as it is, free decoding; `results/notes/cpu/generalisation.json`) on the same stdlib lines:
{reference}.

These are single, short, unequal runs: a probe of the method, not the controlled ablation, which
still has to be run at equal epochs with two seeds.
"""


def row(r: dict) -> list[str]:
    rand, std, brown, free = (r["sets"][name] for name in ("random_letters", "stdlib", "test", "test_free"))
    return [
        r["name"], str(r["epochs"]),
        f"{100 * rand['char_accuracy']:.2f} / {rand['exact_lines']} of {rand['lines']}",
        f"{100 * std['bit_accuracy']:.2f} / {100 * std['sequence_accuracy']:.1f}",
        f"{100 * brown['bit_accuracy']:.3f} / {100 * brown['sequence_accuracy']:.1f}",
        f"{100 * free['bit_accuracy']:.3f} / {100 * free['sequence_accuracy']:.1f}",
    ]


def reference() -> str:
    general = json.loads((HERE.parent / "notes" / "cpu" / "generalisation.json").read_text())
    return "; ".join(f"{name.upper()} {100 * general[name]['bit_accuracy']:.2f} % of the bits, "
                     f"{100 * general[name]['sequence_accuracy']:.1f} % of the lines exact" for name in ("c2", "c5"))


def main() -> None:
    records = [read_record(p) for p in sorted(HERE.glob("*.json"))]
    headers = ["run", "epochs", "random strings: characters % / exact", "stdlib: bit % / exact %",
               "Brown test: bit % / exact %", "Brown test, free decoding: bit % / exact %"]
    lines = [INTRO.format(reference=reference()), markdown_table(headers, [row(r) for r in records])]
    lines += ["", "Commands: the `command` field of each record. Goals: random strings "
              "≥ 99.9 % of characters and ≥ 95 % exact; English outside the corpus ≥ 99.9 % bits and "
              "≥ 90 % exact; Brown test ≥ 99.9 % bits and ≥ 95 % exact with free decoding.", ""]
    (HERE / "README.md").write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    main()
