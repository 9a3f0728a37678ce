"""Facts for chapter 4 (positions): the checks whose numbers the viva answers quote.

Every function runs cipherlab's own modules (``cipherlab.models.positional`` and
``cipherlab.models.attention``); chapter 4 calls the same functions, so the book and the
answers show the same numbers.
"""

from __future__ import annotations

import functools
import math

import torch

from cipherlab.data import CHUNK_CHARS
from cipherlab.models.attention import MultiHeadAttention, causal_mask
from cipherlab.models.positional import (LearnedPositionalEncoding, RotaryPositionalEmbedding,
                                         SinusoidalPositionalEncoding, interleaved_to_half_split,
                                         inverse_frequencies)
from cipherlab.models.transformer import Seq2SeqTransformer

D_MODEL, N_HEADS, MAX_LEN = 256, 8, 4096  # the assignment's shared hyperparameters
HEAD_DIM = D_MODEL // N_HEADS
KEY_PERIOD = 8  # len(cipherlab.cipher.KEY)


def sinusoidal_table(d_model: int = D_MODEL, length: int = MAX_LEN) -> torch.Tensor:
    """(length, d_model): what SinusoidalPositionalEncoding adds at positions 0..length-1 (added to zeros)."""
    module = SinusoidalPositionalEncoding(d_model, max_len=length, dropout=0.0)
    with torch.no_grad():
        return module(torch.zeros(1, length, d_model))[0]


def wavelengths(dim: int = D_MODEL) -> torch.Tensor:
    """(dim/2,) positions per full turn of each frequency pair: 2*pi / theta_i."""
    return 2 * math.pi / inverse_frequencies(dim)


def pairs_near_period(period: float = KEY_PERIOD, d_model: int = D_MODEL) -> dict:
    """The two sinusoidal pairs whose wavelengths bracket ``period``: {"below": (i, wl), "above": (i, wl)}."""
    wl = wavelengths(d_model)
    above = int(torch.searchsorted(wl, torch.tensor(float(period))))  # first pair with wavelength >= period
    return {"below": (above - 1, wl[above - 1].item()), "above": (above, wl[above].item())}


def _pair_dims(i: int) -> str:
    return f"{2 * i}–{2 * i + 1}"  # sinusoidal pair i occupies columns 2i (sin) and 2i+1 (cos)


def nonpersistent_buffer_bytes(module: torch.nn.Module) -> int:
    """Bytes held in buffers that state_dict() leaves out (persistent=False)."""
    saved = module.state_dict()
    return sum(b.numel() * b.element_size() for name, b in module.named_buffers() if name not in saved)


def count_parameters(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@functools.lru_cache(maxsize=1)
def baseline_model() -> Seq2SeqTransformer:
    """A freshly initialised C1 model with the assignment's sizes (vocabularies 1024 / 8000), seeded."""
    torch.manual_seed(0)
    return Seq2SeqTransformer(1024, 8000, d_model=D_MODEL, n_heads=N_HEADS)


def scaled_embedding_std() -> float:
    """Standard deviation of the C1 source embedding after the sqrt(d_model) factor."""
    model = baseline_model()
    return (model.src_embed.weight * math.sqrt(model.d_model)).std().item()


def rope_scores(q: torch.Tensor, k: torch.Tensor, rope: RotaryPositionalEmbedding) -> torch.Tensor:
    """(L, L) scores between the same query vector placed at every position and the same key vector.

    q, k: (head_dim,). Entry [m, n] is rotated-q at position m dotted with rotated-k at position n,
    so if RoPE works, entry [m, n] depends on n - m only.
    """
    L = rope.max_len
    rq = rope.rotate(q.expand(1, 1, L, -1))[0, 0]  # (L, head_dim)
    rk = rope.rotate(k.expand(1, 1, L, -1))[0, 0]
    return rq @ rk.T  # (L, L)


def rope_offset_error(length: int = 512, seed: int = 0) -> float:
    """Largest change of a RoPE score when both positions move together: |S[m, n] - S[m+s, n+s]|, all m, n, s."""
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(HEAD_DIM, generator=g), torch.randn(HEAD_DIM, generator=g)
    scores = rope_scores(q, k, RotaryPositionalEmbedding(HEAD_DIM, max_len=length))
    # Along each diagonal n - m = const the scores must be equal: compare each with the diagonal's first entry.
    worst = 0.0
    for offset in range(-(length - 1), length):
        diagonal = scores.diagonal(offset)
        worst = max(worst, (diagonal - diagonal[0]).abs().max().item())
    return worst


def halfsplit_vs_interleaved_error(seed: int = 0) -> float:
    """max |rotate(x[perm]) - rotate_interleaved(x)[perm]|: the two conventions agree up to a permutation."""
    g = torch.Generator().manual_seed(seed)
    rope = RotaryPositionalEmbedding(HEAD_DIM, max_len=64)
    x = torch.randn(2, N_HEADS, 64, HEAD_DIM, generator=g)  # (B, H, L, head_dim)
    perm = interleaved_to_half_split(HEAD_DIM)
    return (rope.rotate(x[..., perm]) - rope.rotate_interleaved(x)[..., perm]).abs().max().item()


def _small_attention(seed: int = 0) -> MultiHeadAttention:
    torch.manual_seed(seed)
    return MultiHeadAttention(32, 4, dropout=0.0).eval()


def permutation_checks(length: int = 10, seed: int = 0) -> dict:
    """Self-attention with no positions is permutation-equivariant; cross-attention ignores memory order.

    Returns the largest differences for: self-attention, out(x[perm]) vs out(x)[perm]; the same under
    a causal mask (NOT equivariant); cross-attention with the memory rows shuffled vs not.
    """
    attn = _small_attention(seed)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, length, 32, generator=g)  # (B, L, D)
    memory = torch.randn(1, length + 3, 32, generator=g)
    perm = torch.randperm(length, generator=g)
    shuffle = torch.randperm(length + 3, generator=g)
    with torch.no_grad():
        equivariance = (attn(x[:, perm], x[:, perm], x[:, perm]) - attn(x, x, x)[:, perm]).abs().max()
        mask = causal_mask(length)
        causal = (attn(x[:, perm], x[:, perm], x[:, perm], mask) - attn(x, x, x, mask)[:, perm]).abs().max()
        mem = memory[:, shuffle]
        cross = (attn(x, mem, mem) - attn(x, memory, memory)).abs().max()
    return {"equivariance": equivariance.item(), "causal": causal.item(), "cross_shuffle": cross.item()}


