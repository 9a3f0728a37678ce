"""Per-token normalisation: LayerNorm (C1-C3, C5) and RMSNorm (C4), over the last dimension.

Statistics are computed in float32 and the result cast back to the input dtype.
"""

import torch
from torch import nn


class LayerNorm(nn.Module):
    """y = (x - mean) / sqrt(var + eps) * gamma + beta, over the last dimension (biased variance)."""

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        mean = x32.mean(dim=-1, keepdim=True)  # (..., 1)
        var = x32.var(dim=-1, keepdim=True, unbiased=False)  # (..., 1)
        y = (x32 - mean) * torch.rsqrt(var + self.eps)
        return (y * self.gamma.float() + self.beta.float()).to(x.dtype)


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x^2) + eps) * gamma (Zhang & Sennrich 2019): no centring, no beta."""

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        y = x32 * torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (y * self.gamma.float()).to(x.dtype)


NORMS = {"layernorm": LayerNorm, "rmsnorm": RMSNorm}


def make_norm(kind: str, d_model: int, eps: float = 1e-5) -> nn.Module:
    """The norm a configuration asks for: "layernorm" or "rmsnorm"."""
    if kind not in NORMS:
        raise ValueError(f"make_norm: unknown norm {kind!r}; expected one of {sorted(NORMS)}")
    return NORMS[kind](d_model, eps)
