"""BPE from scratch, the cached task tokenizers, and the byte path (cipherlab.data.tokenizers)."""

from __future__ import annotations

import dataclasses
import doctest
import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cipherlab.data.cipher import encrypt
from cipherlab.data.corpus import load_corpus
from cipherlab.data.tokenizers import bpe, cipher_task, pretokenize
from cipherlab.data.tokenizers import bytes as byte_path
from cipherlab.data.tokenizers import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    VOCAB_SIZE,
    BPETokenizer,
    ByteTokenizer,
    TokenizerFileError,
    apply_merges,
    boundary_straddle_rate,
    get_tokenizers,
    learn_merges,
    merge_symbols,
    pair_counts,
    split_plaintext,
)

# ---------------------------------------------------------------------------- drill step 1

DRILL_CORPUS = "low low low low low lower lower newest newest newest widest widest"


def drill_word_counts() -> dict[tuple[str, ...], int]:
    return {tuple(word) + ("</w>",): n for word, n in Counter(DRILL_CORPUS.split()).items()}


@pytest.mark.parametrize("method", ["naive", "fast"])
def test_drill_first_merge_is_lo_with_weighted_count_7(method):
    trace = learn_merges(drill_word_counts(), 6, method=method, return_counts=True)
    assert trace[0] == (("l", "o"), 7)
    # Ties (7: ('l','o') and ('o','w'); 5: ('e','s'), ('s','t'), ('w','e'), ...) go to the smallest pair.
    assert trace == [
        (("l", "o"), 7),
        (("lo", "w"), 7),
        (("e", "s"), 5),
        (("es", "t"), 5),
        (("est", "</w>"), 5),
        (("low", "</w>"), 5),
    ]


@pytest.mark.parametrize("method", ["naive", "fast"])
def test_drill_merges_keep_all_12_word_occurrences(method):
    merges = learn_merges(drill_word_counts(), 6, method=method)
    merged = Counter()
    for symbols, n in drill_word_counts().items():
        merged[apply_merges(symbols, merges)] += n
    assert sum(merged.values()) == 12
    assert {"".join(symbols) for symbols in merged} == {w + "</w>" for w in set(DRILL_CORPUS.split())}


def test_merge_symbols_merges_adjacent_symbols_not_substrings():
    assert merge_symbols(("ab", "c", "a", "b"), ("a", "b")) == ("ab", "c", "ab")


def test_merge_symbols_merges_runs_left_to_right():
    assert merge_symbols(("a",) * 4, ("a", "a")) == ("aa", "aa")
    assert merge_symbols(("a",) * 3, ("a", "a")) == ("aa", "a")


def test_pair_counts_count_every_overlapping_position():
    assert pair_counts({("a", "a", "a", "a"): 2}) == {("a", "a"): 6}


def test_ties_go_to_the_lexicographically_smallest_pair():
    # ('b','c') and ('a','b') both occur 3 times; ('a','b') < ('b','c').
    assert learn_merges({("b", "c"): 3, ("a", "b"): 3}, 1) == [("a", "b")]


def test_learning_stops_when_no_pair_is_left():
    assert learn_merges({("a", "b"): 1, ("c",): 5}, 10) == [("a", "b")]
    assert learn_merges({}, 3) == []


def test_unknown_learner_method_is_rejected_by_name():
    with pytest.raises(ValueError, match="method='slow'"):
        learn_merges({("a", "b"): 1}, 1, method="slow")


# ------------------------------------------------------------------------- fast == naive

symbols = st.sampled_from(["a", "b", "c", "ab", "bc"])  # 'ab' is also what merging ('a','b') builds
sequence = st.one_of(
    st.lists(symbols, max_size=9).map(tuple),
    st.tuples(st.sampled_from(["a", "b"]), st.integers(1, 9)).map(lambda s: (s[0],) * s[1]),  # runs
)
corpora = st.dictionaries(sequence, st.integers(1, 4), max_size=6)


@settings(max_examples=300, deadline=None)
@given(corpus=corpora, num_merges=st.integers(0, 14))
def test_fast_learner_matches_naive_merge_for_merge(corpus, num_merges):
    fast = learn_merges(corpus, num_merges, method="fast", return_counts=True)
    naive = learn_merges(corpus, num_merges, method="naive", return_counts=True)
    assert fast == naive


