"""Facts for chapter 9 (results and the ablation): the numbers the viva answers quote.

Two kinds. The metric demonstrations run ``cipherlab.metrics`` on one sentence and its damaged
copies, and need nothing but the package. Everything about what was *measured* reads the committed
results through ``cipherlab.results``, so an answer can never quote a figure the results do not
hold. ``results/cpu`` (at least c1.json) must exist: until it does, those facts raise
FileNotFoundError naming it. Whatever else is missing -- a configuration of ``results/cpu``,
``results/cpu-bits``, ``results/equal-epochs/cpu``, ``results/extended/cpu``, ``results/cpu/beam.json`` --
turns into a sentence
saying so, which is why the facts that may meet a missing file return text, not bare numbers.
Importing this module always works.
"""

from __future__ import annotations

import functools

import sacrebleu

from cipherlab.cipher import encrypt
from cipherlab.config import CONFIG_NAMES, make_config
from cipherlab.metrics import compute_metrics, levenshtein
from cipherlab.results import (BITS_RUN, EQUAL_EPOCHS_RUN, EXTENDED_RUN, PRIMARY_RUN, SEED_RANGES, beam_gains,
                               budget_reading, byte_aligned, difference,
                               equal_epochs_reading, exact_lines_stderr, lines_of, load_beam, load_curve,
                               load_errors, load_run, metric, reference, single_change_rows,
                               tokenization, trained_on)

RUN = PRIMARY_RUN
# The first sentence of the Brown corpus, and what a model might make of it.
SENTENCE = ("The Fulton County Grand Jury said Friday an investigation of Atlanta's recent primary "
            "election produced no evidence.")
DROP_AT = 4  # the damaged copy misses the character at this index (the F of Fulton)
SWAPPED = SENTENCE.replace("Grand Jury", "Jury Grand")  # two words in the wrong order
MISSPELT = SENTENCE.replace("evidence", "evidance")  # one wrong character
BYTES_PER_PARAM_TRAINING = 16  # fp32 weight + gradient + AdamW's two moments, 4 bytes each
ABLATED = ("c2", "c3", "c4")  # the single-component changes inside the Seq2SeqTransformer


# --------------------------------------------------------------------------- metric demonstrations

@functools.cache
def damaged(kind: str) -> dict:
    """compute_metrics of one damaged copy of SENTENCE: "drop", "swap" or "lower"."""
    prediction = {"drop": SENTENCE[:DROP_AT] + SENTENCE[DROP_AT + 1:], "swap": SWAPPED,
                  "lower": SENTENCE.lower()}[kind]
    return compute_metrics([prediction], [SENTENCE], [encrypt(SENTENCE)])


def bleu_by_unit(tokenize: str) -> float:
    """sacrebleu's sentence BLEU of the one-wrong-character copy, with words (13a) or characters as n-gram units."""
    return sacrebleu.sentence_bleu(MISSPELT, [SENTENCE], tokenize=tokenize).score


# --------------------------------------------------------------------------- the committed results

@functools.cache
def records(run: str = RUN) -> dict[str, dict]:
    return load_run(run)


def value(config: str, key: str, run: str = RUN) -> float:
    """A test metric of the run; an error naming it when the run does not hold it."""
    got = metric(records(run)[config], key)
    if got is None:
        raise ValueError(f"results/{run}/{config}.json has no comparable {key}")
    return got


def pct(x: float) -> float:
    return 100 * x


def have(config: str, run: str = RUN) -> bool:
    """Whether the run exists and holds a record of ``config``."""
    try:
        return config in records(run)
    except FileNotFoundError:
        return False


def missing(config: str, run: str = RUN) -> str:
    return f"not measured yet (results/{run}/{config}.json is missing)"


def shown(config: str, read, fmt: str, run: str = RUN) -> str:
    """``format(read(), fmt)`` where the run holds ``config``, else the sentence saying it does not."""
    return format(read(), fmt) if have(config, run) else missing(config, run)


def extended_records() -> dict[str, dict] | None:
    """The runs trained on (results/extended/cpu: C2 and C5 resumed), or None while they do not exist."""
    try:
        return records(EXTENDED_RUN)
    except FileNotFoundError:
        return None


def equal_records() -> dict[str, dict] | None:
    """Every controlled run continued to equal epochs (results/equal-epochs/cpu), or None while it does not exist."""
    try:
        return records(EQUAL_EPOCHS_RUN)
    except FileNotFoundError:
        return None


