"""The tokenisation chapter's experiments: what its cells call and print, and what its facts quote.

Every function runs cipherlab's own tokenizers (``cipherlab.data.tokenizers``); the tokenisation chapter calls the
same functions, so the book and the answers show the same numbers. Tokenizers trained here are
small (a few hundred training lines) so that the chapter runs in seconds; the full-size ones are
``cipherlab.data.tokenizers.get_tokenizers``. The "mode_" facts read C1's committed test records in
``results/notes/cpu`` (cipher bytes, no merges) and ``results/notes/cpu-bits`` (bits-mode BPE), which differ
only in how the source is tokenised.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from pathlib import Path

from cipherlab.data.cipher import BITS_PER_CHAR, encrypt
from cipherlab.base.config import TOKENIZATIONS, make_config
from cipherlab.data.corpus import load_corpus
from cipherbook.experiments.common import BITS, PRIMARY_RUN, SRC_VOCAB
from cipherlab.analysis.ablation import load_run, metric
from cipherlab.data.tokenizers import (BPETokenizer, apply_merges, boundary_straddle_rate, learn_merges,
                                  split_plaintext)
from cipherlab.data.tokenizers.cipher_task import TARGET_SETTINGS, aligned_target_ids
from cipherlab.data.tokenizers.pretokenize import UNITS, Utf8ByteUnit
from cipherlab.pipeline.codec import fit_codec, merge_texts, select_lines

BYTES = PRIMARY_RUN  # the reference run: C1 reads whole cipher bytes, no merges (BITS: the same with bits-mode BPE)
BENCHMARK_FILE = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "bpe.json"
NOT_MEASURED = "not measured yet (run benchmarks/bench_bpe.py)"

# Drill sheet R22, step 1 (Sennrich et al.'s word-level BPE with an end-of-word marker).
DRILL_CORPUS = "low low low low low lower lower newest newest newest widest widest"
DRILL_MERGES = 6
END_OF_WORD = "</w>"

# Drill sheet R22, step 2 (a toy byte-level BPE: whole strings, no pre-tokenizer, 12 merges).
BYTE_TRAINING = ["the river and the road", "the quick brown fox", "the river flows"]
BYTE_MERGES = 12
BYTE_SAMPLES = {
    "prose": "the river and the road",
    "json": '{"userId":"a3f9-2c1b","amountCents":12995}',
    "code": "def get_user(id): return db.get(id)",
    "identifier": "550e8400-e29b-41d4-a716-446655440000",
    "non-Latin": "నమస్కారం ప్రపంచం",
}

# Small tokenizers trained inside the chapter.
SMALL_CIPHER_LINES, SMALL_PLAIN_LINES, EVAL_LINES = 200, 1000, 100
SMALL_TGT_VOCAB = 1000  # (the cipher side's have the assignment's SRC_VOCAB)


# --------------------------------------------------------------------------- the drill

def drill_words() -> dict[tuple[str, ...], int]:
    """{('l','o','w','</w>'): 5, ...}: each word as characters plus the end-of-word marker, with its count."""
    return {(*word, END_OF_WORD): n for word, n in Counter(DRILL_CORPUS.split()).items()}


def drill_trace() -> list[tuple[tuple[str, str], int]]:
    """The drill's six merges with their weighted counts, learned by cipherlab.data.tokenizers.learn_merges."""
    return learn_merges(drill_words(), DRILL_MERGES, return_counts=True)


def drill_ties() -> list[int]:
    """For each merge of the drill's trace: how many pairs had the top count (more than 1: the tie rule chose)."""
    from cipherlab.data.tokenizers.bpe import merge_symbols, pair_counts

    words, ties = drill_words(), []
    for pair, count in drill_trace():
        ties.append(sum(c == count for c in pair_counts(words).values()))
        words = {merge_symbols(symbols, pair): n for symbols, n in words.items()}
    return ties


