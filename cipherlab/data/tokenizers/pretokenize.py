"""How a text becomes base symbols before BPE merges anything.

Two independent choices are made here:

- a **pre-tokenizer** cuts a text into *pieces* (also called "merge units"). BPE
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

from cipherlab.data.cipher import BITS_PER_CHAR, PERIOD, check_bits

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


# The key phase of a cipher character (its position mod PERIOD) written as one letter before its bits.
PHASE_TAGS = "abcdefgh"[:PERIOD]


class PhaseByte8Unit:
    """One base symbol per 8-bit group *and its key phase*: ``'a01000001'`` is the cipher byte 0x41
    at phase 0 (position 0, 8, 16, ... of its line), ``'b01000001'`` the same byte at phase 1.

    The XOR mask of a character depends on its phase alone, so a (byte, phase) symbol stands for
    exactly one plaintext character, and a merged token for exactly one plaintext string, wherever
    it occurs. A piece must start at phase 0: a cipher line does, and so does every chunk
    (:func:`cipherlab.data.corpus.make_chunks`). The alphabet has 256 x 8 = 2,048 symbols.

    >>> PhaseByte8Unit().split("0100000101001110")
    ['a01000001', 'b01001110']
    >>> PhaseByte8Unit().join(['a01000001b01001110'])
    '0100000101001110'
    """

    name = "byte8-phase"
    full_alphabet = [tag + format(value, "08b") for tag in PHASE_TAGS for value in range(256)]

    def split(self, piece: str) -> list[str]:
        check_bits(piece)
        return [PHASE_TAGS[j % PERIOD] + piece[BITS_PER_CHAR * j : BITS_PER_CHAR * (j + 1)]
                for j in range(len(piece) // BITS_PER_CHAR)]

    def join(self, tokens: list[str]) -> str:
        return "".join(ch for token in tokens for ch in token if ch in "01")


def phase_symbols(token: str) -> list[tuple[int, int]]:
    """The (key phase, byte) of each base symbol of a :class:`PhaseByte8Unit` token.

    >>> phase_symbols('a01000001b01001110')
    [(0, 65), (1, 78)]
    """
    width = 1 + BITS_PER_CHAR
    return [(PHASE_TAGS.index(token[i]), int(token[i + 1 : i + width], 2)) for i in range(0, len(token), width)]


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


UNITS = {unit.name: unit for unit in (CharUnit(), Byte8Unit(), PhaseByte8Unit(), Utf8ByteUnit())}
