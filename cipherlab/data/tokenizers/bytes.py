"""The byte ids of C5 (the Byte Latent Transformer): 0-255 are byte values, then three specials.

The source is each 8-bit group of the cipher as one value; the target each plaintext character's code.

>>> tok = ByteTokenizer()
>>> tok.encode_cipher("0000100100100111"), tok.encode_plain("Hi")
([9, 39], [72, 105])
>>> tok.decode([BOS_ID, 72, 105, EOS_ID])
'Hi'
"""

from __future__ import annotations

from collections.abc import Iterable

from cipherlab.data.cipher import bits_to_bytes

PAD_ID = 256
BOS_ID = 257
EOS_ID = 258
VOCAB_SIZE = 259
SPECIAL_IDS = {"pad_id": PAD_ID, "bos_id": BOS_ID, "eos_id": EOS_ID}


class ByteTokenizer:
    """Characters and 8-bit cipher groups to byte values 0-255, plus PAD/BOS/EOS."""

    pad_id, bos_id, eos_id, vocab_size = PAD_ID, BOS_ID, EOS_ID, VOCAB_SIZE

    def encode_plain(self, text: str) -> list[int]:
        """One id per character: its code, which must fit in one byte."""
        for position, ch in enumerate(text):
            if ord(ch) >= 256:
                raise ValueError(f"character {ch!r} (code {ord(ch)}) at position {position} does not fit in one byte")
        return [ord(ch) for ch in text]

    def encode_cipher(self, bits: str) -> list[int]:
        """One id per 8 cipher bits, big-endian."""
        return bits_to_bytes(bits)

    def decode(self, ids: Iterable[int]) -> str:
        """Characters of the byte ids, skipping PAD/BOS/EOS."""
        return "".join(chr(i) for i in map(int, ids) if i < 256)
