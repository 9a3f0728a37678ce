"""A little corpus the tests write to temporary data folders (see conftest.sample_dir)."""

SAMPLE_LINES = [
    "The jury said it did find that many of the laws are outmoded.",
    "Hi",
    "A short line of plain English text, with punctuation!",
    "x" * 600,
    "Mixed Case and digits 0123456789 (in brackets).",
] + [f"Line number {i} of the little sample corpus." for i in range(40)]
