"""The command ``python -m cipherlab score --pred PRED.txt``.

The metrics are :mod:`cipherlab.analysis.score`'s; here are the flags, the references the command reads
(``--plain``/``--cipher`` files, checked line by line, or the data folder's test split), the notes it
prints on stderr about files that look like something else, and its report.
"""

from __future__ import annotations

import json
import sys
import unicodedata
from collections.abc import Sequence

from cipherlab.analysis.score import (CONTROL_WARNING, DEFAULT_CHUNKS, DEFAULT_FIRST, control_share, read_text_lines,
                                      score_predictions)
from cipherlab.runner.errors import outside_results, writable_file
from cipherlab.base.files import write_atomic
from cipherlab.data.cipher import KEY, DatasetError, check_bits, decrypt, encrypt

__all__ = ["register_cli"]


def _warn_if_noise(lines: Sequence[str], path, what: str, looks: str) -> None:
    """A note on stderr, one line naming ``path``, when more than :data:`CONTROL_WARNING` of the characters
    of ``lines`` are control characters: they cannot be text, and the numbers would compare text with noise."""
    share = control_share(lines)
    if share > CONTROL_WARNING:
        print(f"cipherlab: note: {path}: {100 * share:.0f} % of the characters {what} are control characters, "
              f"which text has next to none of; {looks}", file=sys.stderr)


def _nfc(lines: Sequence[str], path) -> list[str]:
    """``lines`` in Unicode's composed form (NFC), with one note on stderr naming ``path`` and how many lines that
    changed: an editor or a Mac may write an accent as a letter and a combining mark (NFD), which looks the same
    but compares unequal, and the cipher's references are composed (Latin-1)."""
    composed = [unicodedata.normalize("NFC", line) for line in lines]
    changed = sum(a != b for a, b in zip(lines, composed))
    if changed:
        print(f"cipherlab: note: {path}: {changed} of {len(lines)} lines write accents as a letter and a combining "
              "mark (Unicode NFD), which compares unequal to the references' composed letters; they were scored "
              "composed (NFC)", file=sys.stderr)
    return composed


def _encodable(lines: Sequence[str], path) -> None:
    """Refuse, naming the file and line, a reference line the cipher cannot encrypt (a code above 255)."""
    for n, line in enumerate(lines, start=1):
        if not line.isascii() and max(map(ord, line)) >= 256:
            i, ch = next((i, ch) for i, ch in enumerate(line) if ord(ch) >= 256)
            raise DatasetError(f"{path}, line {n}: character {ch!r} (code {ord(ch)}) at position {i} does not "
                               "fit in one byte, and the cipher covers codes 0-255 only (Latin-1); a reference line "
                               "must be text the cipher can encrypt: replace or remove that character")


def _references(args) -> tuple[list[str], list[str], str]:
    """(plaintext lines, cipher lines, where they came from)."""
    if args.plain or args.cipher:
        plain = read_text_lines(args.plain, "plaintext file") if args.plain else None
        if plain is not None:
            _encodable(plain, args.plain)
            _warn_if_noise(plain, args.plain, "of its lines",
                           "is it the plaintext the predictions are for, or text decrypted with another key?")
        cipher = read_text_lines(args.cipher, "cipher file") if args.cipher else None
        if cipher is not None:
            for n, bits in enumerate(cipher, start=1):
                check_bits(bits, path=str(args.cipher), line=n)
        if plain is None:
            plain = [decrypt(bits) for bits in cipher]
            _warn_if_noise(plain, args.cipher, "it decrypts to",
                           f"it looks encrypted with another key than cipherlab's ({KEY.decode()}), or it is not "
                           "the cipher of the lines predicted")
        if cipher is None:
            cipher = [encrypt(line) for line in plain]
        if len(plain) != len(cipher):
            raise DatasetError(f"{args.plain} has {len(plain)} lines but {args.cipher} has {len(cipher)}")
        for n, (p, c) in enumerate(zip(plain, cipher), start=1):
            if encrypt(p) != c:
                raise DatasetError(f"{args.cipher}, line {n}: not the encryption of line {n} of {args.plain}")
        return plain, cipher, ", ".join(str(x) for x in (args.plain, args.cipher) if x)
    from cipherlab.data.corpus import load_corpus

    corpus = load_corpus(args.data_dir)
    where = f"the test split of {corpus.data_dir}"
    if args.preset:
        from cipherlab.base.config import make_config
        from cipherlab.pipeline.codec import select_lines

        corpus = select_lines(corpus, make_config("c1", args.preset))
        where += f" (the {args.preset} preset's test lines)"
    plain, cipher = corpus.lines("test")
    return plain, cipher, where