@functools.cache
def equal_reading() -> dict[str, str] | None:
    """results.equal_epochs_reading of the equal-epoch run against the primary run (None without the run)."""
    equal = equal_records()
    return None if equal is None or "c1" not in equal else equal_epochs_reading(equal, records())


def equal(key: str) -> str:
    """One sentence of :func:`equal_reading`, or the sentence saying the run is missing."""
    reading = equal_reading()
    if reading is None:
        return f"not measured yet (results/{EQUAL_EPOCHS_RUN} is missing or has no C1)"
    return reading[key]


def extension() -> str:
    """How C2 and C5 were trained on, read from their records and logs: what each continued, and how."""
    ext = extended_records()
    if ext is None:
        return f"not run yet (results/{EXTENDED_RUN} is missing)"
    stages = {RUN: records()} | ({EQUAL_EPOCHS_RUN: equal_records()} if equal_records() else {})
    return "; ".join(entry["how"] for entry in trained_on(stages, ext).values())


@functools.cache
def budget() -> dict[str, str]:
    """results.budget_reading of the primary run: what its time budget bought each configuration."""
    return budget_reading(records(), {name: load_curve(RUN, name) for name in records()}, load_errors(RUN), RUN)


def _names(configs) -> str:
    names = [c.upper() for c in configs]
    return " and ".join(names) if len(names) <= 2 else ", ".join(names[:-1]) + " and " + names[-1]


def _points(delta: float) -> str:
    return f"{100 * delta:+.1f}"


@functools.cache
def test_line_lengths(run: str = RUN) -> tuple[int, ...]:
    """Characters of each test line the run was scored on (its preset's first ``lines`` test lines)."""
    return tuple(len(line) for line in lines_of(next(iter(records(run).values()))))


def exact_if_independent(config: str) -> float:
    """The exact-line rate if every character were right with probability 1 - CER, independently."""
    p = 1 - value(config, "char_error_rate")
    lengths = test_line_lengths()
    return sum(p ** n for n in lengths) / len(lengths)


def c1_c4_range(key: str) -> tuple[float, float]:
    values = [value(c, key) for c in ("c1", "c2", "c3", "c4") if c in records()]
    return min(values), max(values)


def seed_pattern_verdict() -> str:
    """Whether the course notes' "0-5% exact lines, BLEU 60+" for C1-C4 holds in this run."""
    exact, bleu = c1_c4_range("sequence_accuracy"), c1_c4_range("bleu")
    exact_ok = exact[1] <= SEED_RANGES["exact_lines"].high
    bleu_ok = bleu[0] >= SEED_RANGES["bleu"].low
    if exact_ok and bleu_ok:
        return "the same pattern as the course notes: few exact lines, high BLEU"
    if bleu_ok:
        return "high BLEU as in the course notes, but more exact lines than their 0-5 %"
    if exact_ok:
        return "few exact lines as in the course notes, but BLEU below their 60"
    return "neither of the course notes' two figures: more exact lines and lower BLEU"


# greedy vs beam (beam.json)

def beam_width(entry: dict) -> str:
    keys = [k for k in entry if k.startswith("beam")]
    return keys[0] if keys else ""


@functools.cache
def beam() -> dict | None:
    return load_beam(RUN)


def beam_gain(config: str, key: str) -> float | None:
    return None if beam() is None else beam_gains(beam(), key).get(config)


def beam_summary(config: str) -> str:
    if beam() is None:
        return f"{config.upper()}: no results/{RUN}/beam.json yet"
    entry = beam().get(config) or {}
    width = beam_width(entry)
    if not width:
        return f"{config.upper()}: no beam search run (greedy only)"
    g, b = entry["greedy"], entry[width]
    return (f"{config.upper()}: bit accuracy {pct(metric(g, 'bit_accuracy')):.2f} % greedy, "
            f"{pct(metric(b, 'bit_accuracy')):.2f} % with beam {width.removeprefix('beam')}; exact lines "
            f"{pct(metric(g, 'sequence_accuracy')):.1f} % and {pct(metric(b, 'sequence_accuracy')):.1f} %")


