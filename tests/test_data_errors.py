"""Bad data is a clear error, never silent: empty files, blank lines, too few lines for the splits.

Each case is checked through `load_corpus` and through the command line, where it must end in one
line on stderr (`cipherlab: error: FILE[, line N]: reason`), exit status 1 and no traceback.
"""

from __future__ import annotations

import dataclasses

import pytest

from cipherlab.__main__ import main
from cipherlab.data.cipher import DatasetError, encrypt
from cipherlab.data.corpus import CIPHER_FILE, MIN_LINES, PLAIN_FILE, SPLITS_FILE, load_corpus, split_lines

LINES = [f"Line {i} of a small corpus." for i in range(12)]


def write(folder, plain, cipher=None):
    """A data folder: the plaintext lines, and the cipher lines (encrypted from them unless given; False: no file)."""
    (folder / PLAIN_FILE).write_text("".join(line + "\n" for line in plain), encoding="utf-8")
    if cipher is not False:
        cipher = [encrypt(line) for line in plain] if cipher is None else cipher
        (folder / CIPHER_FILE).write_text("".join(line + "\n" for line in cipher), encoding="utf-8")
    return folder


def cli_error(folder, capsys, *command) -> str:
    """Run `data verify` (or the given command) on the folder; return its one-line error."""
    capsys.readouterr()
    argv = list(command) or ["data", "verify"]
    assert main([*argv, "--data-dir", str(folder)]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "OK" not in out
    assert err.startswith("cipherlab: error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("cipher", [[], False], ids=["both-files-empty", "no-cipher-file"])
def test_an_empty_plaintext_file_is_an_error_naming_it(tmp_path, capsys, cipher):
    write(tmp_path, [], cipher)
    with pytest.raises(DatasetError, match=rf"{PLAIN_FILE}: no lines \(the file is empty\)"):
        load_corpus(tmp_path)
    err = cli_error(tmp_path, capsys)
    assert f"{tmp_path / PLAIN_FILE}: no lines (the file is empty)" in err
    assert not (tmp_path / SPLITS_FILE).exists()


def test_an_empty_cipher_file_is_an_error_naming_it_and_the_plaintext_count(tmp_path, capsys):
    write(tmp_path, LINES, [])
    pattern = rf"{CIPHER_FILE}: no lines \(the file is empty\) but .*{PLAIN_FILE} has {len(LINES)}"
    with pytest.raises(DatasetError, match=pattern):
        load_corpus(tmp_path)
    assert f"{tmp_path / CIPHER_FILE}: no lines (the file is empty) but" in cli_error(tmp_path, capsys)


def test_a_blank_line_pair_is_an_error_naming_the_line(tmp_path, capsys):
    write(tmp_path, LINES[:3] + [""] + LINES[3:])
    with pytest.raises(DatasetError, match=rf"{PLAIN_FILE}, line 4: blank line \(and so is line 4 of .*{CIPHER_FILE}\)"):
        load_corpus(tmp_path)
    err = cli_error(tmp_path, capsys)
    assert f"{tmp_path / PLAIN_FILE}, line 4: blank line" in err and "exact match for free" in err


def test_a_blank_line_in_the_plaintext_alone_is_an_error_too(tmp_path, capsys):
    """Without a cipher file, the cipher is written from the plaintext: the blank line is still found."""
    write(tmp_path, LINES[:5] + [""] + LINES[5:], cipher=False)
    assert f"{tmp_path / PLAIN_FILE}, line 6: blank line" in cli_error(tmp_path, capsys)


def test_a_file_of_newlines_only_is_refused_at_its_first_line(tmp_path, capsys):
    (tmp_path / PLAIN_FILE).write_text("\n\n\n")
    assert f"{tmp_path / PLAIN_FILE}, line 1: blank line" in cli_error(tmp_path, capsys)


@pytest.mark.parametrize("n", range(1, MIN_LINES))
def test_too_few_lines_for_the_splits_is_an_error_naming_the_counts(tmp_path, capsys, n):
    write(tmp_path, LINES[:n])
    sizes = {name: len(ids) for name, ids in split_lines(n).items()}
    expected = (
        f"{tmp_path / PLAIN_FILE} has {n} line{'' if n == 1 else 's'}; the splits need at least {MIN_LINES}: "
        f"80/10/10 of {n} line{'' if n == 1 else 's'} gives train {sizes['train']}, val {sizes['val']}, "
        f"test {sizes['test']}"
    )
    with pytest.raises(DatasetError) as info:
        load_corpus(tmp_path)
    assert str(info.value).startswith(expected)
    assert expected in cli_error(tmp_path, capsys)
    assert not (tmp_path / SPLITS_FILE).exists()


def test_min_lines_is_the_smallest_count_that_gives_every_split_a_line():
    def every_split_has_a_line(n):
        return all(split_lines(n).values())

    assert not every_split_has_a_line(MIN_LINES - 1)
    assert all(every_split_has_a_line(n) for n in range(MIN_LINES, 3000))


def test_min_lines_lines_are_accepted(tmp_path, capsys):
    write(tmp_path, LINES[:MIN_LINES])
    corpus = load_corpus(tmp_path)
    assert all(len(ids) >= 1 for ids in corpus.splits.values())
    assert main(["data", "verify", "--data-dir", str(tmp_path)]) == 0
    assert f"lines: {MIN_LINES}" in capsys.readouterr().out


@pytest.mark.parametrize("split, role", [("train", "training"), ("val", "validation"), ("test", "test")])
def test_a_selection_that_empties_a_split_is_an_error_naming_the_counts(tmp_path, split, role):
    """What train.select_lines makes (dataclasses.replace) is checked too: no split may end up empty."""
    corpus = load_corpus(write(tmp_path, LINES))
    splits = {**corpus.splits, split: []}
    sizes = ", ".join(f"{name} {len(ids)}" for name, ids in splits.items())
    with pytest.raises(DatasetError, match=rf"{PLAIN_FILE}: no {role} lines are selected \({sizes} of its 12 lines\)"):
        dataclasses.replace(corpus, splits=splits)


def test_train_on_empty_files_is_one_line_error_not_a_traceback(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    write(data, [], [])
    err = cli_error(
        data, capsys, "train", "--config", "c1", "--preset", "smoke", "--device", "cpu",
        "--out", str(tmp_path / "run"), "--results-dir", str(tmp_path / "results"),
    )  # fmt: skip
    assert f"{data / PLAIN_FILE}: no lines (the file is empty)" in err


def test_load_pairs_scores_a_file_too_small_to_split_but_refuses_bad_lines(tmp_path):
    """For `evaluate --split all`: every line of a small file, no split needed; bad data still refused."""
    from cipherlab.data.corpus import load_pairs

    write(tmp_path, LINES[:3], cipher=False)
    assert load_pairs(tmp_path) == (LINES[:3], [encrypt(line) for line in LINES[:3]])
    write(tmp_path, ["ab", ""])
    with pytest.raises(DatasetError, match=rf"{PLAIN_FILE}, line 2: blank line"):
        load_pairs(tmp_path)
