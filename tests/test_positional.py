"""Sinusoidal, learned and rotary positions: the formulas and the claims the positions chapter makes."""

import math

import pytest
import torch

from cipherlab.models.positional import (LearnedPositionalEncoding, RotaryPositionalEmbedding,
                                         SinusoidalPositionalEncoding, interleaved_to_half_split, rotate_half)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_sinusoidal_table_follows_the_vaswani_formula():
    pe = SinusoidalPositionalEncoding(16, max_len=50, dropout=0.0)
    pos, i = 37, 3
    angle = pos / 10000 ** (2 * i / 16)
    assert pe.table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
    assert pe.table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)


def test_sinusoidal_encoding_adds_the_rows_at_the_offset():
    pe = SinusoidalPositionalEncoding(16, max_len=50, dropout=0.0)
    x = torch.randn(2, 4, 16)
    torch.testing.assert_close(pe(x, offset=10), x + pe.table[10:14])
    torch.testing.assert_close(pe(x)[:, 2:], pe(x[:, 2:], offset=2))


def test_sinusoidal_table_is_not_saved_in_the_state_dict_but_moves_with_the_module():
    pe = SinusoidalPositionalEncoding(16, max_len=50)
    assert "table" not in pe.state_dict()
    assert "table" in dict(pe.named_buffers())
    assert pe.to(torch.float64).table.dtype == torch.float64


def test_learned_encoding_is_a_trained_table_at_the_sinusoidal_scale():
    learned = LearnedPositionalEncoding(256, max_len=512, dropout=0.0)
    assert [name for name, _ in learned.named_parameters()] == ["table"]
    sinus = SinusoidalPositionalEncoding(256, max_len=512)
    assert learned.table.pow(2).mean().sqrt().item() == pytest.approx(sinus.table.pow(2).mean().sqrt().item(), rel=0.02)
    x = torch.zeros(1, 3, 256)
    torch.testing.assert_close(learned(x, offset=5), learned.table[5:8][None])


@pytest.mark.parametrize("cls", [SinusoidalPositionalEncoding, LearnedPositionalEncoding])
def test_absolute_positions_beyond_max_len_raise(cls):
    enc = cls(16, max_len=8, dropout=0.0)
    enc(torch.zeros(1, 8, 16))
    with pytest.raises(ValueError, match=r"positions 5\.\.8 .* max_len=8.*max_len >= 9"):
        enc(torch.zeros(1, 4, 16), offset=5)


def test_rope_score_depends_only_on_the_offset_between_positions():
    rope = RotaryPositionalEmbedding(16, max_len=128)
    q, k = torch.randn(16), torch.randn(16)

    def score(m, n):
        return rope.rotate(q[None], m) @ rope.rotate(k[None], n)[0]

    for shift in (1, 17, 90):
        torch.testing.assert_close(score(3 + shift, 10 + shift), score(3, 10))
    assert not torch.allclose(score(3, 10), score(3, 11))


def test_rope_preserves_vector_norms():
    rope = RotaryPositionalEmbedding(16, max_len=64)
    x = torch.randn(2, 3, 64, 16)
    torch.testing.assert_close(rope.rotate(x).norm(dim=-1), x.norm(dim=-1))


def test_rope_rotated_dot_product_is_q_dot_rotation_of_k_by_the_difference():
    """The 2-D identity of the drill sheet: (R_m q).(R_n k) = q.(R_(n-m) k); with head_dim=2 theta=1."""
    rope = RotaryPositionalEmbedding(2, max_len=32)
    q, k = torch.tensor([[2.0, 1.0]]), torch.tensor([[-1.0, 3.0]])
    m, n = 4, 11
    lhs = (rope.rotate(q, m) * rope.rotate(k, n)).sum()
    rhs = (q * rope.rotate(k, n - m)).sum()
    torch.testing.assert_close(lhs, rhs)
    c, s = math.cos(n - m), math.sin(n - m)
    rotation = torch.tensor([[c, -s], [s, c]])
    torch.testing.assert_close(rhs, q[0] @ (rotation @ k[0]))


def test_rotate_half_swaps_halves_with_a_sign():
    assert rotate_half(torch.tensor([1.0, 2.0, 3.0, 4.0])).tolist() == [-3.0, -4.0, 1.0, 2.0]


def test_interleaved_rope_equals_half_split_up_to_a_permutation():
    rope = RotaryPositionalEmbedding(8, max_len=32)
    x = torch.randn(2, 3, 10, 8)
    perm = interleaved_to_half_split(8)
    assert perm.tolist() == [0, 2, 4, 6, 1, 3, 5, 7]
    torch.testing.assert_close(rope.rotate(x[..., perm], offset=5), rope.rotate_interleaved(x, offset=5)[..., perm])


def test_rope_accepts_different_head_counts_for_q_and_k():
    rope = RotaryPositionalEmbedding(8)
    q, k = torch.randn(2, 4, 5, 8), torch.randn(2, 1, 5, 8)
    rq, rk = rope(q, k, offset=3)
    assert rq.shape == q.shape and rk.shape == k.shape
    torch.testing.assert_close(rk, rope.rotate(k, 3))


def test_rope_at_an_offset_equals_the_matching_slice_of_a_full_rotation():
    rope = RotaryPositionalEmbedding(8)
    x = torch.randn(1, 2, 9, 8)
    torch.testing.assert_close(rope.rotate(x[:, :, 6:7], offset=6), rope.rotate(x)[:, :, 6:7])


def test_rope_in_bf16_is_computed_in_float32_and_cast_back():
    rope = RotaryPositionalEmbedding(8, max_len=4096)
    x = torch.randn(1, 1, 4, 8)
    out = rope.rotate(x.bfloat16(), offset=4000)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, rope.rotate(x.bfloat16().float(), offset=4000).bfloat16(), rtol=0, atol=0)


def test_rope_rejects_odd_head_dim_and_positions_beyond_max_len():
    with pytest.raises(ValueError, match=r"head_dim=7 is odd"):
        RotaryPositionalEmbedding(7)
    rope = RotaryPositionalEmbedding(8, max_len=16)
    with pytest.raises(ValueError, match=r"positions 14\.\.17 .* max_len=16"):
        rope.rotate(torch.randn(1, 1, 4, 8), offset=14)
