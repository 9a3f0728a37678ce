"""Write results/merges/README.md from the run records beside it (every number read from a file or computed).

    python results/merges/make_readme.py
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from cipherlab.pipeline.codec import fit_codec, select_lines  # noqa: E402
from cipherlab.runner.record import read_record  # noqa: E402
from cipherlab.base.config import TOKENIZATIONS, config_from_dict  # noqa: E402
from cipherlab.data.corpus import load_corpus  # noqa: E402
from cipherlab.analysis.ablation import first_step  # noqa: E402
from cipherlab.base.markdown import markdown_table  # noqa: E402
from cipherlab.data.tokenizers.cipher_task import aligned_target_ids  # noqa: E402

REFERENCE = ROOT / "results" / "reference" / "ref-c1-seed0.json"  # the same run with no merges
NOTES_BITS = ROOT / "results" / "learn" / "bits" / "cipher-c1-bits-seed0.json"  # the notes' bits-mode BPE
ALIGNED_C1 = ROOT / "results" / "aligned" / "aligned-c1-seed0.json"  # the chosen tokenisation, the model as it is now
# Runs made while the model still added the key-phase vector of token *position* mod 8 to phase-tagged
# tokens (now each token gets its first character's phase, Seq2SeqTransformer's src_phase): after a
# merged token the two disagree. Their records keep the numbers of that model.
POSITION_PHASE = {"m-phase2560-aligned-bits", "m-phase2560-chunks", "m-phase3072-chunks", "m-phase2560-chunks-chars"}
ORDER = ("m-src512-chars", "m-chars-tgt1000", "m-phase2560-aligned-bits", "m-phase2560-chunks-chars",
         "m-phase2560-chunks", "m-phase3072-chunks", "m-phase3072-chunks-tokenphase")

INTRO = """# Which BPE learns the cipher

The `cpu` preset's C1-C4 learn no merges (`TOKENIZATIONS["chars"]`: whole cipher bytes in,
characters out), and reach the ceiling (`results/reference`). The assignment asks for BPE. Each
record here is one run of `results/learn/probe.py` (its `command` field; `run.sh` reruns them):
C1 of the `cpu` preset, seed 0, the default recipe, one torch thread, with one tokenisation of
C1-C4 changed, decoded (greedy, length-aware unless it says free) on 50 random strings over
a-z, A-Z and space, the 500 docstring lines (`data/stdlib`) and the 200 Brown test lines. One seed
each, two or three runs at a time on a 2-core machine: a search, not the ablation. The last row is
the no-merge reference run with the same preset, recipe and seed (`results/reference/ref-c1-seed0.json`,
200 random strings and all 500 Brown test lines). What each column means:

- **source**: what the cipher is cut into before BPE (`bytes`: 8-bit groups; `phase`: 8-bit groups
  tagged with their key phase, position mod 8, 2,048 symbols) and how many merges;
- **learned on**: the training lines as they are (English), or the training chunks as the recipe shows
  them to the model (`merges_on="chunks"`: phase-shuffled, case-flipped);
- **target**: characters, a BPE of its own, or *aligned*: target token i is the plaintext of source
  token i (`target_tokens="aligned"`);
- **key phase by**: for phase-tagged tokens, what the key-phase vector (`phase_embedding`) was added
  by: the token's *position* mod 8 (the model when these runs were made; after a merged token that
  is not its characters' phase) or the *token*'s first character (the model now);
- **chars/token**: characters per source token on the Brown test lines (1 without merges);
- **val accuracy by epoch**: teacher-forced validation token accuracy after each epoch (`log`);
- **steps to 99.9 %**: the first validation every 100 steps at or above 99.9 % token accuracy (`curve`;
  "–" where the run had no curve or never got there).
"""

WHY = """
## What the runs say

- **Merges learned on the English lines do not learn under the recipe** (the rows learned on
  "English lines": validation accuracy stays below 99 %, few Brown lines come out exact). The
  recipe trains on phase-preserving shuffles of the text, so that the model must decrypt rather
  than guess English; a token such as ` the` or `ation` is then common in validation and rare in
  training. Merges learned on the training chunks as the model sees them are frequent in training
  by construction: every run with them passes 99.9 % validation accuracy by its second epoch.
- **A merged cipher token means nothing without its key phase.** The byte pair `XY` stands for a
  different plaintext at each of the 8 phases; tagging every byte with its phase makes a token stand
  for exactly one plaintext string, which is what lets a target token follow a source token.
  (Merges over untagged bytes learned on the chunks were not run.)
