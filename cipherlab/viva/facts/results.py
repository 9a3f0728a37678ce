"""Facts for chapter 9 (results and the ablation): the numbers the viva answers quote.

Two kinds. The metric demonstrations run ``cipherlab.metrics`` on one sentence and its damaged
copies, and need nothing but the package. Everything about what was *measured* reads the committed
results through ``cipherlab.results``; a missing file is a FileNotFoundError naming it.

Every fact is a number (or a configuration's name, such as ``"C3"``), never a sentence: the answers
in ``bank/results.yml`` are written by hand around them, and ``tests/test_results.py`` checks the
claims those sentences make (``test_the_results_answers_say_what_the_files_hold``), so a changed
result fails a test instead of leaving a wrong sentence.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import sacrebleu

from cipherlab.cipher import encrypt
from cipherlab.config import CONFIG_NAMES, make_config
from cipherlab.metrics import compute_metrics, levenshtein
from cipherlab.results import (ANALYSIS_RUNS, BITS_RUN, EQUAL_EPOCHS_RUN, EXTENDED_RUN, LEARN_RUN, PRIMARY_RUN,
                               REFERENCE_SETS, beam_gains, decoding_gains, exact_difference_stderr,
                               exact_lines_stderr, lines_of, load_beam, load_curve, load_errors,
                               load_generalisation, load_learn_runs, load_reference_runs, load_run, mcnemar, metric,
                               paired_rows, rate_difference_stderr, reference, run_path, section)

RUN = PRIMARY_RUN
# The first sentence of the Brown corpus, and what a model might make of it.
SENTENCE = ("The Fulton County Grand Jury said Friday an investigation of Atlanta's recent primary "
            "election produced no evidence.")
DROP_AT = 4  # the damaged copy misses the character at this index (the F of Fulton)
SWAPPED = SENTENCE.replace("Grand Jury", "Jury Grand")  # two words in the wrong order
MISSPELT = SENTENCE.replace("evidence", "evidance")  # one wrong character
BYTES_PER_PARAM_TRAINING = 16  # fp32 weight + gradient + AdamW's two moments, 4 bytes each
C1_C4 = ("c1", "c2", "c3", "c4")


# --------------------------------------------------------------------------- metric demonstrations

@functools.cache
def damaged(kind: str) -> dict:
    """compute_metrics of one damaged copy of SENTENCE: "drop", "swap" or "lower"."""
    prediction = {"drop": SENTENCE[:DROP_AT] + SENTENCE[DROP_AT + 1:], "swap": SWAPPED,
                  "lower": SENTENCE.lower()}[kind]
    return compute_metrics([prediction], [SENTENCE], [encrypt(SENTENCE)])


@functools.cache
def drop_bits() -> dict:
    """Why dropping one character costs the bits it does: after the gap, predicted character j is
    SENTENCE[j + 1] under key byte j mod 8, and the cipher holds SENTENCE[j] under the same key byte, so
    the key cancels and the bits lost at j are the Hamming distance between the two neighbours; the
    missing last character loses all 8. "neighbour_bits": their mean Hamming distance; "bit_accuracy"
    recomputed that way (per cent), checked against ``compute_metrics``."""
    after = [bin(ord(a) ^ ord(b)).count("1") for a, b in zip(SENTENCE[DROP_AT:], SENTENCE[DROP_AT + 1:])]
    compared = 8 * len(SENTENCE)
    accuracy = pct((compared - sum(after) - 8) / compared)
    if abs(accuracy - pct(damaged("drop")["bit_accuracy"])) > 1e-9:
        raise ValueError("the Hamming-distance account of the dropped character disagrees with compute_metrics")
    return {"neighbour_bits": sum(after) / len(after), "bit_accuracy": accuracy}


def bleu_by_unit(tokenize: str) -> float:
    """sacrebleu's sentence BLEU of the one-wrong-character copy, with words (13a) or characters as n-gram units."""
    return sacrebleu.sentence_bleu(MISSPELT, [SENTENCE], tokenize=tokenize).score


