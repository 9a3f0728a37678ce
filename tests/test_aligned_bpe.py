"""The aligned BPE (the assignment preset's tokenisation), learning curves and step-limited training."""

from __future__ import annotations

import json

import pytest
import torch

from cipherlab.data.cipher import encrypt
from cipherlab.pipeline.codec import codec_from_artifacts, fit_codec, select_lines
from cipherlab.base.config import TOKENIZATIONS, ConfigError, make_config, tokenization_of
from cipherlab.data.corpus import load_corpus, make_chunks, shuffle_chunks
from cipherlab.models.embedding import bit_features
from cipherlab.data.tokenizers import BPETokenizer
from cipherlab.data.tokenizers.cipher_task import aligned_target, aligned_target_ids, get_tokenizers
from cipherlab.data.tokenizers.pretokenize import PhaseByte8Unit, phase_symbols

# a source vocabulary a little above the 2,048 phase-tagged bytes and the specials: a few dozen merges
SMALL = dict(source_mode="phase", src_vocab=2051 + 40, tgt_vocab=None, target_tokens="aligned")


def test_phase_unit_tags_each_byte_with_its_key_phase_and_joins_back():
    bits = encrypt("key phase!")  # 10 characters: phases 0..7, then 0, 1 again
    symbols = PhaseByte8Unit().split(bits)
    assert [s[0] for s in symbols] == list("abcdefghab")
    assert PhaseByte8Unit().join(symbols) == bits
    assert len(PhaseByte8Unit.full_alphabet) == 2048
    assert phase_symbols("".join(symbols[:2])) == [(0, int(bits[:8], 2)), (1, int(bits[8:16], 2))]


def test_aligned_target_token_i_is_the_plaintext_of_source_token_i(sample_dir):
    corpus = load_corpus(sample_dir)
    src, tgt = get_tokenizers(corpus, "phase", SMALL["src_vocab"], None, "aligned")
    assert src.merges and tgt.merges  # merges on both sides
    assert len(tgt.merges) == len(src.merges)
    multi = 0
    for plain, cipher in zip(*corpus.lines("val")):
        ids = src.encode(cipher)
        targets = aligned_target_ids(src, tgt, ids, plain)
        assert len(targets) == len(ids) and tgt.decode(targets) == plain
        start = 0
        for s, t in zip(ids, targets):  # each source token's bits are the cipher of its target token's text
            n = len(tgt.token(t))
            assert PhaseByte8Unit().join([src.token(s)]) == cipher[8 * start: 8 * (start + n)]
            assert tgt.token(t) == plain[start: start + n]
            multi += n > 1
            start += n
    assert multi > 0  # the merges are used on English


def test_aligned_target_refuses_a_pair_that_is_not_one_cipher():
    src = BPETokenizer.train([encrypt("abab abab")], 2051 + 3, pretokenizer="cipher", unit="byte8-phase")
    with pytest.raises(ValueError, match="stands for both"):
        aligned_target(src, ["abab abab", "xbab abab"], [encrypt("abab abab"), encrypt("abab abab")])


def test_aligned_configurations_are_checked_and_named():
    assert tokenization_of(make_config("c1", "assignment")) == "aligned"
    assert tokenization_of(make_config("c1", "assignment", **TOKENIZATIONS["notes"])) == "notes"
    assert tokenization_of(make_config("c1", "cpu")) == "chars"
    with pytest.raises(ConfigError, match="source_mode=phase and tgt_vocab=null"):
        make_config("c1", "cpu", target_tokens="aligned")


@pytest.mark.parametrize("name", ["c1", "c2", "c3", "c4"])
def test_the_assignment_preset_learns_merges_on_both_sides(name, sample_dir):
    config = make_config(name, "assignment", src_vocab=SMALL["src_vocab"])  # the preset's tokenisation, fewer merges
    codec = fit_codec(config, select_lines(load_corpus(sample_dir), config))
    assert codec.aligned and codec.src.merges and codec.tgt.merges
    assert make_config(name, "assignment").src_vocab > 2051  # merges beyond the phase-tagged bytes


