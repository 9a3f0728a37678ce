"""The assembled encoder-decoder: masks, KV-cache decoding, parameter counts, configuration errors."""

import pytest
import torch
from torch import nn

from cipherlab.models.attention import GroupedQueryAttention, MultiHeadAttention
from cipherlab.models.norm import RMSNorm
from cipherlab.pipeline.decode import greedy_decode
from cipherlab.models.transformer import (ModelArgs, Seq2SeqTransformer, cross_kv_cache_bytes, init_transformer_weights,
                                          kv_cache_bytes)

PAD, BOS, EOS = 0, 1, 2
TINY = dict(d_model=32, n_heads=4, enc_layers=2, dec_layers=2, ffn_dim=64, dropout=0.0, max_len=64)
CONFIGS = {
    "C1": dict(),
    "C2": dict(pos_encoding="rope"),
    "C3": dict(attn_type="gqa", n_kv_heads=2),
    "C4": dict(norm="rmsnorm"),
    "learned": dict(pos_encoding="learned"),
}


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def tiny_model(name="C1", **overrides):
    return Seq2SeqTransformer(ModelArgs(40, 50, **{**TINY, **CONFIGS[name], **overrides})).eval()


def _ids(B, L, vocab, lo=3):
    return torch.randint(lo, vocab, (B, L))


@pytest.mark.parametrize("name", CONFIGS)
def test_forward_gives_one_logit_row_per_target_position(name):
    model = tiny_model(name)
    assert model(_ids(3, 9, 40), _ids(3, 6, 50)).shape == (3, 6, 50)


@pytest.mark.parametrize("name", CONFIGS)
def test_causal_decoder_ignores_future_tokens(name):
    model = tiny_model(name)
    src, tgt = _ids(2, 8, 40), _ids(2, 7, 50)
    changed = tgt.clone()
    changed[:, 4:] = _ids(2, 3, 50)
    torch.testing.assert_close(model(src, changed)[:, :4], model(src, tgt)[:, :4])
    assert not torch.allclose(model(src, changed)[:, 4:], model(src, tgt)[:, 4:])


@pytest.mark.parametrize("name", CONFIGS)
def test_extra_padding_does_not_change_outputs_at_real_positions(name):
    model = tiny_model(name)
    src, tgt = _ids(2, 8, 40), _ids(2, 6, 50)
    padded_src = torch.cat([src, torch.full((2, 5), PAD)], dim=1)
    padded_tgt = torch.cat([tgt, torch.full((2, 3), PAD)], dim=1)
    torch.testing.assert_close(model(padded_src, padded_tgt)[:, :6], model(src, tgt), atol=1e-5, rtol=1e-5)


def test_encoder_without_positions_is_permutation_equivariant():
    encoder = tiny_model().encoder
    x = torch.randn(1, 6, 32)
    perm = torch.tensor([2, 5, 0, 1, 4, 3])
    torch.testing.assert_close(encoder(x[:, perm]), encoder(x)[:, perm])


@pytest.mark.parametrize("name", CONFIGS)
def test_kv_cache_logits_equal_full_recomputation_token_by_token(name):
    model = tiny_model(name)
    src, tgt = _ids(3, 9, 40), _ids(3, 8, 50)
    src[0, 6:] = PAD
    memory, src_mask = model.encode(src)
    full = model.decode(tgt, memory, src_mask)
    cache = model.decoder.new_cache()
    steps = [model.decode(tgt[:, t:t + 1], memory, src_mask, cache) for t in range(tgt.size(1))]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.length == tgt.size(1)


@pytest.mark.parametrize("name", CONFIGS)
def test_greedy_decoding_with_and_without_cache_agree(name):
    model = tiny_model(name)
    src = _ids(4, 10, 40)
    src[1, 7:] = PAD
    cached = greedy_decode(model, src, BOS, EOS, max_len=12, use_cache=True)
    assert torch.equal(cached, greedy_decode(model, src, BOS, EOS, max_len=12, use_cache=False))
    assert cached.shape == (4, 12) and not (cached == PAD).any()