# --------------------------------------------------------------------------- the committed results

@functools.cache
def records(run: str = RUN) -> dict[str, dict]:
    return load_run(run)


def value(config: str, key: str, run: str = RUN) -> float:
    """A test metric of a run; an error naming it when the run does not hold it."""
    got = metric(records(run)[config], key)
    if got is None:
        raise ValueError(f"results/{run}/{config}.json has no comparable {key}")
    return got


def pct(x: float) -> float:
    return 100 * x


def exact_pct(config: str, run: str = RUN) -> float:
    return pct(value(config, "sequence_accuracy", run))


def bit_pct(config: str, run: str = RUN) -> float:
    return pct(value(config, "bit_accuracy", run))


def against_c1(config: str, key: str, run: str = EQUAL_EPOCHS_RUN) -> float:
    """Points of ``key`` of ``config`` minus C1's, in a run (by default at equal epochs)."""
    return pct(value(config, key, run) - value("c1", key, run))


def se_against_c1(config: str, run: str = EQUAL_EPOCHS_RUN) -> float:
    """One binomial standard error of the exact-line difference from C1, in points."""
    return pct(exact_difference_stderr(records(run), config))


@functools.cache
def test_line_lengths(run: str = RUN) -> tuple[int, ...]:
    """Characters of each test line the run was scored on (its preset's first ``lines`` test lines)."""
    return tuple(len(line) for line in lines_of(next(iter(records(run).values()))))


def exact_if_independent(config: str) -> float:
    """The exact-line rate if every character were right with probability p = 1 - CER, independently:
    the mean of p ** n over the test lines' own lengths n (not p to the mean length)."""
    p = 1 - value(config, "char_error_rate")
    lengths = test_line_lengths()
    return sum(p ** n for n in lengths) / len(lengths)


def exact_at_mean_length(config: str) -> float:
    """p ** (mean test-line length), p = 1 - CER: what one line of average length would give."""
    lengths = test_line_lengths()
    return (1 - value(config, "char_error_rate")) ** (sum(lengths) / len(lengths))


def over_c1_c4(key: str, run: str = RUN, scale: float = 1.0) -> list[float]:
    return [scale * value(c, key, run) for c in C1_C4 if c in records(run)]


def epoch_ratio(config: str, run: str = RUN) -> float:
    """Mean seconds per epoch of ``config`` over C1's."""
    return records(run)[config]["seconds_per_epoch"] / records(run)["c1"]["seconds_per_epoch"]


def epoch_time_spread(run: str = RUN) -> float:
    """The largest ratio of a configuration's slowest to its fastest epoch (the machine's load, nothing else)."""
    spreads = []
    for name in records(run):
        seconds = [r["seconds"] for r in load_curve(run, name)]
        spreads.append(max(seconds) / min(seconds))
    return max(spreads)


# greedy vs beam (beam.json): the committed models on the first test lines

@functools.cache
def beam() -> dict:
    return load_beam(RUN)


def beam_width(config: str) -> str:
    return next(k for k in beam()[config] if k.startswith("beam"))


def beam_exact(config: str, decoding: str) -> float:
    decoding = beam_width(config) if decoding == "beam" else decoding
    return pct(metric(beam()[config][decoding], "sequence_accuracy"))


def beam_lines_gained(config: str) -> int:
    """Exact lines beam search gained over greedy (negative: lost)."""
    return round(beam_gains(beam())[config] * beam()[config]["greedy"]["lines"])


def beam_se(config: str) -> float:
    """One standard error of the beam-minus-greedy exact-line difference, in points."""
    entry = beam()[config]
    return pct(rate_difference_stderr(entry["greedy"], entry[beam_width(config)]))


def beam_slowdown(config: str) -> float:
    """How many times longer beam search took than greedy decoding on the same lines."""
    entry = beam()[config]
    return entry[beam_width(config)]["decode_seconds"] / entry["greedy"]["decode_seconds"]