def drill_segmented() -> dict[tuple[str, ...], int]:
    """The drill's words after its merges, with their counts (which merging never changes)."""
    merges = [pair for pair, _ in drill_trace()]
    return {apply_merges(symbols, merges): n for symbols, n in drill_words().items()}


@functools.lru_cache(maxsize=1)
def byte_drill_merges() -> list[tuple[str, str]]:
    """Step 2's merges over UTF-8 bytes (each byte held as the Latin-1 character of the same code)."""
    unit = Utf8ByteUnit()
    return learn_merges({tuple(unit.split(text)): 1 for text in BYTE_TRAINING}, BYTE_MERGES)


def byte_tokenize(text: str) -> list[str]:
    """Step 2's tokenizer: the text's bytes with the merges replayed."""
    return list(apply_merges(Utf8ByteUnit().split(text), byte_drill_merges()))


def byte_drill_table() -> dict[str, dict]:
    """Per sample: characters, UTF-8 bytes, whitespace words, toy tokens, tokens per word, and the round trip."""
    unit = Utf8ByteUnit()
    table = {}
    for label, text in BYTE_SAMPLES.items():
        tokens = byte_tokenize(text)
        words = len(text.split())
        table[label] = {"chars": len(text), "bytes": len(text.encode("utf-8")), "words": words,
                        "tokens": len(tokens), "tokens_per_word": len(tokens) / words,
                        "round_trip": unit.join(tokens) == text}
    return table


def byte_drill_heldout() -> dict:
    """``byte_drill_table``'s row for English the toy BPE never saw: the first EVAL_LINES validation lines (its
    prose sample is one of its training phrases)."""
    unit, lines = Utf8ByteUnit(), eval_plain_lines()
    tokens = [byte_tokenize(line) for line in lines]
    words, n_tokens = sum(len(line.split()) for line in lines), sum(map(len, tokens))
    return {"chars": sum(map(len, lines)), "bytes": sum(len(line.encode("utf-8")) for line in lines),
            "words": words, "tokens": n_tokens, "tokens_per_word": n_tokens / words,
            "round_trip": all(unit.join(t) == line for t, line in zip(tokens, lines))}


# --------------------------------------------------------------------------- small tokenizers on the corpus

@functools.lru_cache(maxsize=1)
def corpus():
    return load_corpus()


@functools.lru_cache(maxsize=None)
def small_cipher_tokenizer(mode: str) -> BPETokenizer:
    """A source tokenizer like get_tokenizers' ("bits" or "bytes" mode) but trained on few lines."""
    settings = {"bits": dict(unit="char", alphabet="01"), "bytes": dict(unit="byte8")}[mode]
    _, cipher = corpus().lines("train")
    return BPETokenizer.train(cipher[:SMALL_CIPHER_LINES], SRC_VOCAB, pretokenizer="cipher", **settings)


def eval_cipher_lines() -> list[str]:
    return corpus().lines("val")[1][:EVAL_LINES]


def eval_plain_lines() -> list[str]:
    return corpus().lines("val")[0][:EVAL_LINES]


@functools.lru_cache(maxsize=None)
def cipher_mode_stats(mode: str) -> dict:
    """Straddle rate and mean bits per token of a small source tokenizer on validation lines."""
    tok, lines = small_cipher_tokenizer(mode), eval_cipher_lines()
    n_tokens = sum(len(tok.encode(line)) for line in lines)
    return {"straddle": boundary_straddle_rate(tok, lines),
            "bits_per_token": sum(map(len, lines)) / n_tokens,
            "merges": len(tok.merges)}


@functools.lru_cache(maxsize=None)
def bytes_tokenizer_with_merges(n_merges: int) -> BPETokenizer:
    """A bytes-mode source tokenizer with exactly ``n_merges`` merges (0: whole bytes), on the small training set."""
    _, cipher = corpus().lines("train")
    fixed = 3 + 256  # <pad>, <bos>, <eos> and the 256 bit groups
    return BPETokenizer.train(cipher[:SMALL_CIPHER_LINES], fixed + n_merges, pretokenizer="cipher", unit="byte8")


