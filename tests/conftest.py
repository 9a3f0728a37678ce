"""Shared fixtures: a small verified corpus written to a temporary folder."""

from __future__ import annotations

import pytest
import torch

from cipherlab.data.cipher import encrypt
from cipherlab.data.corpus import CIPHER_FILE, PLAIN_FILE
from samples import SAMPLE_LINES  # tests/ is on sys.path under pytest

torch.set_num_threads(1)  # tests use tiny tensors; threads only add contention on 2 cores

@pytest.fixture
def sample_lines():
    """The lines that `sample_dir` holds."""
    return list(SAMPLE_LINES)

@pytest.fixture
def sample_dir(tmp_path):
    """A data folder with a plaintext file and its correct cipher file."""
    (tmp_path / PLAIN_FILE).write_text("".join(line + "\n" for line in SAMPLE_LINES), encoding="latin-1")
    (tmp_path / CIPHER_FILE).write_text("".join(encrypt(line) + "\n" for line in SAMPLE_LINES), encoding="latin-1")
    return tmp_path