def test_a_pair_is_learned_again_when_another_merge_rebuilds_its_string():
    # ('ab','c') and ('a','bc') both build 'abc', so ('abc','d') comes back after being merged.
    corpus = {("a", "b", "c", "d"): 3, ("a", "bc", "d"): 2}
    trace = learn_merges(corpus, 10, method="fast", return_counts=True)
    assert trace == learn_merges(corpus, 10, method="naive", return_counts=True)
    assert [pair for pair, _ in trace] == [("a", "b"), ("ab", "c"), ("abc", "d"), ("a", "bc"), ("abc", "d")]
    assert trace[-1][1] == 2


# ------------------------------------------------------------------- BPETokenizer: encode


@st.composite
def merge_tables(draw):
    """Any valid merge table over 'abc', including a pair merged twice and a string built twice."""
    tokens, merges = ["a", "b", "c"], []
    for _ in range(draw(st.integers(0, 12))):
        pair = (draw(st.sampled_from(tokens)), draw(st.sampled_from(tokens)))
        merges.append(pair)
        tokens.append(pair[0] + pair[1])
    return merges


@settings(max_examples=300, deadline=None)
@given(merges=merge_tables(), probes=st.lists(st.text(alphabet="abc", max_size=30), max_size=4))
def test_rank_heap_encoding_equals_replaying_every_merge_in_order(merges, probes):
    tok = BPETokenizer(merges, "abc", pretokenizer="cipher")
    for text in probes:
        assert tuple(tok.tokenize(text)) == (apply_merges(text, merges) if text else ())
        assert tok.decode(tok.encode(text)) == text


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(st.text(alphabet="01", max_size=40), min_size=1, max_size=5), probe=st.text(alphabet="01", max_size=40))
def test_trained_bit_tokenizer_round_trips_and_matches_replay(texts, probe):
    tok = BPETokenizer.train(texts, 30, pretokenizer="cipher", alphabet="01")
    for text in texts + [probe]:
        assert tuple(tok.tokenize(text)) == (apply_merges(text, tok.merges) if text else ())
        assert tok.decode(tok.encode(text)) == text


def test_plaintext_pretokenizer_glues_leading_whitespace_to_the_next_word():
    assert split_plaintext(" The jury\tsaid  it. ") == [" The", " jury", "\tsaid", "  it.", " "]
    assert "".join(split_plaintext("a \n b  ")) == "a \n b  "


def test_plaintext_merges_never_cross_a_piece():
    tok = BPETokenizer.train(["of the of the of the"], 40)
    assert all(token.strip() == token.lstrip() for token in tok.tokenize("of the"))
    assert "of the" not in tok.tokenize("of the of the")


def test_plaintext_round_trip_and_unseen_character_becomes_visible_unk():
    texts = ["The jury said it did find that many laws are outmoded.", "Hi there"]
    tok = BPETokenizer.train(texts, 60)
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (0, 1, 2, 3)
    for text in texts + ["", "  said the jury  "]:
        assert tok.decode(tok.encode(text)) == text
    ids = tok.encode("the zebra")  # 'z' and 'b' were never seen
    assert ids.count(tok.unk_id) == 2
    assert tok.decode(ids) == "the \ufffde\ufffdra"


def test_decode_skips_pad_bos_eos():
    tok = BPETokenizer.train(["abab"], 10)
    assert tok.decode([tok.bos_id, *tok.encode("ab"), tok.eos_id, tok.pad_id]) == "ab"


def test_vocab_size_is_reached_exactly_when_the_corpus_allows_it():
    tok = BPETokenizer.train([encrypt("The jury said it did find that many laws are outmoded.")], 30, pretokenizer="cipher", alphabet="01")
    assert tok.vocab_size == 30 and tok.unk_id is None


def test_unknown_symbol_without_unk_names_the_symbol_and_position():
    tok = BPETokenizer.train(["0101"], 6, pretokenizer="cipher", alphabet="01")
    with pytest.raises(ValueError, match=r"'2' at position 3"):
        tok.encode("0102")


# -------------------------------------------------------------- drill step 2: byte level

DRILL_TRAINING = ["the river and the road", "the quick brown fox", "the river flows"]
DRILL_SAMPLES = [
    "the river and the road",
    '{"userId":"a3f9-2c1b","amountCents":12995}',
    "def get_user(id): return db.get(id)",
    "550e8400-e29b-41d4-a716-446655440000",
    "నమస్కారం ప్రపంచం",
]


