"""Shared fixtures: a small verified corpus written to a temporary folder."""

from __future__ import annotations

import pytest
import torch

from cipherlab.cipher import encrypt
from cipherlab.data import CIPHER_FILE, PLAIN_FILE

torch.set_num_threads(1)  # tests use tiny tensors; threads only add contention on 2 cores

SAMPLE_LINES = [
    "The jury said it did find that many of the laws are outmoded.",
    "Hi",
    "A short line of plain English text, with punctuation!",
    "x" * 600,
    "",
    "Mixed Case and digits 0123456789 (in brackets).",
] + [f"Line number {i} of the little sample corpus." for i in range(40)]


@pytest.fixture
def sample_dir(tmp_path):
    """A data folder with a plaintext file and its correct cipher file."""
    (tmp_path / PLAIN_FILE).write_text("".join(line + "\n" for line in SAMPLE_LINES), encoding="latin-1")
    (tmp_path / CIPHER_FILE).write_text("".join(encrypt(line) + "\n" for line in SAMPLE_LINES), encoding="latin-1")
    return tmp_path