def test_greedy_decode_stops_when_every_row_has_emitted_eos_and_pads_finished_rows():
    model = tiny_model()
    script = torch.tensor([[5, EOS, 7, 7, 7, 7], [5, 6, 8, EOS, 7, 7]])  # the token each row "predicts" per step

    def scripted_decode(tgt_in, memory, src_mask, cache=None):
        step = tgt_in.size(1) - 1 if cache is None else cache.self_attn[0].length
        if cache is not None:
            cache.self_attn[0].update(torch.zeros(2, 1, 1, 1), torch.zeros(2, 1, 1, 1))
        logits = torch.zeros(2, tgt_in.size(1), 50)
        logits[torch.arange(2), -1, script[:, step]] = 1.0
        logits[:, -1, PAD] = 5.0  # PAD is never chosen, however high its score
        return logits

    model.decode = scripted_decode
    out = greedy_decode(model, _ids(2, 5, 40), BOS, EOS, max_len=10)
    assert out.tolist() == [[5, EOS, PAD, PAD], [5, 6, 8, EOS]]
    assert greedy_decode(model, _ids(2, 5, 40), BOS, EOS, max_len=10, use_cache=False).tolist() == out.tolist()
    assert greedy_decode(model, _ids(2, 5, 40), BOS, EOS, max_len=3).tolist() == [[5, EOS, PAD], [5, 6, 8]]


