"""Score anyone's predictions: ``python -m cipherlab score --pred PRED.txt`` (chapter 9).

Every student writes their own model; this module lets them put its numbers next to the book's
and next to the public ones *in the same units*. Published figures for this assignment come in
many units — whole lines, the first 256 characters, chunks of 32 or 128 characters, short chunks
dropped — and the unit changes the number a lot: a per-character error rate of 0.2 % leaves
about 94 % of 32-character chunks exact but only about a third of 550-character lines. So the
report gives the book's whole-line metrics and the same predictions cut the other ways.

Input: one predicted plaintext line per reference line, in order (UTF-8 text; a missing
trailing newline, CRLF line ends and a leading byte-order mark, which Windows Notepad writes and
which is skipped with a note, are fine). References: ``--plain`` and/or ``--cipher`` files, or by default the
test split of the data folder in use (``--preset`` picks the same test lines as that preset's
reference results). A file whose characters are largely control characters (a cipher of another key,
predictions decrypted with one, the wrong file) gets a note naming it before the numbers.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from cipherlab.cipher import KEY, DatasetError, check_bits, decrypt, encrypt
from cipherlab.errors import outside_results, require_file, strip_bom, writable_file, write_text_atomic
from cipherlab.metrics import bit_accuracy, compute_metrics

__all__ = ["control_share", "read_text_lines", "score_predictions", "register_cli"]

DEFAULT_FIRST = (256,)
DEFAULT_CHUNKS = (32, 128)
CONTROL_WARNING = 0.10
"""The share of control characters above which ``score`` warns that a file looks like something else: text
has next to none, a cipher decrypted with another key about a quarter (the XOR lands many letters on 0-31)."""
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")  # Unicode's control characters (Cc), tab aside


def read_text_lines(path: str | Path, what: str = "file", holds: str = "one line per reference line") -> list[str]:
    """The lines of a text file (UTF-8), without line ends; a clear error for anything else.

    A missing trailing newline, CRLF line ends and a leading byte-order mark (skipped, with a
    note on stderr: :func:`cipherlab.errors.strip_bom`) are not errors; a missing file, a folder,
    an empty file, a binary file or bytes that are not UTF-8 are, naming the file and the line.
    ``holds`` says what the file should hold, for the messages.
    """
    path = require_file(path, what, f"pass a text file with {holds}")
    data = strip_bom(path.read_bytes(), path)
    if not data.strip(b"\r\n"):
        raise DatasetError(f"{path}: the {what} is empty; expected {holds}")
    if b"\0" in data:
        line = data[: data.index(b"\0")].count(b"\n") + 1
        raise DatasetError(f"{path}, line {line}: a NUL byte; this is not a text file: pass one with {holds}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise DatasetError(f"{path}, line {line}: byte 0x{data[e.start]:02x} is not UTF-8 text; save the file "
                           "as UTF-8") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the file's last newline ends the last line; it does not start a new one
    return [line.removesuffix("\r") for line in lines]


def _first(predictions: Sequence[str], plain: Sequence[str], n: int) -> dict:
    """Each line cut to its first ``n`` characters, predictions and references alike."""
    pred = [p[:n] for p in predictions]
    ref = [r[:n] for r in plain]
    return {"lines": len(ref), "bit_accuracy": bit_accuracy(pred, [encrypt(r) for r in ref]),
            "exact": sum(p == r for p, r in zip(pred, ref)) / len(ref)}


def _chunks(predictions: Sequence[str], plain: Sequence[str], k: int) -> dict:
    """Every line cut into chunks of ``k`` characters at offsets 0, k, 2k, ...; the prediction is
    cut at the same offsets (a prediction that is too short or too long shifts nothing: position
    i is compared with position i, as in the bit metric)."""
    pairs, full = [], []
    for p, r in zip(predictions, plain):
        for start in range(0, max(len(r), 1), k):
            piece = (p[start: start + k], r[start: start + k])
            if start + k >= len(r) and len(p) > len(r):  # the last chunk also holds what runs past the end
                piece = (p[start:], r[start: start + k])
            pairs.append(piece)
            full.append(len(piece[1]) == k)
    exact = [p == r for p, r in pairs]
    kept = [e for e, f in zip(exact, full) if f]
    return {
        "chunks": len(pairs),
        "exact": sum(exact) / len(pairs),
        "bit_accuracy": bit_accuracy([p for p, _ in pairs], [encrypt(r) for _, r in pairs]),
        "full_chunks": len(kept),
        "exact_full_chunks_only": sum(kept) / len(kept) if kept else None,
    }


def score_predictions(
    predictions: Sequence[str],
    plain: Sequence[str],
    cipher: Sequence[str] | None = None,
    *,
    first: Sequence[int] = DEFAULT_FIRST,
    chunks: Sequence[int] = DEFAULT_CHUNKS,
) -> dict:
    """The book's whole-line metrics of ``predictions`` and the same predictions in other units."""
    if len(predictions) != len(plain):
        raise ValueError(f"{len(predictions)} predicted lines for {len(plain)} reference lines")
    cipher = [encrypt(r) for r in plain] if cipher is None else list(cipher)
    whole = compute_metrics(predictions, plain, cipher, tokenised=True)
    return {
        "whole_lines": whole,
        "first_chars": {str(n): _first(predictions, plain, n) for n in first},
        "chunks": {str(k): _chunks(predictions, plain, k) for k in chunks},
    }


def control_share(lines: Sequence[str]) -> float:
    """The share of the characters of ``lines`` that are control characters (tab aside): 0 for text."""
    chars = sum(map(len, lines))
    return sum(len(_CONTROL.findall(line)) for line in lines) / chars if chars else 0.0


def _warn_if_noise(lines: Sequence[str], path, what: str, looks: str) -> None:
    """A note on stderr, one line naming ``path``, when more than :data:`CONTROL_WARNING` of the characters
    of ``lines`` are control characters: they cannot be text, and the numbers would compare text with noise."""
    share = control_share(lines)
    if share > CONTROL_WARNING:
        print(f"cipherlab: note: {path}: {100 * share:.0f} % of the characters {what} are control characters, "
              f"which text has next to none of; {looks}", file=sys.stderr)


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
    from cipherlab.data import load_corpus

    corpus = load_corpus(args.data_dir)
    where = f"the test split of {corpus.data_dir}"
    if args.preset:
        from cipherlab.config import make_config
        from cipherlab.codec import select_lines

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
        write_text_atomic(args.json, json.dumps(result, indent=2) + "\n")  # a reader never sees half of it
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