def test_merges_learned_on_the_training_chunks_are_the_recipes_chunks(sample_dir):
    config = make_config("c1", "smoke", **SMALL, merges_on="chunks", max_train_lines=None)
    corpus = select_lines(load_corpus(sample_dir), config)
    codec = fit_codec(config, corpus)
    chunks = shuffle_chunks(make_chunks(corpus.plain, corpus.cipher, corpus.splits["train"], config.chunk_chars),
                            config.phase_shuffle, 0, config.case_flip)
    expected = BPETokenizer.train([c.cipher for c in chunks], config.src_vocab, pretokenizer="cipher",
                                  unit="byte8-phase")
    assert codec.src.merges == expected.merges
    assert "phase_shuffle=1.0" in codec.src.metadata["split"]
    lines = fit_codec(make_config("c1", "smoke", **SMALL, max_train_lines=None), corpus)
    assert lines.src.merges != codec.src.merges  # learned on other text


def test_composed_bit_features_build_a_merged_token_from_its_characters():
    features = bit_features([65, ((65, 66), None), None])
    one, two = features[0], features[1]
    assert torch.equal(two[:8], one[:8])  # slot 0 of "AB" holds A's bits
    assert torch.equal(two[8:16], bit_features([66])[0, :8])  # slot 1 holds B's
    assert one[16:18].tolist() == [1.0, 0.0] and two[16:18].tolist() == [0.0, 1.0]  # lengths 1 and 2
    assert features[:, 18:].sum(dim=0).tolist() == [1.0, 1.0]  # own rows: the merged token and the special
    tagged = bit_features([(65, 3), ((65, 66), 2)])
    assert tagged[0, 16 + 3] == 1 and tagged[1, 16 + 2] == 1  # the phase of the token's first byte


def test_an_aligned_model_trains_saves_and_reloads_with_its_codec(sample_dir, tmp_path):
    from cipherlab.runner.trained import load_trained
    from cipherlab.pipeline.decode import decrypt_lines
    from cipherlab.runner.training import train_config

    config = make_config("c1", "smoke", **SMALL, max_epochs=1)
    run = train_config(config, tmp_path / "run", data_dir=sample_dir, device="cpu")
    model, codec, loaded = load_trained(run.best_checkpoint, "cpu")
    assert codec.aligned and loaded.target_tokens == "aligned"
    plain = load_corpus(sample_dir).lines("test")[0][:2]
    out = decrypt_lines(model, codec, [encrypt(p) for p in plain], chunk_chars=config.chunk_chars, length_aware=True,
                        device="cpu")
    assert [len(o) for o in out] == [len(p) for p in plain]  # the cipher's length, in characters
    rebuilt = codec_from_artifacts(loaded, codec.artifacts())
    assert rebuilt.aligned and rebuilt.tgt.merges == codec.tgt.merges
    from cipherlab.analysis.attention_maps import attention_view  # weights mapped back to characters (doctor, the attention chapter)

    corpus = load_corpus(sample_dir)
    chunks = [c for c in make_chunks(corpus.plain, corpus.cipher, corpus.splits["train"], config.chunk_chars)
              if len(c.plain) == config.chunk_chars][:3]
    view = attention_view(model, codec, chunks)
    cross = view.maps[("cross", 0)]
    assert cross.shape[-2:] == (config.chunk_chars, config.chunk_chars)
    # a character's row: at most its token's weights (what sits on the end-of-source token covers no character)
    assert (cross.sum(-1) <= 1 + 1e-5).all() and (cross.sum(-1) > 0).all()