def beam_verdict() -> str:
    """Which configuration beam search helped more, in exact lines, or why that cannot be said."""
    if beam() is None:
        return f"this run cannot test the course notes' prediction yet: results/{RUN}/beam.json is missing"
    gains = {c: beam_gain(c, "sequence_accuracy") for c in ("c2", "c5")}
    if gains["c2"] is None or gains["c5"] is None:
        missing = _names(c for c, g in gains.items() if g is None)
        return f"this run cannot test the course notes' prediction: beam.json has no beam result for {missing}"
    if abs(gains["c2"] - gains["c5"]) < 1e-12:
        return "beam search changed the exact-line rate of C2 and C5 by the same amount"
    more = "c2" if gains["c2"] > gains["c5"] else "c5"
    agrees = "as the course notes predict" if more == "c2" else "against the course notes' prediction"
    return (f"beam search moved C2's exact-line rate by {_points(gains['c2'])} points and C5's by "
            f"{_points(gains['c5'])}: it helped {more.upper()} more, {agrees}")


# the ablation, config by config

def improved_verdict() -> str:
    """Which of C2-C4 beat C1 in bit accuracy, with the differences, set against the notes' "only C2"."""
    if not any(have(c) for c in ABLATED):
        return f"none of C2, C3, C4 is measured yet (results/{RUN} holds only C1)"
    deltas = {c: difference(records(), c, "bit_accuracy") for c in ABLATED if c in records()}
    better = [c for c, d in deltas.items() if d is not None and d > 0]
    listing = "; ".join(f"{c.upper()} {_points(d)}" for c, d in deltas.items())
    if better == ["c2"]:
        head = "as in the course notes, only C2 beat C1 in bit accuracy"
    elif not better:
        head = "none of C2, C3, C4 beat C1 in bit accuracy, so not even the course notes' C2 result repeated"
    elif "c2" in better:
        head = f"{_names(better)} beat C1 in bit accuracy, not C2 alone as the course notes have it"
    else:
        head = f"{_names(better)} beat C1 in bit accuracy and C2 did not, against the course notes' \"only C2\""
    return f"{head} (points against C1: {listing})"


def ratio(config: str, field: str, base: str = "c1") -> float:
    return records()[config][field] / records()[base][field]


def fewest_params(counts: dict[str, int]) -> str:
    return min(counts, key=counts.get).upper()


@functools.cache
def assignment_model(name: str):
    """Configuration ``name`` built at the assignment's sizes (the course notes' model), untrained."""
    from cipherlab.models import Seq2SeqTransformer
    from cipherlab.models.blt import BLTModel

    config = make_config(name, "assignment")
    if config.tokenization == "blt":
        return BLTModel(**config.model_hyperparameters(), local_layers=config.blt_local_layers,
                        window=config.blt_window, patch_tgt=config.blt_patch_tgt,
                        source_memory=config.blt_source_memory)
    # as SubwordCodec.build_model, with the vocabulary sizes the configuration asks for
    return Seq2SeqTransformer(config.src_vocab, config.tgt_vocab, **config.model_hyperparameters(),
                              pos_encoding=config.pos_encoding, attn_type=config.attn_type,
                              n_kv_heads=config.n_kv_heads if config.attn_type == "gqa" else None,
                              norm=config.norm, rope_cross_attention=config.rope_cross_attention)


def assignment_params() -> dict[str, int]:
    return {name: assignment_model(name).num_params() for name in CONFIG_NAMES}


def self_attention_modules() -> int:
    """Self-attention modules of C1-C4 (encoder and decoder layers); cross-attention is MHA in all."""
    model = assignment_model("c3")
    return len(model.encoder.layers) + len(model.decoder.layers)


def norm_layers() -> int:
    """Norm modules of C1 (two per encoder layer, three per decoder layer, one final norm per stack)."""
    from cipherlab.models.norm import LayerNorm

    return sum(isinstance(m, LayerNorm) for m in assignment_model("c1").modules())


def run_params() -> dict[str, int]:
    return {name: r["params"] for name, r in records().items()}


def single_change_fields() -> str:
    """For C2-C5: the Config fields that differ from C1 at the same preset (one each, checked here)."""
    base = make_config("c1", "assignment").to_dict()
    parts = []
    for name in CONFIG_NAMES[1:]:
        changed = [k for k, v in make_config(name, "assignment").to_dict().items() if k != "name" and base[k] != v]
        parts.append(f"{name.upper()} {', '.join(changed)}")
    return "; ".join(parts)


