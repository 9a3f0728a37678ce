"""Score anyone's predictions: ``python -m cipherlab score --pred PRED.txt``.

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

The command (its flags, the references it reads, the notes and the report it prints) is :mod:`cipherlab.cli.score`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from cipherlab.data.cipher import DatasetError, encrypt
from cipherlab.runner.errors import require_file
from cipherlab.base.files import strip_bom
from cipherlab.pipeline.metrics import bit_accuracy, compute_metrics

__all__ = ["control_share", "read_text_lines", "score_predictions", "text_lines"]

DEFAULT_FIRST = (256,)
DEFAULT_CHUNKS = (32, 128)
CONTROL_WARNING = 0.10
"""The share of control characters above which ``score`` warns that a file looks like something else: text
has next to none, a cipher decrypted with another key about a quarter (the XOR lands many letters on 0-31)."""
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")  # Unicode's control characters (Cc), tab aside


def read_text_lines(path: str | Path, what: str = "file", holds: str = "one line per reference line") -> list[str]:
    """The lines of a text file (UTF-8), without line ends; a clear error for anything else.

    A missing trailing newline, CRLF line ends and a leading byte-order mark (skipped, with a
    note on stderr: :func:`cipherlab.base.files.strip_bom`) are not errors; a missing file, a folder,
    an empty file, a binary file or bytes that are not UTF-8 are, naming the file and the line.
    ``holds`` says what the file should hold, for the messages.
    """
    path = require_file(path, what, f"pass a text file with {holds}")
    return text_lines(path.read_bytes(), path, what, holds)


def text_lines(data: bytes, path: str | Path, what: str = "file", holds: str = "one line per reference line") -> list[str]:
    """The lines of ``data``, read from ``path`` (a file, or ``<stdin>``), as :func:`read_text_lines` reads a file's."""
    data = strip_bom(data, path)
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
