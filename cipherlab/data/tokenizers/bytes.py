"""The byte path of C5 (the Byte Latent Transformer): no vocabulary learning at all.

Ids 0-255 are byte
values, followed by three specials. The source side reads each 8-bit group of the cipher as one
value (the encrypted byte itself, not the ASCII codes of '0' and '1'); the target side reads each
plaintext character as its code, which the cipher already requires to be below 256.

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
# The special ids as the BLT takes them: BLTModel(BLTArgs(..., **SPECIAL_IDS)), as cipherlab.pipeline.codec.blt_args
# passes them
SPECIAL_IDS = {"pad_id": PAD_ID, "bos_id": BOS_ID, "eos_id": EOS_ID}


class ByteTokenizer:
    """Characters and 8-bit cipher groups to byte values 0-255, plus PAD/BOS/EOS."""

    pad_id, bos_id, eos_id, vocab_size = PAD_ID, BOS_ID, EOS_ID, VOCAB_SIZE

    def encode_plain(self, text: str) -> list[int]:
        """One id per character: its code. Raises ValueError for a code that does not fit a byte."""
        ids = [ord(ch) for ch in text]
        for position, value in enumerate(ids):
            if value >= 256:
                raise ValueError(
                    f"character {text[position]!r} (code {value}) at position {position} does not fit in "
                    "one byte; the byte path covers codes 0-255 only"
                )
        return ids

    def encode_cipher(self, bits: str) -> list[int]:
        """One id per 8 cipher bits, big-endian. Raises ValueError (cipher.DatasetError) for a
        character other than '0'/'1' or a length that is not a multiple of 8, naming the place."""
        return bits_to_bytes(bits)

    def decode(self, ids: Iterable[int]) -> str:
        """Characters of the byte ids, skipping PAD/BOS/EOS."""
        chars = []
        for i in map(int, ids):
            if not 0 <= i < VOCAB_SIZE:
                raise ValueError(f"id {i} is outside the byte vocabulary 0..{VOCAB_SIZE - 1}")
            if i < 256:
                chars.append(chr(i))
        return "".join(chars)