def test_eval_every_writes_a_learning_curve_and_changes_nothing_of_the_run(sample_dir, tmp_path):
    from cipherlab.runner.training import train_config

    base = make_config("c1", "smoke", max_epochs=2, warmup_steps=4)
    plain = train_config(base, tmp_path / "plain", data_dir=sample_dir, device="cpu")
    curved = train_config(make_config("c1", "smoke", max_epochs=2, warmup_steps=4, eval_every=2),
                          tmp_path / "curved", data_dir=sample_dir, device="cpu")
    assert [r["train_loss"] for r in plain.fit.history] == [r["train_loss"] for r in curved.fit.history]
    curve = [json.loads(line) for line in (tmp_path / "curved" / "curve.jsonl").read_text().splitlines()]
    steps = curved.fit.history[-1]["step"]
    assert [p["step"] for p in curve] == list(range(2, steps + 1, 2))
    assert all(0 <= p["val_accuracy"] <= 1 and 0 <= p["val_exact_chunks"] <= 1 for p in curve)
    assert not (tmp_path / "plain" / "curve.jsonl").exists()


def test_max_steps_stops_training_mid_epoch_and_resumes(sample_dir, tmp_path):
    from cipherlab.runner.training import train_config

    config = make_config("c1", "smoke", max_epochs=2, warmup_steps=4)
    full = train_config(config, tmp_path / "full", data_dir=sample_dir, device="cpu")
    steps = full.fit.history[-1]["step"]
    run = train_config(config, tmp_path / "run", data_dir=sample_dir, device="cpu", max_steps=steps - 1)
    assert run.fit.stopped == "max steps" and run.fit.epochs == 1  # one step short of the second epoch's end
    more = train_config(config, tmp_path / "run", data_dir=sample_dir, device="cpu", resume=True)
    assert more.fit.stopped == "max_epochs" and more.fit.epochs == 2
    assert [r["train_loss"] for r in more.fit.history] == [r["train_loss"] for r in full.fit.history]