# the committed models: C2 and C5 trained on (notes/extended/cpu)

def decode_lps(config: str) -> float:
    """Lines per second the committed model decoded its test lines at (greedy, its own record)."""
    return records(EXTENDED_RUN)[config]["decode_lines_per_s"]


@functools.cache
def decode_benchmark() -> dict:
    """benchmarks/results/decode.json (``benchmarks/bench_decode.py``): the committed ablation models decoding."""
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "decode.json"
    return json.loads(path.read_text(encoding="utf-8"))["configurations"]


def decode_checkpoints() -> str:
    """The folder of the models decode.json timed, as the file records it."""
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "decode.json"
    return json.loads(path.read_text(encoding="utf-8"))["checkpoints"]


def bench_lps(config: str, decoding: str = "greedy") -> float:
    """Lines per second of ``config``'s committed ablation model in decode.json ("greedy", "beam4", ...)."""
    return decode_benchmark()[config]["lines_per_second"][decoding]["lines_per_s"]


def bench_beam_cost() -> list[float]:
    """How many times greedy decoding's time batched, cached beam search took, per configuration."""
    return [bench_lps(c) / bench_lps(c, f"beam{r['beam']['beam_size']}") for c, r in decode_benchmark().items()]


def extended_c5_minus_c2() -> float:
    return exact_pct("c5", EXTENDED_RUN) - exact_pct("c2", EXTENDED_RUN)


def extended_se() -> float:
    ext = records(EXTENDED_RUN)
    return pct(rate_difference_stderr(ext["c5"], ext["c2"]))


# parameters at the assignment's sizes

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


@functools.cache
def assignment_params() -> dict[str, int]:
    return {name: assignment_model(name).num_params() for name in CONFIG_NAMES}


def fewest(counts: dict[str, int]) -> str:
    return min(counts, key=counts.get).upper()


def self_attention_modules() -> int:
    """Self-attention modules of C1-C4 (encoder and decoder layers); cross-attention is MHA in all."""
    model = assignment_model("c3")
    return len(model.encoder.layers) + len(model.decoder.layers)


def norm_layers() -> int:
    """Norm modules of C1 (two per encoder layer, three per decoder layer, one final norm per stack)."""
    from cipherlab.models.norm import LayerNorm

    return sum(isinstance(m, LayerNorm) for m in assignment_model("c1").modules())


def single_change_fields() -> dict[str, list[str]]:
    """For C2-C5: the Config fields that differ from C1 at the assignment's sizes."""
    base = make_config("c1", "assignment").to_dict()
    return {name: [k for k, v in make_config(name, "assignment").to_dict().items() if k != "name" and base[k] != v]
            for name in CONFIG_NAMES[1:]}


# memory

def state_mib(config: str) -> float:
    """Weights, gradients and AdamW moments in fp32, the part of training memory the model size fixes."""
    return BYTES_PER_PARAM_TRAINING * records()[config]["params"] / 2**20


def peak_mib(config: str) -> float:
    peak = records()[config].get("peak_memory_bytes")
    if peak is None:
        raise ValueError(f"results/{RUN}/{config}.json has no peak memory (it ran where none is measured)")
    return peak / 2**20


def _triangle(n: int) -> int:
    """1 + 2 + ... + n: decoder positions computed over n steps when every step recomputes the prefix."""
    return n * (n + 1) // 2


def _chunk_chars() -> int:
    return next(iter(records().values()))["hyperparameters"]["chunk_chars"]


@functools.cache
def learned() -> dict[tuple[str, int], dict]:
    """The controlled ablation of the recipe before case flips and the end-of-source token (results/learn/ablation)."""
    return load_learn_runs(LEARN_RUN)


def learned_pct(section: str, measure: str, pick=min) -> float:
    """``pick`` (min or max) over every configuration and seed of one measure, in percent."""
    return pct(pick(r[section][measure] for r in learned().values()))