def bits_per_token(tok: BPETokenizer, lines: list[str] | None = None) -> float:
    """Mean cipher bits per source token on validation lines."""
    lines = eval_cipher_lines() if lines is None else lines
    return sum(map(len, lines)) / sum(len(tok.encode(line)) for line in lines)


def bits_over_whole_bytes() -> float:
    """How many times shorter bits-mode BPE makes a cipher line than whole bytes (8 bits a token)."""
    return cipher_mode_stats("bits")["bits_per_token"] / BITS_PER_CHAR


def cipher_at_phase(word: str, phase: int) -> str:
    """The cipher bits of ``word`` starting at character position ``phase`` of a line (key byte phase)."""
    return encrypt(" " * phase + word)[phase * BITS_PER_CHAR:]


def reference_source_vocab(config: str = "c1", preset: str = "cpu") -> int | None:
    """The source vocabulary a preset asks for; None means no merges (whole bytes in "bytes" mode)."""
    return make_config(config, preset).src_vocab


@functools.lru_cache(maxsize=1)
def notes_bits_tokenizer() -> BPETokenizer:
    """The bits-mode source tokenizer ``results/notes/cpu-bits`` trained: its vocabulary, its training lines."""
    from cipherlab.base.config import config_from_dict
    from cipherlab.data.tokenizers import get_tokenizers

    config = config_from_dict(load_run(BITS)["c1"]["hyperparameters"])
    src, _ = get_tokenizers(select_lines(corpus(), config), config.source_mode, config.src_vocab, None)
    return src


def notes_bits_straddle() -> float:
    """Share of that tokenizer's tokens on the validation lines that cut a character boundary."""
    return boundary_straddle_rate(notes_bits_tokenizer(), eval_cipher_lines())


def mode_table(configs=("c1", "c2", "c3", "c4")) -> dict[str, dict]:
    """Per configuration, test bit accuracy and exact-line rate (per cent) in ``cpu`` (whole bytes)
    and ``notes/cpu-bits`` (bits-mode BPE)."""
    runs = {mode: load_run(run) for mode, run in (("bytes", BYTES), ("bits", BITS))}
    return {c: {f"{mode}_{key}": 100 * metric(runs[mode][c], name)
                for mode in runs for key, name in (("bit", "bit_accuracy"), ("exact", "sequence_accuracy"))}
            for c in configs}


@functools.lru_cache(maxsize=None)
def small_plain_tokenizer(pretokenizer: str = "plaintext") -> BPETokenizer:
    """A target tokenizer trained on few lines; pretokenizer="cipher" treats each whole line as one piece."""
    plain, _ = corpus().lines("train")
    return BPETokenizer.train(plain[:SMALL_PLAIN_LINES], SMALL_TGT_VOCAB, pretokenizer=pretokenizer)


def learned_tokens(tok: BPETokenizer) -> list[str]:
    """The token strings that merges built (not specials, not the base alphabet), in order."""
    return list(dict.fromkeys(left + right for left, right in tok.merges))


def spans_words(token: str) -> bool:
    """True when a token has non-space characters on both sides of a space ('of the', 'e th')."""
    return re.search(r"\S\s+\S", token) is not None


def cross_word_share(pretokenizer: str) -> float:
    """Share of a small target tokenizer's learned tokens that run across a word boundary."""
    tokens = learned_tokens(small_plain_tokenizer(pretokenizer))
    return sum(map(spans_words, tokens)) / len(tokens)


def longest_match(tok: BPETokenizer, piece: str) -> list[str]:
    """WordPiece-style inference, for contrast: greedy longest vocabulary prefix, left to right.

    Uses the BPE tokenizer's own vocabulary, so any difference from ``tok.tokenize`` comes from
    the segmentation rule alone. (Real WordPiece also marks word-internal pieces with '##' and
    builds its vocabulary differently.) A character outside the vocabulary is kept on its own.
    """
    vocabulary = set(tok.alphabet) | set(learned_tokens(tok))
    out, i = [], 0
    while i < len(piece):
        j = next((j for j in range(len(piece), i, -1) if piece[i:j] in vocabulary), i + 1)
        out.append(piece[i:j])
        i = j
    return out


