"""Diagnose any cipherlab checkpoint: ``python -m cipherlab doctor --checkpoint CK``.

A student's model can reach a high score on the test split for the wrong reason: Brown is a
corpus of English, and a model that learned English well can guess much of a line from a few
characters. The doctor asks four questions of a trained model, each answered by a measurement:

(a) *Did it learn the cipher, the corpus, or neither?* Random strings over the characters it was
    trained on, encrypted with the key, decode as well as English for a model that learned the
    cipher (the cipher works character by character), and badly for one that leans on the corpus.
    English from outside Brown (``data/stdlib``, Python's docstrings) sits between the two. Its own
    test split is the comparison, and the first test: a model that gets fewer than
    ``LEARNED_MIN_CHAR_ACCURACY`` of its own test characters right has learned neither (writing
    spaces alone gets about a sixth). The thresholds are the named constants below, and the
    report states them.
(b) *Where are its errors?* By key phase (position mod 8), by position inside a training chunk,
    by character class and by line length, on the test lines.
(c) *Does it know when to stop?* Free greedy decoding must guess where a chunk ends; length-aware
    greedy decoding (:class:`cipherlab.pipeline.decode.LengthConstraint`) stops where the cipher's length says.
(d) *Does it read the aligned source position?* The share of the last decoder layer's
    cross-attention weight on the source character at the same position
    (:func:`cipherlab.analysis.attention_maps.band_mass` on an :class:`~cipherlab.analysis.attention_maps.AttentionView`).

Every number in the report is computed from the checkpoint and the data; nothing is typed in.

The command, ``python -m cipherlab doctor``, is :mod:`cipherlab.cli.doctor`: its flags, its progress bar
and its ``--json`` file. What it runs is :func:`diagnose_checkpoint`, and what it prints is :func:`report`
of the result, so ``print(report(diagnose_checkpoint(CK)))`` in a notebook prints the same.
"""

from __future__ import annotations

import random
import string
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import torch

from cipherlab.analysis.attention_maps import attention_view, band_mass, example_chunks
from cipherlab.runner.trained import check_data, model_from_payload, read_payload
from cipherlab.data.cipher import PERIOD, encrypt
from cipherlab.pipeline.codec import OWN_MODEL, ModelBuilder, select_lines
from cipherlab.data.corpus import REPO_DATA_DIR, load_corpus, load_pairs
from cipherlab.pipeline.decode import decrypt_lines
from cipherlab.base.device import pick_device
from cipherlab.pipeline.metrics import bit_accuracy, sequence_accuracy

__all__ = [
    "CIPHER_MIN_KEPT_SHARE",
    "CLASSES",
    "LEARNED_MIN_CHAR_ACCURACY",
    "LENGTH_BINS",
    "PARTLY_MIN_KEPT_SHARE",
    "char_class",
    "diagnose",
    "diagnose_checkpoint",
    "error_breakdown",
    "probe",
    "random_strings",
    "report",
    "training_alphabet",
    "verdict",
]

CLASSES = ("lower", "upper", "space", "digit", "punctuation", "other")
LENGTH_BINS = ((1, 50), (51, 100), (101, 200), (201, 400), (401, None))  # line lengths in characters
DEFAULT_LINES = 200
DEFAULT_RANDOM = 30
DEFAULT_SEED = 2026
DEFAULT_ATTENTION_CHUNKS = 4
OUTSIDE_DIR = REPO_DATA_DIR / "stdlib"

# The verdict of (a). First: did it learn anything? Below this share of its own test lines'
# characters it has learned neither the cipher nor the corpus (always writing a space, the most
# common character of English, gets about 17 %: what an untrained model does).
LEARNED_MIN_CHAR_ACCURACY = 0.5
# Then: of its test accuracy above chance, the share random strings keep. At least this much: it
# learned the cipher (random strings decode about as well as English).
CIPHER_MIN_KEPT_SHARE = 0.95
# Below it but at least this much: partly the cipher, leaning on the corpus; below this: the corpus.
PARTLY_MIN_KEPT_SHARE = 0.5


def char_class(ch: str) -> str:
    """lower, upper, space, digit, punctuation (ASCII ``string.punctuation``) or other."""
    if "a" <= ch <= "z":
        return "lower"
    if "A" <= ch <= "Z":
        return "upper"
    if ch == " ":
        return "space"
    if "0" <= ch <= "9":
        return "digit"
    return "punctuation" if ch in string.punctuation else "other"


