"""LayerNorm and RMSNorm checked against torch.nn, in float32 and under bf16."""

import pytest
import torch
from torch import nn

from cipherlab.models.norm import LayerNorm, RMSNorm, make_norm


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _randomise(module):
    with torch.no_grad():
        for p in module.parameters():
            p.normal_()
    return module


def test_layernorm_matches_torch_layernorm():
    ours = _randomise(LayerNorm(32, eps=1e-5))
    ref = nn.LayerNorm(32, eps=1e-5)
    with torch.no_grad():
        ref.weight.copy_(ours.gamma)
        ref.bias.copy_(ours.beta)
    x = torch.randn(2, 7, 32) * 3 + 1
    torch.testing.assert_close(ours(x), ref(x))


def test_rmsnorm_matches_torch_rmsnorm():
    ours = _randomise(RMSNorm(32, eps=1e-6))
    ref = nn.RMSNorm(32, eps=1e-6)
    with torch.no_grad():
        ref.weight.copy_(ours.gamma)
    x = torch.randn(2, 7, 32) * 3 + 1
    torch.testing.assert_close(ours(x), ref(x))


def test_layernorm_has_gamma_and_beta_rmsnorm_only_gamma():
    assert [n for n, _ in LayerNorm(8).named_parameters()] == ["gamma", "beta"]
    assert [n for n, _ in RMSNorm(8).named_parameters()] == ["gamma"]


@pytest.mark.parametrize("cls", [LayerNorm, RMSNorm])
def test_bf16_input_is_normalised_in_float32_and_returned_in_bf16(cls):
    norm = _randomise(cls(64))
    x = (torch.randn(4, 64) * 1e-3 + 5).bfloat16()  # tiny spread on a large mean: bf16 maths would lose it
    out = norm(x)
    assert out.dtype == torch.bfloat16
    expected = norm(x.float()).bfloat16()
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


@pytest.mark.parametrize("cls", [LayerNorm, RMSNorm])
def test_norm_under_bf16_autocast_keeps_the_input_dtype(cls):
    norm = cls(16)
    x = torch.randn(3, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert norm(x).dtype == torch.float32
        assert norm(x.bfloat16()).dtype == torch.bfloat16


def test_make_norm_builds_both_kinds_and_names_the_choices_for_unknown_ones():
    assert isinstance(make_norm("layernorm", 8), LayerNorm)
    assert isinstance(make_norm("rmsnorm", 8), RMSNorm)
    with pytest.raises(ValueError, match=r"unknown norm 'batchnorm'.*'layernorm', 'rmsnorm'"):
        make_norm("batchnorm", 8)
