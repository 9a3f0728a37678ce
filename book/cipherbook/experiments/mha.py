"""The multi-head attention chapter's experiments.

Parameter counts come from real cipherlab modules, cache sizes from
``cipherlab.models.transformer.kv_cache_bytes``; the multi-head attention chapter calls the same functions. C3's
measured quality against C1 comes from the committed results through
``cipherlab.analysis.ablation.single_change_rows``, the function the results chapter uses.
"""

from __future__ import annotations

import functools

import torch
from torch.utils.flop_counter import FlopCounterMode

from cipherlab.pipeline.decode import greedy_decode
from cipherbook.experiments.common import SRC_VOCAB, TGT_VOCAB  # the course notes' BPE vocabularies
from cipherlab.models.attention import MultiHeadAttention, repeat_kv
from cipherlab.models.transformer import ModelArgs, Seq2SeqTransformer, cross_kv_cache_bytes, kv_cache_bytes
from cipherlab.analysis.ablation import load_run, metric, single_change_rows

CONFIGS = {"C1": {}, "C3": {"attn_type": "gqa", "n_kv_heads": 2}}


@functools.lru_cache(maxsize=None)
def trace_shapes(batch: int = 2, length: int = 4, d_model: int = 12, n_heads: int = 3, key_length=None) -> dict:
    """Shapes inside a real MultiHeadAttention.forward, recorded with hooks: ``length`` queries read
    ``key_length`` keys (cross-attention; self-attention when None), no mask."""
    mha = MultiHeadAttention(d_model, n_heads, dropout=0.0)
    seen = {}

    def record(name, tensor):  # a hook that returns None leaves the forward pass unchanged
        seen[name] = tuple(tensor.shape)

    mha.q_proj.register_forward_hook(lambda m, i, o: record("projected", o))
    mha.o_proj.register_forward_pre_hook(lambda m, i: record("concatenated", i[0]))
    mha.attention.register_forward_pre_hook(lambda m, i: record("heads", i[0]))
    mha.attention.register_forward_hook(lambda m, i, o: record("head_outputs", o))
    mha.attention.capture = True
    x, memory = torch.randn(batch, length, d_model), torch.randn(batch, key_length or length, d_model)
    out = mha(x, memory, memory)
    seen["scores"] = tuple(mha.attention.last_attn.shape)
    seen["o_proj_weight"] = tuple(mha.o_proj.weight.shape)
    seen["output"] = tuple(out.shape)
    return seen