def probe_random_chars(name: str) -> float:
    """Characters right (percent) on random strings of one short probe run in results/learn."""
    probe = _read_probe(name)
    return pct(probe["random_strings"]["char_accuracy"])


@functools.cache
def _read_probe(name: str) -> dict:
    return json.loads((run_path("learn") / f"{name}.json").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- the chapter's findings

@functools.cache
def ref_runs() -> dict[tuple[str, int], dict]:
    """The reference ablation (results/reference): the default recipe, five configurations, two seeds."""
    return load_reference_runs()


def ref_exact_pct(pick=min, sets: tuple[str, ...] | None = None) -> float:
    """``pick`` over every run and probe set of the reference ablation of the exact-line rate, in percent."""
    names = sets or tuple(name for name, _ in REFERENCE_SETS)
    return pct(pick(section(r, n)["sequence_accuracy"] for r in ref_runs().values() for n in names))


def ref_perfect_runs() -> int:
    """Reference runs that decoded every line of every probe set exactly."""
    return sum(all(section(r, n)["exact_lines"] == section(r, n)["lines"] for n, _ in REFERENCE_SETS)
               for r in ref_runs().values())


@functools.cache
def paired() -> tuple[dict, ...]:
    """McNemar's exact test of C2-C5 against C1, seed by seed, on every probe set of the reference ablation."""
    return tuple(paired_rows(ref_runs()))


def paired_lowest() -> dict:
    return min(paired(), key=lambda row: row["p"])


def paired_other_seed() -> dict:
    """The test of the lowest p-value's configuration and set with the other seed."""
    low = paired_lowest()
    return next(row for row in paired() if (row["config"], row["set"]) == (low["config"], low["set"])
                and row["seed"] != low["seed"])


@functools.cache
def recipe_steps() -> tuple[dict, ...]:
    """The recipe before case flips and the end-of-source token (results/learn/ablation) against the reference,
    run by run, on the sets both decoded: lines only the new model got right, only the old, McNemar's p."""
    before, after = learned(), ref_runs()
    steps = []
    for key in sorted(set(before) & set(after)):
        for name in ("random_letters", "stdlib", "brown_test_free"):
            only_before, only_after, p = mcnemar(section(before[key], name)["exact_by_line"],
                                                 section(after[key], name)["exact_by_line"])
            steps.append({"key": key, "set": name, "gained": only_after, "lost": only_before, "p": p})
    return tuple(steps)


def generalisation_exact(config: str, text: str) -> float:
    """Exact lines (percent) of a committed course-notes model on its Brown test lines or the docstrings."""
    if text == "brown":
        return exact_pct(config, EXTENDED_RUN)
    return pct(metric(load_generalisation(RUN)[config], "sequence_accuracy"))


@functools.cache
def recipe_bits() -> dict:
    """C1 with the default recipe reading the course notes' bits-mode BPE (results/learn/bits)."""
    return json.loads((run_path("learn/bits") / "cipher-c1-bits-seed0.json").read_text(encoding="utf-8"))


@functools.cache
def aware_gains() -> dict[str, float]:
    """Bit-accuracy gain (points) of length-aware over free decoding, per errors.json entry."""
    return {key: pct(gain) for key, gain in decoding_gains(load_errors(RUN), "bit_accuracy").items()}


def aware_gain_range(bits: bool, pick=max) -> float:
    prefix = ANALYSIS_RUNS[BITS_RUN] + "/"
    return pick(g for key, g in aware_gains().items() if key.startswith(prefix) == bits)


FACTS = {
    # the findings that open the chapter
    "res_ref_runs": lambda: len(ref_runs()),
    "res_ref_seeds": lambda: len({seed for _, seed in ref_runs()}),
    "res_ref_sets": lambda: len(REFERENCE_SETS),
    "res_ref_perfect_runs": ref_perfect_runs,
    "res_ref_exact_min": ref_exact_pct,
    "res_ref_brown_exact_min": lambda: ref_exact_pct(min, ("brown_test_free",)),
    "res_ref_c5_time_ratio": lambda: (sum(r["train_seconds"] for (c, _), r in ref_runs().items() if c == "c5")
                                      / sum(r["train_seconds"] for (c, _), r in ref_runs().items() if c == "c1")),
    "res_step_tests": lambda: len(recipe_steps()),
    "res_step_gains": lambda: sum(s["p"] < 0.05 and s["gained"] > s["lost"] for s in recipe_steps()),
    "res_step_loss_p": lambda: min(s["p"] for s in recipe_steps() if s["lost"] > s["gained"]),
    "res_paired_tests": lambda: len(paired()),
    "res_paired_below_05": lambda: sum(row["p"] < 0.05 for row in paired()),
    "res_paired_min_p": lambda: paired_lowest()["p"],
    "res_paired_min_where": lambda: (f"{paired_lowest()['config'].upper()}, seed {paired_lowest()['seed']}, "
                                     f"{paired_lowest()['label']}"),
    "res_paired_min_lost": lambda: paired_lowest()["only_base"],
    "res_paired_min_other_p": lambda: paired_other_seed()["p"],
    "res_paired_bonferroni": lambda: 0.05 / len(paired()),
    "res_gen_c2_brown": lambda: generalisation_exact("c2", "brown"),
    "res_gen_c2_stdlib": lambda: generalisation_exact("c2", "stdlib"),
    "res_gen_c5_brown": lambda: generalisation_exact("c5", "brown"),
    "res_gen_c5_stdlib": lambda: generalisation_exact("c5", "stdlib"),
    "res_recipe_bits_exact": lambda: recipe_bits()["brown_test_free"]["exact_lines"],
    "res_recipe_bits_lines": lambda: recipe_bits()["brown_test_free"]["lines"],
    "res_recipe_bits_random_chars": lambda: pct(recipe_bits()["random_strings"]["char_accuracy"]),
    "res_aware_bits_gain_min": lambda: aware_gain_range(True, min),
    "res_aware_bits_gain_max": lambda: aware_gain_range(True, max),
    "res_aware_bytes_gain_max": lambda: aware_gain_range(False, max),

    # §7.8 Q1: what each metric sees
    "res_demo_chars": lambda: len(SENTENCE),
    "res_drop_at": lambda: DROP_AT,
    "res_drop_bit": lambda: pct(damaged("drop")["bit_accuracy"]),
    "res_drop_neighbour_bits": lambda: drop_bits()["neighbour_bits"],
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
    "res_c1c4_exact_min": lambda: min(over_c1_c4("sequence_accuracy", scale=100)),
    "res_c1c4_exact_max": lambda: max(over_c1_c4("sequence_accuracy", scale=100)),
    "res_c1c4_bleu_min": lambda: min(over_c1_c4("bleu")),
    "res_c1c4_bleu_max": lambda: max(over_c1_c4("bleu")),
    "res_bits_exact_max": lambda: max(over_c1_c4("sequence_accuracy", BITS_RUN, 100)),
    "res_p99_256": lambda: pct(0.99 ** 256),
    "res_test_lines": lambda: len(test_line_lengths()),
    "res_mean_line_chars": lambda: sum(test_line_lengths()) / len(test_line_lengths()),
    "res_longest_line": lambda: max(test_line_lengths()),
    "res_c1_cer": lambda: pct(value("c1", "char_error_rate")),
    "res_c1_exact": lambda: exact_pct("c1"),
    "res_c1_exact_indep": lambda: pct(exact_if_independent("c1")),
    "res_c1_char_p": lambda: 1 - value("c1", "char_error_rate"),
    "res_c1_exact_at_mean": lambda: pct(exact_at_mean_length("c1")),
    # §7.8 Q4: BLEU and ROUGE depend on their units
    "res_lower_rougeL": lambda: damaged("lower")["rougeL"],
    "res_lower_bleu": lambda: damaged("lower")["bleu"],
    "res_bleu_words": lambda: bleu_by_unit("13a"),
    "res_bleu_chars": lambda: bleu_by_unit("char"),
    "res_c5_chrf": lambda: value("c5", "chrf"),
    "res_c1_chrf": lambda: value("c1", "chrf"),
    # §7.8 Q5: two rows
    "res_kitten": lambda: levenshtein("kitten", "sitting"),
    "res_full_cells": lambda: (max(test_line_lengths()) + 1) ** 2,
    "res_two_rows": lambda: 2 * (max(test_line_lengths()) + 1),
    # §7.8 Q6: greedy vs beam
    "res_beam_lines": lambda: beam()["c5"]["greedy"]["lines"],
    "res_beam_width": lambda: int(beam_width("c5").removeprefix("beam")),
    "res_beam_c2_greedy": lambda: beam_exact("c2", "greedy"),
    "res_beam_c2_beam": lambda: beam_exact("c2", "beam"),
    "res_beam_c5_greedy": lambda: beam_exact("c5", "greedy"),
    "res_beam_c5_beam": lambda: beam_exact("c5", "beam"),
    "res_beam_c5_lines_lost": lambda: -beam_lines_gained("c5"),
    "res_beam_c5_se": lambda: beam_se("c5"),
    "res_beam_c2_slowdown": lambda: beam_slowdown("c2"),
    "res_beam_c5_slowdown": lambda: beam_slowdown("c5"),
    # §7.8 Q7: what the KV cache saves
    "res_chunk_chars": _chunk_chars,
    "res_uncached_positions": lambda: _triangle(_chunk_chars() + 1),
    "res_cached_positions": lambda: _chunk_chars() + 1,
    "res_c2_decode_lps": lambda: decode_lps("c2"),
    "res_c5_decode_lps": lambda: decode_lps("c5"),
    "res_extended_run": lambda: f"results/{EXTENDED_RUN}",
    "res_bench_models": lambda: str(Path(decode_checkpoints()).parent),
    "res_bench_lines": lambda: decode_benchmark()["c5"]["lines_per_second"]["lines"],
    "res_bench_c1_lps": lambda: bench_lps("c1"),
    "res_bench_c2_lps": lambda: bench_lps("c2"),
    "res_bench_c5_lps": lambda: bench_lps("c5"),
    "res_bench_c5_cache_bytes": lambda: decode_benchmark()["c5"]["cache"]["target_tokens"],
    "res_bench_c5_cache_speedup": lambda: decode_benchmark()["c5"]["cache"]["speedup"],
    "res_bench_beam_cost_min": lambda: min(bench_beam_cost()),
    "res_bench_beam_cost_max": lambda: max(bench_beam_cost()),
    # §7.9 Q1: what one change at a time guarantees
    "res_seeds": lambda: len({r["seed"] for r in records().values()}),
    "res_c1_exact_se": lambda: pct(exact_lines_stderr(records()["c1"])),
    "res_budget_minutes": lambda: records()["c1"]["hyperparameters"]["time_budget_s"] / 60,
    "res_epochs_min": lambda: min(r["epochs"] for r in records().values()),
    "res_epochs_max": lambda: max(r["epochs"] for r in records().values()),
    "res_epoch_time_spread": epoch_time_spread,
    "res_equal_epochs": lambda: records(EQUAL_EPOCHS_RUN)["c1"]["epochs"],
    # §7.9 Q2: which single changes helped
    "res_equal_c2_exact": lambda: against_c1("c2", "sequence_accuracy"),
    "res_equal_c2_se": lambda: se_against_c1("c2"),
    "res_equal_c2_bit": lambda: against_c1("c2", "bit_accuracy"),
    "res_equal_c3_exact": lambda: against_c1("c3", "sequence_accuracy"),
    "res_equal_c3_se": lambda: se_against_c1("c3"),
    "res_equal_c4_exact": lambda: against_c1("c4", "sequence_accuracy"),
    "res_equal_c4_se": lambda: se_against_c1("c4"),
    "res_c4_controlled_exact": lambda: against_c1("c4", "sequence_accuracy", RUN),
    "res_c1_controlled_epochs": lambda: records()["c1"]["epochs"],
    "res_c4_controlled_epochs": lambda: records()["c4"]["epochs"],
    # §7.9 Q3: C5
    "res_ext_c5_minus_c2": extended_c5_minus_c2,
    "res_ext_se": extended_se,
    "res_ext_c5_exact": lambda: exact_pct("c5", EXTENDED_RUN),
    "res_ext_c2_exact": lambda: exact_pct("c2", EXTENDED_RUN),
    "res_ext_c5_epochs": lambda: records(EXTENDED_RUN)["c5"]["epochs"],
    "res_ext_c2_epochs": lambda: records(EXTENDED_RUN)["c2"]["epochs"],
    "res_equal_c5_exact": lambda: against_c1("c5", "sequence_accuracy"),
    "res_equal_c5_se": lambda: se_against_c1("c5"),
    "res_c5_epoch_ratio": lambda: epoch_ratio("c5"),
    "res_c1_bit": lambda: bit_pct("c1"),
    "res_bits_c1_bit": lambda: bit_pct("c1", BITS_RUN),
    "res_seed_c1_bit": lambda: pct(reference("seed", "c1", "bit_accuracy")),
    "res_seed_c5_bit": lambda: pct(reference("seed", "c5", "bit_accuracy")),
    # §7.9 Q4: the slot already spent on bits vs bytes
    "res_bytes_bit_min": lambda: min(over_c1_c4("bit_accuracy", scale=100)),
    "res_bytes_bit_max": lambda: max(over_c1_c4("bit_accuracy", scale=100)),
    "res_bits_bit_min": lambda: min(over_c1_c4("bit_accuracy", BITS_RUN, 100)),
    "res_bits_bit_max": lambda: max(over_c1_c4("bit_accuracy", BITS_RUN, 100)),
    # §7.9 Q4: the key-phase embedding, measured (results/learn)
    "res_learn_seeds": lambda: len({seed for _, seed in learned()}),
    "res_learn_brown_exact_min": lambda: learned_pct("brown_test_free", "sequence_accuracy"),
    "res_learn_brown_exact_max": lambda: learned_pct("brown_test_free", "sequence_accuracy", max),
    "res_learn_brown_lines": lambda: next(iter(learned().values()))["brown_test_free"]["lines"],
    "res_probe_c2_two": lambda: probe_random_chars("c2-shuffle-bits"),
    "res_probe_c2_phase": lambda: probe_random_chars("c2-shuffle-bits-phase"),
    # §7.9 Q5: what peak memory means here
    "res_device": lambda: next(iter(records().values()))["device"],
    "res_c1_peak_mib": lambda: peak_mib("c1"),
    "res_c5_peak_mib": lambda: peak_mib("c5"),
    "res_c1_state_mib": lambda: state_mib("c1"),
    "res_c5_state_mib": lambda: state_mib("c5"),
    "res_c1_state_share": lambda: state_mib("c1") / peak_mib("c1"),
    # §7.9 Q6: fewest parameters
    "res_fewest_run": lambda: fewest({name: r["params"] for name, r in records().items()}),
    "res_fewest_assignment": lambda: fewest(assignment_params()),
    **{f"res_{name}_params": (lambda name=name: assignment_params()[name]) for name in CONFIG_NAMES},
    "res_c3_saving": lambda: assignment_params()["c1"] - assignment_params()["c3"],
    "res_c4_saving": lambda: assignment_params()["c1"] - assignment_params()["c4"],
    "res_heads": lambda: make_config("c3", "assignment").n_heads,
    "res_kv_heads": lambda: make_config("c3", "assignment").n_kv_heads,
    "res_self_attn_modules": self_attention_modules,
    "res_c3_per_module": lambda: (assignment_params()["c1"] - assignment_params()["c3"]) // self_attention_modules(),
    "res_norm_layers": norm_layers,
}