- **Alignment.** With merges learned on the chunks, character targets learn too
  (`m-phase2560-chunks-chars`). Aligned targets were kept: their Brown lines come out exact as
  often or more, the target gets merges of its own (the plaintext of the source's), and the decoder
  takes one step per source token.
- **The key phase of a merged token.** The rows whose key phase is by *position* added the vector of
  position mod 8, which after a merged token is not its characters' phase; the two aligned runs among
  them decode the fewest random strings exactly. The model now adds each token's first character's
  phase (`src_phase`).
- **Merged tokens crowd out single symbols.** A byte that usually sits inside a merged token is rarely
  seen alone at its phase, and random strings, where few merges apply, need exactly those. BPE-dropout
  (each merge skipped with probability {dropout} when the training chunks are cut) took C1 seed 0 from
  {before} to {after} exact random strings; the no-merge run decodes all {lines}.

Not tried: a bits-mode BPE whose pre-tokenizer cuts at every 8-bit boundary (no token could cover
more than one character, so once it has all 256 byte tokens it is the no-merge byte tokenisation),
and other target BPE sizes (a target BPE of its own cuts the line elsewhere at any size).
"""


def describe(config) -> dict:
    """What a record's tokenisation is, and its characters per source token on the Brown test lines."""
    corpus = select_lines(load_corpus(), config)
    codec = fit_codec(config, corpus)
    plain, cipher = corpus.lines("test")
    tokens = sum(len(codec.src.encode(c)) for c in cipher)
    if config.source_mode == "bytes" and config.src_vocab is None:
        source = "bytes, no merges"
    else:
        source = f"{config.source_mode}, {len(codec.src.merges)} merges"
    if codec.aligned:
        target = f"aligned ({len(codec.tgt.merges)} merges, {codec.tgt.vocab_size} tokens)"
        assert all(len(aligned_target_ids(codec.src, codec.tgt, codec.src.encode(c), p)) == len(codec.src.encode(c))
                   for p, c in zip(plain[:20], cipher[:20]))
    elif config.tgt_vocab is None:
        target = "characters"
    else:
        target = f"BPE, {len(codec.tgt.merges)} merges"
    merged = codec.src.merges or codec.tgt.merges
    learned = {"lines": "English lines", "chunks": "training chunks"}[config.merges_on] if merged else "–"
    return {"source": source, "learned": learned, "target": target,
            "chars_per_token": sum(map(len, plain)) / tokens}


def steps_to(record: dict, level: float = 0.999) -> str:
    step = first_step(record.get("curve"), "val_accuracy", level)
    return "–" if step is None else str(step)


def row(name: str, record: dict) -> list[str]:
    config = config_from_dict(record["hyperparameters"])
    d = describe(config)
    r, s, b, f = (record["sets"][k] for k in ("random_letters", "stdlib", "test", "test_free"))
    phase = "–" if config.source_mode != "phase" else "position" if name in POSITION_PHASE else "token"
    return [name, d["source"], d["learned"], d["target"], phase, f"{d['chars_per_token']:.2f}",
            " / ".join(f"{100 * e['val_accuracy']:.1f}" for e in record["log"]), steps_to(record),
            f"{100 * r['char_accuracy']:.2f} / {r['exact_lines']} of {r['lines']}",
            f"{100 * s['bit_accuracy']:.2f} / {s['exact_lines']} of {s['lines']}",
            f"{100 * b['bit_accuracy']:.3f} / {b['exact_lines']} of {b['lines']}",
            f"{f['exact_lines']} of {f['lines']}"]


def main() -> None:
    records = {p.stem: read_record(p) for p in sorted(HERE.glob("m-*.json"))}
    names = [n for n in ORDER if n in records] + sorted(set(records) - set(ORDER))
    rows = [row(n, records[n]) for n in names]
    reference = read_record(REFERENCE)
    rows.append(row("no merges (`results/reference/ref-c1-seed0`)", reference))
    aligned = read_record(ALIGNED_C1) if ALIGNED_C1.exists() else None
    if aligned:
        rows.append(row("aligned, as the model is now (`results/aligned/aligned-c1-seed0`)", aligned))
    headers = ["run", "source", "learned on", "target", "key phase by", "chars/token", "val accuracy % by epoch", "steps to 99.9 %",
               "random strings: chars % / exact", "docstrings: bits % / exact", "Brown: bits % / exact",
               "Brown free: exact"]
    dropout_off = records.get("m-phase3072-chunks-tokenphase")
    before = dropout_off["sets"]["random_letters"] if dropout_off else None
    after = aligned["sets"]["random_letters"] if aligned else None
    why = WHY.format(dropout=TOKENIZATIONS["aligned"]["bpe_dropout"],
                     before=f"{before['exact_lines']} of {before['lines']}" if before else "–",
                     after=f"{after['exact_lines']} of {after['lines']}" if after else "–",
                     lines=reference["sets"]["random_letters"]["lines"])
    text = INTRO + "\n" + markdown_table(headers, rows) + "\n" + why
    if NOTES_BITS.exists():
        notes = read_record(NOTES_BITS)
        config = config_from_dict(notes["hyperparameters"])
        b = notes["sets"]["test"]
        text += (f"\nThe course notes' own BPE over bits, at the `cpu` sizes (`{NOTES_BITS.relative_to(ROOT)}`: "
                 f"{config.src_vocab}-token source, target {'characters' if config.tgt_vocab is None else config.tgt_vocab}, "
                 f"the `{notes['recipe']}` recipe, {notes['epochs']} epochs): {b['exact_lines']} of {b['lines']} Brown test "
                 f"lines exact, {100 * b['bit_accuracy']:.1f} % of bits.\n")
    (HERE / "README.md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