@functools.lru_cache(maxsize=1)
def segmentation_disagreements() -> tuple[int, int, tuple]:
    """(pieces that differ, pieces, first few examples) between merge replay and longest match."""
    tok = small_plain_tokenizer()
    pieces = [p for line in eval_plain_lines() for p in split_plaintext(line)]
    differ = [(p, tuple(tok.tokenize(p)), tuple(longest_match(tok, p))) for p in pieces
              if tok.tokenize(p) != longest_match(tok, p)]
    return len(differ), len(pieces), tuple(differ[:8])


# --------------------------------------------------------------------------- the three tokenisations

OPENING_LINE = 0  # the validation line the chapter opens with
SHOWN_CHARS = 6  # how many of its characters the opening cell draws


@functools.lru_cache(maxsize=None)
def tokenizers(name: str) -> tuple[BPETokenizer, BPETokenizer]:
    """(source, target) tokenizers of ``TOKENIZATIONS[name]`` as ``train --preset assignment --tokens NAME``
    learns them from the training split (``fit_codec``), except that "notes" takes the chapter's small bits BPE
    (SMALL_CIPHER_LINES lines: the full one takes a minute) beside its full-size target BPE."""
    config = make_config("c1", "assignment", **TOKENIZATIONS[name])
    if name == "notes":
        plain, _ = corpus().lines("train")
        return small_cipher_tokenizer("bits"), BPETokenizer.train(plain, config.tgt_vocab, **TARGET_SETTINGS)
    codec = fit_codec(config, select_lines(corpus(), config))
    return codec.src, codec.tgt


def opening_line() -> tuple[str, str]:
    """(plaintext, cipher bits) of the validation line the chapter opens with."""
    plain, cipher = corpus().lines("val")
    return plain[OPENING_LINE], cipher[OPENING_LINE]


def cut(name: str, plain: str, cipher: str) -> tuple[list[str], list[str]]:
    """(source tokens as cipher bits, target tokens as text) of one line under ``TOKENIZATIONS[name]``; the
    aligned target is cut where the source is (``aligned_target_ids``), the others by their own tokenizer."""
    src, tgt = tokenizers(name)
    ids = src.encode(cipher)
    targets = aligned_target_ids(src, tgt, ids, plain) if src.unit == "byte8-phase" else tgt.encode(plain)
    return [UNITS[src.unit].join([src.token(i)]) for i in ids], [tgt.decode([i]) for i in targets]


def show_cut(tokens: list[str], chars: int = SHOWN_CHARS, bits: bool = True) -> str:
    """The tokens covering the first ``chars`` characters, ' | ' between tokens; for bit tokens a '·' marks
    each character boundary (every 8 bits) that falls inside a token."""
    width = BITS_PER_CHAR if bits else 1
    shown, start = [], 0
    for token in tokens:
        if start >= chars * width:
            shown.append("...")
            break
        shown.append("".join("·" * (bits and k > 0 and (start + k) % width == 0) + s for k, s in enumerate(token))
                     if bits else repr(token))
        start += len(token)
    return " | ".join(shown)


@functools.lru_cache(maxsize=1)
def aligned_texts() -> tuple[list[str], list[str], str]:
    """(plaintexts, ciphers, description) of the training chunks the aligned BPE learns its merges from."""
    config = make_config("c1", "assignment")
    return merge_texts(config, select_lines(corpus(), config))


# --------------------------------------------------------------------------- the benchmark

def benchmark() -> dict | None:
    """benchmarks/results/bpe.json as written by benchmarks/bench_bpe.py, or None when it is absent."""
    if not BENCHMARK_FILE.exists():
        return None
    return json.loads(BENCHMARK_FILE.read_text(encoding="utf-8"))


