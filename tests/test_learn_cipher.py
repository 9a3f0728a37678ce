"""Learning the cipher rather than the corpus: phase-preserving shuffles and bit-factored embeddings."""

import json
import random
from pathlib import Path

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cipherlab.data.cipher import encrypt
from cipherlab.base.config import make_config
from cipherlab.data.corpus import Chunk, phase_shuffle, shuffle_chunks
from cipherlab.pipeline.decode import greedy_decode
from cipherlab.models.blt import BLTArgs, BLTModel
from cipherlab.models.embedding import BitFactoredEmbedding, KeyPhaseEmbedding, bit_features
from cipherlab.models.transformer import ModelArgs, Seq2SeqTransformer
from cipherlab.data.tokenizers.bytes import SPECIAL_IDS

TEXT = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=64)
CODES = [None, None, None, *range(32, 127)]  # three specials, then the printable characters


def bit_model(phase: bool = False, **overrides) -> Seq2SeqTransformer:
    """A tiny model given bit-factored tables of CODES on both sides and, with ``phase``, the key-phase vector."""
    args = ModelArgs(len(CODES), len(CODES), d_model=16, n_heads=2, enc_layers=1, dec_layers=1, ffn_dim=32,
                     dropout=0.0, **overrides)
    return Seq2SeqTransformer(args, src_embed=BitFactoredEmbedding(CODES, 16), tgt_embed=BitFactoredEmbedding(CODES, 16),
                              phase_embed=KeyPhaseEmbedding(16, 8) if phase else None)


@settings(max_examples=60, deadline=None)
@given(TEXT, st.integers(0, 2**32 - 1))
def test_a_phase_shuffle_is_still_a_valid_cipher_pair_with_the_same_phases(text, seed):
    chunk = Chunk(3, 1, text, encrypt(text))
    shuffled = phase_shuffle(chunk, random.Random(seed))
    assert encrypt(shuffled.plain) == shuffled.cipher  # every pair is still the cipher's
    assert (shuffled.line, shuffled.part) == (3, 1)
    for phase in range(8):  # the same characters at each key phase, only reordered
        assert sorted(shuffled.plain[phase::8]) == sorted(text[phase::8])


def test_shuffles_move_characters_and_keep_the_share_asked_for():
    text = "the quick brown fox jumps over the lazy dog, again and again"
    chunks = [Chunk(i, 0, text, encrypt(text)) for i in range(400)]
    mixed = shuffle_chunks(chunks, 0.5, seed=0)
    changed = sum(c.plain != text for c in mixed)
    assert 150 < changed < 250  # about half, drawn with the seed
    assert shuffle_chunks(chunks, 0.5, seed=0) == mixed and shuffle_chunks(chunks, 0.0, seed=0) == chunks


def test_bit_features_are_the_bits_as_plus_minus_one_and_one_hot_for_the_rest():
    f = bit_features([0, 255, None, 65, None])
    assert f.shape == (5, 10)
    assert f[0, :8].tolist() == [-1.0] * 8 and f[1, :8].tolist() == [1.0] * 8
    assert f[2].tolist() == [0.0] * 8 + [1.0, 0.0] and f[4].tolist() == [0.0] * 9 + [1.0]


def test_a_bit_factored_table_is_linear_in_the_bits():
    torch.manual_seed(0)
    emb = BitFactoredEmbedding(list(range(256)), 16)
    w = emb.weight  # (256, 16)
    # bytes a, b, c, d with a ^ b == c ^ d (same bits flipped): rows differ by the same vector
    assert torch.allclose(w[0b1010] - w[0b1000], w[0b0011] - w[0b0001], atol=1e-6)
    assert torch.allclose(emb(torch.tensor([[5, 7]]))[0], w[[5, 7]])
    assert abs(w.std().item() - 16 ** -0.5) < 0.1  # the scale of cipherlab's ordinary embeddings


def test_the_tied_head_of_a_bit_factored_model_is_the_bit_table():
    model = bit_model()
    assert isinstance(model.tgt_embed, BitFactoredEmbedding)
    logits = model(torch.tensor([[3, 4, 5]]), torch.tensor([[1, 6]]))
    assert logits.shape == (1, 2, len(CODES))
    logits.sum().backward()
    assert model.tgt_embed.proj.grad is not None and model.src_embed.proj.grad.abs().sum() > 0


def test_config_switches_reach_both_model_families():
    from cipherlab.data.corpus import load_corpus
    from cipherlab.pipeline.codec import fit_codec, select_lines

    for name in ("c1", "c5"):
        config = make_config(name, "smoke", bit_embeddings=True, phase_shuffle=1.0)
        model = fit_codec(config, select_lines(load_corpus(), config)).build_model(config)
        embeds = [m for m in model.modules() if isinstance(m, BitFactoredEmbedding)]
        assert len(embeds) == 2, name
    plain = BLTModel(BLTArgs(d_model=16, n_heads=2, enc_layers=1, dec_layers=1, ffn_dim=32, window=8, patch_tgt=4,
                             local_layers=1, source_memory="bytes", **SPECIAL_IDS))
    assert not any(isinstance(m, BitFactoredEmbedding) for m in plain.modules())


