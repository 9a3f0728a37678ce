"""Write results/learn/ablation/README.md from the run records beside it (every number read from a file).

    python results/learn/ablation/make_readme.py
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from cipherlab.analysis.ablation import LEARN_HEADERS, learn_row, learn_tables, load_learn_runs, markdown_table  # noqa: E402
from cipherlab.data.cipher import KEY  # noqa: E402
from cipherlab.runner.record import read_record  # noqa: E402

BITS = HERE.parent / "bits"  # the course notes' bits-mode BPE with the same method, beside it

BITS_TEXT = """
## Beside it: the course notes' bits-mode BPE

`results/learn/bits/`: C1 with the same changes and budget, but reading the cipher the course notes'
way, a BPE of 512 symbols learned over the cipher's bits (`source_mode=bits`, `src_vocab=512`),
one seed. Its tokens cut across characters and key phases, so a bit-factored source embedding has
no byte to factor (only the target side has one) and the key phase of a source token's index means
nothing. Both runs ran at a lower scheduling priority beside other runs, so their epoch times say nothing
about their cost. `c1-bits-seed0` has this ablation's recipe and 3 epochs (the 30-minute budget
stopped it); `cipher-c1-bits-seed0` has the default recipe (with case flips and the
end-of-source token) and 4 epochs. The validation accuracy of both was still rising (the `log` field of each record):

"""

BITS_AFTER = """
In bits mode the recipe loses most of what makes it work, and the records say so
(`recipe_caveats`). A source token is a BPE piece of the bit string. It does not stand for one
byte, so its embedding cannot be factored into bits, and its position is not a character's
position, so the key phase of its index means nothing. The model must also learn which bits of
which character each token covers before it can learn the XOR. Neither run comes near the byte
mode.
"""


INTRO = """# Learning the cipher, not the corpus: the controlled ablation

Each record here is one run of `results/learn/probe.py` (its `command` field): the `cpu` preset of
one configuration with the same three changes to the shared data pipeline and embeddings for all
five, trained for the same number of epochs with two seeds, one torch thread per run, two runs side
by side on a 2-core machine. The changes (`cipherlab/base/config.py`; the `shuffles` recipe of `RECIPES`):

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

`run.sh` reruns the whole ablation (about two hours on 2 cores). The seed-0 model of each configuration
was exported to `checkpoints/` (safetensors, each record's `export` field); the models are no longer
in the tree, and `checkpoints/README.md` names the commit that holds them. The committed models are
the reference ones, `results/checkpoints/`.
"""


def errors_text(path: Path) -> str:
    """What the wrong characters of ``checkpoints/random_errors.json`` have in common (every number read from it)."""
    kept = json.loads(path.read_text(encoding="utf-8"))
    strings, predictions = kept["strings"], kept["predictions"]
    wrong = [(i, a, b) for p, r in zip(predictions, strings) for i, (a, b) in enumerate(zip(r, p)) if a != b]
    case = sum(a.isupper() and b == a.lower() and ord(a) ^ ord(b) == 0x20 for _, a, b in wrong)
    phases = sorted(Counter(i % 8 for i, _, _ in wrong))
    bit5 = [i for i, k in enumerate(KEY) if k & 0x20]
    upper = sum(c.isupper() for s in strings for c in s) / sum(map(len, strings))
    same_length = all(len(p) == len(r) for p, r in zip(predictions, strings))
    return (
        "\n## The errors left on random strings\n\n"
        f"The seed-0 run with the most random-string characters wrong, {kept['config'].upper()}, decoded "
        f"{len(strings)} fresh random strings once while its model was in the tree "
        f"(`checkpoints/random_errors.json`, {kept['about']['decoding']}): {len(wrong)} wrong characters in "
        f"{sum(map(len, strings)):,}, every line {'the right length' if same_length else 'not always the right length'}. "
        f"{case} of the {len(wrong)} are an upper-case letter read as its lower-case twin, which differs only in "
        f"bit 5, and the wrong characters sit at key phases {', '.join(map(str, phases))}; the key bytes with "
        f"bit 5 set are those at phases {', '.join(map(str, bit5))} (the digits of the key). There the cipher flips "
        "bit 5, and the model sometimes reads the flipped bit as unflipped, the answer Brown's lower case makes "
        f"likely: upper case is {100 * upper:.1f} % of these strings (chapter 12, section 12.2, prints Brown's "
        "share), and a phase-preserving shuffle keeps which characters a chunk holds. Flipping bit 5 of a letter flips bit 5 "
        "of its cipher byte whatever the key byte, so cipher pairs with more capitals need no key: the default "
        "recipe's case flips (`results/reference`) were added for this.\n")


def main() -> None:
    runs = load_learn_runs(HERE)
    first = next(iter(runs.values()))
    every, goals = learn_tables(runs)
    text = INTRO.format(n_random=first["sets"]["random_letters"]["lines"], n_brown=first["sets"]["test_free"]["lines"])
    text += "\n## Every run\n\n" + every + "\n\n## The goals\n\nA goal is met when every seed meets it.\n\n"
    text += goals + "\n"
    errors = HERE / "checkpoints" / "random_errors.json"
    if errors.is_file():
        text += errors_text(errors)
    bits = [read_record(p) for p in sorted(BITS.glob("*.json"))] if BITS.is_dir() else []
    if bits:
        text += BITS_TEXT + markdown_table(["run", "recipe", *LEARN_HEADERS],
                                           [[r["name"], r["recipe"] or "shuffles", *learn_row(r)] for r in bits]) + "\n"
        text += BITS_AFTER
    (HERE / "README.md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