def bench_field(report: dict, *path: str):
    """report[path[0]][path[1]]..., or an error naming the missing field and what to update."""
    value = report
    for depth, key in enumerate(path):
        if not isinstance(value, dict) or key not in value:
            raise KeyError(f"{BENCHMARK_FILE}: no field {'.'.join(path[:depth + 1])}; the benchmark's format changed, "
                           "so update book/cipherbook/experiments/bpe.py and book/06_bpe.ipynb to match")
        value = value[key]
    return value


def benchmark_rows(report: dict) -> dict[str, dict]:
    """Per side: merges, fast CPU s, naive CPU s (full split: extrapolated), ratios, and the subset run."""
    rows = {}
    for side in bench_field(report, "sides"):
        def get(*path):
            return bench_field(report, "sides", side, *path)
        rows[side] = {"merges": get("merges"), "fast_s": get("fast_train", "cpu_s"),
                      "naive_s": get("naive", "full", "naive_estimated_cpu_s"),
                      "ratio": get("naive", "full", "speedup_estimated"),
                      "rust_s": get("hf_tokenizers").get("cpu_s"),
                      "subset_lines": get("naive", "subset_lines"),
                      "subset_fast_s": get("naive", "subset", "fast", "cpu_s"),
                      "subset_naive_s": get("naive", "subset", "naive", "cpu_s"),
                      "subset_ratio": get("naive", "subset", "speedup_measured"),
                      "identical": get("naive", "subset", "identical_merges")}
    return rows


def benchmark_summary() -> str:
    """One sentence of the benchmark's numbers for the cipher side, or a note that it has not been run."""
    report = benchmark()
    if report is None:
        return NOT_MEASURED
    bits = benchmark_rows(report)["source_bits"]
    return (f"on the {bench_field(report, 'data', 'train_lines'):,}-line training split the cipher side's "
            f"{bits['merges']:,} merges take the fast learner {bits['fast_s']:.1f} s of CPU and the naive one "
            f"about {bits['naive_s']:,.0f} s ({bits['ratio']:,.0f}×, extrapolated from a {bits['subset_lines']}-line "
            f"subset where it is {bits['subset_ratio']:,.0f}× slower and returns "
            f"{'the same' if bits['identical'] else 'DIFFERENT'} merges)")


# --------------------------------------------------------------------------- merges that still decrypt

MERGES_RUN = "merges"  # results/merges: C1 of the cpu preset with one tokenisation changed per run
ALIGNED_RUN = "aligned"  # results/aligned: the reference ablation's C1-C4 with the aligned BPE


def merges_runs() -> dict[str, dict]:
    """The records of ``results/merges`` by run name, in the order of their README."""
    from cipherlab.analysis.ablation.records import run_path
    from cipherlab.runner.record import read_record

    folder = run_path(MERGES_RUN)
    order = ("m-src512-chars", "m-chars-tgt1000", "m-phase2560-aligned-bits", "m-phase2560-chunks-chars",
             "m-phase2560-chunks", "m-phase3072-chunks", "m-phase3072-chunks-tokenphase")
    records = {p.stem: read_record(p) for p in folder.glob("m-*.json")}
    return {name: records[name] for name in order if name in records}


# Runs of results/merges made while the model added the key-phase vector of token *position* mod 8 to
# phase-tagged tokens (now: each token's first character's phase, src_phase); as results/merges/make_readme.py.
POSITION_PHASE = {"m-phase2560-aligned-bits", "m-phase2560-chunks", "m-phase3072-chunks", "m-phase2560-chunks-chars"}