def test_byte_level_bpe_learns_the_drills_12_merges_and_round_trips_every_sample():
    tok = BPETokenizer.train(DRILL_TRAINING, 3 + 256 + 12, pretokenizer="cipher", unit="utf8-byte")
    # The drill's own learner, on bytes objects; bytes compare like their Latin-1 strings.
    vocab = Counter({tuple(bytes([b]) for b in text.encode()): 1 for text in DRILL_TRAINING})
    drill_merges = []
    for _ in range(12):
        counts = pair_counts(vocab)
        pair = min(counts, key=lambda p: (-counts[p], p))
        drill_merges.append(tuple(part.decode("latin-1") for part in pair))
        vocab = Counter({merge_symbols(s, pair): n for s, n in vocab.items()})
    assert tok.merges == drill_merges
    assert tok.unk_id is None and tok.vocab_size == 271
    for text in DRILL_SAMPLES:
        assert tok.decode(tok.encode(text)) == text
    assert tok.encode("") == []


# ----------------------------------------------------------------------- save and load


def test_save_then_load_gives_identical_encodings(tmp_path):
    texts = ["The jury said it did find that many laws are outmoded.", "the the the jury"]
    tok = BPETokenizer.train(texts, 50)
    tok.save(tmp_path / "tok.json")
    loaded = BPETokenizer.load(tmp_path / "tok.json")
    for text in texts + ["unseen qz"]:
        assert loaded.encode(text) == tok.encode(text)
    assert loaded.merges == tok.merges and loaded.vocab_size == tok.vocab_size
    saved = json.loads((tmp_path / "tok.json").read_text())
    assert {"version", "tie_rule", "pretokenizer", "unit", "alphabet", "merges"} <= saved.keys()


def _saved(tmp_path, **changes):
    path = tmp_path / "tok.json"
    BPETokenizer.train(["abcabc"], 9).save(path)
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))
    return path


def test_load_rejects_a_corrupt_file_naming_it(tmp_path):
    path = tmp_path / "tok.json"
    path.write_text('{"format": "cipherlab-bpe", "vers')
    with pytest.raises(TokenizerFileError, match="tok.json.*delete it and retrain"):
        BPETokenizer.load(path)


def test_load_rejects_an_unknown_version_naming_it(tmp_path):
    with pytest.raises(TokenizerFileError, match="tok.json: format version 99 is unknown"):
        BPETokenizer.load(_saved(tmp_path, version=99))


def test_load_rejects_a_merge_of_symbols_that_do_not_exist(tmp_path):
    with pytest.raises(TokenizerFileError, match="tok.json: damaged.*'zz'"):
        BPETokenizer.load(_saved(tmp_path, merges=[["zz", "a"]]))


# ------------------------------------------------------------------- the task tokenizers


@pytest.fixture
def training_calls(monkeypatch):
    """The vocab_size of every BPETokenizer.train call made during the test."""
    calls = []
    original = BPETokenizer.train.__func__

    def train(cls, texts, vocab_size, **kwargs):
        calls.append(vocab_size)
        return original(cls, texts, vocab_size, **kwargs)

    monkeypatch.setattr(BPETokenizer, "train", classmethod(train))
    return calls


def test_get_tokenizers_trains_once_then_loads_from_the_cache(sample_dir, training_calls):
    corpus = load_corpus(sample_dir)
    src, tgt = get_tokenizers(corpus, mode="bits", src_vocab=40, tgt_vocab=80)
    assert training_calls == [40, 80]
    src2, tgt2 = get_tokenizers(corpus, mode="bits", src_vocab=40, tgt_vocab=80)
    assert training_calls == [40, 80]
    assert (src2.merges, tgt2.merges) == (src.merges, tgt.merges)
    line = corpus.lines("val")[1][0]
    assert src2.encode(line) == src.encode(line)


def test_get_tokenizers_trains_on_the_training_split_only(sample_dir):
    corpus = load_corpus(sample_dir)
    train_plain, _ = corpus.lines("train")
    _, tgt = get_tokenizers(corpus, src_vocab=40, tgt_vocab=80)
    assert set(tgt.alphabet) == set("".join(train_plain))