def test_each_phase_tagged_token_gets_its_first_characters_key_phase(sample_dir):
    from cipherlab.pipeline.decode import greedy_decode

    config = make_config("c1", "smoke", **SMALL)
    codec = fit_codec(config, select_lines(load_corpus(sample_dir), config))
    lines = load_corpus(sample_dir).lines("train")[0]
    plain = next(p for p in lines if any(len(codec.src.token(i)) > 9 for i in codec.src.encode(encrypt(p))))
    ids = codec.encode_source(encrypt(plain))
    batch = codec.collate_sources([ids])
    lengths = [len(codec.src.token(i)) // 9 for i in ids]
    starts = [sum(lengths[:k]) for k in range(len(ids))]
    assert batch["src_phase"][0].tolist() == [s % 8 for s in starts]
    torch.manual_seed(0)
    model = codec.build_model(config).eval()
    with torch.inference_mode():  # cached decoding reads the same phases as the full pass
        state = model.begin_decoding(**batch)
        prefix = torch.tensor([[codec.bos_id, *aligned_target_ids(codec.src, codec.tgt, ids[:-1], plain)]])
        full = model.decode_prefix(state, prefix)
        steps = torch.stack([model.decode_step(state, prefix[:, t]) for t in range(prefix.size(1))], dim=1)
        assert torch.allclose(full, steps, atol=1e-5)
        other = model.begin_decoding(batch["src"])  # position mod 8 instead: another model input
        assert not torch.allclose(model.decode_prefix(other, prefix), full)
        out = greedy_decode(model, batch["src"], codec.bos_id, codec.eos_id, max_len=len(ids) + 2,
                            src_phase=batch["src_phase"])
        assert out.size(0) == 1


def test_assignment_steps_records_a_learning_curve_for_each_configuration(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    small = ["d_model=32", "n_heads=4", "enc_layers=1", "dec_layers=1", "ffn_dim=64", "max_train_lines=40",
             "src_vocab=2100", "chunk_chars=32", "token_budget=1024", "blt_window=32", "warmup_steps=2"]
    out = tmp_path / "steps.json"
    command = [sys.executable, str(root / "benchmarks" / "assignment_steps.py"), "--configs", "c1,c5", "--steps", "4",
               "--eval-every", "2", "--eval-lines", "4", "--threads", "1", "--out", str(out),
               *(arg for item in small for arg in ("--set", item))]
    subprocess.run(command, check=True, cwd=tmp_path, capture_output=True, text=True)
    record = json.loads(out.read_text())
    assert [r["config"] for r in record["runs"]] == ["c1", "c5"]
    for run in record["runs"]:
        assert [p["step"] for p in run["curve"]] == [2, 4] and run["seconds_per_step"] > 0
        assert run["hyperparameters"]["preset"] == "assignment" and run["plan"]["steps_per_epoch"] > 0
    assert record["runs"][0]["hyperparameters"]["target_tokens"] == "aligned"
    refused = subprocess.run([*command[:2], "--out", str(root / "results" / "x.json")], capture_output=True, text=True)
    assert refused.returncode == 2 and "does not write into results/" in refused.stderr
    # a candidate still at chance by its onset step stops there, and its curve so far is still the record
    flat = tmp_path / "flat.json"
    subprocess.run([*command[:3], "c1", *command[4:], "--set", "onset_step=2", "--set", "onset_accuracy=0.99",
                    "--out", str(flat)], check=True, cwd=tmp_path, capture_output=True, text=True)
    stopped = json.loads(flat.read_text())["runs"][0]
    assert stopped["stopped"].startswith("not learning: c1: teacher-forced validation accuracy is ")
    assert [p["step"] for p in stopped["curve"]] == [2] and stopped["params"] > 0


def test_every_part_of_the_default_recipe_says_what_it_knows():
    from cipherlab.base.config import RECIPE_KNOWLEDGE, RECIPES

    changed = {k for k, v in RECIPES["cipher"].items() if v != RECIPES["notes"][k]}
    assert changed <= set(RECIPE_KNOWLEDGE)
    assert all(text.split(":")[0] in ("nothing", "the key's period", "the bit structure of XOR")
               for text in RECIPE_KNOWLEDGE.values())


def test_bpe_dropout_cuts_training_chunks_finer_and_keeps_the_alignment(sample_dir):
    config = make_config("c1", "smoke", **SMALL)
    corpus = select_lines(load_corpus(sample_dir), config)
    codec = fit_codec(config, corpus)
    chunks = make_chunks(corpus.plain, corpus.cipher, corpus.splits["train"], config.chunk_chars)
    plain, dropped = codec.dataset(chunks), codec.dataset(chunks, dropout=0.5, seed=1)
    assert sum(plain.src_lengths) < sum(dropped.src_lengths)  # more, smaller tokens
    assert codec.dataset(chunks, dropout=0.5, seed=1).examples == dropped.examples  # drawn once, by the seed
    for chunk, (src, tgt) in zip(chunks, dropped.examples):
        assert codec.tgt.decode(tgt) == chunk.plain and len(tgt) == len(src) + 1  # + BOS and EOS, - the source EOS
    with pytest.raises(ConfigError, match="bpe_dropout"):
        make_config("c1", "smoke", bpe_dropout=1.0)


def test_the_tokens_flag_sets_the_whole_tokenisation():
    import argparse

    from cipherlab.cli.pipeline import _mode

    args = argparse.Namespace(source_mode=None, tokens="notes", set=["src_vocab=512"])
    assert _mode(args) == {**TOKENIZATIONS["notes"], "src_vocab": 512}  # --set still wins
    args = argparse.Namespace(source_mode=None, tokens=None, set=[])
    assert _mode(args) == {}
    config = make_config("c1", "smoke", **_mode(argparse.Namespace(source_mode=None, tokens="aligned", set=[])))
    assert config.run_name == "smoke-phase" and tokenization_of(config) == "aligned"
