"""The cipher: round trips, the key phase, and every way a dataset can be wrong."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cipherlab.data.cipher import (
    KEY,
    DatasetError,
    bits_to_bytes,
    bytes_to_bits,
    decrypt,
    encrypt,
    key_phase,
    verify_dataset,
)

byte_text = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=255), max_size=64)


def test_encrypt_matches_the_definition_by_hand():
    # 'H' = 0x48, KEY[0] = 'A' = 0x41 -> 0x09; 'i' = 0x69, KEY[1] = 'N' = 0x4E -> 0x27
    assert encrypt("Hi") == "00001001" + "00100111"


@given(byte_text)
def test_text_bits_text_round_trip_for_every_byte_value(text):
    bits = encrypt(text)
    assert len(bits) == 8 * len(text) and set(bits) <= {"0", "1"}
    assert decrypt(bits) == text


@given(st.lists(st.integers(0, 255), max_size=64))
def test_bits_bytes_round_trip(values):
    assert bits_to_bytes(bytes_to_bits(values)) == values


def test_the_map_depends_only_on_position_modulo_8():
    # the same character at positions i and i+8 is encrypted identically; at i+1 it usually is not
    line = "e" * 24
    groups = [encrypt(line)[8 * i : 8 * i + 8] for i in range(24)]
    for i in range(16):
        assert groups[i] == groups[i + 8]
        assert key_phase(i) == i % len(KEY)
    assert len(set(groups[:8])) == len(set(KEY))


def test_key_phase_restarts_on_every_line():
    # "abc" at the start of a line is not encrypted like "abc" at position 3
    assert encrypt("xyzabc")[24:] != encrypt("abc")
    assert encrypt("abcdefghij")[:24] == encrypt("abc")


def test_character_beyond_one_byte_is_rejected():
    with pytest.raises(ValueError, match="position 2"):
        encrypt("ab\u0100")


def test_verify_accepts_a_correct_dataset():
    plain = ["Hello world", " ", "x" * 100]
    verify_dataset(plain, [encrypt(p) for p in plain])


@pytest.mark.parametrize(
    "plain, cipher, pattern",
    [
        (["ab", "cd"], [encrypt("ab")], r"2 lines but .* has 1"),
        (["ab", "cd"], [encrypt("ab"), encrypt("cd")[:-1] + "2"], r"c\.txt, line 2: character '2' at position 15"),
        (["ab", "cd"], [encrypt("ab"), encrypt("cd")[:-3]], r"c\.txt, line 2: cipher length 13 is not a multiple of 8"),
        (["ab", "cd"], [encrypt("ab"), encrypt("cde")], r"c\.txt, line 2: cipher has 24 bits .* 2 characters"),
        (["ab", "c\u0101"], [encrypt("ab"), "0" * 16], r"p\.txt, line 2: character .*\(code 257\)"),
        (
            ["abc", "hello"],
            [encrypt("abc"), encrypt("help!")],
            r"c\.txt, line 2: does not decrypt .* character 3 \(bits 24-31\).*'p'.*'l'",
        ),
        ([], [], r"^p\.txt: no lines \(the file is empty\); a dataset needs"),
        (["ab"], [], r"^c\.txt: no lines \(the file is empty\) but p\.txt has 1; the files must be parallel"),
        ([], [encrypt("ab")], r"^p\.txt: no lines \(the file is empty\) but c\.txt has 1"),
        (["ab", ""], [encrypt("ab"), ""], r"^p\.txt, line 2: blank line \(and so is line 2 of c\.txt\): .*exact match for free"),
        (["ab", "cd"], [encrypt("ab"), ""], r"^c\.txt, line 2: cipher has 0 bits but the plaintext line has 2 characters"),
    ],
    ids=["line-count", "non-bit", "not-multiple-of-8", "length-mismatch", "wide-char", "wrong-decryption",
         "no-lines", "no-cipher-lines", "no-plain-lines", "blank-pair", "empty-cipher-line"],
)
def test_verify_names_file_line_and_reason(plain, cipher, pattern):
    with pytest.raises(DatasetError, match=pattern):
        verify_dataset(plain, cipher, plain_path="p.txt", cipher_path="c.txt")


def test_dataset_error_is_a_value_error():
    assert issubclass(DatasetError, ValueError)
