"""The attention chapter's experiments: what its cells call and print, and what its facts quote.

Each function runs cipherlab's own modules (``cipherlab.models.attention``); the attention chapter calls
the same functions, so the book and the answers show the same numbers.
"""

from __future__ import annotations

import copy
import functools
import math
from fractions import Fraction
from itertools import product

import torch
from torch.utils.flop_counter import FlopCounterMode

from cipherlab.base.config import DEFAULT_RECIPE, make_config
from cipherlab.data.corpus import load_corpus
from cipherbook.experiments.common import D_MODEL, FFN_DIM, N_HEADS
from cipherlab.models.attention import MultiHeadAttention, ScaledDotProductAttention, causal_mask, padding_mask
from cipherlab.models.transformer import FeedForward

@functools.lru_cache(maxsize=None)
def scaling_experiment(d: int, n_queries: int = 100, n_keys: int = 20, seed: int = 0) -> dict:
    """Random q, k with independent N(0, 1) entries of width d.

    Returns the variance of the raw dot products divided by d, and the mean largest attention
    weight per query with and without the 1/sqrt(d) scaling. The weights come from cipherlab's
    ScaledDotProductAttention with v = identity (so its output IS the weight matrix); passing
    q * sqrt(d) cancels the scaling.
    """
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 1, n_queries, d, generator=g)  # (B, H, Lq, d)
    k = torch.randn(1, 1, n_keys, d, generator=g)  # (B, H, Lk, d)
    eye = torch.eye(n_keys)[None, None]  # (1, 1, Lk, Lk): row j of v is one-hot j
    sdpa = ScaledDotProductAttention()
    dots = q @ k.transpose(-2, -1)  # (1, 1, Lq, Lk) raw dot products
    scaled, raw = sdpa(q, k, eye), sdpa(q * math.sqrt(d), k, eye)
    return {"var_over_d": dots.var().item() / d,
            "max_weight_raw": raw.max(-1).values.mean().item(),
            "max_weight_scaled": scaled.max(-1).values.mean().item()}


@functools.lru_cache(maxsize=None)
def sign_enumeration(d: int = 2) -> dict:
    """Exact mean and variance of q.k over ALL pairs of q, k in {-1, +1}^d (each pair equally likely)."""
    dots = [sum(a * b for a, b in zip(q, k)) for q in product((-1, 1), repeat=d) for k in product((-1, 1), repeat=d)]
    mean = Fraction(sum(dots), len(dots))
    var = Fraction(sum(x * x for x in dots), len(dots)) - mean**2
    return {"pairs": len(dots), "mean": mean, "var": var, "scaled_var": var / d}


@functools.lru_cache(maxsize=None)
def mask_shapes(batch: int = 2, length: int = 5, pad_id: int = 0) -> dict:
    """Shapes of the two masks and of their OR, for a batch of ids."""
    ids = torch.ones(batch, length, dtype=torch.long)
    ids[0, -2:] = pad_id
    pad, causal = padding_mask(ids, pad_id), causal_mask(length)
    return {"padding": tuple(pad.shape), "causal": tuple(causal.shape), "both": tuple((pad | causal).shape)}


@functools.lru_cache(maxsize=None)
def blocked_row_policies(n_keys: int = 4) -> dict:
    """What a query whose keys are ALL blocked gets under three policies."""
    neg_inf = torch.softmax(torch.full((n_keys,), float("-inf")), dim=-1)
    dtype_min = torch.softmax(torch.full((n_keys,), torch.finfo(torch.float32).min), dim=-1)
    q, kv = torch.ones(1, 1, 1, 2), torch.ones(1, 1, n_keys, 2)  # one query, n_keys keys/values
    out = ScaledDotProductAttention()(q, kv, kv, torch.ones(1, 1, 1, n_keys, dtype=torch.bool))
    return {"neg_inf": neg_inf, "dtype_min": dtype_min, "cipherlab_output": out.flatten()}


@functools.lru_cache(maxsize=1)
def longest_line() -> int:
    """Characters in the longest line of the corpus."""
    return max(map(len, load_corpus().plain))


