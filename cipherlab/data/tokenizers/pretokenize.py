"""How a text becomes base symbols before BPE merges anything: a **pre-tokenizer** cuts a text into
*pieces* (BPE never merges across them), a **unit** cuts a piece into its *base symbols* and joins
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

# Optional leading whitespace plus the word after it, or trailing whitespace: no text is ever lost.
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
    """One base symbol per 8-bit group of a cipher string, e.g. '01000001': one cipher character."""

    name = "byte8"
    full_alphabet = [format(value, "08b") for value in range(256)]

    def split(self, piece: str) -> list[str]:
        check_bits(piece)
        return [piece[j : j + BITS_PER_CHAR] for j in range(0, len(piece), BITS_PER_CHAR)]

    def join(self, tokens: list[str]) -> str:
        return "".join(tokens)


# The key phase of a cipher character (its position mod PERIOD) written as one letter before its bits.
PHASE_TAGS = "abcdefgh"[:PERIOD]


class PhaseByte8Unit:
    """One base symbol per 8-bit group *and its key phase*: ``'a01000001'`` is the cipher byte 0x41
    at phase 0 (position 0, 8, 16, ... of its line), ``'b01000001'`` the same byte at phase 1.

    A (byte, phase) symbol stands for exactly one plaintext character wherever it occurs. A piece
    must start at phase 0, as a line and every chunk do.

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
    """One base symbol per UTF-8 byte, stored as the character of the same code (Latin-1).

    >>> Utf8ByteUnit().split("é")
    ['Ã', '©']
    """

    name = "utf8-byte"
    full_alphabet = [chr(value) for value in range(256)]

    def split(self, piece: str) -> list[str]:
        return list(piece.encode("utf-8").decode("latin-1"))

    def join(self, tokens: list[str]) -> str:
        return "".join(tokens).encode("latin-1").decode("utf-8", errors="replace")


UNITS = {unit.name: unit for unit in (CharUnit(), Byte8Unit(), PhaseByte8Unit(), Utf8ByteUnit())}