def slot_reason() -> str:
    """Why a learned-position slot is informative, given what this run says about C1 against C2: at equal
    epochs by exact lines and their standard error where measured, else by the time-budget run's bit accuracy."""
    fair = equal_records()
    if fair and {"c1", "c2"} <= set(fair):
        row = next(r for r in single_change_rows(fair) if r["config"] == "c2")
        figures = (f"{_points(row['exact'])} ± {100 * row['se']:.1f} points of exact lines, "
                   f"{_points(row['bit'])} of bit accuracy")
        if row["reading"] == "better":
            return (f"It separates two explanations of C2's lead over C1 at equal epochs ({figures}): "
                    "\"RoPE wins because it is relative\" and \"the fixed sinusoidal code is a poor fit here\"")
        if row["reading"] == "worse":
            return (f"At equal epochs C2 trails C1 ({figures}), so the slot would test whether the position code "
                    "matters here at all — whether a learned absolute code beats, matches or trails both fixed "
                    "ones — rather than explain a RoPE win")
        return (f"At equal epochs C2 and C1 are level within the noise ({figures}), so the slot would test the "
                "course notes' claim that position encoding matters here — \"relative positions help\" against "
                "\"any learned code does as well\" — rather than explain a gap")
    d = difference(records(), "c2", "bit_accuracy")
    if d is None:
        return ("It would separate two readings of the course notes' C1–C2 gap, \"RoPE wins because it is "
                f"relative\" and \"the fixed sinusoidal code is a poor fit here\" ({missing('c2')} in this run)")
    if 100 * d >= 1:
        return (f"It separates two explanations of this run's C1–C2 gap ({_points(d)} points of bit accuracy): "
                "\"RoPE wins because it is relative\" and \"the fixed sinusoidal code is a poor fit here\"")
    return (f"In this run C2 did not beat C1 by even a point ({_points(d)} points of bit accuracy), so the slot "
            "would test the course notes' claim that position encoding matters here — \"relative positions "
            "help\" against \"any learned code does as well\" — rather than explain a gap")


def epochs_listing() -> str:
    return ", ".join(f"{name.upper()} {r['epochs']}" for name, r in records().items())


def bits_records() -> dict[str, dict] | None:
    """The bits-mode run, or None while results/cpu-bits does not exist."""
    try:
        return records(BITS_RUN)
    except FileNotFoundError:
        return None


def bits_vs_bytes() -> str:
    """C1-C4's bit accuracy in bytes mode (the primary run) against bits mode (the course notes' BPE)."""
    bits = bits_records()
    if bits is None:
        return f"not measured yet (results/{BITS_RUN} is missing)"
    return "; ".join(f"{c.upper()} {pct(value(c, 'bit_accuracy')):.2f} % vs "
                     f"{pct(value(c, 'bit_accuracy', BITS_RUN)):.2f} %"
                     for c in ("c1", "c2", "c3", "c4") if c in bits and c in records())


def c1_input() -> str:
    """What C1 read in the primary run, and what that means for the C1-C5 comparison."""
    record = records()["c1"]
    if byte_aligned(record):
        return (f"it reads {tokenization(record)} — input already aligned with the cipher's characters, "
                "which is what the course notes credit for C5's win")
    return (f"it reads {tokenization(record)}, so C1 and C5 differ in their input units as well as in "
            "their architecture")


def bits_c1() -> str:
    """C1 with the course notes' tokenization, from the bits-mode run."""
    bits = bits_records()
    if bits is None or "c1" not in bits:
        return f"The bits-mode run (results/{BITS_RUN}), which would show C1 with the course notes' tokenization, is missing"
    return (f"With the course notes' tokenization (results/{BITS_RUN}: {tokenization(bits['c1'])}) C1 reaches "
            f"{pct(value('c1', 'bit_accuracy', BITS_RUN)):.2f} % bit accuracy")


def cluster_verdict() -> str:
    """C1's measured exact-line rate against what independent character errors would give."""
    measured, independent = value("c1", "sequence_accuracy"), exact_if_independent("c1")
    if abs(measured - independent) < 0.005:
        return "about what independent errors predict"
    if measured > independent:
        return "more than independent errors would leave, so the errors cluster: some lines take many, others none"
    return "fewer than independent errors would leave, so the errors are spread over more lines than chance would spread them"