def _report(result: dict, pred: str, where: str) -> str:
    whole = result["whole_lines"]
    rows = [
        f"{pred} against {where}: {whole['lines']} lines",
        "",
        "whole lines (the book's unit)",
        f"  bit accuracy      {100 * whole['bit_accuracy']:8.3f} %",
        f"  exact lines       {100 * whole['sequence_accuracy']:8.2f} %",
        f"  Levenshtein       {whole['levenshtein']:8.2f} edits per line",
        f"  CER               {100 * whole['char_error_rate']:8.3f} %",
        f"  chrF              {whole['chrf']:8.2f}",
        f"  BLEU              {whole['bleu']:8.2f}",
        f"  ROUGE-L F1        {whole['rougeL']:8.4f}",
        "",
        "the same predictions in other units people report",
    ]
    for n, r in result["first_chars"].items():
        rows.append(f"  first {n} characters: bit accuracy {100 * r['bit_accuracy']:.3f} %, exact {100 * r['exact']:.2f} %")
    for k, r in result["chunks"].items():
        only = r["exact_full_chunks_only"]
        dropped = f"; {100 * only:.2f} % of the {r['full_chunks']} full ones" if only is not None else ""
        rows.append(f"  chunks of {k} characters: {100 * r['exact']:.2f} % of {r['chunks']} exact{dropped}")
    rows += ["", "Compare a figure only with one in the same unit: whole-line exact accuracy is the "
             "strictest, because one wrong character anywhere in a long line counts the whole line."]
    return "\n".join(rows)


def _check_sizes(flag: str, values: Sequence[int] | None, what: str, default: str) -> None:
    """``--first``/``--chunk`` values are whole numbers of characters, 1 or more."""
    for value in values or ():
        if value < 1:
            raise ValueError(f"{flag} {value}: {what}, 1 or more (e.g. {flag} 32); leave {flag} out for {default}")


def _cmd_score(args) -> int:
    _check_sizes("--first", args.first, "N is how many characters each line is cut to",
                 f"the default, {DEFAULT_FIRST[0]}")
    _check_sizes("--chunk", args.chunk, "K is how many characters a chunk holds",
                 f"the defaults, {' and '.join(map(str, DEFAULT_CHUNKS))}")
    if args.json:
        writable_file(outside_results(args.json, "--json"), "--json")  # before the work
    predictions = read_text_lines(args.pred, "prediction file")
    _warn_if_noise(predictions, args.pred, "predicted",
                   "were they decrypted with another key, or is it not the file of predictions?")
    predictions = _nfc(predictions, args.pred)
    plain, cipher, where = _references(args)
    if len(predictions) != len(plain):
        raise DatasetError(
            f"{args.pred} has {len(predictions)} lines but {where} has {len(plain)}: write one predicted "
            "line per reference line, in the same order (an empty line for an empty prediction)"
        )
    result = score_predictions(predictions, plain, cipher, first=args.first or DEFAULT_FIRST,
                               chunks=args.chunk or DEFAULT_CHUNKS)
    result["references"] = where
    result["predictions"] = str(args.pred)
    print(_report(result, str(args.pred), where))
    if args.json:
        write_atomic(args.json, json.dumps(result, indent=2) + "\n")  # a reader never sees half of it
        print(f"\nwrote {args.json}")
    return 0


def register_cli(subparsers) -> None:
    """Add ``python -m cipherlab score``."""
    p = subparsers.add_parser(
        "score",
        help="score a file of predicted lines with the book's metrics, in several units",
        description="Score predicted plaintext lines (one per line, in order) against reference lines: "
        "the book's whole-line metrics (bit accuracy, exact lines, Levenshtein, CER, chrF, BLEU, "
        "ROUGE), then the first N characters of each line and chunks of K characters, the units "
        "other reports use. References: --plain and/or --cipher, or the test split of --data-dir.",
    )
    p.add_argument("--pred", required=True, metavar="PRED.txt", help="predicted lines, UTF-8, one per line")
    p.add_argument("--plain", metavar="PLAIN.txt", help="reference plaintext lines")
    p.add_argument("--cipher", metavar="CIPHER.txt", help="reference cipher lines (bits)")
    p.add_argument("--data-dir", help="data folder whose test split is the reference (default: the repository's)")
    p.add_argument("--preset", help="take the test lines that preset's runs are scored on (e.g. cpu)")
    p.add_argument("--first", type=int, action="append", metavar="N",
                   help=f"also score the first N characters of each line (repeatable; default {DEFAULT_FIRST[0]})")
    p.add_argument("--chunk", type=int, action="append", metavar="K",
                   help="also score chunks of K characters (repeatable; default 32 and 128)")
    p.add_argument("--json", metavar="FILE", help="also write every number to FILE")
    p.set_defaults(func=_cmd_score)