def training_alphabet(codec, train_plain: Sequence[str] | None = None) -> list[str]:
    """The printable characters the model was trained to write, sorted.

    C1-C4: the base symbols of the model's own target vocabulary (learned from the training
    text). C5 (bytes, no vocabulary): the characters of ``train_plain``, the training lines.
    """
    symbols = getattr(getattr(codec, "tgt", None), "alphabet", None)
    if symbols is None or any(len(s) != 1 for s in symbols):
        if train_plain is None:
            raise ValueError("a byte-level model has no target vocabulary: pass its training lines")
        symbols = set("".join(train_plain))
    return sorted(s for s in symbols if s.isprintable() and ord(s) < 256)


def random_strings(alphabet: Sequence[str], n: int = DEFAULT_RANDOM, seed: int = DEFAULT_SEED,
                   lengths: tuple[int, int] = (40, 120)) -> list[str]:
    """``n`` strings of ``lengths`` characters drawn uniformly from ``alphabet`` (seeded).

    No string starts or ends with a space (training lines never do), so an error there is the model's.
    """
    rng = random.Random(seed)
    inner = [c for c in alphabet if c != " "] or list(alphabet)
    out = []
    for _ in range(n):
        chars = [rng.choice(alphabet) for _ in range(rng.randint(*lengths))]
        chars[0], chars[-1] = rng.choice(inner), rng.choice(inner)
        out.append("".join(chars))
    return out


def _position_errors(pred: str, ref: str) -> list[bool]:
    """For each reference position i: is the predicted character at i wrong (or missing)?"""
    return [i >= len(pred) or pred[i] != ch for i, ch in enumerate(ref)]


def probe(predictions: Sequence[str], plain: Sequence[str], cipher: Sequence[str]) -> dict:
    """Character accuracy (position by position), exact lines and bit accuracy of predictions.

    Bit and sequence accuracy are the book's (:mod:`cipherlab.pipeline.metrics`, as ``score`` reports them);
    the slower text metrics of ``score`` (Levenshtein, BLEU, ROUGE) are left to that command.
    """
    chars = sum(len(r) for r in plain)
    wrong = sum(sum(_position_errors(p, r)) for p, r in zip(predictions, plain))
    lengths = [len(p) - len(r) for p, r in zip(predictions, plain)]
    return {
        "lines": len(plain),
        "chars": chars,
        "char_accuracy": 1 - wrong / max(chars, 1),
        "exact_lines": sum(p == r for p, r in zip(predictions, plain)),
        "sequence_accuracy": sequence_accuracy(predictions, plain),
        "bit_accuracy": bit_accuracy(predictions, cipher),
        "wrong_length": sum(d != 0 for d in lengths),
        "too_short": sum(d < 0 for d in lengths),
        "too_long": sum(d > 0 for d in lengths),
    }


def _rates(errors: Counter, totals: Counter, keys) -> dict:
    return {str(k): {"chars": totals[k], "errors": errors[k],
                     "error_rate": errors[k] / totals[k] if totals[k] else None} for k in keys}


def _length_bin(n: int) -> str:
    for lo, hi in LENGTH_BINS:
        if n >= lo and (hi is None or n <= hi):
            return f"{lo}-{hi}" if hi is not None else f"{lo}+"
    return "0"  # an empty line


def error_breakdown(predictions: Sequence[str], plain: Sequence[str], chunk_chars: int) -> dict:
    """Character error rates by key phase, position in the chunk, character class, and line length.

    Position i of a prediction is compared with position i of the reference (a missing character
    is an error), so this is meant for length-aware predictions, which have the right length.
    """
    tot = {k: Counter() for k in ("phase", "chunk", "class", "length")}
    err = {k: Counter() for k in tot}
    lines, exact = Counter(), Counter()
    for pred, ref in zip(predictions, plain):
        b = _length_bin(len(ref))
        lines[b] += 1
        exact[b] += pred == ref
        for i, (ch, wrong) in enumerate(zip(ref, _position_errors(pred, ref))):
            for kind, key in (("phase", i % PERIOD), ("chunk", i % chunk_chars), ("class", char_class(ch)),
                              ("length", b)):
                tot[kind][key] += 1
                err[kind][key] += wrong
    bins = [_length_bin(lo) for lo, _ in LENGTH_BINS]
    by_length = _rates(err["length"], tot["length"], bins)
    for b in bins:
        by_length[b].update(lines=lines[b], exact_lines=exact[b])
    return {
        "key_phase": _rates(err["phase"], tot["phase"], range(PERIOD)),
        "chunk_position": _rates(err["chunk"], tot["chunk"], range(chunk_chars)),
        "char_class": _rates(err["class"], tot["class"], CLASSES),
        "line_length": by_length,
    }