def c5_controlled() -> str:
    """C1 against C5 in the controlled run: bit accuracy, exact lines and epochs."""
    if not have("c5"):
        return missing("c5")
    e1, e5 = records()["c1"]["epochs"], records()["c5"]["epochs"]
    return (f"C1 → C5 bit accuracy {pct(value('c1', 'bit_accuracy')):.2f} % → "
            f"{pct(value('c5', 'bit_accuracy')):.2f} %, exact lines {pct(value('c1', 'sequence_accuracy')):.1f} % → "
            f"{pct(value('c5', 'sequence_accuracy')):.1f} %, "
            f"after {e1} and {e5} epochs")


def c5_cost() -> str:
    """What C5's epochs cost against C1's, and what that did to its training within the budget."""
    if not have("c5"):
        return missing("c5")
    return (f"a C5 epoch took {ratio('c5', 'seconds_per_epoch'):.1f} times as long as C1's on average (on a machine "
            f"whose load varied), so within the same budget C5 trained {records()['c5']['epochs']} epochs to C1's "
            f"{records()['c1']['epochs']}")


def extended_pair() -> str:
    """C2 and C5 trained on (results/extended/cpu): their test accuracies and epochs."""
    ext = extended_records()
    if ext is None or not {"c2", "c5"} <= set(ext):
        return f"not measured yet (results/{EXTENDED_RUN} lacks C2 or C5)"
    return "; ".join(f"{n.upper()} {pct(metric(ext[n], 'bit_accuracy')):.2f} % bit accuracy and "
                     f"{pct(metric(ext[n], 'sequence_accuracy')):.1f} % exact lines after {ext[n]['epochs']} epochs"
                     for n in ("c2", "c5"))


def c5_verdict() -> str:
    """Whether this run's numbers make C5 the configuration to pick: the controlled run, then the runs trained on."""
    if not have("c5"):
        return f"not decidable yet: {missing('c5')}"
    bit = {c: value(c, "bit_accuracy") for c in records()}
    exact = {c: value(c, "sequence_accuracy") for c in records()}
    best = max(bit, key=bit.get)
    e1, e5 = records()["c1"]["epochs"], records()["c5"]["epochs"]
    if equal_reading() is not None and "c5" in equal_records():
        head = "in the fair comparison, " + equal_reading()["c5"]
    elif best == "c5" and exact["c5"] >= max(exact.values()):
        head = "in the controlled run C5 is the most accurate of the five by bit accuracy and by exact lines"
    elif bit["c5"] > bit["c1"]:
        head = f"in the controlled run C5 beats C1, but {best.upper()} is more accurate still"
    elif e5 < e1:
        head = (f"in the controlled run C5 trails C1, but it trained {e5} epochs to C1's {e1}, so that run cannot "
                "say whether the BLT or its fewer epochs is to blame")
    else:
        head = f"in the controlled run C5 trails C1, with as many epochs ({e5}) or more"
    ext = extended_records()
    if ext is None or not {"c2", "c5"} <= set(ext):
        return f"{head}; the runs trained on ({EXTENDED_RUN}) would decide more, and are not there yet"
    score = {n: (metric(ext[n], "sequence_accuracy"), metric(ext[n], "bit_accuracy")) for n in ("c2", "c5")}
    if score["c5"] == score["c2"]:
        return f"{head}; trained on, C5 and C2 end level, so nothing here favours the BLT's extra cost"
    winner, other = ("c5", "c2") if score["c5"] > score["c2"] else ("c2", "c5")
    more = ext[winner]["epochs"] > ext[other]["epochs"]
    return (f"{head}; trained on, {winner.upper()} ends ahead of {other.upper()} "
            + (f"({pct(score[winner][0]):.1f} % against {pct(score[other][0]):.1f} % exact lines), "
               if score[winner][0] != score[other][0] else
               f"(level at {pct(score[winner][0]):.1f} % exact lines, {pct(score[winner][1]):.2f} % against "
               f"{pct(score[other][1]):.2f} % bit accuracy), ")
            + (f"but with more epochs ({ext[winner]['epochs']} to {ext[other]['epochs']}), so part of that lead is time"
               if more else f"with no more epochs ({ext[winner]['epochs']} to {ext[other]['epochs']})")
            + f": on this evidence, {winner.upper()}" + (" is the pick here" if winner == "c5" else
                                                          " is the better buy here, not the BLT"))


def stopped_listing() -> str:
    return ", ".join(f"{name.upper()} {r.get('stopped', '?')}" for name, r in records().items())


