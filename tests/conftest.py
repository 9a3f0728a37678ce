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


# `make quick` runs the tests outside these modules (pytest -m "not slow"): those that train, read
# the committed models, run the README's commands, test the book's own tooling or spawn many
# processes. What is left checks the layers, the components against their oracles, the config, the
# data and the one-line messages in about two minutes on two cores; `make unit` runs every unit test.
SLOW_MODULES = frozenset({
    "test_aligned_bpe.py", "test_aligned_models.py", "test_assignment_cpu_models.py", "test_blt.py",
    "test_book.py", "test_broken.py", "test_checkpoints.py", "test_cli.py", "test_doctor.py",
    "test_explorers.py", "test_faults_fuzz.py", "test_faults_holes.py", "test_faults_results_lock.py",
    "test_faults_runs.py", "test_faults_student.py", "test_flashcards.py", "test_gpu_paths.py",
    "test_learned_models.py", "test_part_blame.py", "test_plan.py", "test_readme.py",
    "test_reference_models.py", "test_results.py", "test_setup_cell.py", "test_train.py", "test_view.py",
    "test_viva.py", "test_wandb.py",
})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
