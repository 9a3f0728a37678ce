"""Attention checked against PyTorch's own modules, plus the claims chapters 2-3 make."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from cipherlab.models.attention import (GroupedQueryAttention, KVCache, MultiHeadAttention,
                                        ScaledDotProductAttention, causal_mask, make_attention, padding_mask,
                                        repeat_kv)
from cipherlab.models.positional import RotaryPositionalEmbedding

B, H, LQ, LK, D_HEAD = 2, 4, 5, 7, 8


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _qkv(lq=LQ, lk=LK):
    return torch.randn(B, H, lq, D_HEAD), torch.randn(B, H, lk, D_HEAD), torch.randn(B, H, lk, D_HEAD)


def _masks(lq=LQ, lk=LK):
    ids = torch.tensor([[5, 6, 7, 8, 9, 0, 0], [5, 6, 7, 8, 9, 10, 11]])[:, :lk]
    pad = padding_mask(ids, pad_id=0)  # (B, 1, 1, Lk)
    causal = torch.ones(lq, lk, dtype=torch.bool).triu(1)[None, None]  # (1, 1, Lq, Lk)
    return {"none": None, "padding": pad, "causal": causal, "padding|causal": pad | causal}


def test_padding_and_causal_masks_have_the_documented_shapes():
    ids = torch.tensor([[4, 5, 0], [4, 0, 0]])
    pad = padding_mask(ids, 0)
    assert pad.shape == (2, 1, 1, 3) and pad.dtype == torch.bool
    assert pad[1, 0, 0].tolist() == [False, True, True]
    causal = causal_mask(3)
    assert causal.shape == (1, 1, 3, 3)
    assert causal[0, 0].tolist() == [[False, True, True], [False, False, True], [False, False, False]]
    assert (pad | causal).shape == (2, 1, 3, 3)


def test_causal_mask_with_offset_lets_new_queries_read_the_cached_prefix():
    mask = causal_mask(2, offset=3)  # queries at positions 3 and 4, keys 0..4
    assert mask.shape == (1, 1, 2, 5)
    assert mask[0, 0].tolist() == [[False] * 4 + [True], [False] * 5]
    assert torch.equal(causal_mask(5)[..., 3:, :], mask)


@pytest.mark.parametrize("kind", ["none", "padding", "causal", "padding|causal"])
def test_scaled_dot_product_attention_matches_torch_sdpa(kind):
    q, k, v = _qkv()
    mask = _masks()[kind]
    ours = ScaledDotProductAttention()(q, k, v, mask)
    # torch's bool attn_mask means True = KEEP, ours True = BLOCKED
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask)
    torch.testing.assert_close(ours, ref)


def test_causal_mask_matches_torch_is_causal():
    q, k, v = _qkv(LQ, LQ)
    ours = ScaledDotProductAttention()(q, k, v, causal_mask(LQ))
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, is_causal=True))


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_query_with_every_key_blocked_outputs_zeros_never_nan(fused, dtype):
    q, k, v = (t.to(dtype).requires_grad_() for t in _qkv())
    mask = torch.zeros(B, 1, LQ, LK, dtype=torch.bool)
    mask[0, 0, 1] = True  # batch 0, query 1 sees no key
    mask[1] = True  # batch 1 sees nothing at all (an all-PAD source line)
    attn = ScaledDotProductAttention(fused=fused)
    out = attn(q, k, v, mask)
    assert torch.isfinite(out).all()
    assert (out[0, :, 1] == 0).all() and (out[1] == 0).all()
    assert (out[0, :, 0] != 0).any()
    out.float().sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()
    assert (q.grad[1] == 0).all()  # a blind query learns nothing from the keys it may not read
    torch_out = F.scaled_dot_product_attention(q, k, v, attn_mask=~mask)
    assert (torch_out[0, :, 1] == 0).all() and (torch_out[1] == 0).all()  # torch's own policy is the same


def test_blind_query_row_has_zero_attention_weights():
    q, k, v = _qkv()
    mask = torch.zeros(1, 1, LQ, LK, dtype=torch.bool)
    mask[..., 2, :] = True
    attn = ScaledDotProductAttention()
    attn.capture = True
    attn(q, k, v, mask)
    row_sums = attn.last_attn.sum(-1)  # (B, H, Lq)
    assert (row_sums[..., 2] == 0).all()
    torch.testing.assert_close(row_sums[..., [0, 1, 3, 4]], torch.ones(B, H, 4))


@pytest.mark.parametrize("kind", ["none", "padding", "causal", "padding|causal"])
def test_fused_path_equals_scratch_path(kind):
    q, k, v = _qkv()
    mask = _masks()[kind]
    scratch = ScaledDotProductAttention(fused=False)(q, k, v, mask)
    fused = ScaledDotProductAttention(fused=True)(q, k, v, mask)
    torch.testing.assert_close(fused, scratch)


def test_fused_multi_head_attention_equals_scratch_with_the_same_weights():
    scratch = MultiHeadAttention(32, 4, dropout=0.0)
    fused = MultiHeadAttention(32, 4, dropout=0.0, fused=True)
    fused.load_state_dict(scratch.state_dict())
    x = torch.randn(B, 6, 32)
    torch.testing.assert_close(fused(x, x, x, causal_mask(6)), scratch(x, x, x, causal_mask(6)))


def test_capture_stores_attention_weights_without_changing_the_output():
    mha = MultiHeadAttention(32, 4, dropout=0.0, fused=True)
    x = torch.randn(B, 6, 32)
    plain = mha(x, x, x)
    mha.attention.capture = True
    captured = mha(x, x, x)
    torch.testing.assert_close(captured, plain)
    weights = mha.attention.last_attn
    assert weights.shape == (B, 4, 6, 6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, 4, 6))


def _copy_into_torch_mha(ours: MultiHeadAttention) -> nn.MultiheadAttention:
    ref = nn.MultiheadAttention(ours.d_model, ours.n_heads, dropout=0.0, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        ref.out_proj.weight.copy_(ours.o_proj.weight)
        ref.out_proj.bias.copy_(ours.o_proj.bias)
    return ref


def test_multi_head_attention_matches_torch_multihead_attention_with_key_padding():
    ours = MultiHeadAttention(32, 4, dropout=0.0).eval()
    ref = _copy_into_torch_mha(ours).eval()
    query, memory = torch.randn(B, 5, 32), torch.randn(B, 7, 32)
    ids = torch.tensor([[3, 3, 3, 3, 0, 0, 0], [3, 3, 3, 3, 3, 3, 3]])
    key_padding = ids == 0  # (B, Lk) True = ignore, like ours
    expected, _ = ref(query, memory, memory, key_padding_mask=key_padding, need_weights=False)
    torch.testing.assert_close(ours(query, memory, memory, padding_mask(ids, 0)), expected)


def test_multi_head_attention_matches_torch_with_a_causal_mask():
    ours = MultiHeadAttention(32, 4, dropout=0.0).eval()
    ref = _copy_into_torch_mha(ours).eval()
    x = torch.randn(B, 6, 32)
    expected, _ = ref(x, x, x, attn_mask=causal_mask(6)[0, 0], need_weights=False)
    torch.testing.assert_close(ours(x, x, x, causal_mask(6)), expected)


def test_gqa_with_as_many_kv_heads_as_query_heads_is_mha():
    mha = MultiHeadAttention(32, 4, dropout=0.0)
    gqa = GroupedQueryAttention(32, 4, n_kv_heads=4, dropout=0.0)
    gqa.load_state_dict(mha.state_dict())
    x, mem = torch.randn(B, 5, 32), torch.randn(B, 7, 32)
    torch.testing.assert_close(gqa(x, mem, mem), mha(x, mem, mem))


def test_gqa_query_heads_in_a_group_read_the_same_kv_head():
    """GQA equals MHA whose K/V weights repeat each K/V head for its group of query heads."""
    gqa = GroupedQueryAttention(32, 4, n_kv_heads=2, dropout=0.0)
    mha = MultiHeadAttention(32, 4, dropout=0.0)
    group, head_dim = 2, 8
    with torch.no_grad():
        for name in ("q_proj", "o_proj"):
            getattr(mha, name).load_state_dict(getattr(gqa, name).state_dict())
        for name in ("k_proj", "v_proj"):
            src, dst = getattr(gqa, name), getattr(mha, name)
            dst.weight.copy_(src.weight.view(2, head_dim, 32).repeat_interleave(group, 0).reshape(32, 32))
            dst.bias.copy_(src.bias.view(2, head_dim).repeat_interleave(group, 0).reshape(32))
    x = torch.randn(B, 6, 32)
    torch.testing.assert_close(gqa(x, x, x, causal_mask(6)), mha(x, x, x, causal_mask(6)))


def test_repeat_kv_by_expand_and_reshape_equals_repeat_interleave():
    kv = torch.randn(B, 2, 5, D_HEAD)
    torch.testing.assert_close(repeat_kv(kv, 4), kv.repeat_interleave(4, dim=1), rtol=0, atol=0)
    assert repeat_kv(kv, 1) is kv


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
def test_gqa_output_has_the_query_shape(n_kv_heads):
    gqa = GroupedQueryAttention(32, 4, n_kv_heads)
    assert gqa.k_proj.out_features == n_kv_heads * 8
    assert gqa(torch.randn(B, 5, 32), torch.randn(B, 9, 32), torch.randn(B, 9, 32)).shape == (B, 5, 32)


def test_bias_free_projection_parameters_match_the_closed_forms():
    D, h = 12, 3
    d = D // h
    assert sum(p.numel() for p in MultiHeadAttention(D, h, bias=False).parameters()) == 4 * D * D == 576
    for g in (1, 3):
        gqa = GroupedQueryAttention(D, h, n_kv_heads=g, bias=False)
        assert sum(p.numel() for p in gqa.parameters()) == 2 * D * D + 2 * D * g * d
    assert sum(p.numel() for p in GroupedQueryAttention(D, h, 1, bias=False).parameters()) == 384


def test_self_attention_without_positions_is_permutation_equivariant():
    mha = MultiHeadAttention(32, 4, dropout=0.0)
    x = torch.randn(1, 6, 32)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    out = mha(x, x, x)
    xp = x[:, perm]
    torch.testing.assert_close(mha(xp, xp, xp), out[:, perm])


def test_a_causal_mask_breaks_permutation_equivariance():
    mha = MultiHeadAttention(32, 4, dropout=0.0)
    x = torch.randn(1, 6, 32)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    out = mha(x, x, x, causal_mask(6))
    xp = x[:, perm]
    assert not torch.allclose(mha(xp, xp, xp, causal_mask(6)), out[:, perm], atol=1e-4)


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_kv_cache_step_by_step_equals_full_causal_attention(n_kv_heads):
    rope = RotaryPositionalEmbedding(8)
    attn = GroupedQueryAttention(32, 4, n_kv_heads, dropout=0.0, rope=rope)
    x = torch.randn(B, 6, 32)
    full = attn(x, x, x, causal_mask(6))
    cache = KVCache()
    steps = [attn(x[:, t:t + 1], x[:, t:t + 1], x[:, t:t + 1], None, cache) for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
    assert cache.k.shape == (B, n_kv_heads, 6, 8)  # cached keys stay un-repeated
    torch.testing.assert_close(cache.k, rope.rotate(attn._split_heads(attn.k_proj(x), n_kv_heads)))


def test_static_cache_projects_the_memory_once():
    attn = MultiHeadAttention(32, 4, dropout=0.0)
    x, mem = torch.randn(B, 3, 32), torch.randn(B, 7, 32)
    cache = KVCache(static=True)
    first = attn(x[:, :1], mem, mem, None, cache)
    stored = cache.k
    second = attn(x[:, 1:2], None, None, None, cache)  # memory not even passed again
    assert cache.k is stored
    torch.testing.assert_close(torch.cat([first, second], 1), attn(x[:, :2], mem, mem))


def test_bad_head_configurations_raise_errors_that_say_what_to_change():
    with pytest.raises(ValueError, match=r"d_model=30 is not divisible by n_heads=8.*divisors"):
        MultiHeadAttention(30, 8)
    with pytest.raises(ValueError, match=r"n_heads=8 is not a multiple of n_kv_heads=3.*\[1, 2, 4, 8\]"):
        GroupedQueryAttention(32, 8, n_kv_heads=3)
    with pytest.raises(ValueError, match=r"RotaryPositionalEmbedding\(head_dim=4\)"):
        MultiHeadAttention(32, 8, rope=RotaryPositionalEmbedding(8))
    with pytest.raises(ValueError, match=r"unknown attn_type 'mqa'"):
        make_attention("mqa", 32, 4)
    with pytest.raises(ValueError, match=r"attn_type='gqa' needs n_kv_heads"):
        make_attention("gqa", 32, 4)
    with pytest.raises(ValueError, match=r"only applies to attn_type='gqa'"):
        make_attention("mha", 32, 4, n_kv_heads=2)