def test_the_key_phase_embedding_is_periodic_and_follows_the_decoding_offset():
    torch.manual_seed(0)
    phase = KeyPhaseEmbedding(16, 8)
    table = phase(24)
    assert torch.equal(table[:8], table[8:16]) and not torch.equal(table[0], table[1])
    assert torch.equal(phase(3, offset=13), table[13:16])


def test_cached_greedy_decoding_equals_full_recomputation_with_phase_and_bit_embeddings():
    torch.manual_seed(0)
    model = bit_model(phase=True, pos_encoding="rope").eval()
    src = torch.randint(3, len(CODES), (2, 11))
    fast = greedy_decode(model, src, 1, 2, 12)
    ys = torch.ones(2, 1, dtype=torch.long)
    with torch.no_grad():
        for _ in range(fast.size(1)):
            logits = model(src, ys)  # the whole prefix again, no cache
            ys = torch.cat([ys, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(fast, ys[:, 1:])


def test_the_blt_takes_phase_and_bit_embeddings():
    from cipherlab.models.blt_patching import fixed_patch_membership

    torch.manual_seed(0)
    model = BLTModel(BLTArgs(d_model=16, n_heads=2, enc_layers=1, dec_layers=1, ffn_dim=32, window=8, patch_tgt=4,
                             local_layers=1, source_memory="bytes", **SPECIAL_IDS, bit_embeddings=True,
                             phase_embedding=True, key_period=8))
    assert model.local_encoder.phase_embed is not None and model.local_decoder.phase_embed is not None
    src = torch.randint(0, 256, (1, 12))
    member = fixed_patch_membership(torch.ones(1, 12, dtype=torch.bool), 4)
    tgt_in = torch.tensor([[257, *range(65, 72)]])
    assert model(src, member, tgt_in).shape == (1, 8, 259)


# --------------------------------------------------------------------------- the default recipe


@settings(max_examples=60, deadline=None)
@given(TEXT, st.integers(0, 2**32 - 1), st.sampled_from([0.0, 0.5, 1.0]))
def test_a_case_flip_is_still_a_valid_cipher_pair_that_changes_letters_only(text, seed, probability):
    from cipherlab.data.corpus import case_flip

    chunk = Chunk(2, 0, text, encrypt(text))
    flipped = case_flip(chunk, probability, random.Random(seed))
    assert encrypt(flipped.plain) == flipped.cipher  # (p ^ 0x20) ^ k == (p ^ k) ^ 0x20: no key needed
    assert flipped.plain.lower() == text.lower() and (flipped.line, flipped.part) == (2, 0)
    assert all(a == b for a, b in zip(flipped.plain, text) if not (b.isascii() and b.isalpha()))
    if probability == 1.0:
        assert flipped.plain == text.swapcase()
    if probability == 0.0:
        assert flipped == chunk


def test_case_flips_apply_to_the_shuffled_copies_and_need_shuffles():
    import pytest
    from cipherlab.base.config import ConfigError

    text = "the quick brown fox jumps over the lazy dog and again"
    chunks = [Chunk(i, 0, text, encrypt(text)) for i in range(200)]
    mixed = shuffle_chunks(chunks, 1.0, seed=0, flip_case=0.5)
    upper = sum(ch.isupper() for c in mixed for ch in c.plain)
    letters = sum(ch.isalpha() for c in mixed for ch in c.plain)
    assert 0.45 < upper / letters < 0.55 and all(encrypt(c.plain) == c.cipher for c in mixed)
    with pytest.raises(ConfigError, match="phase_shuffle"):
        make_config("c1", "cpu", phase_shuffle=0.0)  # the default recipe's case flips need shuffles


def test_every_preset_gives_the_recipe_and_notes_is_one_argument_away():
    from cipherlab.base.config import CONFIG_NAMES, PRESETS, RECIPES, config_from_dict, recipe_of

    for preset in PRESETS:
        for name in CONFIG_NAMES:
            config = make_config(name, preset)
            assert config.recipe == "cipher" and config.phase_shuffle == 1.0 and config.source_eos
            notes = make_config(name, preset, recipe="notes")
            assert notes.recipe == "notes" and not (notes.phase_shuffle or notes.bit_embeddings or notes.source_eos)
            assert config_from_dict(config.to_dict()) == config and config.to_dict()["recipe"] == "cipher"
    assert make_config("c1", "cpu", case_flip=0.25).recipe == "custom"
    assert make_config("c1", "cpu", recipe="notes").run_name == "cpu-notes" and make_config("c1", "cpu").run_name == "cpu"
    # a configuration without the "recipe" key names the recipe its fields make; the first recipe that learned
    # the cipher keeps its name, as the committed records of results/learn/ablation are of it
    old = make_config("c2", "cpu", recipe="shuffles").to_dict()
    old.pop("recipe")
    assert recipe_of(config_from_dict(old)) == "shuffles" and set(RECIPES) == {"cipher", "shuffles", "notes"}
    ablation = sorted((Path(__file__).resolve().parents[1] / "results" / "learn" / "ablation").glob("c*-seed*.json"))
    assert len(ablation) == 10
    for path in ablation:
        record = json.loads(path.read_text(encoding="utf-8"))
        assert record["recipe"] == config_from_dict(record["hyperparameters"]).recipe == "shuffles", path


def test_the_bits_mode_bpe_says_what_of_the_recipe_it_cannot_take():
    from cipherlab.base.config import recipe_caveats

    assert recipe_caveats(make_config("c1", "cpu")) == [] and recipe_caveats(make_config("c5", "assignment")) == []
    caveats = recipe_caveats(make_config("c1", "assignment", source_mode="bits", src_vocab=1024, tgt_vocab=8000,
                                         target_tokens="bpe"))
    assert any("bit_embeddings" in c and "BPE" in c for c in caveats)
    assert any("phase_embedding" in c for c in caveats)
    assert any("measured not to learn" in c for c in caveats)
    assert recipe_caveats(make_config("c1", "assignment")) == []  # each aligned token gets its own key phase


def test_the_end_of_source_token_ends_every_source_of_both_codecs():
    from cipherlab.pipeline.codec import fit_codec, select_lines
    from cipherlab.data.corpus import load_corpus, make_chunks

    corpus = load_corpus()
    for name in ("c1", "c5"):
        for source_eos in (True, False):
            config = make_config(name, "smoke", source_eos=source_eos)
            codec = fit_codec(config, select_lines(corpus, config))
            chunks = make_chunks(corpus.plain, corpus.cipher, corpus.splits["train"][:3], config.chunk_chars)
            batch = codec.collate([codec.dataset(chunks)[i] for i in range(len(chunks))])
            sources = [codec.encode_source(c.cipher) for c in chunks]
            alone = codec.collate_sources(sources)
            assert torch.equal(alone["src"], batch["src"])  # training and decoding see the same source
            eos = codec.src.eos_id if name == "c1" else codec.eos_id
            lengths = (batch["src"] != codec.src_pad_id).sum(1)
            last = batch["src"][torch.arange(len(chunks)), lengths - 1]
            assert bool((last == eos).all()) == source_eos, (name, source_eos)
            if name == "c5" and source_eos:  # EOS is a patch of its own: the last patch of each row
                member = batch["src_member"]
                for b, n in enumerate(lengths.tolist()):
                    k = int(member[b, :, n - 1].float().argmax())
                    assert member[b, k].sum() == 1 and not member[b, k + 1:].any()


def test_an_empty_source_is_one_end_of_source_token():
    from cipherlab.pipeline.codec import collate_source
    from cipherlab.models.blt_patching import ByteEntropyModel
    from cipherlab.data.tokenizers.bytes import EOS_ID

    entropy = ByteEntropyModel().fit([bytes(range(40)) * 3])
    src, member = collate_source(["", "01000001"], entropy, entropy.threshold_at(75.0), source_eos=True)
    assert src[0].tolist() == [EOS_ID, 256] and src[1].tolist() == [65, EOS_ID]
    assert member[0, 0].tolist() == [True, False] and member[1, :, 1].sum() == 1


def test_decoding_builds_no_autograd_graph():
    torch.manual_seed(0)
    model = bit_model().eval()
    out = greedy_decode(model, torch.randint(3, len(CODES), (2, 5)), 1, 2, 6)
    assert not out.requires_grad and torch.is_inference(out)


@settings(max_examples=60, deadline=None)
@given(TEXT, st.integers(0, 2**32 - 1), st.sampled_from([0.0, 0.3, 1.0]))
def test_a_substitution_is_still_a_valid_cipher_pair_over_the_alphabet(text, seed, probability):
    from cipherlab.data.corpus import substitute

    alphabet = "{}*#abcXYZ "
    chunk = Chunk(0, 4, text, encrypt(text))
    out = substitute(chunk, probability, alphabet, random.Random(seed))
    assert encrypt(out.plain) == out.cipher and len(out.plain) == len(text)  # the mask needs no key
    if probability == 1.0:
        assert set(out.plain) <= set(alphabet)
    if probability == 0.0:
        assert out == chunk


def test_substitutions_spread_rare_characters_and_draw_nothing_when_off():
    text = "the quick brown fox jumps over the lazy dog {and} again *"
    chunks = [Chunk(i, 0, text, encrypt(text)) for i in range(300)]
    assert shuffle_chunks(chunks, 1.0, seed=3, flip_case=0.5) == shuffle_chunks(chunks, 1.0, 3, 0.5, 0.0)
    mixed = shuffle_chunks(chunks, 1.0, seed=3, substitution=0.5)
    braces = sum(c.plain.count("{") for c in mixed)
    assert braces > 1.3 * 300 and all(encrypt(c.plain) == c.cipher for c in mixed)