BLOCKED_ROW_BATCHES = 4  # training batches of epoch 0 that blocked_rows_in_training runs through


def _epoch0_batches(config):
    """The training batches of ``config``'s epoch 0, from the data alone, as ``cipherlab.pipeline.train`` makes them:
    (codec, dataset, list of index lists)."""
    from cipherlab.pipeline.codec import fit_codec, select_lines
    from cipherlab.data.corpus import BucketBatchSampler, make_chunks

    corpus = select_lines(load_corpus(), config)
    codec = fit_codec(config, corpus)
    dataset = codec.dataset(make_chunks(corpus.plain, corpus.cipher, corpus.splits["train"], config.chunk_chars))
    sampler = BucketBatchSampler(dataset.src_lengths, config.token_budget, config.max_batch_size,
                                 shuffle=True, seed=config.seed)
    return codec, dataset, sampler.epoch_batches(0)


@functools.lru_cache(maxsize=None)
def blocked_rows_in_training(name: str, n_batches: int = BLOCKED_ROW_BATCHES) -> dict:
    """Query rows whose keys are ALL blocked, per attention module, in real training batches.

    Configuration ``name`` at the cpu preset (the committed runs), its first ``n_batches``
    training batches of epoch 0, one teacher-forced forward pass; a forward pre-hook on every
    ScaledDotProductAttention counts the (example, query) rows of its mask that see no key.
    Masks depend on the data and the architecture, not on the width or the weights, so the
    model is built 32 wide to keep this cheap. Returns {module path without layer numbers:
    (blocked rows, all rows)}.
    """
    from collections import Counter

    from cipherlab.pipeline.codec import teacher_forcing_logits
    from cipherlab.base.config import make_config

    config = make_config(name, "cpu", recipe="notes", d_model=32, ffn_dim=64)  # the course notes' training
    codec, dataset, epoch0 = _epoch0_batches(config)
    blocked, rows = Counter(), Counter()

    def count(module, args):
        q, mask = args[0], args[3]
        where = module.where
        blind = torch.zeros(q.shape[0], q.shape[2], dtype=torch.bool) if mask is None else \
            mask.all(-1).expand(q.shape[0], -1, q.shape[2])[:, 0]  # (B, Lq) rows seeing no key
        blocked[where] += int(blind.sum())
        rows[where] += blind.numel()

    with torch.random.fork_rng():
        torch.manual_seed(config.seed)
        model = codec.build_model(config).eval()
    for path, module in model.named_modules():
        if isinstance(module, ScaledDotProductAttention):
            module.where = ".".join(p for p in path.split(".") if not p.isdigit() and p != "layers")
            module.register_forward_pre_hook(count)
    with torch.no_grad():
        for indices in epoch0[:n_batches]:
            teacher_forcing_logits(model, codec.collate([dataset[i] for i in indices]))
    return {where: (blocked[where], rows[where]) for where in rows}


def padded_window_rows(window: int = 4, seed: int = 0) -> dict:
    """C5's windowed self-attention (``cipherlab.models.blt.WindowedSelfAttention``) on a batch of
    two sources, 8 and 3 positions, windows of ``window``: the shorter source's second window is
    all padding. Returns the query rows that see no key ("blocked", of "rows") and whether every
    output is finite."""
    from cipherlab.models.blt import WindowedSelfAttention

    torch.manual_seed(seed)
    layer = WindowedSelfAttention(16, 2, window, causal=False, dropout=0.0).eval()
    x = torch.randn(2, 2 * window, 16)  # (B, L, D)
    pad = torch.zeros(2, 2 * window, dtype=torch.bool)
    pad[1, 3:] = True  # the second source has 3 real positions
    counts = {"blocked": 0, "rows": 0}

    def count(module, args):
        q, mask = args[0], args[3]
        blind = mask.all(-1).expand(q.shape[0], -1, q.shape[2])[:, 0]  # (B * n_win, Lq)
        counts["blocked"] += int(blind.sum())
        counts["rows"] += blind.numel()

    layer.attn.attention.register_forward_pre_hook(count)
    with torch.no_grad():
        out = layer(x, pad)
    return {**counts, "finite": bool(out.isfinite().all())}