def memory_measure() -> str:
    """What the run's peak-memory column measured, by the device it ran on."""
    device = next(iter(records().values()))["device"]
    if device.startswith("cuda"):
        return "exactly this max_memory_allocated"
    return ("the process's peak resident set size (ru_maxrss) instead. That counts everything the "
            "process touched since it started — the Python interpreter, the torch libraries, the corpus "
            "and tokenizers, the batches — which is why cipherlab's train command trains one "
            "configuration per process (ablate starts one for each)")


def state_mib(config: str) -> float:
    """Weights, gradients and AdamW moments in fp32, the part of training memory the model size fixes."""
    return BYTES_PER_PARAM_TRAINING * records()[config]["params"] / 2**20


def peak_mib(config: str) -> float:
    peak = records()[config].get("peak_memory_bytes")
    if peak is None:
        raise ValueError(f"results/{RUN}/{config}.json has no peak memory (it ran where none is measured)")
    return peak / 2**20


FACTS = {
    # §7.8 Q1: what each metric sees
    "res_demo_chars": lambda: len(SENTENCE),
    "res_drop_at": lambda: DROP_AT,
    "res_drop_bit": lambda: pct(damaged("drop")["bit_accuracy"]),
    "res_drop_lev": lambda: int(damaged("drop")["levenshtein"]),
    "res_drop_chrf": lambda: damaged("drop")["chrf"],
    "res_drop_bleu": lambda: damaged("drop")["bleu"],
    "res_swap_bit": lambda: pct(damaged("swap")["bit_accuracy"]),
    "res_swap_lev": lambda: int(damaged("swap")["levenshtein"]),
    "res_swap_bleu": lambda: damaged("swap")["bleu"],
    "res_swap_rouge1": lambda: damaged("swap")["rouge1"],
    "res_swap_rougeL": lambda: damaged("swap")["rougeL"],
    "res_swap_rouge2": lambda: damaged("swap")["rouge2"],
    # §7.8 Q3: exact lines against BLEU
    "res_p99_256": lambda: pct(0.99 ** 256),
    "res_test_lines": lambda: len(test_line_lengths()),
    "res_mean_line_chars": lambda: sum(test_line_lengths()) / len(test_line_lengths()),
    "res_longest_line": lambda: max(test_line_lengths()),
    "res_c1_cer": lambda: pct(value("c1", "char_error_rate")),
    "res_c1_exact": lambda: pct(value("c1", "sequence_accuracy")),
    "res_c1_exact_indep": lambda: pct(exact_if_independent("c1")),
    "res_cluster": cluster_verdict,
    "res_c1c4_exact_range": lambda: "{:.1f}–{:.1f}".format(*map(pct, c1_c4_range("sequence_accuracy"))),
    "res_c1c4_bleu_range": lambda: "{:.1f}–{:.1f}".format(*c1_c4_range("bleu")),
    "res_seed_pattern": seed_pattern_verdict,
    # §7.8 Q4: BLEU and ROUGE depend on their units
    "res_lower_rougeL": lambda: damaged("lower")["rougeL"],
    "res_lower_bleu": lambda: damaged("lower")["bleu"],
    "res_lower_bit": lambda: pct(damaged("lower")["bit_accuracy"]),
    "res_bleu_words": lambda: bleu_by_unit("13a"),
    "res_bleu_chars": lambda: bleu_by_unit("char"),
    "res_c5_chrf": lambda: shown("c5", lambda: value("c5", "chrf"), ".1f"),
    "res_c1_chrf": lambda: value("c1", "chrf"),
    # §7.8 Q5: two rows
    "res_kitten": lambda: levenshtein("kitten", "sitting"),
    "res_full_cells": lambda: f"{(max(test_line_lengths()) + 1) ** 2:,}",
    "res_two_rows": lambda: 2 * (max(test_line_lengths()) + 1),
    # §7.8 Q6: greedy vs beam
    "res_beam_c2": lambda: beam_summary("c2"),
    "res_beam_c5": lambda: beam_summary("c5"),
    "res_beam_verdict": beam_verdict,
    # §7.8 Q7: what the KV cache saves
    "res_chunk_chars": lambda: next(iter(records().values()))["hyperparameters"]["chunk_chars"],
    "res_uncached_positions": lambda: _triangle(next(iter(records().values()))["hyperparameters"]["chunk_chars"] + 1),
    "res_cached_positions": lambda: next(iter(records().values()))["hyperparameters"]["chunk_chars"] + 1,
    "res_c2_decode_lps": lambda: shown("c2", lambda: records()["c2"]["decode_lines_per_s"], ".1f"),
    "res_c5_decode_lps": lambda: shown("c5", lambda: records()["c5"]["decode_lines_per_s"], ".1f"),
    # §7.9 Q1: what one change at a time guarantees
    "res_single_changes": single_change_fields,
    "res_epochs": epochs_listing,
    "res_seeds": lambda: len({r["seed"] for r in records().values()}),
    "res_stopped": stopped_listing,
    "res_epoch_times": lambda: budget()["times"],
    "res_equal_epochs_n": lambda: equal("epochs"),
    "res_equal_moved": lambda: equal("moved"),
    "res_equal_caveat": lambda: equal("caveat"),
    # §7.9 Q2: which single changes helped
    "res_improved": improved_verdict,
    "res_c1_bit": lambda: pct(value("c1", "bit_accuracy")),
    "res_c1_exact_se": lambda: pct(exact_lines_stderr(records()["c1"])),
    "res_attribution": lambda: budget()["verdict"],
    "res_equal_epochs": lambda: budget()["equal_epochs"],
    "res_equal_inside": lambda: equal("inside"),
    "res_c3_epoch_ratio": lambda: shown("c3", lambda: ratio("c3", "seconds_per_epoch"), ".2f"),
    "res_c4_epoch_ratio": lambda: shown("c4", lambda: ratio("c4", "seconds_per_epoch"), ".2f"),
    # §7.9 Q3: C5
    "res_c1_c5_controlled": c5_controlled,
    "res_c5_cost": c5_cost,
    "res_extended_pair": extended_pair,
    "res_extension": extension,
    "res_equal_c5": lambda: equal("c5"),
    "res_seed_c1_bit": lambda: pct(reference("seed", "c1", "bit_accuracy")),
    "res_seed_c5_bit": lambda: pct(reference("seed", "c5", "bit_accuracy")),
    "res_seed_c1_exact": lambda: pct(reference("seed", "c1", "exact_lines")),
    "res_seed_c5_exact": lambda: pct(reference("seed", "c5", "exact_lines")),
    "res_c5_verdict": c5_verdict,
    "res_c1_input": c1_input,
    "res_bits_c1": bits_c1,
    # §7.9 Q4: the slot already spent on bits vs bytes
    "res_bits_vs_bytes": bits_vs_bytes,
    "res_slot_reason": slot_reason,
    # §7.9 Q5: what peak memory means here
    "res_device": lambda: next(iter(records().values()))["device"],
    "res_c1_peak_mib": lambda: peak_mib("c1"),
    "res_c5_peak_mib": lambda: shown("c5", lambda: peak_mib("c5"), ",.0f"),
    "res_c1_state_mib": lambda: state_mib("c1"),
    "res_c5_state_mib": lambda: shown("c5", lambda: state_mib("c5"), ".1f"),
    "res_c1_state_share": lambda: state_mib("c1") / peak_mib("c1"),
    "res_memory_measure": memory_measure,
    # §7.9 Q6: fewest parameters
    "res_fewest_run": lambda: fewest_params(run_params()),
    "res_run_params": lambda: ", ".join(f"{c.upper()} {n:,}" for c, n in run_params().items()),
    "res_fewest_assignment": lambda: fewest_params(assignment_params()),
    "res_assignment_params": lambda: ", ".join(f"{c.upper()} {n:,}" for c, n in assignment_params().items()),
    "res_c3_saving": lambda: f"{assignment_params()['c1'] - assignment_params()['c3']:,}",
    "res_c4_saving": lambda: f"{assignment_params()['c1'] - assignment_params()['c4']:,}",
    "res_heads": lambda: make_config("c3", "assignment").n_heads,
    "res_kv_heads": lambda: make_config("c3", "assignment").n_kv_heads,
    "res_self_attn_modules": self_attention_modules,
    "res_c3_per_module": lambda: f"{(assignment_params()['c1'] - assignment_params()['c3']) // self_attention_modules():,}",
    "res_norm_layers": norm_layers,
    "res_c5_vs_c1_params": lambda: "more" if assignment_params()["c5"] > assignment_params()["c1"] else "fewer",
}


def _triangle(n: int) -> int:
    """1 + 2 + ... + n: decoder positions computed over n steps when every step recomputes the prefix."""
    return n * (n + 1) // 2