def _by_class(predictions: Sequence[str], plain: Sequence[str]) -> dict:
    """Character accuracy of each character class (position by position)."""
    tot, right = Counter(), Counter()
    for pred, ref in zip(predictions, plain):
        for ch, wrong in zip(ref, _position_errors(pred, ref)):
            tot[char_class(ch)] += 1
            right[char_class(ch)] += not wrong
    return {c: {"chars": tot[c], "char_accuracy": right[c] / tot[c]} for c in CLASSES if tot[c]}


def cross_attention_diagonality(model, codec, config, corpus, n_chunks: int = DEFAULT_ATTENTION_CHUNKS) -> dict:
    """Share of cross-attention weight on the aligned source character, per layer and head.

    Teacher-forced on the first ``n_chunks`` full-length test chunks, mapped to characters by
    :func:`cipherlab.analysis.attention_maps.attention_view`. The last decoder layer is the headline.
    """
    chunks = example_chunks(config, n_chunks, corpus=corpus)
    with torch.no_grad():
        view = attention_view(model, codec, chunks)
    layers = {}
    for (kind, layer), weights in sorted(view.maps.items()):
        if kind != "cross":
            continue
        diag, near = band_mass(weights).mean(0), band_mass(weights, 1).mean(0)  # (H,) each
        layers[layer] = {"diagonal_per_head": diag.tolist(), "within_one_per_head": near.tolist(),
                         "diagonal_mean": diag.mean().item(), "best_head": int(diag.argmax()),
                         "diagonal_best": diag.max().item(), "within_one_best": near.max().item()}
    last = max(layers)
    module = ("the local decoder's attention to the source bytes" if codec.kind == "blt"
              else "decoder cross-attention")
    return {"module": module, "chunks": len(chunks), "chunk_chars": len(chunks[0].plain), "uniform": 1 / len(chunks[0].plain),
            "last_layer": last, "layers": {str(k): v for k, v in layers.items()}, **layers[last]}


def verdict(random: dict, test: dict, chance: float) -> tuple[float, str, str]:
    """(the share of the test accuracy above chance that random strings keep, what the model learned:
    "cipher", "corpus" or "neither", the verdict in words), from the :func:`probe` of random strings
    and of the test lines, by the thresholds LEARNED_MIN_CHAR_ACCURACY, CIPHER_MIN_KEPT_SHARE and
    PARTLY_MIN_KEPT_SHARE."""
    above = test["char_accuracy"] - chance
    kept = (random["char_accuracy"] - chance) / above if above > 0 else 0.0
    if test["char_accuracy"] < LEARNED_MIN_CHAR_ACCURACY:
        return kept, "neither", (f"it learned neither the cipher nor the corpus: under {LEARNED_MIN_CHAR_ACCURACY:.0%} "
                                 "of its own test lines' characters come out right")
    if kept >= CIPHER_MIN_KEPT_SHARE:
        return kept, "cipher", "it learned the cipher: random strings decode about as well as its test lines"
    if kept >= PARTLY_MIN_KEPT_SHARE:
        return kept, "corpus", ("partly the cipher: it decodes random strings, but worse than English: it leans "
                                "on the corpus")
    return kept, "corpus", "it leans on the corpus: random strings, which no model of English can predict, mostly fail"