def blocked_total(name: str, skip: str = "") -> tuple[int, int]:
    counts = [c for where, c in blocked_rows_in_training(name).items() if not (skip and where.startswith(skip))]
    return sum(b for b, _ in counts), sum(n for _, n in counts)


def attention_ffn_flops(length: int, d_model: int = D_MODEL, n_heads: int = N_HEADS, ffn_dim: int = FFN_DIM):
    """FLOPs (2 per multiply-add, as torch's FlopCounterMode counts) of one self-attention and one FFN
    on a (1, length, d_model) input, counted on cipherlab's real modules."""
    x = torch.zeros(1, length, d_model)
    counts = []
    for module, args in ((MultiHeadAttention(d_model, n_heads, dropout=0.0), (x, x, x)),
                         (FeedForward(d_model, ffn_dim, dropout=0.0), (x,))):
        with FlopCounterMode(display=False) as counter:
            module(*args)
        counts.append(counter.get_total_flops())
    return tuple(counts)


@functools.lru_cache(maxsize=None)
def flop_model(d_model: int = D_MODEL) -> dict:
    """Coefficients of the counted FLOPs: attention = a*L + b*L^2, FFN = c*L, and where they cross."""
    (a1, c1), (a2, _) = attention_ffn_flops(1, d_model), attention_ffn_flops(2, d_model)
    b = (a2 - 2 * a1) // 2
    a = a1 - b
    return {"proj_per_token": a, "pair": b, "ffn_per_token": c1, "crossover": (c1 - a) / b}


def fused_vs_scratch(seed: int = 0) -> float:
    """Largest difference between the fused kernel and the three-line maths.

    Padding and causal masks, and a third example that is all padding (every row blocked).
    """
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(3, 4, 6, 8, generator=g) for _ in range(3))  # (B, H, L, d)
    ids = torch.tensor([[5, 5, 5, 5, 0, 0], [5, 5, 5, 5, 5, 5], [0, 0, 0, 0, 0, 0]])
    mask = padding_mask(ids, 0) | causal_mask(6)
    fused, scratch = ScaledDotProductAttention(fused=True), ScaledDotProductAttention()
    return (fused(q, k, v, mask) - scratch(q, k, v, mask)).abs().max().item()