def attention_core(m: MultiHeadAttention, query, key, value, mask=None):
    """MultiHeadAttention.forward without the KV cache and RoPE: project, split, group, attend, merge."""
    B, Lq, _ = query.shape
    Lk, H, Hkv, d = key.size(1), m.n_heads, m.n_kv_heads, m.head_dim
    q = m.q_proj(query).view(B, Lq, H, d).transpose(1, 2)      # (B, H, Lq, d)
    k = m.k_proj(key).view(B, Lk, Hkv, d).transpose(1, 2)      # (B, Hkv, Lk, d)
    v = m.v_proj(value).view(B, Lk, Hkv, d).transpose(1, 2)    # (B, Hkv, Lk, d)
    k, v = repeat_kv(k, H // Hkv), repeat_kv(v, H // Hkv)      # (B, H, Lk, d): K/V head j serves H/Hkv query heads
    out = m.attention(q, k, v, mask)                           # (B, H, Lq, d): softmax(q k^T / sqrt(d)) v
    out = out.transpose(1, 2).contiguous().view(B, Lq, H * d)  # (B, Lq, D): the heads concatenated
    return m.o_proj(out)


def core_matches_module(n_kv_heads: int | None = None, seed: int = 0) -> bool:
    """attention_core gives exactly what the real module's forward gives (self-attention, padding mask)."""
    torch.manual_seed(seed)
    m = MultiHeadAttention(12, 4, dropout=0.0, n_kv_heads=n_kv_heads)
    x, mask = torch.randn(2, 5, 12), torch.zeros(2, 1, 1, 5, dtype=torch.bool)
    mask[1, ..., 3:] = True  # the second sequence's last two keys are padding
    return torch.equal(attention_core(m, x, x, x, mask), m(x, x, x, mask))


def kv_head_of_query_head(n_heads: int, n_kv_heads: int) -> list[int]:
    """Which K/V head each query head reads, read off repeat_kv applied to the K/V head numbers."""
    numbers = torch.arange(n_kv_heads, dtype=torch.float32).view(1, n_kv_heads, 1, 1)  # (B, Hkv, L, d)
    return repeat_kv(numbers, n_heads // n_kv_heads).flatten().long().tolist()


def plot_head_grouping(layouts=((8, 8, "MHA (C1)"), (8, 2, "GQA, 2 K/V heads (C3)"), (8, 1, "MQA"))):
    """Query heads (top row) joined to the K/V head they read (bottom row), one panel per layout."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(layouts), figsize=(10, 2.6))
    for ax, (h, g, title) in zip(axes, layouts):
        reads = kv_head_of_query_head(h, g)
        kv_x = [(j + 0.5) * h / g - 0.5 for j in range(g)]  # each K/V head under the middle of its group
        colours = plt.cm.tab10(range(g))
        for i, j in enumerate(reads):
            ax.plot([i, kv_x[j]], [1, 0], color=colours[j], lw=1.5)
        ax.scatter(range(h), [1] * h, s=160, c=[colours[j] for j in reads], zorder=3)
        ax.scatter(kv_x, [0] * g, s=160, marker="s", c=colours, zorder=3)
        ax.set(title=title, xlim=(-0.7, h - 0.3), ylim=(-0.35, 1.35), yticks=[0, 1],
               yticklabels=["K/V heads", "query heads"], xticks=[])
        for side in ("top", "right", "bottom", "left"):
            ax.spines[side].set_visible(False)
    fig.tight_layout()
    return fig


def cache_by_module(name: str, batch: int = 64, tgt_length: int = 256, src_length: int = 256) -> dict:
    """Bytes a greedy decode keeps, per kind of attention module: the encoder keeps none."""
    m = model(name)
    return {"encoder self-attention": 0,
            "decoder self-attention": kv_cache_bytes(m, batch, tgt_length),
            "decoder cross-attention": cross_kv_cache_bytes(m, batch, src_length)}


def total_cache_drop_pct(batch: int = 64, tgt_length: int = 256, src_length: int = 256) -> float:
    """How much smaller C3's whole decode cache is than C1's, in per cent."""
    c1, c3 = (sum(cache_by_module(n, batch, tgt_length, src_length).values()) for n in ("C1", "C3"))
    return 100 * (1 - c3 / c1)


def attention_params_by_stack(name: str) -> dict:
    """Parameters of the self-attention modules of each stack, and of the cross-attention modules."""
    m = model(name)

    def count(modules):
        return sum(p.numel() for module in modules for p in module.parameters())
    return {"encoder self-attention": count(layer.self_attn for layer in m.encoder.layers),
            "decoder self-attention": count(layer.self_attn for layer in m.decoder.layers),
            "decoder cross-attention": count(layer.cross_attn for layer in m.decoder.layers)}


def decode_flops(m: Seq2SeqTransformer, src: torch.Tensor, steps: int, use_cache: bool) -> int:
    """FLOPs (2 per multiply-add) torch counts in a greedy decode of ``steps`` tokens, less the encoder's."""
    with FlopCounterMode(display=False) as counter:
        m.encode(src)
    encoder = counter.get_total_flops()
    with FlopCounterMode(display=False) as counter:
        greedy_decode(m, src, bos_id=1, eos_id=-1, max_len=steps, use_cache=use_cache)
    return counter.get_total_flops() - encoder


def uncached_decode_terms(m: Seq2SeqTransformer, batch: int, src_length: int, steps: int) -> dict:
    """The FLOPs of decoding without a cache, by term (encoder excluded): step t recomputes t positions.

    Per decoder layer and step t: the self-attention and FFN projections of all t positions (t D^2
    terms), the t x t scores and weighted values (t^2 D), the re-projected memory keys and values
    (S D^2), the cross-attention scores (t S D); once per step the output head over t positions.
    """
    D, S, layers = m.d_model, src_length, len(m.decoder.layers)
    a = m.decoder.layers[0].self_attn
    F = m.decoder.layers[0].ffn.linear1.out_features
    V = m.tgt_embed.weight.size(0)
    kv = a.n_kv_heads * a.head_dim
    ts = range(1, steps + 1)
    terms = {  # 2 FLOPs per multiply-add, times the batch
        "projections and FFN (T^2 D^2)": layers * sum(t * (2 * D * (2 * D + 2 * kv) + 2 * 2 * D * D + 2 * 2 * D * F)
                                                      for t in ts),
        "self-attention scores (T^3 D)": layers * sum(2 * 2 * t * t * D for t in ts),
        "memory re-projected (T S D^2)": layers * steps * 2 * 2 * S * D * D,
        "cross-attention scores (T^2 S D)": layers * sum(2 * 2 * t * S * D for t in ts),
        "output head (T^2 D V)": sum(2 * t * D * V for t in ts),
    }
    return {name: batch * flops for name, flops in terms.items()}


def projection_params(d_model: int, n_heads: int, n_kv_heads: int | None = None, bias: bool = False) -> int:
    """Parameters of the four projections of a real (grouped-query) attention module."""
    return sum(p.numel() for p in MultiHeadAttention(d_model, n_heads, n_kv_heads=n_kv_heads, bias=bias).parameters())


@functools.lru_cache(maxsize=None)
def model(name: str, **overrides) -> Seq2SeqTransformer:
    """C1 or C3 at the assignment's sizes (src vocab 1024, tgt vocab 8000, d_model 256, 8 heads, 4+4 layers)."""
    torch.manual_seed(0)
    return Seq2SeqTransformer(ModelArgs(SRC_VOCAB, TGT_VOCAB, **CONFIGS[name], **overrides))


@functools.lru_cache(maxsize=None)
def big_decoder(n_kv_heads: int) -> Seq2SeqTransformer:
    """Drill sheet step 4's model: 80 decoder layers, 64 query heads of width 128, on the meta device.

    The meta device records shapes without allocating memory, so a model of this size
    (d_model 8192) costs nothing to build; kv_cache_bytes only reads its shapes.
    """
    with torch.device("meta"):
        return Seq2SeqTransformer(ModelArgs(1, 1, d_model=64 * 128, n_heads=64, enc_layers=0, dec_layers=80, ffn_dim=1,
                                            attn_type="gqa", n_kv_heads=n_kv_heads, max_len=1))


def big_cache(n_kv_heads: int, length: int) -> int:
    """Bytes of bf16 K/V for one sequence of ``length`` tokens in the 80-layer decoder."""
    return kv_cache_bytes(big_decoder(n_kv_heads), batch=1, length=length, dtype=torch.bfloat16)


def grouping_checks(n_kv_heads: int = 2, n_rep: int = 4) -> dict:
    """repeat_kv (expand + reshape) against repeat_interleave and against the wrong tiling."""
    x = torch.randn(1, n_kv_heads, 3, 5)  # (B, Hkv, L, d)
    viewed = x[:, :, None].expand(1, n_kv_heads, n_rep, 3, 5)
    return {"equal": torch.equal(repeat_kv(x, n_rep), x.repeat_interleave(n_rep, dim=1)),
            "tile_equal": torch.equal(x.repeat(1, n_rep, 1, 1), x.repeat_interleave(n_rep, dim=1)),
            "expand_is_view": viewed.data_ptr() == x.data_ptr() and viewed.stride(2) == 0}


@functools.lru_cache(maxsize=None)
def c3_against_c1(run: str) -> dict:
    """C3 - C1 in a committed run: "exact" and "bit" in percentage points, "se" the binomial standard
    error of the exact-line difference (points), "reading", the epochs and the test lines."""
    records = load_run(run)
    row = next(r for r in single_change_rows(records) if r["config"] == "c3")
    return {"exact": 100 * row["exact"], "bit": 100 * row["bit"], "se": 100 * row["se"], "reading": row["reading"],
            "epochs": row["epochs"], "c1_epochs": row["baseline_epochs"], "lines": records["c1"]["sets"]["test"]["lines"],
            "c1_exact": 100 * metric(records["c1"], "sequence_accuracy"),
            "c3_exact": 100 * metric(records["c3"], "sequence_accuracy"),
            "params_saved_pct": 100 * (1 - records["c3"]["params"] / records["c1"]["params"])}


def megabytes(n: int) -> float:
    return n / 1e6


def heads_as_separate_attentions(d_model: int = 12, n_heads: int = 3, seed: int = 0) -> float:
    """The largest difference between MultiHeadAttention's output and ``n_heads`` single-head
    attentions, each with its own (d_model -> d_model / n_heads) projections, taken as the matching
    rows of q_proj, k_proj and v_proj, their outputs concatenated and passed through o_proj."""
    torch.manual_seed(seed)
    mha = MultiHeadAttention(d_model, n_heads, dropout=0.0)
    x, memory = torch.randn(2, 5, d_model), torch.randn(2, 7, d_model)
    d = d_model // n_heads
    outs = []
    for h in range(n_heads):
        rows = slice(h * d, (h + 1) * d)  # head h's own projections: d of the D output rows
        q = x @ mha.q_proj.weight[rows].T + mha.q_proj.bias[rows]
        k = memory @ mha.k_proj.weight[rows].T + mha.k_proj.bias[rows]
        v = memory @ mha.v_proj.weight[rows].T + mha.v_proj.bias[rows]
        outs.append(torch.softmax(q @ k.transpose(-2, -1) / d ** 0.5, dim=-1) @ v)  # (B, Lq, d)
    separate = mha.o_proj(torch.cat(outs, dim=-1))
    with torch.no_grad():
        return float((separate - mha(x, memory, memory)).abs().max())