def diagnose(model, codec, config, corpus, outside: tuple[list[str], list[str]], *, lines: int = DEFAULT_LINES,
             n_random: int = DEFAULT_RANDOM, seed: int = DEFAULT_SEED,
             attention_chunks: int = DEFAULT_ATTENTION_CHUNKS, progress=None) -> dict:
    """Every measurement of the doctor, as a dict (see the module docstring). ``progress``, if given, is
    called with the name of each of the five steps before it runs (the command line's bar)."""
    device = next(model.parameters()).device
    started = time.perf_counter()
    steps = iter(("random strings", "outside English", "test lines", "test lines, free", "cross-attention"))

    def decode(cipher: Sequence[str], length_aware: bool) -> list[str]:
        if progress is not None:
            progress(next(steps))
        return decrypt_lines(model, codec, cipher, chunk_chars=config.chunk_chars, device=device,
                             token_budget=config.token_budget, max_batch_size=config.max_batch_size,
                             length_aware=length_aware)

    train_plain, _ = corpus.lines("train")
    alphabet = training_alphabet(codec, train_plain)
    rand_plain = random_strings(alphabet, n_random, seed)
    rand_cipher = [encrypt(s) for s in rand_plain]
    out_plain, out_cipher = outside[0][:lines], outside[1][:lines]
    test_plain, test_cipher = (x[:lines] for x in corpus.lines("test"))

    rand_pred = decode(rand_cipher, True)
    out_pred = decode(out_cipher, True)
    test_pred = decode(test_cipher, True)
    test_free = decode(test_cipher, False)

    if progress is not None:
        progress(next(steps))
    attention = cross_attention_diagonality(model, codec, config, corpus, attention_chunks)
    random_probe = probe(rand_pred, rand_plain, rand_cipher) | {"by_class": _by_class(rand_pred, rand_plain)}
    test_probe = probe(test_pred, test_plain, test_cipher)
    chance = 1 / len(alphabet)
    kept, learned, said = verdict(random_probe, test_probe, chance)
    result = {
        "alphabet": "".join(alphabet),
        "cipher_or_corpus": {
            "decoding": "length-aware greedy",
            "random_strings": random_probe | {"seed": seed, "examples": [
                {"reference": r, "prediction": p} for r, p in list(zip(rand_plain, rand_pred))[:2]]},
            "outside_english": probe(out_pred, out_plain, out_cipher),
            "test": test_probe,
            "chance_char_accuracy": chance,
            "random_kept_share": kept,
            "learned": learned,
            "verdict": said,
            "thresholds": {"learned_min_char_accuracy": LEARNED_MIN_CHAR_ACCURACY,
                           "cipher_min_kept_share": CIPHER_MIN_KEPT_SHARE,
                           "partly_min_kept_share": PARTLY_MIN_KEPT_SHARE},
        },
        "errors": {"decoding": "length-aware greedy", "lines": len(test_plain),
                   **error_breakdown(test_pred, test_plain, config.chunk_chars)},
        "stopping": {"free greedy": probe(test_free, test_plain, test_cipher), "length-aware greedy": test_probe},
        "cross_attention": attention,
    }
    result["seconds"] = time.perf_counter() - started
    return result


# --------------------------------------------------------------------------- the report


def _pct(x: float | None, digits: int = 2) -> str:
    return "  -  " if x is None else f"{100 * x:.{digits}f}"


def _groups(rates: dict, width: int = 1) -> list[tuple[str, dict]]:
    """Merge consecutive integer keys into bins of ``width`` (the chunk positions)."""
    if width == 1:
        return list(rates.items())
    keys = sorted(rates, key=int)
    out = []
    for start in range(0, len(keys), width):
        part = keys[start:start + width]
        chars = sum(rates[k]["chars"] for k in part)
        errors = sum(rates[k]["errors"] for k in part)
        out.append((f"{part[0]}-{part[-1]}", {"chars": chars, "errors": errors,
                                               "error_rate": errors / chars if chars else None}))
    return out


def _row(rates: list[tuple[str, dict]], sep: str = ": ") -> str:
    return "  ".join(f"{k}{sep}{_pct(v['error_rate'])}" for k, v in rates if v["chars"])


