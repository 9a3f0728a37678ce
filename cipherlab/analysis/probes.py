"""Text that no model here was trained on, to tell a model that learned the cipher from one that
learned the corpus (the reference ablation in ``results/reference``).

The cipher is a bijection per character at each key phase, so a model that learned it decodes any
text over its alphabet as well as Brown. Every set here is made by a fixed recipe, from the
repository's own files, the same on every machine:

- ``random_letters``: strings of 40-120 characters over a-z, A-Z and (six times as likely) space;
- ``random_alphabet``: strings of 40-120 characters drawn uniformly from the training alphabet
  (every character of the training lines a configuration was trained on: letters, digits,
  punctuation, space; the ``cpu`` preset's 2,000 lines hold 80 of the 83 characters of the whole
  training split, lacking ``*``, ``{`` and ``}``, which no model trained on them can be asked for);
- ``stdlib``: the 500 letters-and-spaces lines of Python's docstrings (``data/stdlib``);
- ``stdlib_upper``: the first 100 of those lines in upper case (upper case is rare in Brown);
- ``stdlib_long``: those lines joined with spaces and cut into lines of 2,600 characters.

>>> [len(line) for line in long_lines(["ab cd"] * 2000, length=2600, n=2)]
[2600, 2600]
"""

from __future__ import annotations

import random
from pathlib import Path

from cipherlab.pipeline.codec import select_lines
from cipherlab.base.config import Config
from cipherlab.data.corpus import REPO_DATA_DIR, load_corpus, load_pairs

__all__ = ["LETTERS", "PROBE_SETS", "long_lines", "probe_sets", "random_strings", "training_alphabet"]

# a-z, A-Z and space six times as likely: about as many spaces as in English.
LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" + " " * 6

# name: what it is, in a few words (for tables)
PROBE_SETS = {
    "random_letters": "random strings, letters and space",
    "random_alphabet": "random strings over the training alphabet",
    "stdlib": "docstring English (letters, spaces)",
    "stdlib_upper": "the same English in upper case",
    "stdlib_long": "the same English in 2,600-character lines",
}


def random_strings(n: int, alphabet: str = LETTERS, seed: int = 2026) -> list[str]:
    """``n`` strings of 40-120 characters drawn from ``alphabet`` (a character listed twice is twice
    as likely), without leading or trailing spaces (a line of the data never has them)."""
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(40, 120))).strip() or "a" for _ in range(n)]


def training_alphabet(config: Config | None = None, data_dir: str | Path | None = None) -> str:
    """Every character of the training lines ``config`` trains on (``max_train_lines``; all of the
    training split without a config), sorted: what a model trained on them can be asked for."""
    corpus = load_corpus(data_dir)
    plain, _ = (select_lines(corpus, config) if config is not None else corpus).lines("train")
    return "".join(sorted(set("".join(plain))))


def long_lines(lines: list[str], length: int = 2600, n: int = 10) -> list[str]:
    """``lines`` joined with single spaces and cut into ``n`` consecutive lines of ``length``
    characters (stripped of a space at either end, so a few may be a character shorter)."""
    text = " ".join(lines)
    if len(text) < n * length:
        raise ValueError(f"{len(text)} characters make fewer than {n} lines of {length}")
    return [text[i * length: (i + 1) * length].strip() for i in range(n)]


def probe_sets(config: Config | None = None, n_random: int = 200, n_alphabet: int = 100, n_upper: int = 100,
               n_long: int = 10, data_dir: str | Path | None = None) -> dict[str, list[str]]:
    """The plaintext lines of every set in :data:`PROBE_SETS` for a model trained by ``config``
    (its training alphabet; encrypt them with ``cipherlab.data.cipher.encrypt``)."""
    stdlib, _ = load_pairs(REPO_DATA_DIR / "stdlib")
    return {
        "random_letters": random_strings(n_random),
        "random_alphabet": random_strings(n_alphabet, training_alphabet(config, data_dir), seed=2027),
        "stdlib": stdlib,
        "stdlib_upper": [line.upper() for line in stdlib[:n_upper]],
        "stdlib_long": long_lines(stdlib, n=n_long),
    }