@functools.lru_cache(maxsize=None)
def softmax_axis_leak(length: int = 5, d: int = 8, seed: int = 0) -> dict:
    """How much the FIRST output of causal self-attention moves when only the LAST input changes.

    "keys" normalises each query's row (cipherlab's ScaledDotProductAttention); "queries" is the
    classic bug, softmax over dim=-2, which normalises each key's column. Same shapes, same mask.
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 1, length, d, generator=g)  # (B, H, L, d); q = k = v = x keeps it small
    y = x.clone()
    y[..., -1, :] = torch.randn(d, generator=g)  # only the last position differs
    mask = causal_mask(length)

    def wrong_axis(t):
        scores = (t @ t.transpose(-2, -1) / math.sqrt(d)).masked_fill(mask, torch.finfo(t.dtype).min)
        weights = torch.softmax(scores, dim=-2)  # the bug: normalises over queries
        return weights @ t, weights.sum(-1)

    right = ScaledDotProductAttention()
    (wx, row_sums), (wy, _) = wrong_axis(x), wrong_axis(y)
    return {"keys": (right(x, x, x, mask) - right(y, y, y, mask))[..., 0, :].abs().max().item(),
            "queries": (wx - wy)[..., 0, :].abs().max().item(),
            "row_sum_min": row_sums.min().item(), "row_sum_max": row_sums.max().item()}


def reparametrised_qk(mha: MultiHeadAttention, seed: int = 0, across_heads: bool = False) -> MultiHeadAttention:
    """A copy of ``mha`` whose q/k projections are changed but whose scores are not.

    For each head, queries are multiplied by an invertible A and keys by A^-T, so
    (q A)(k A^-T)^T = q k^T: the projections are not unique, only their product is.
    across_heads=True uses one A over the whole width instead, mixing the heads: then each
    head's scores change (the identity holds only for the sum over all heads).
    """
    g = torch.Generator().manual_seed(seed)
    other = copy.deepcopy(mha)
    d = mha.d_model if across_heads else mha.head_dim
    with torch.no_grad():
        for h in range(mha.d_model // d):
            rows = slice(h * d, (h + 1) * d)
            A = torch.randn(d, d, generator=g) + 3 * torch.eye(d)  # (d, d), comfortably invertible
            A_inv_T = torch.linalg.inv(A).T
            # nn.Linear computes x W^T + b, so q_h A means W_h -> A^T W_h and b_h -> b_h A.
            other.q_proj.weight[rows] = A.T @ mha.q_proj.weight[rows]
            other.q_proj.bias[rows] = mha.q_proj.bias[rows] @ A
            other.k_proj.weight[rows] = A_inv_T.T @ mha.k_proj.weight[rows]
            other.k_proj.bias[rows] = mha.k_proj.bias[rows] @ A_inv_T
    return other


@functools.lru_cache(maxsize=None)
def reparametrisation_gap(seed: int = 0) -> dict:
    """Max output difference between an MHA and its q/k-reparametrised copy, and how much the weights moved.

    "output_gap": a change of basis per head, no RoPE (the scores cannot change); "rope_gap": the
    same change with RoPE in both modules; "across_heads_gap": one change of basis over the
    whole width, no RoPE. The last two change the output: the freedom is per head and without RoPE.
    """
    from cipherlab.models.positional import RotaryPositionalEmbedding

    torch.manual_seed(seed)
    mha = MultiHeadAttention(16, 2, dropout=0.0).eval()
    other = reparametrised_qk(mha, seed)
    mixed = reparametrised_qk(mha, seed, across_heads=True)
    rotary = copy.deepcopy(mha)
    rotary.rope = RotaryPositionalEmbedding(mha.head_dim, max_len=16)
    rotary_other = reparametrised_qk(rotary, seed)
    x = torch.randn(1, 5, 16)
    with torch.no_grad():
        gap = (mha(x, x, x) - other(x, x, x)).abs().max().item()
        rope_gap = (rotary(x, x, x) - rotary_other(x, x, x)).abs().max().item()
        across = (mha(x, x, x) - mixed(x, x, x)).abs().max().item()
    moved = (mha.q_proj.weight - other.q_proj.weight).abs().max().item()
    return {"output_gap": gap, "weight_change": moved, "rope_gap": rope_gap, "across_heads_gap": across}


def shape_text(t) -> str:
    return str(tuple(t))


@functools.lru_cache(maxsize=None)
def padded_window_batches(recipe: str = DEFAULT_RECIPE) -> tuple[int, int]:
    """C5's training at the cpu preset, epoch 0 replayed from the data alone: (batches in which some source
    has a local-encoder window wholly in padding, all batches).

    The batches are the training run's (``cipherlab.pipeline.train``: the same chunks, ``BucketBatchSampler`` and
    collate; the recipe's phase shuffles and case flips keep every chunk's length, so they are left out).
    The local encoder cuts each collated source into windows of W = min(``blt_window``, Ls) positions
    (``WindowedSelfAttention``); the queries of a window with no real position see no key. With
    ``source_eos`` a full chunk's source is one position longer than a window. No model runs: forward
    hooks on a real C5 (as :func:`blocked_rows_in_training`) find the same batches.
    """
    config = make_config("c5", "cpu", recipe=recipe)
    codec, dataset, batches = _epoch0_batches(config)
    blind = 0
    for indices in batches:
        pad = codec.collate([dataset[i] for i in indices])["src"] == codec.src_pad_id  # (B, Ls)
        length = pad.size(1)
        width = min(config.blt_window, length)
        windows = -(-length // width)
        pad = torch.nn.functional.pad(pad, (0, windows * width - length), value=True)
        blind += bool(pad.reshape(-1, width).all(-1).any())
    return blind, len(batches)
