"""How a text becomes base symbols before BPE merges anything.

Chapter 6 ("Tokenisation") teaches this module. Two independent choices are made here:

- a **pre-tokenizer** cuts a text into *pieces* (the course notes call them "merge units"). BPE
  never merges across a piece boundary, and the pieces concatenate back to the text exactly;
- a **unit** cuts one piece into its *base symbols*, the alphabet BPE starts from, and joins
  token strings back into text.

>>> split_plaintext("The jury  said.")
['The', ' jury', '  said.']
>>> Byte8Unit().split("0100000101001110")
['01000001', '01001110']
"""

from __future__ import annotations

import re
from collections.abc import Callable

from cipherlab.cipher import BITS_PER_CHAR, check_bits

# Optional leading whitespace plus the word after it, or a run of whitespace with no word after it
# (trailing spaces). Every character matches exactly one alternative, so no text is ever lost.
_PLAINTEXT_PIECE = re.compile(r"\s*\S+|\s+")


def split_plaintext(text: str) -> list[str]:
    """Plaintext pieces: whitespace is glued to the front of the following word.

    Merges stay inside a piece, so BPE learns ' the' but never 'of the'.

    >>> split_plaintext("a  b ")
    ['a', '  b', ' ']
    """
    return _PLAINTEXT_PIECE.findall(text)


def split_cipher(text: str) -> list[str]:
    """Ciphertext pieces: the whole line is one piece (a cipher line has no whitespace to split on).

    >>> split_cipher("0110"), split_cipher("")
    (['0110'], [])
    """
    return [text] if text else []


PRETOKENIZERS: dict[str, Callable[[str], list[str]]] = {
    "plaintext": split_plaintext,
    "cipher": split_cipher,
}


class CharUnit:
    """One base symbol per Unicode character; the alphabet is whatever training text contains."""

    name = "char"
    full_alphabet: list[str] | None = None  # open-ended: learned from the training text

    def split(self, piece: str) -> list[str]:
        return list(piece)

    def join(self, tokens: list[str]) -> str:
        return "".join(tokens)


class Byte8Unit:
    """One base symbol per 8-bit group of a cipher string, e.g. '01000001': one cipher character.

    Every BPE token built from these symbols covers whole cipher characters, never part of one.
    """

    name = "byte8"
    full_alphabet = [format(value, "08b") for value in range(256)]

    def split(self, piece: str) -> list[str]:
        check_bits(piece)  # names the offending position: a non-bit or a length not a multiple of 8
        return [piece[j : j + BITS_PER_CHAR] for j in range(0, len(piece), BITS_PER_CHAR)]

    def join(self, tokens: list[str]) -> str:
        return "".join(tokens)


class Utf8ByteUnit:
    """One base symbol per UTF-8 byte: every string is representable, no unknown token needed.

    A byte is stored as the character with the same code (``chr(b)``, i.e. Latin-1), so token
    strings are ordinary Python strings and compare in byte order.

    >>> Utf8ByteUnit().split("é")
    ['Ã', '©']
    """

    name = "utf8-byte"
    full_alphabet = [chr(value) for value in range(256)]

    def split(self, piece: str) -> list[str]:
        return list(piece.encode("utf-8").decode("latin-1"))

    def join(self, tokens: list[str]) -> str:
        # Any id sequence can be decoded, even one a model made up; a byte sequence that is not
        # valid UTF-8 shows up as U+FFFD instead of raising.
        return "".join(tokens).encode("latin-1").decode("utf-8", errors="replace")


UNITS = {unit.name: unit for unit in (CharUnit(), Byte8Unit(), Utf8ByteUnit())}