def test_get_tokenizers_does_not_reuse_a_cache_for_other_data_or_settings(sample_dir, training_calls):
    corpus = load_corpus(sample_dir)
    get_tokenizers(corpus, src_vocab=40, tgt_vocab=80)
    get_tokenizers(dataclasses.replace(corpus, sha256="0" * 64), src_vocab=40, tgt_vocab=80)
    assert training_calls == [40, 80, 40, 80]
    get_tokenizers(corpus, src_vocab=41, tgt_vocab=80)  # the target tokenizer is reused
    get_tokenizers(corpus, mode="bytes", src_vocab=300, tgt_vocab=80)
    assert training_calls == [40, 80, 40, 80, 41, 300]


def test_get_tokenizers_refuses_a_cache_file_whose_stored_key_differs(sample_dir):
    corpus = load_corpus(sample_dir)
    get_tokenizers(corpus, src_vocab=40, tgt_vocab=80)
    (path,) = corpus.cache_dir.glob("bpe_target_80_*.json")
    data = json.loads(path.read_text())
    data["metadata"]["corpus_sha256"] = "f" * 64
    path.write_text(json.dumps(data))
    with pytest.raises(TokenizerFileError, match="delete the file"):
        get_tokenizers(corpus, src_vocab=40, tgt_vocab=80)


def test_bits_mode_tokens_straddle_character_boundaries_and_bytes_mode_tokens_never_do(sample_dir):
    corpus = load_corpus(sample_dir)
    _, cipher = corpus.lines("train")
    bits_src, _ = get_tokenizers(corpus, mode="bits", src_vocab=60, tgt_vocab=80)
    bytes_src, _ = get_tokenizers(corpus, mode="bytes", src_vocab=300, tgt_vocab=80)
    assert boundary_straddle_rate(bits_src, cipher) > 0.1
    assert boundary_straddle_rate(bytes_src, cipher) == 0.0
    line = encrypt("The jury said.")
    assert bits_src.decode(bits_src.encode(line)) == line
    assert bytes_src.decode(bytes_src.encode(line)) == line


def test_boundary_straddle_rate_counts_tokens_that_cut_a_character():
    merges = [("0", "0"), ("00", "00"), ("0000", "0000"), ("00000000", "00000000")]
    tok = BPETokenizer(merges, "01", pretokenizer="cipher")
    # [0, 16) crosses the boundary at 8 but holds two whole characters: it cuts nothing.
    assert tok.tokenize("0" * 16) == ["0" * 16]
    assert boundary_straddle_rate(tok, ["0" * 16]) == 0.0
    # [0, 4) [4, 5) [5, 13) [13, 15) [15, 16): only [5, 13) cuts characters 0 and 1.
    assert tok.tokenize("0000" + "1" + "0" * 11) == ["0000", "1", "0" * 8, "00", "0"]
    assert boundary_straddle_rate(tok, ["0000" + "1" + "0" * 11]) == pytest.approx(1 / 5)


# -------------------------------------------------------------------------- byte path


def test_byte_tokenizer_ids_and_specials():
    tok = ByteTokenizer()
    assert (PAD_ID, BOS_ID, EOS_ID, VOCAB_SIZE) == (256, 257, 258, 259)
    assert tok.encode_cipher(encrypt("Hi")) == [0b00001001, 0b00100111]
    assert tok.encode_plain("Hi\xff") == [72, 105, 255]
    assert tok.decode([BOS_ID, 72, 105, PAD_ID, EOS_ID]) == "Hi"


def test_byte_tokenizer_rejects_a_character_beyond_one_byte_naming_it():
    with pytest.raises(ValueError, match=r"'€' \(code 8364\) at position 2"):
        ByteTokenizer().encode_plain("ab€")


@pytest.mark.parametrize(("bits", "reason"), [("0101010", "not a multiple of 8"), ("0101201", "'2' at position 4")])
def test_byte_tokenizer_rejects_malformed_cipher(bits, reason):
    with pytest.raises(ValueError, match=reason):
        ByteTokenizer().encode_cipher(bits)


@pytest.mark.parametrize("module", [bpe.naive, bpe.fast, bpe.learn, bpe.tokenizer, pretokenize, byte_path, cipher_task])
def test_docstring_examples_hold(module):
    assert doctest.testmod(module).failed == 0


def test_vocab_size_none_learns_no_merges():
    texts = ["the cat", "the hat"]
    tok = BPETokenizer.train(texts, None)
    assert tok.merges == [] and tok.vocab_size == 3 + 1 + len(set("".join(texts)))
    assert tok.decode(tok.encode("the cat")) == "the cat"