def merges_summary(record: dict) -> dict:
    """What one run of ``results/merges`` changed and what it reached."""
    h, sets = record["hyperparameters"], record["sets"]
    phase_by = "-" if h["source_mode"] != "phase" else "position" if record["name"] in POSITION_PHASE else "token"
    return {"source": h["source_mode"] if h["src_vocab"] is None else f"{h['source_mode']} BPE {h['src_vocab']}",
            "learned on": "-" if h["src_vocab"] is None and h["tgt_vocab"] is None else h.get("merges_on", "lines"),
            "target": ("aligned" if h.get("target_tokens") == "aligned" else
                       "characters" if h["tgt_vocab"] is None else f"BPE {h['tgt_vocab']}"),
            "key phase by": phase_by,
            "random exact": (sets["random_letters"]["exact_lines"], sets["random_letters"]["lines"]),
            "Brown exact": (sets["test"]["exact_lines"], sets["test"]["lines"])}


def aligned_runs() -> dict[tuple[str, int], dict]:
    """``results/aligned``: {(config, seed): record}."""
    from cipherlab.analysis.ablation import load_learn_runs

    return load_learn_runs(ALIGNED_RUN)


def merges_exact(name: str, section: str = "random_letters") -> tuple[int, int]:
    """(exact lines, lines) of one run of ``results/merges`` on one decoded set."""
    sets = merges_runs()[name]["sets"][section]
    return sets["exact_lines"], sets["lines"]


def merges_paired(a: str, b: str, section: str = "random_letters") -> tuple[int, int, float]:
    """Two runs of ``results/merges`` on the same lines of one set: (lines only ``a`` decoded exactly, lines only
    ``b`` did, McNemar's exact p)."""
    from cipherlab.analysis.ablation import mcnemar

    runs = merges_runs()
    return mcnemar(runs[a]["sets"][section]["exact_by_line"], runs[b]["sets"][section]["exact_by_line"])


def brown_exact_by_merges_on() -> dict[str, list[tuple[int, int]]]:
    """(exact, lines) on the Brown test lines of the results/merges runs whose source has merges, by where the
    merges were learned ("lines" or "chunks")."""
    out: dict[str, list[tuple[int, int]]] = {}
    for record in merges_runs().values():
        s = merges_summary(record)
        if s["learned on"] != "-" and s["source"] != "bytes":
            out.setdefault(s["learned on"], []).append(s["Brown exact"])
    return out


@functools.cache
def dropout_random() -> dict:
    """C1 seed 0, cpu preset, aligned BPE, on the same 200 random letter strings: exact without BPE-dropout
    (results/merges) and with it (results/aligned), the strings only one of the two decoded, McNemar's exact p,
    and the same run with no merges (results/reference)."""
    from cipherlab.analysis.ablation import load_learn_runs, mcnemar

    off_sets = merges_runs()["m-phase3072-chunks-tokenphase"]["sets"]["random_letters"]
    on_sets = aligned_runs()[("c1", 0)]["sets"]["random_letters"]
    assert off_sets["lines"] == on_sets["lines"]
    only_on, only_off, p = mcnemar(on_sets["exact_by_line"], off_sets["exact_by_line"])
    reference = load_learn_runs("reference")[("c1", 0)]["sets"]["random_letters"]  # the same run with no merges
    assert reference["lines"] == on_sets["lines"]
    return {"off": off_sets["exact_lines"], "on": on_sets["exact_lines"], "lines": on_sets["lines"],
            "only_on": only_on, "only_off": only_off, "p": p, "no_merges": reference["exact_lines"]}


def aligned_brown_cost() -> dict[tuple[str, int], dict]:
    """results/aligned against results/reference (no merges), the same configuration and seed, on the Brown
    free lines: {(config, seed): {"only_aligned", "only_reference", "p" (McNemar's exact), "lines"}}."""
    from cipherlab.analysis.ablation import load_learn_runs, mcnemar, section

    reference = load_learn_runs("reference")
    out = {}
    for key, run in aligned_runs().items():
        a, b = section(run, "test_free"), section(reference[key], "test_free")
        only_a, only_b, p = mcnemar(a["exact_by_line"], b["exact_by_line"])
        out[key] = {"only_aligned": only_a, "only_reference": only_b, "p": p, "lines": a["lines"]}
    return out