def report(result: dict) -> str:
    """The doctor's findings on one screen."""
    about = result["checkpoint"]
    a, e, s, x = result["cipher_or_corpus"], result["errors"], result["stopping"], result["cross_attention"]
    chunk = about["chunk_chars"]
    rows = [
        f"cipherlab doctor: {about['path']}",
        f"{about['config'].upper()} ({about['change']}), preset {about['preset']}, source {about['source']}, "
        f"{about['params']:,} parameters, chunks of {chunk} characters",
        "",
        "(a) cipher or corpus?  length-aware greedy decoding",
        f"    {'':34}{'lines':>6}{'char acc %':>12}{'exact':>10}{'bit acc %':>11}",
    ]
    probes = [(f"random strings ({len(result['alphabet'])}-char alphabet)", a["random_strings"]),
              (f"English outside Brown ({about['outside']})", a["outside_english"]),
              ("its own test split", a["test"])]
    for name, p in probes:
        rows.append(f"    {name:34}{p['lines']:>6}{_pct(p['char_accuracy']):>12}"
                    f"{str(p['exact_lines']) + '/' + str(p['lines']):>10}{_pct(p['bit_accuracy'], 3):>11}")
    by_class = ", ".join(f"{c} {_pct(v['char_accuracy'], 1)}" for c, v in a["random_strings"]["by_class"].items())
    rows += [
        f"    random strings, char acc % by class: {by_class}",
        f"    verdict: {a['verdict']}",
        f"      (random strings keep {100 * a['random_kept_share']:.0f} % of the test lines' character accuracy "
        f"above chance, {_pct(a['chance_char_accuracy'], 1)} %)",
        f"      thresholds: neither if test char acc < {LEARNED_MIN_CHAR_ACCURACY:.0%}; else the cipher if random "
        f"strings keep >= {CIPHER_MIN_KEPT_SHARE:.0%}, partly the cipher if >= {PARTLY_MIN_KEPT_SHARE:.0%}, "
        "the corpus below",
        "",
        f"(b) character error rate % on the {e['lines']} test lines (length-aware)",
        f"    key phase (i mod {PERIOD})     {_row(list(e['key_phase'].items()))}",
        f"    chunk position (of {chunk})  {_row(_groups(e['chunk_position'], max(chunk // 8, 1)))}",
        f"    character class       {_row(list(e['char_class'].items()), ' ')}",
        "    line length [exact]   " + "  ".join(
            f"{k}: {_pct(v['error_rate'])} [{v['exact_lines']}/{v['lines']}]"
            for k, v in e["line_length"].items() if v["lines"]),
        "",
        "(c) stopping on the test lines",
        f"    {'':22}{'exact':>10}{'bit acc %':>11}{'wrong length (short/long)':>28}",
    ]
    for name, p in s.items():
        rows.append(f"    {name:22}{str(p['exact_lines']) + '/' + str(p['lines']):>10}{_pct(p['bit_accuracy'], 3):>11}"
                    f"{p['wrong_length']:>17} ({p['too_short']}/{p['too_long']})")
    rows += [
        "",
        f"(d) {x['module']}, layer {x['last_layer']} (the last), teacher-forced on {x['chunks']} test chunks of "
        f"{x['chunk_chars']} characters",
        f"    weight on the aligned source character: mean of heads {x['diagonal_mean']:.2f}, best head "
        f"{x['best_head']} {x['diagonal_best']:.2f}, within one character {x['within_one_best']:.2f} "
        f"(uniform attention: {x['uniform']:.2f})",
        "    per head: " + " ".join(f"{v:.2f}" for v in x["diagonal_per_head"]),
    ]
    if about["source"] == "bits":
        rows.append("    (a BPE token over cipher bits can span characters; its weight is shared among them, "
                    "so even perfect alignment scores below 1)")
    rows += ["", f"{result['seconds']:.0f} s; every number above is computed from the checkpoint and the data."]
    return "\n".join(rows)


# --------------------------------------------------------------------------- a checkpoint file


def diagnose_checkpoint(checkpoint: str | Path, *, data_dir: str | Path | None = None,
                        outside: str | Path | None = None, device: str | None = None, lines: int = DEFAULT_LINES,
                        n_random: int = DEFAULT_RANDOM, seed: int = DEFAULT_SEED,
                        attention_chunks: int = DEFAULT_ATTENTION_CHUNKS, progress=None,
                        builder: ModelBuilder = OWN_MODEL) -> dict:
    """:func:`diagnose` a checkpoint file, with what it is under ``"checkpoint"``: the doctor command.

    ``print(report(diagnose_checkpoint(CK)))`` prints what ``python -m cipherlab doctor --checkpoint CK``
    prints. Raises CheckpointError, naming the file,
    for a checkpoint trained on other data than ``data_dir``'s (its test split would not be held out).
    ``builder``: what rebuilds the model, as :func:`cipherlab.runner.trained.load_trained`'s.
    """
    started = time.perf_counter()
    payload = read_payload(checkpoint)  # what load_trained reads; the data digest is needed too
    model, codec, config = model_from_payload(payload, pick_device(device), checkpoint, builder=builder)
    corpus = select_lines(load_corpus(data_dir), config)
    check_data(payload, corpus, checkpoint, "its test split would not be held out; pass the --data-dir it was trained with")
    outside_dir = Path(outside) if outside else OUTSIDE_DIR
    result = diagnose(model, codec, config, corpus, load_pairs(outside_dir), lines=lines, n_random=n_random,
                      seed=seed, attention_chunks=attention_chunks, progress=progress)
    change = [f"{k}={v}" for k, v in config.components().items()
              if v != {"pos_encoding": "sinusoidal", "attn_type": "mha", "norm": "layernorm",
                       "tokenization": "bpe"}[k]]
    result["checkpoint"] = {
        "path": str(checkpoint), "config": config.name, "preset": config.preset,
        "change": ", ".join(change) or "baseline",
        "source": "bytes" if codec.kind == "blt" else config.source_mode,
        "params": sum(p.numel() for p in model.parameters()), "chunk_chars": config.chunk_chars,
        "data": str(corpus.data_dir), "outside": outside_dir.name if not outside else str(outside_dir),
        "device": str(next(model.parameters()).device),
    }
    result["seconds"] = time.perf_counter() - started
    return result
