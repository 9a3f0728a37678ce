"""The data pipeline: loading, verification errors, splits, chunks, bucketing, collation."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cipherlab.__main__ import main
from cipherlab.data.cipher import DatasetError, encrypt
from cipherlab.data.corpus import (
    CIPHER_FILE,
    PLAIN_FILE,
    SPLITS_FILE,
    BucketBatchSampler,
    collate,
    load_corpus,
    make_chunks,
    padding_waste,
    reassemble,
    split_lines,
)


def test_load_corpus_reads_verifies_and_splits(sample_dir, sample_lines):
    corpus = load_corpus(sample_dir)
    assert corpus.plain == sample_lines
    assert corpus.cipher == [encrypt(line) for line in sample_lines]
    plain, cipher = corpus.lines("test")
    assert [encrypt(p) for p in plain] == cipher


def test_missing_cipher_file_is_created_deterministically(sample_dir):
    expected = (sample_dir / CIPHER_FILE).read_bytes()
    (sample_dir / CIPHER_FILE).unlink()
    load_corpus(sample_dir)
    assert (sample_dir / CIPHER_FILE).read_bytes() == expected


def test_data_dir_from_environment(sample_dir, monkeypatch):
    monkeypatch.setenv("CIPHERLAB_DATA_DIR", str(sample_dir))
    assert load_corpus().data_dir == sample_dir


def test_missing_plaintext_says_how_to_point_at_data(tmp_path):
    with pytest.raises(FileNotFoundError, match="--data-dir"):
        load_corpus(tmp_path)


def test_corrupted_line_is_reported_with_its_file_and_line(sample_dir):
    lines = (sample_dir / CIPHER_FILE).read_text().split("\n")
    lines[3] = lines[3][:40] + ("1" if lines[3][40] == "0" else "0") + lines[3][41:]
    (sample_dir / CIPHER_FILE).write_text("\n".join(lines))
    with pytest.raises(DatasetError, match=rf"{CIPHER_FILE}, line 4: does not decrypt .* character 5"):
        load_corpus(sample_dir)


def test_splits_are_disjoint_cover_every_line_and_are_stable(sample_dir, sample_lines):
    first = load_corpus(sample_dir).splits
    again = load_corpus(sample_dir).splits
    assert first == again
    ids = first["train"] + first["val"] + first["test"]
    assert sorted(ids) == list(range(len(sample_lines)))
    assert len(first["train"]) == round(0.8 * len(sample_lines))


@given(st.integers(0, 3000))
def test_split_lines_partitions_any_size(n):
    splits = split_lines(n)
    ids = [i for part in splits.values() for i in part]
    assert sorted(ids) == list(range(n))


def test_stale_split_file_from_other_data_is_not_reused(sample_dir, capsys, sample_lines):
    load_corpus(sample_dir)
    saved = json.loads((sample_dir / SPLITS_FILE).read_text())
    saved["sha256"] = "0" * 64
    saved["train"], saved["test"] = saved["test"], saved["train"]
    (sample_dir / SPLITS_FILE).write_text(json.dumps(saved))
    corpus = load_corpus(sample_dir)
    assert "other data" in capsys.readouterr().err
    assert len(corpus.splits["train"]) == round(0.8 * len(sample_lines))
    assert json.loads((sample_dir / SPLITS_FILE).read_text())["sha256"] == corpus.sha256


def test_chunks_reassemble_into_the_original_lines(sample_dir):
    corpus = load_corpus(sample_dir)
    ids = range(len(corpus))
    chunks = make_chunks(corpus.plain, corpus.cipher, ids, chunk_chars=16)
    for c in chunks:
        assert len(c.plain) <= 16 and c.cipher == encrypt(c.plain)  # phase 0 at every chunk start
    lines = reassemble((c.line, c.part, c.plain) for c in chunks)
    assert lines == {i: corpus.plain[i] for i in ids}


@given(st.lists(st.text(alphabet="ab ", max_size=70), min_size=1, max_size=8), st.sampled_from([8, 16, 24, 256]))
def test_any_lines_chunk_and_reassemble_exactly(lines, size):
    cipher = [encrypt(line) for line in lines]
    chunks = make_chunks(lines, cipher, range(len(lines)), chunk_chars=size)
    assert reassemble((c.line, c.part, c.cipher) for c in chunks) == dict(enumerate(cipher))


@pytest.mark.parametrize("size", [0, 250, 253])
def test_chunk_size_not_a_multiple_of_8_explains_the_key_phase(size):
    with pytest.raises(ValueError, match="key phase"):
        make_chunks(["abc"], [encrypt("abc")], [0], chunk_chars=size)


def test_reassemble_refuses_a_lost_chunk():
    with pytest.raises(ValueError, match=r"line 7: parts \[1\] are missing"):
        reassemble([(7, 0, "ab"), (7, 2, "cd")])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 300), min_size=1, max_size=300),
    st.integers(1, 2000),
    st.integers(1, 64),
    st.integers(0, 5),
)
def test_bucket_sampler_yields_every_example_once_within_budget(lengths, budget, max_batch, epoch):
    sampler = BucketBatchSampler(lengths, token_budget=budget, max_batch_size=max_batch, seed=3)
    sampler.set_epoch(epoch)
    batches = list(sampler)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    for b in batches:
        assert len(b) <= max_batch
        assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= budget
    assert batches == sampler.epoch_batches(epoch)  # deterministic per (seed, epoch)


def test_bucket_sampler_changes_order_between_epochs_and_wastes_little_padding():
    lengths = [(7 * i) % 200 + 1 for i in range(1000)]
    sampler = BucketBatchSampler(lengths, token_budget=2048, max_batch_size=32, seed=0)
    assert sampler.epoch_batches(0) != sampler.epoch_batches(1)
    g = torch.Generator().manual_seed(0)
    random_batches = torch.randperm(len(lengths), generator=g).split(32)
    assert padding_waste(lengths, sampler.batches) < 0.05 < padding_waste(lengths, [b.tolist() for b in random_batches])


def test_collate_pads_to_rectangles():
    batch = collate([([5, 6, 7], [1, 9, 2]), ([8], [1, 2])], src_pad_id=0, tgt_pad_id=3)
    assert batch["src"].tolist() == [[5, 6, 7], [8, 0, 0]]
    assert batch["tgt"].tolist() == [[1, 9, 2], [1, 2, 3]]
    assert batch["src"].dtype == torch.long


def test_cli_verify_accepts_good_data_and_rejects_a_corrupted_copy(sample_dir, capsys, sample_lines):
    assert main(["data", "verify", "--data-dir", str(sample_dir)]) == 0
    out = capsys.readouterr().out
    assert f"lines: {len(sample_lines)}" in out and "alphabet" in out
    lines = (sample_dir / CIPHER_FILE).read_text().split("\n")
    lines[1] = lines[1][:-1] + "x"
    (sample_dir / CIPHER_FILE).write_text("\n".join(lines))
    assert main(["data", "verify", "--data-dir", str(sample_dir)]) == 1
    err = capsys.readouterr().err
    assert f"{CIPHER_FILE}, line 2: character 'x'" in err and "Traceback" not in err


def test_plaintext_character_beyond_a_byte_is_named_with_its_line(tmp_path):
    (tmp_path / PLAIN_FILE).write_text("fine\nnot \u0100 fine\n", encoding="utf-8")
    (tmp_path / CIPHER_FILE).write_text(encrypt("fine") + "\n" + "0" * 80 + "\n")
    with pytest.raises(DatasetError, match=rf"{PLAIN_FILE}, line 2: character .*\(code 256\) at position 4"):
        load_corpus(tmp_path)


def test_file_that_is_not_utf8_is_named_with_its_line(tmp_path):
    (tmp_path / PLAIN_FILE).write_bytes(b"fine\nbad \xff byte\n")
    with pytest.raises(DatasetError, match=rf"{PLAIN_FILE}, line 2: not valid UTF-8"):
        load_corpus(tmp_path)


# --------------------------------------------------------------------------- data/letters: the official format


def test_reduce_to_letters_keeps_word_boundaries_and_drops_the_rest():
    from cipherlab.data.sources.letters import reduce_to_letters

    assert reduce_to_letters("The mayor's term -- Jan. 1, 1962 -- ended.") == "The mayors term Jan ended"
    assert reduce_to_letters("a well-known 'quote' (and $5)") == "a well known quote and"
    assert reduce_to_letters("1961: 42%") == ""


def test_join_paragraphs_never_cuts_or_reorders_and_respects_the_maximum():
    from cipherlab.data.sources.letters import MAX_CHARS, join_paragraphs

    paragraphs = [("word " * n).strip() for n in [3, 500, 1, 200, 80, 530, 2, 7, 400, 60] * 5]
    lines = join_paragraphs(paragraphs)
    assert " ".join(lines) == " ".join(paragraphs)
    assert all(0 < len(line) <= MAX_CHARS for line in lines)


def test_letters_dataset_rebuilds_byte_for_byte_in_the_official_format(tmp_path, capsys):
    """`data build-letters` remakes the committed data/letters/brown_plain.txt, and it verifies."""
    import re
    import statistics

    from cipherlab.data.corpus import REPO_DATA_DIR
    from cipherlab.data.sources.letters import MAX_CHARS, OFFICIAL_MEDIAN

    out = tmp_path / PLAIN_FILE
    assert main(["data", "build-letters", "--out", str(out)]) == 0
    assert out.read_bytes() == (REPO_DATA_DIR / "letters" / PLAIN_FILE).read_bytes()
    lines = out.read_text(encoding="ascii").splitlines()
    assert all(re.fullmatch(r"[A-Za-z]+( [A-Za-z]+)*", line) for line in lines)
    lengths = [len(line) for line in lines]
    assert len(lines) == 2947 and max(lengths) == 2646 <= MAX_CHARS and min(lengths) >= 19
    assert abs(statistics.median(lengths) - OFFICIAL_MEDIAN) <= 5  # 552
    capsys.readouterr()
    assert main(["data", "verify", "--data-dir", str(tmp_path)]) == 0
    report = capsys.readouterr().out
    assert "lines: 2947" in report and "alphabet: ' ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'" in report
