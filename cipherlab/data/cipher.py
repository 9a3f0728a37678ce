"""The cipher: a repeating-key XOR written out as bits.

Character ``c`` at position ``i`` of a line becomes the 8 bits, most significant first, of
``ord(c) ^ KEY[i % 8]``; the key phase restarts at 0 on every line.

>>> encrypt("Hi")
'0000100100100111'
>>> decrypt("0000100100100111")
'Hi'
"""

from __future__ import annotations

from collections.abc import Sequence

KEY = b"ANLP2026"  # the assignment's key
PERIOD = len(KEY)  # the cipher's period, 8: characters PERIOD apart share a key byte

BITS_PER_CHAR = 8

# _BITS[phase][code] is the 8-character cipher of a character with that code at that key phase.
_BITS = [[format(code ^ k, "08b") for code in range(256)] for k in KEY]


class DatasetError(ValueError):
    """A plaintext/cipher pair that is not what the assignment promises; the message names the file
    (when known), the 1-based line number and the reason."""


def _where(path: str | None, line: int | None) -> str:
    """'brown_cipher.txt, line 17: ' -- the place part of an error message."""
    parts = ([str(path)] if path is not None else []) + ([f"line {line}"] if line is not None else [])
    return (", ".join(parts) + ": ") if parts else ""


def encrypt(text: str) -> str:
    """Encrypt one line: 8 big-endian bits of ``ord(c) ^ KEY[i % 8]`` per character (codes below 256)."""
    if not text.isascii():
        for i, ch in enumerate(text):
            if ord(ch) >= 256:
                raise ValueError(f"character {ch!r} (code {ord(ch)}) at position {i} does not fit in one byte; "
                                 "the cipher only covers codes 0-255")
    return "".join(_BITS[i % PERIOD][ord(ch)] for i, ch in enumerate(text))


def bits_to_bytes(bits: str) -> list[int]:
    """Group a cipher string into its raw 8-bit values (still encrypted), e.g. '00001001' -> [9]: what C5 reads."""
    check_bits(bits)
    return [int(bits[j : j + BITS_PER_CHAR], 2) for j in range(0, len(bits), BITS_PER_CHAR)]


def bytes_to_bits(values: Sequence[int]) -> str:
    """Inverse of :func:`bits_to_bytes`."""
    return "".join(format(v, "08b") for v in values)


def check_bits(bits: str, *, path: str | None = None, line: int | None = None) -> None:
    """Raise DatasetError unless ``bits`` is a string of '0'/'1' whose length is a multiple of 8."""
    if bits.count("0") + bits.count("1") != len(bits):
        bad = next(j for j, ch in enumerate(bits) if ch not in "01")
        raise DatasetError(f"{_where(path, line)}character {bits[bad]!r} at position {bad} is not a bit; "
                           "a cipher line contains only '0' and '1'")
    if len(bits) % BITS_PER_CHAR:
        raise DatasetError(f"{_where(path, line)}cipher length {len(bits)} is not a multiple of 8 "
                           "(each plaintext character is exactly 8 bits)")


def decrypt(bits: str) -> str:
    """Invert :func:`encrypt`: XOR each 8-bit group with the key byte of its position."""
    return "".join(chr(v ^ KEY[i % PERIOD]) for i, v in enumerate(bits_to_bytes(bits)))


def key_phase(position: int) -> int:
    """The index into KEY used at character ``position`` of a line."""
    return position % PERIOD


def verify_dataset(plain_lines: Sequence[str], cipher_lines: Sequence[str], *, plain_path: str | None = None,
                   cipher_path: str | None = None) -> None:
    """Check that every cipher line is the encryption of its plaintext line.

    Raises DatasetError at the first problem, naming the file, the 1-based line and the reason. A
    blank pair is refused: it has no cipher to learn from, and would be a free exact match.
    """
    if not plain_lines or not cipher_lines:
        empty, other = (plain_path, cipher_path) if not plain_lines else (cipher_path, plain_path)
        empty = empty or ("plaintext" if not plain_lines else "ciphertext")
        if not plain_lines and not cipher_lines:
            raise DatasetError(f"{empty}: no lines (the file is empty); a dataset needs one line of text per example")
        n_other = len(cipher_lines) if not plain_lines else len(plain_lines)
        raise DatasetError(f"{empty}: no lines (the file is empty) but {other or 'the other file'} has {n_other}; "
                           "the files must be parallel")
    if len(plain_lines) != len(cipher_lines):
        raise DatasetError(f"{plain_path or 'plaintext'} has {len(plain_lines)} lines but "
                           f"{cipher_path or 'ciphertext'} has {len(cipher_lines)}; the files must be parallel")
    for n, (plain, bits) in enumerate(zip(plain_lines, cipher_lines), start=1):
        if not plain and not bits:
            raise DatasetError(f"{_where(plain_path, n)}blank line (and so is line {n} of {cipher_path or 'the cipher'}): "
                               "an empty line has no cipher to learn from and would count as an exact match for "
                               "free; remove it from both files")
        if not plain.isascii() and max(map(ord, plain)) >= 256:
            i, ch = next((i, ch) for i, ch in enumerate(plain) if ord(ch) >= 256)
            raise DatasetError(f"{_where(plain_path, n)}character {ch!r} (code {ord(ch)}) at position {i} "
                               "does not fit in one byte")
        check_bits(bits, path=cipher_path, line=n)
        if len(bits) != BITS_PER_CHAR * len(plain):
            raise DatasetError(f"{_where(cipher_path, n)}cipher has {len(bits)} bits but the plaintext line has "
                               f"{len(plain)} characters (expected {BITS_PER_CHAR * len(plain)} bits)")
        if encrypt(plain) != bits:
            decrypted = decrypt(bits)
            i = next(j for j, (a, b) in enumerate(zip(decrypted, plain)) if a != b)
            raise DatasetError(f"{_where(cipher_path, n)}does not decrypt to its plaintext: first difference at "
                               f"character {i} (bits {BITS_PER_CHAR * i}-{BITS_PER_CHAR * i + 7}): "
                               f"decrypts to {decrypted[i]!r}, plaintext has {plain[i]!r}")