@pytest.mark.parametrize("name, n_kv", [("C1", 4), ("C3", 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kv_cache_bytes_equal_the_bytes_of_a_real_cache(name, n_kv, dtype):
    model = tiny_model(name).to(dtype)
    B, Ls, Lt = 3, 9, 7
    memory, src_mask = model.encode(_ids(B, Ls, 40))
    cache = model.decoder.new_cache()
    for t in range(Lt):
        model.decode(_ids(B, 1, 50), memory, src_mask, cache)
    measured = cache.nbytes()
    assert kv_cache_bytes(model, B, Lt, dtype) == measured["self_attn"]
    assert cross_kv_cache_bytes(model, B, Ls, dtype) == measured["cross_attn"]
    assert measured["self_attn"] == 2 * 2 * B * n_kv * Lt * 8 * dtype.itemsize  # layers * K,V * B * heads * L * d


def test_gqa_shrinks_the_self_attention_cache_by_heads_over_kv_heads():
    c1, c3 = tiny_model("C1"), tiny_model("C3")
    assert kv_cache_bytes(c1, 8, 256) == 2 * kv_cache_bytes(c3, 8, 256)
    assert cross_kv_cache_bytes(c1, 8, 256) == cross_kv_cache_bytes(c3, 8, 256)


SEED_SIZES = dict(src_vocab_size=1024, tgt_vocab_size=8000)  # d_model 256, 8 heads, 4+4 layers, ffn 1024


def _closed_form_params(V_src, V_tgt, D=256, F=1024, layers=4, kv_dim=256, norm_params=2 * 256):
    self_attn = 2 * (D * D + D) + 2 * (D * kv_dim + kv_dim)
    cross_attn = 4 * (D * D + D)
    ffn = D * F + F + F * D + D
    encoder = layers * (self_attn + ffn + 2 * norm_params) + norm_params
    decoder = layers * (self_attn + cross_attn + ffn + 3 * norm_params) + norm_params
    return (V_src + V_tgt) * D + encoder + decoder  # output head tied: no extra matrix


def test_c1_and_c3_parameter_totals_at_the_seed_sizes_match_closed_forms():
    c1 = Seq2SeqTransformer(ModelArgs(**SEED_SIZES))
    c2 = Seq2SeqTransformer(ModelArgs(**SEED_SIZES, pos_encoding="rope"))
    c3 = Seq2SeqTransformer(ModelArgs(**SEED_SIZES, attn_type="gqa", n_kv_heads=2))
    c4 = Seq2SeqTransformer(ModelArgs(**SEED_SIZES, norm="rmsnorm"))
    assert c1.num_params() == _closed_form_params(1024, 8000) == 9_683_968
    assert c3.num_params() == _closed_form_params(1024, 8000, kv_dim=64) == 8_894_464
    assert c4.num_params() == _closed_form_params(1024, 8000, norm_params=256) == 9_678_336
    assert c2.num_params() == c1.num_params()  # RoPE has no parameters


def test_output_head_is_the_target_embedding_matrix():
    model = tiny_model()
    h = torch.randn(2, 3, 32)
    x = torch.zeros(2, 3, dtype=torch.long)
    model.decoder.forward = lambda *args, **kwargs: h
    torch.testing.assert_close(model.decode(x, None, None), h @ model.tgt_embed.weight.T)


def test_initialisation_is_xavier_for_linears_and_inverse_sqrt_d_for_embeddings():
    model = Seq2SeqTransformer(ModelArgs(1000, 2000, d_model=256, n_heads=8, enc_layers=1, dec_layers=1))
    for emb in (model.src_embed, model.tgt_embed):
        assert emb.weight.std().item() == pytest.approx(256 ** -0.5, rel=0.05)
    linear = model.encoder.layers[0].ffn.linear1
    bound = (6 / (linear.in_features + linear.out_features)) ** 0.5
    assert linear.weight.abs().max().item() <= bound and linear.weight.std().item() == pytest.approx(bound / 3 ** 0.5, rel=0.05)
    assert all((m.bias == 0).all() for m in model.modules() if isinstance(m, nn.Linear) and m.bias is not None)
    fresh = nn.Module()
    fresh.embed = nn.Embedding(10, 64)
    init_transformer_weights(fresh)
    assert fresh.embed.weight.std().item() < 0.3


def test_flags_select_the_configurations():
    c2, c3, c4 = tiny_model("C2"), tiny_model("C3"), tiny_model("C4")
    assert c2.pos_enc is None and c2.encoder.layers[0].self_attn.rope is not None
    assert c2.decoder.layers[0].cross_attn.rope is not None  # rope_cross_attention=True by default
    assert tiny_model("C2", rope_cross_attention=False).decoder.layers[0].cross_attn.rope is None
    assert isinstance(c3.decoder.layers[0].self_attn, GroupedQueryAttention)
    cross = c3.decoder.layers[0].cross_attn
    assert type(cross) is MultiHeadAttention and cross.n_kv_heads == cross.n_heads
    assert isinstance(c4.encoder.final_norm, RMSNorm) and isinstance(c4.decoder.layers[1].norm3, RMSNorm)


def test_fused_attention_model_equals_scratch_model():
    scratch = tiny_model("C2")
    fused = tiny_model("C2", fused_attention=True)
    fused.load_state_dict(scratch.state_dict())
    src, tgt = _ids(2, 8, 40), _ids(2, 6, 50)
    src[0, 5:] = PAD
    torch.testing.assert_close(fused(src, tgt), scratch(src, tgt), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["C1", "C2", "C3"])
def test_model_runs_under_bf16_autocast_and_in_pure_bf16(name):
    model = tiny_model(name)
    src, tgt = _ids(2, 8, 40), _ids(2, 6, 50)
    src[1, :] = PAD  # an all-PAD source line: every cross-attention row is blind
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(src, tgt)
    assert torch.isfinite(logits).all()
    assert torch.isfinite(model.to(torch.bfloat16)(src, tgt)).all()


def test_training_step_gives_finite_gradients_with_an_all_pad_source():
    model = tiny_model("C1", dropout=0.1).train()
    src, tgt = _ids(2, 8, 40), _ids(2, 6, 50)
    src[1, :] = PAD
    model(src, tgt).sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_bad_configurations_raise_errors_that_say_what_to_change():
    cases = [
        (dict(d_model=30, n_heads=4), r"d_model=30 is not divisible by n_heads=4"),
        (dict(d_model=24, n_heads=8, pos_encoding="rope"), r"head_dim=3 is odd"),
        (dict(attn_type="gqa", n_kv_heads=3), r"n_heads=4 is not a multiple of n_kv_heads=3"),
        (dict(attn_type="gqa"), r"attn_type='gqa' needs n_kv_heads"),
        (dict(pos_encoding="alibi"), r"unknown pos_encoding 'alibi'.*'sinusoidal', 'rope', 'learned'"),
        (dict(norm="batchnorm"), r"unknown norm 'batchnorm'"),
        (dict(attn_type="mla"), r"unknown attn_type 'mla'"),
    ]
    for overrides, message in cases:
        with pytest.raises(ValueError, match=message):
            Seq2SeqTransformer(ModelArgs(40, 50, **{**TINY, **overrides}))


def test_targets_longer_than_max_len_raise():
    model = tiny_model(max_len=8)
    with pytest.raises(ValueError, match=r"max_len=8"):
        model(_ids(1, 4, 40), _ids(1, 9, 50))


@pytest.mark.parametrize("cross", [False, True])
def test_rope_in_cross_attention_decodes_the_same_with_and_without_the_cache(cross):
    torch.manual_seed(0)
    model = Seq2SeqTransformer(ModelArgs(20, 20, d_model=32, n_heads=4, enc_layers=1, dec_layers=2, ffn_dim=64,
                                         dropout=0.0, pos_encoding="rope", rope_cross_attention=cross)).eval()
    assert (model.decoder.layers[0].cross_attn.rope is not None) == cross
    src = torch.randint(3, 20, (3, 9))
    cached = greedy_decode(model, src, 1, 2, 12, use_cache=True)
    assert torch.equal(cached, greedy_decode(model, src, 1, 2, 12, use_cache=False))


def test_cross_attention_rope_scores_depend_on_target_minus_source_position():
    from cipherlab.models.positional import RotaryPositionalEmbedding

    rope = RotaryPositionalEmbedding(16, 64)
    q, k = torch.randn(1, 1, 1, 16), torch.randn(1, 1, 1, 16)
    score = lambda i, j: (rope.rotate(q, i) * rope.rotate(k, j)).sum().item()  # noqa: E731
    assert score(7, 7) == pytest.approx(score(0, 0), abs=1e-4)
    assert score(9, 4) == pytest.approx(score(5, 0), abs=1e-4)
    assert score(9, 4) != pytest.approx(score(9, 5), abs=1e-4)


# --------------------------------------------------------------------------- ModelArgs: the one way to build it

def test_model_args_are_frozen_and_compare_by_value():
    import dataclasses

    args = ModelArgs(40, 50, **TINY)
    assert args == ModelArgs(40, 50, **TINY) and hash(args) == hash(ModelArgs(40, 50, **TINY))
    assert args != ModelArgs(40, 50, **{**TINY, "norm": "rmsnorm"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        args.d_model = 64
    assert dataclasses.replace(args, norm="rmsnorm").norm == "rmsnorm" and args.norm == "layernorm"
    assert tiny_model().args == ModelArgs(40, 50, **TINY)


def test_the_embeddings_are_the_modules_given_or_plain_tables():
    model = tiny_model()
    assert type(model.src_embed) is nn.Embedding and model.src_embed.num_embeddings == 40
    assert type(model.tgt_embed) is nn.Embedding and model.tgt_embed.num_embeddings == 50
    assert model.phase_embed is None
    src_embed, tgt_embed = nn.Embedding(40, 32), nn.Embedding(50, 32)
    given = Seq2SeqTransformer(ModelArgs(40, 50, **TINY), src_embed=src_embed, tgt_embed=tgt_embed)
    assert given.src_embed is src_embed and given.tgt_embed is tgt_embed
    assert src_embed.weight.std().item() < 0.3  # init_transformer_weights reached it: N(0, 1/d), not N(0, 1)
    with pytest.raises(ValueError, match="target embedding has 40 rows for a vocabulary of 50"):
        Seq2SeqTransformer(ModelArgs(40, 50, **TINY), tgt_embed=nn.Embedding(40, 32))


@pytest.mark.parametrize("name", ["c1", "c2", "c3", "c4"])
def test_build_model_gives_the_model_the_args_its_config_asks_for(name):
    from cipherlab.base.config import make_config
    from cipherlab.pipeline.codec import build_model

    config = make_config(name, "smoke", bit_embeddings=False)  # bit embeddings need a codec's codes
    model = build_model(config, vocab_sizes=(40, 50), pad_id=1, fused_attention=True)
    assert isinstance(model, Seq2SeqTransformer)
    assert model.args == ModelArgs(
        40, 50, d_model=config.d_model, n_heads=config.n_heads, enc_layers=config.enc_layers,
        dec_layers=config.dec_layers, ffn_dim=config.ffn_dim, dropout=config.dropout,
        pos_encoding=config.pos_encoding, attn_type=config.attn_type,
        n_kv_heads=config.n_kv_heads if config.attn_type == "gqa" else None, norm=config.norm,
        src_pad_id=1, tgt_pad_id=1, fused_attention=True, rope_cross_attention=config.rope_cross_attention)
    assert (model.args.n_kv_heads == 2) == (name == "c3")
    assert config.phase_embedding and model.phase_embed.period == 8  # the recipe's key-phase vector, given to it


@pytest.mark.parametrize("call", [
    lambda: Seq2SeqTransformer(src_vocab_size=40, tgt_vocab_size=50),
    lambda: Seq2SeqTransformer(40, 50),
    lambda: Seq2SeqTransformer(ModelArgs(40, 50), d_model=32),
    lambda: Seq2SeqTransformer(),
], ids=["keywords", "positional", "args-and-keywords", "nothing"])
def test_anything_but_one_model_args_is_a_type_error(call):
    with pytest.raises(TypeError):
        call()
