"""The results chapter's experiments: what its facts quote, and what its cells call.

Two kinds. The metric demonstrations run ``cipherlab.pipeline.metrics`` on one sentence and its damaged
copies, and need nothing but the package. Everything about what was *measured* reads the committed
results through ``cipherlab.analysis.ablation``; a missing file is a FileNotFoundError naming it.

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

from cipherlab.data.cipher import encrypt
from cipherlab.base.config import CONFIG_NAMES, TOKENIZATIONS, make_config
from cipherbook.experiments import common
from cipherbook.experiments.common import reference_runs
from cipherlab.pipeline.metrics import compute_metrics
from cipherlab.runner.record import read_record
from cipherbook.runs import EQUAL_EPOCHS_RUN, EXTENDED_RUN, LEARN_RUN, PRIMARY_RUN
from cipherlab.analysis.ablation import (REFERENCE_SETS, beam_gains, exact_difference_stderr, lines_of,
                               load_beam, load_generalisation, load_learn_runs,
                               load_run, mcnemar, metric, paired_rows, rate_difference_stderr,
                               run_path, section)

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


def over_c1_c4(key: str, run: str = RUN, scale: float = 1.0) -> list[float]:
    return [scale * value(c, key, run) for c in C1_C4 if c in records(run)]


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


def beam_lowest_p(config: str) -> float:
    """The lowest McNemar p-value (:func:`cipherlab.analysis.ablation.mcnemar`) any pairing of beam search's and greedy
    decoding's outcomes on the same lines allows. beam.json keeps no per-line outcomes, only the exact-line
    counts, so a net change of n lines means n + k lines only one decoding got right and k only the other;
    every k the line count allows is tried."""
    entry = beam()[config]
    lines, n = entry["greedy"]["lines"], abs(beam_lines_gained(config))
    return min(mcnemar("1" * (n + k) + "0" * k, "0" * (n + k) + "1" * k)[2] for k in range((lines - n) // 2 + 1))


# the committed models: C2 and C5 trained on (notes/extended/cpu)

def decode_lps(config: str) -> float:
    """Lines per second the committed model decoded its test lines at (greedy, its own record)."""
    return records(EXTENDED_RUN)[config]["sets"]["test"]["decode_lines_per_s"]


@functools.cache
def decode_benchmark() -> dict:
    """benchmarks/results/decode.json (``benchmarks/bench_decode.py``): the committed ablation models decoding."""
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "decode.json"
    return json.loads(path.read_text(encoding="utf-8"))["configurations"]


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
    from cipherlab.models import BLTArgs, BLTModel, ModelArgs, Seq2SeqTransformer
    from cipherlab.data.tokenizers.bytes import SPECIAL_IDS

    config = make_config(name, "assignment", **TOKENIZATIONS["notes"])  # the notes' 1024 / 8000 BPEs
    if config.tokenization == "blt":  # the special ids as cipherlab.pipeline.codec.build_model passes them
        return BLTModel(BLTArgs(**config.model_hyperparameters(), local_layers=config.blt_local_layers,
                                window=config.blt_window, patch_tgt=config.blt_patch_tgt,
                                source_memory=config.blt_source_memory, **SPECIAL_IDS))
    # as SubwordCodec.build_model, with the vocabulary sizes the configuration asks for
    return Seq2SeqTransformer(ModelArgs(config.src_vocab, config.tgt_vocab, **config.model_hyperparameters(),
                                        pos_encoding=config.pos_encoding, attn_type=config.attn_type,
                                        n_kv_heads=config.n_kv_heads if config.attn_type == "gqa" else None,
                                        norm=config.norm, rope_cross_attention=config.rope_cross_attention))


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


def triangle(n: int) -> int:
    """1 + 2 + ... + n: decoder positions computed over n steps when every step recomputes the prefix."""
    return n * (n + 1) // 2


def run_chunk_chars() -> int:
    return next(iter(records().values()))["hyperparameters"]["chunk_chars"]


@functools.cache
def learned() -> dict[tuple[str, int], dict]:
    """The controlled ablation of the recipe before case flips and the end-of-source token (results/learn/ablation)."""
    return load_learn_runs(LEARN_RUN)


# --------------------------------------------------------------------------- the chapter's findings

def ref_runs() -> dict[tuple[str, int], dict]:
    """The reference ablation (results/reference): the default recipe, five configurations, two seeds."""
    return reference_runs()


def ref_time_ratios(config: str, folder: str = "reference") -> list[float]:
    """Training seconds of ``config`` over C1's with the same seed, seed by seed, in results/reference (every run
    trained the same number of epochs) or another folder of the same runs ("nophase")."""
    runs = ref_runs() if folder == "reference" else load_learn_runs(folder)
    if len({r["epochs"] for r in runs.values()}) != 1:
        raise ValueError(f"results/{folder}: the runs trained different numbers of epochs")
    return [r["train_seconds"] / runs[("c1", seed)]["train_seconds"] for (name, seed), r in runs.items()
            if name == config]


def ref_exact_pct(pick=min, sets: tuple[str, ...] | None = None) -> float:
    """``pick`` over every run and probe set of the reference ablation of the exact-line rate, in percent."""
    names = sets or tuple(name for name, _ in REFERENCE_SETS)
    return pct(pick(section(r, n)["sequence_accuracy"] for r in ref_runs().values() for n in names))


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
        for name in ("random_letters", "stdlib", "test_free"):
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
    return read_record(run_path("learn/bits") / "cipher-c1-bits-seed0.json")


# --------------------------------------------------------------------------- the map of runs and the handout's tables

def folder_records(folder: str) -> dict[tuple[str, int], dict]:
    """Every run record in ``results/<folder>`` (``recipe/*``: in each of its sub-folders, one per part), as
    ``{(config, seed, file stem): record}``; JSON files that are not records (beam.json, errors.json) are skipped."""
    found = {}
    base = folder.removesuffix("/*")
    for path in sorted(run_path(base).glob("*/*.json" if folder.endswith("/*") else "*.json")):
        try:
            record = read_record(path)
        except ValueError:  # not a run record
            continue
        found[(record["config"], record["seed"], path.stem)] = record
    if not found:
        raise FileNotFoundError(f"results/{folder}: no run records")
    return found


def only(values):
    """The one value ``values`` hold; an error naming them when they hold several."""
    values = sorted(set(values))
    if len(values) != 1:
        raise ValueError(f"expected one value, got {values}")
    return values[0]


def _one_or_range(values) -> str:
    values = sorted(set(values))
    return str(values[0]) if len(values) == 1 else f"{values[0]}–{values[-1]}"


def _reads(record: dict) -> str:
    """How C1-C4 of a run read the cipher, from the record: whole bytes, the course notes' BPE over bits, or the
    aligned BPE with its learned merges."""
    hp = record["hyperparameters"]
    if hp.get("target_tokens") == "aligned":
        merges = (record.get("tokens") or {}).get("source_merges")
        return f"aligned BPE, {merges:,} merges" if merges else "aligned BPE"
    if hp["source_mode"] == "bits":
        return f"BPE over bits, {hp['src_vocab']:,} tokens"
    return "whole bytes, no merges"


def _configs(configs: list[str]) -> str:
    """"C1–C5" for a run of consecutive configurations, else "C2, C5"."""
    at = CONFIG_NAMES.index(configs[0])
    if len(configs) > 2 and list(CONFIG_NAMES[at:at + len(configs)]) == configs:
        return f"{configs[0].upper()}–{configs[-1].upper()}"
    return ", ".join(c.upper() for c in configs)


def _seeds(runs: dict) -> str:
    """Seeds per configuration: "0, 1" when every configuration has the same seeds, else grouped, as in
    "C1: 0, 1; C2–C5: 0"."""
    by_config: dict[str, list[int]] = {}
    for c, s, _ in sorted(runs):
        by_config.setdefault(c, []).append(s)
    groups: dict[tuple[int, ...], list[str]] = {}
    for c in sorted(by_config):
        groups.setdefault(tuple(sorted(set(by_config[c]))), []).append(c)
    if len(groups) == 1:
        return ", ".join(map(str, next(iter(groups))))
    return "; ".join(f"{_configs(configs)}: {', '.join(map(str, seeds))}" for seeds, configs in groups.items())


def readme_cores(folder: str) -> int | None:
    """The cores of the machine ``results/<folder>/README.md`` says its runs shared ("2-core CPU", "2-core
    machine"); the records do not hold it. None when the README does not say."""
    import re

    readme = run_path(folder) / "README.md"
    if not readme.exists():  # results/notes/* share one README above them
        return None
    found = re.findall(r"(\d+)-core (?:CPU|machine)", readme.read_text(encoding="utf-8"))
    return int(found[0]) if found and len(set(found)) == 1 else None


def _machine(folder: str, runs: dict) -> str:
    """Where a folder's runs trained, from its records (device, torch threads, time cap) and its README (cores)."""
    devices = sorted({r["device"] or ("cpu" if r["versions"]["torch"].endswith("+cpu") else "device not recorded")
                      for r in runs.values()})  # records before the field: a CPU-only torch says it
    threads = sorted({r["versions"].get("threads") for r in runs.values()} - {None})
    caps = sorted({r["hyperparameters"]["time_budget_s"] for r in runs.values()} - {None})
    cores = readme_cores(folder)
    return (", ".join(d.upper() if d == "cpu" else d for d in devices) + (f" ({cores} cores)" if cores else "")
            + "".join(f", {t} thread a run" for t in threads)
            + "".join(f", cap {c / 60:.0f} min" for c in caps))


def run_map(folders: dict[str, str]) -> list[list[str]]:
    """One row per folder of ``results/`` (``{folder: the question it answers}``), every cell but the question
    read from the folder's records: preset and sizes, recipe, how C1-C4 read the cipher, configurations with
    their seeds, epochs, the machine, C1's parameters."""
    rows = []
    for folder, question in folders.items():
        runs = folder_records(folder)
        hps = [r["hyperparameters"] for r in runs.values()]
        presets = sorted({r["preset"] for r in runs.values()})
        sizes = sorted({(h["d_model"], h["enc_layers"], h["dec_layers"]) for h in hps})
        recipes = sorted({r["recipe"] or "notes" for r in runs.values()})  # records before the field: the notes'
        c1_c4 = [r for (c, _, _), r in runs.items() if c != "c5"]
        c1 = sorted({r["params"] for (c, _, _), r in runs.items() if c == "c1"})
        configs = sorted({c for c, _, _ in runs})
        seeds = _seeds(runs)
        rows.append([f"`{folder}`", ", ".join(presets),
                     "; ".join(f"d {d}, {enc}+{dec}" for d, enc, dec in sizes), ", ".join(recipes),
                     ", ".join(sorted({_reads(r) for r in c1_c4})) or "–",
                     seeds if ":" in seeds else f"{_configs(configs)}: {seeds}",
                     _one_or_range(r["epochs"] for r in runs.values()), _machine(folder, runs),
                     ", ".join(f"{n:,}" for n in c1) or "–", question])
    return rows


def decode_map_row(question: str) -> list[str]:
    """benchmarks/results/decode.json as a row of ``run_map``: it trains nothing, it times the models in its
    ``checkpoints`` folder; their sizes, recipe, seed and epochs from each checkpoint's stored configuration, C1's
    parameters counted from its weights, the machine from decode.json."""
    from cipherlab.runner.trained import read_payload

    root = Path(__file__).resolve().parents[3]
    bench = json.loads((root / "benchmarks" / "results" / "decode.json").read_text(encoding="utf-8"))
    configs, params = {}, {}
    for name in bench["configurations"]:
        payload = read_payload(root / bench["checkpoints"] / f"{name}.safetensors")
        configs[name] = payload["config"]
        params[name] = sum(t.numel() for t in payload["model"].values())
    cfgs = list(configs.values())
    machine = bench["machine"]
    return [f"`benchmarks/results/decode.json` (models: `{bench['checkpoints']}`)",
            ", ".join(sorted({c["preset"] for c in cfgs})),
            "; ".join(f"d {d}, {enc}+{dec}" for d, enc, dec in sorted({(c["d_model"], c["enc_layers"], c["dec_layers"])
                                                                       for c in cfgs})),
            ", ".join(sorted({c["recipe"] for c in cfgs})),
            ", ".join(sorted({_reads({"hyperparameters": c}) for n, c in configs.items() if n != "c5"})),
            f"{_configs(sorted(configs))}: {', '.join(map(str, sorted({c['seed'] for c in cfgs})))}",
            f"{_one_or_range(c['max_epochs'] for c in cfgs)} (trained; here timed decoding)",
            f"CPU ({machine['cpu_count']} cores), {machine['torch_threads']} thread",
            f"{params['c1']:,}" if "c1" in params else "–", question]


def run_names(runs: dict) -> dict:
    """Each run's name in a handout table: "C1", or "C1 seed 0" where the runs hold several seeds of C1 (as
    ``python -m cipherlab report`` names them)."""
    configs = [c for c, _ in runs]
    return {(c, s): c.upper() if configs.count(c) == 1 else f"{c.upper()} seed {s}" for c, s in runs}


def recorded_columns(table):
    """A handout table without the columns that no run recorded (every cell "not recorded", or FLOPs "not
    estimated" without a plan); the names of the
    columns left out."""
    from cipherlab.analysis.handout import NOT_RECORDED, Table

    keep = [i for i in range(len(table.headers))
            if any(row[i] != NOT_RECORDED and not row[i].startswith("not estimated") for row in table.rows)]
    dropped = [h for i, h in enumerate(table.headers) if i not in keep]
    return Table(table.name, table.caption, [table.headers[i] for i in keep],
                 [[row[i] for i in keep] for row in table.rows]), dropped


def over_c1(runs: dict, key: str) -> dict[tuple[str, int], float]:
    """``record[key]`` of every run over C1's of the same seed (the mean of C1's seeds where C1 lacks that seed)."""
    c1 = {s: r[key] for (c, s), r in runs.items() if c == "c1"}
    mean = sum(c1.values()) / len(c1)
    return {(c, s): r[key] / c1.get(s, mean) for (c, s), r in runs.items()}


def ref_epoch_over_c1(config: str) -> float:
    """results/reference: ``config``'s seconds per epoch over C1's of the same seed, the mean over the two seeds."""
    ratios = [v for (c, _), v in over_c1(ref_runs(), "seconds_per_epoch").items() if c == config]
    return sum(ratios) / len(ratios)


def goal_thresholds() -> dict[str, list[float]]:
    """The thresholds of ablation.REFERENCE_GOALS in percent: "chars" (characters or bits right), "exact" (lines)."""
    from cipherlab.analysis.ablation import REFERENCE_GOALS
    out: dict[str, list[float]] = {"chars": [], "exact": []}
    for _, name, bar, _ in REFERENCE_GOALS:
        out["exact" if name == "sequence_accuracy" else "chars"].append(100 * bar)
    return out


def kv_cache_bytes_per_token(config: str, preset: str = "assignment") -> int:
    """Bytes of decoder self-attention keys and values one generated token adds to the cache (float32), from the
    configuration's sizes: 2 (K and V) x layers x KV heads x head width x 4 bytes."""
    cfg = make_config(config, preset)
    kv_heads = cfg.n_kv_heads if cfg.attn_type == "gqa" else cfg.n_heads
    return 2 * cfg.dec_layers * kv_heads * (cfg.d_model // cfg.n_heads) * 4


@functools.cache
def assignment_cpu() -> dict[tuple[str, int], dict]:
    """results/assignment-cpu: the assignment preset, one epoch on a 2-core CPU, C1 seeds 0 and 1, C2-C5 seed 0."""
    return load_learn_runs("assignment-cpu")


def acpu_exact(config: str, seed: int = 0) -> int:
    """Brown test lines a results/assignment-cpu run decoded exactly (greedy, length-aware)."""
    return assignment_cpu()[(config, seed)]["sets"]["test"]["exact_lines"]


@functools.cache
def acpu_paired(set_name: str = "test") -> tuple[dict, ...]:
    """McNemar's exact test on the Brown test lines of results/assignment-cpu, decoded as ``set_name`` says ("test":
    length-aware greedy; "test_free": free greedy, the model ends each line): C1's seed 1 against its seed 0 first
    (how far a seed alone moves C1), then C2-C5 (seed 0) against each seed of C1.
    Each row: ``base`` and ``other`` (config, seed), lines only ``base`` / only ``other`` decoded, p."""
    runs = assignment_cpu()
    lines = {key: r["sets"][set_name]["exact_by_line"] for key, r in runs.items()}
    pairs = [(("c1", 0), ("c1", 1))] + [(("c1", seed), (c, 0)) for c in CONFIG_NAMES[1:] if (c, 0) in runs
                                        for seed in (0, 1)]
    rows = []
    for base, other in pairs:
        only_base, only_other, p = mcnemar(lines[base], lines[other])
        rows.append({"base": base, "other": other, "only_base": only_base, "only_other": only_other, "p": p})
    return tuple(rows)


def acpu_seed_test(set_name: str = "test") -> dict:
    """The test of C1's seed 1 against its seed 0 (results/assignment-cpu): what a seed alone moves."""
    return acpu_paired(set_name)[0]


def acpu_epoch_seed_spread() -> float:
    """How far C1's two seeds' seconds per epoch lie apart in results/assignment-cpu (the larger over the smaller,
    minus 1): the same model on the same machine, beside different neighbours."""
    seconds = [assignment_cpu()[("c1", s)]["seconds_per_epoch"] for s in (0, 1)]
    return max(seconds) / min(seconds) - 1


def bench_repeat_spread() -> float:
    """The largest gap between two back-to-back timings of the same model on the same lines in decode.json (free and
    length-aware greedy decoding, nearly the same work), the larger speed over the smaller, minus 1: the noise of
    one sitting's timings."""
    return max(max(a, b) / min(a, b) - 1 for a, b in ((bench_lps(c), bench_lps(c, "greedy_length_aware"))
                                                       for c in decode_benchmark()))


def acpu_against_better_c1(config: str) -> dict:
    """The test of ``config`` (seed 0) against the C1 seed that decoded more test lines (results/assignment-cpu)."""
    better = max((("c1", s) for s in (0, 1)), key=lambda key: acpu_exact(*key))
    return next(r for r in acpu_paired() if r["base"] == better and r["other"] == (config, 0))


def acpu_test(config: str, c1_seed: int, set_name: str = "test") -> dict:
    """The row of :func:`acpu_paired` testing ``config`` (seed 0) against C1's seed ``c1_seed`` on ``set_name``."""
    return next(r for r in acpu_paired(set_name) if r["base"] == ("c1", c1_seed) and r["other"] == (config, 0))


def acpu_bonferroni() -> tuple[int, float]:
    """§9.1's paired tests (:func:`acpu_paired`, length-aware and free greedy together) and their Bonferroni bar,
    0.05 over their number."""
    tests = len(acpu_paired()) + len(acpu_paired("test_free"))
    return tests, 0.05 / tests


def acpu_c2_against_c5(set_name: str = "test_free") -> dict:
    """McNemar's test of C2 against C5 (seed 0 each) on the Brown test lines of results/assignment-cpu: lines only
    C2 decoded, only C5 decoded, p."""
    runs = assignment_cpu()
    only_c2, only_c5, p = mcnemar(*(runs[(c, 0)]["sets"][set_name]["exact_by_line"] for c in ("c2", "c5")))
    return {"only_c2": only_c2, "only_c5": only_c5, "p": p}


def acpu_stop_lost(config: str, seed: int = 0) -> int:
    """Brown test lines a results/assignment-cpu run decoded exactly length-aware but not freely: lost when the
    model, not the cipher's length, ends the line."""
    sets = assignment_cpu()[(config, seed)]["sets"]
    return sum(a == "1" and b == "0" for a, b in zip(sets["test"]["exact_by_line"], sets["test_free"]["exact_by_line"]))


def acpu_bit_min_config(set_name: str = "test") -> str:
    """The configuration of the results/assignment-cpu run with the lowest bit accuracy on a set ("C3")."""
    return min(ACPU_RUNS, key=lambda k: assignment_cpu()[k]["sets"][set_name]["bit_accuracy"])[0].upper()


def decode_benchmark_machine() -> str:
    """The machine decode.json was timed on, as it records it: cores, torch threads, torch, load at start and end."""
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "decode.json"
    machine = json.loads(path.read_text(encoding="utf-8"))["machine"]
    return (f"{machine['cpu_count']} cores, {machine['torch_threads']} torch thread, torch {machine['torch']}, load "
            f"average (1 min) {machine['load_average_1_5_15min_at_start'][0]} at start, "
            f"{machine['load_average_1_5_15min_at_end'][0]} at end")


# the lead table's yardsticks and costs (results/assignment-cpu), the key-phase embedding off (results/nophase)

ACPU_RUNS = (("c1", 0), ("c1", 1), ("c2", 0), ("c3", 0), ("c4", 0), ("c5", 0))  # the runs the folder holds


def acpu_lines(config: str, seed: int = 0, set_name: str = "test") -> int:
    """Lines of a probe set a results/assignment-cpu run decoded exactly: "test" (length-aware greedy),
    "test_free" (free greedy), "random_letters", "stdlib"."""
    return assignment_cpu()[(config, seed)]["sets"][set_name]["exact_lines"]


def acpu_bit_min(set_name: str = "test") -> float:
    """The lowest bit accuracy (%) of any results/assignment-cpu run on a set ("test" or "test_free")."""
    return pct(min(assignment_cpu()[k]["sets"][set_name]["bit_accuracy"] for k in ACPU_RUNS))


def acpu_gain_over_better_c1(config: str, set_name: str = "test") -> int:
    """Exact lines ``config`` (seed 0) decoded beyond C1's better seed on the same set."""
    return acpu_lines(config, 0, set_name) - max(acpu_lines("c1", s, set_name) for s in (0, 1))


def with_column(table, header: str, cells: dict):
    """A handout table with one more column: ``cells`` maps each row's run name to its cell."""
    from cipherlab.analysis.handout import Table

    return Table(table.name, table.caption, [*table.headers, header],
                 [[*row, cells[row[0]]] for row in table.rows])


def without_column(table, header: str):
    """A handout table without the column ``header``."""
    from cipherlab.analysis.handout import Table

    at = table.headers.index(header)
    return Table(table.name, table.caption, [h for i, h in enumerate(table.headers) if i != at],
                 [[c for i, c in enumerate(row) if i != at] for row in table.rows])


def seconds_per_step(record: dict) -> float:
    """Training seconds per optimiser step: seconds per epoch over the steps an epoch took (from the log)."""
    return record["seconds_per_epoch"] / steps_per_epoch(record)


def acpu_over_c1(config: str, measure: str) -> float:
    """``config``'s (seed 0) "peak" memory, "step" seconds or "epoch" seconds over C1's seed 0 (assignment-cpu)."""
    get = {"peak": lambda r: r["peak_memory_bytes"], "step": seconds_per_step,
           "epoch": lambda r: r["seconds_per_epoch"]}[measure]
    return get(assignment_cpu()[(config, 0)]) / get(assignment_cpu()[("c1", 0)])


@functools.cache
def lines_lost_without_phase() -> dict[tuple[str, int], dict[str, int]]:
    """Per run of results/nophase, per probe set: exact lines of the reference run (key-phase embedding on) minus
    those of the same configuration and seed with it off (negative: gained)."""
    reference, nophase = ref_runs(), load_learn_runs("nophase")
    return {key: {name: section(reference[key], name)["exact_lines"] - section(r, name)["exact_lines"]
                  for name, _ in REFERENCE_SETS} for key, r in sorted(nophase.items())}


def gains_past_bar(folder: str) -> dict[tuple[str, int, str], tuple[int, int]]:
    """Every paired row of results/nophase or results/aligned (:func:`cipherbook.experiments.common.nophase_paired`,
    ``aligned_paired``) where a configuration other than C2 decoded more lines than C1 of the same seed, p below
    the folder's Bonferroni bar: ``{(config, seed, set): (C1's exact lines, the configuration's)}``."""
    paired, bonferroni = {"nophase": (common.nophase_paired, common.nophase_bonferroni),
                          "aligned": (common.aligned_paired, common.aligned_bonferroni)}[folder]
    rows, bar = paired(), bonferroni()
    return {(r["config"], r["seed"], r["set"]): (r["base_exact"], r["exact"]) for r in rows
            if r["config"] != "c2" and r["p"] < bar and r["only_config"] > r["only_base"]}


def nophase_lines(config: str, seed: int, set_name: str = "test_free") -> int:
    """Exact lines of a results/nophase run on one probe set (by default Brown, free greedy)."""
    return section(load_learn_runs("nophase")[(config, seed)], set_name)["exact_lines"]


@functools.cache
def chunk_tokens(model_path: str) -> dict:
    """Source tokens per full chunk, as the aligned BPE of a committed model splits the cipher of its Brown test
    lines and of its random strings (letters and space): ``{"brown": Counter, "random": Counter, "chunk_chars"}``,
    each Counter ``{tokens in a chunk: chunks}``. Few merges apply to random strings, so their chunks are more
    tokens, and their late characters sit at token positions Brown chunks seldom reach."""
    import collections

    import torch

    from cipherlab.analysis.probes import probe_sets
    from cipherlab.data.cipher import encrypt
    from cipherlab.runner.trained import load_trained

    _, codec, config = load_trained(model_path, "cpu")
    record = next(iter(load_learn_runs("aligned").values()))
    n = config.chunk_chars
    out = {"chunk_chars": n}
    for name, lines in (("brown", lines_of(record)), ("random", probe_sets(config, n_random=200)["random_letters"])):
        counts = collections.Counter()
        for line in lines:
            for start in range(0, len(line) - n + 1, n):  # whole chunks only
                ids = codec.encode_source(encrypt(line[start:start + n]))
                counts[sum(k > 0 for k in codec.source_chars(torch.tensor([ids]))[0].tolist())] += 1
        out[name] = counts
    return out


def steps_per_epoch(record: dict) -> int:
    """Optimiser steps one epoch took, from the log (its ``step`` counts every step so far)."""
    return round(record["log"][-1]["step"] / len(record["log"]))


def c3_saving_per_module() -> int:
    """Parameters GQA (C3) saves in each self-attention module at the assignment's sizes; an error unless the
    aligned BPE as trained (results/assignment-cpu) and the course notes' BPEs give the same saving."""
    notes = assignment_params()["c1"] - assignment_params()["c3"]
    trained = assignment_cpu()[("c1", 0)]["params"] - assignment_cpu()[("c3", 0)]["params"]
    if notes != trained:
        raise ValueError(f"C3 saves {notes:,} with the notes' BPEs but {trained:,} as trained")
    return notes // self_attention_modules()


# results/reference against results/nophase: the same runs with the key-phase embedding on and off

@functools.cache
def phase_paired() -> dict[tuple[str, int], dict[str, dict]]:
    """McNemar's exact test of each results/reference run against the results/nophase run of the same configuration
    and seed (key-phase embedding on against off; the phase-preserving shuffle on in both), set by set, on the same
    lines: ``{(config, seed): {set: {"only_ref", "only_nophase", "p"}}}``."""
    reference, nophase = ref_runs(), load_learn_runs("nophase")
    out: dict[tuple[str, int], dict[str, dict]] = {}
    for key, r in sorted(nophase.items()):
        out[key] = {}
        for name, _ in REFERENCE_SETS:
            on, off = section(reference[key], name), section(r, name)
            if on["lines"] != off["lines"]:
                raise ValueError(f"{key} {name}: {on['lines']} lines with the embedding, {off['lines']} without")
            only_ref, only_nophase, p = mcnemar(on["exact_by_line"], off["exact_by_line"])
            out[key][name] = {"only_ref": only_ref, "only_nophase": only_nophase, "p": p}
    return out


def phase_bonferroni() -> float:
    """0.05 over every test of :func:`phase_paired`."""
    return 0.05 / sum(len(sets) for sets in phase_paired().values())


def phase_sets_lost(config: str, seed: int) -> int:
    """Probe sets on which the run lost exact lines without the key-phase embedding past :func:`phase_bonferroni`."""
    bar = phase_bonferroni()
    return sum(t["p"] < bar and t["only_ref"] > t["only_nophase"] for t in phase_paired()[(config, seed)].values())


def acpu_random_against_c1(config: str = "c2") -> list[dict]:
    """McNemar's exact test of ``config`` (seed 0) against each C1 seed on results/assignment-cpu's ``random_letters``
    (200 strings of letters and space): ``[{"only_c1", "only_other", "p"}, ...]`` in C1's seed order."""
    runs = assignment_cpu()
    rows = []
    for seed in (0, 1):
        only_c1, only_other, p = mcnemar(runs[("c1", seed)]["sets"]["random_letters"]["exact_by_line"],
                                         runs[(config, 0)]["sets"]["random_letters"]["exact_by_line"])
        rows.append({"only_c1": only_c1, "only_other": only_other, "p": p})
    return rows