def phase_readout(fit_positions: int = CHUNK_CHARS, test_positions: tuple[int, int] = (CHUNK_CHARS, 2 * CHUNK_CHARS),
                  d_model: int = D_MODEL) -> dict:
    """Least-squares linear read-out of the key phase (position mod 8) from the sinusoidal code.

    Fitted on positions 0 .. fit_positions-1; returns the share of positions whose phase it
    gets right there and on test_positions, where the formula is just as defined.
    """
    pe = sinusoidal_table(d_model, test_positions[1]).double()  # (L, D)
    positions = torch.arange(test_positions[1])
    phase = positions % KEY_PERIOD
    target = torch.nn.functional.one_hot(phase, KEY_PERIOD).double()  # (L, 8)
    weights = torch.linalg.lstsq(pe[:fit_positions], target[:fit_positions], driver="gelsd").solution  # (D, 8)
    correct = (pe @ weights).argmax(-1) == phase  # (L,)
    lo, hi = test_positions
    return {"fit": correct[:fit_positions].double().mean().item(), "beyond": correct[lo:hi].double().mean().item()}


def shift_map_error(shift: int = KEY_PERIOD, d_model: int = D_MODEL, length: int = MAX_LEN) -> float:
    """max_p |R PE(p) - PE(p + shift)| for the fixed block rotation R by shift * theta_i: exact at every p."""
    pe = sinusoidal_table(d_model, length).double()
    angle = shift * inverse_frequencies(d_model).double()  # (D/2,)
    sin_p, cos_p = pe[:-shift, 0::2], pe[:-shift, 1::2]  # (L - shift, D/2): sin(p w), cos(p w)
    sin_next = sin_p * angle.cos() + cos_p * angle.sin()  # sin((p + shift) w)
    cos_next = cos_p * angle.cos() - sin_p * angle.sin()  # cos((p + shift) w)
    return max((sin_next - pe[shift:, 0::2]).abs().max().item(), (cos_next - pe[shift:, 1::2]).abs().max().item())


_permutation_checks = functools.cache(permutation_checks)  # several facts read one run
_phase_readout = functools.cache(phase_readout)

FACTS = {
    "pe_shortest_wavelength": lambda: wavelengths()[0].item(),
    "pe_longest_wavelength": lambda: wavelengths()[-1].item(),
    "pe_near8_low_dims": lambda: _pair_dims(pairs_near_period()["below"][0]),
    "pe_near8_low_wavelength": lambda: pairs_near_period()["below"][1],
    "pe_near8_high_dims": lambda: _pair_dims(pairs_near_period()["above"][0]),
    "pe_near8_high_wavelength": lambda: pairs_near_period()["above"][1],
    "pe_rms": lambda: sinusoidal_table().pow(2).mean().sqrt().item(),
    "emb_scaled_std": scaled_embedding_std,
    "pe_buffer_bytes": lambda: f"{nonpersistent_buffer_bytes(SinusoidalPositionalEncoding(D_MODEL, MAX_LEN)):,}",
    "rope_offset_err": rope_offset_error,
    "cross_perm_err": lambda: _permutation_checks()["cross_shuffle"],
    "halfsplit_perm_err": halfsplit_vs_interleaved_error,
    "mha_perm_err": lambda: _permutation_checks()["equivariance"],
    "causal_perm_diff": lambda: _permutation_checks()["causal"],
    "learned_pe_params": lambda: f"{count_parameters(LearnedPositionalEncoding(D_MODEL, MAX_LEN)):,}",
    "phase_fit_share": lambda: _phase_readout()["fit"],
    "phase_beyond_share": lambda: _phase_readout()["beyond"],
    "rope_head_dim": lambda: HEAD_DIM,
    "rope_n_pairs": lambda: HEAD_DIM // 2,
    "rope_long_pairs": lambda: int((wavelengths(HEAD_DIM) > CHUNK_CHARS).sum()),
    "chunk_chars": lambda: CHUNK_CHARS,
}
