"""Facts for chapter 3 (multi-head and grouped-query attention, the KV cache).

Parameter counts come from real cipherlab modules, cache sizes from
``cipherlab.models.transformer.kv_cache_bytes``; chapter 3 calls the same functions. C3's
measured quality against C1 comes from the committed results through
``cipherlab.results.single_change_rows``, the function chapter 9 uses.
"""

from __future__ import annotations

import functools

import torch

from cipherlab.models.attention import MultiHeadAttention, repeat_kv
from cipherlab.models.transformer import Seq2SeqTransformer, cross_kv_cache_bytes, kv_cache_bytes
from cipherlab.results import EQUAL_EPOCHS_RUN, PRIMARY_RUN, load_run, metric, single_change_rows

SRC_VOCAB, TGT_VOCAB = 1024, 8000  # the assignment's BPE vocabulary sizes for C1-C4
CONFIGS = {"C1": {}, "C3": {"attn_type": "gqa", "n_kv_heads": 2}}


@functools.lru_cache(maxsize=None)
def trace_shapes(batch: int = 2, length: int = 4, d_model: int = 12, n_heads: int = 3) -> dict:
    """Shapes inside a real MultiHeadAttention.forward, recorded with hooks (self-attention, no mask)."""
    mha = MultiHeadAttention(d_model, n_heads, dropout=0.0)
    seen = {}

    def record(name, tensor):  # a hook that returns None leaves the forward pass unchanged
        seen[name] = tuple(tensor.shape)

    mha.q_proj.register_forward_hook(lambda m, i, o: record("projected", o))
    mha.o_proj.register_forward_pre_hook(lambda m, i: record("concatenated", i[0]))
    mha.attention.register_forward_pre_hook(lambda m, i: record("heads", i[0]))
    mha.attention.register_forward_hook(lambda m, i, o: record("head_outputs", o))
    mha.attention.capture = True
    x = torch.randn(batch, length, d_model)
    out = mha(x, x, x)
    seen["scores"] = tuple(mha.attention.last_attn.shape)
    seen["o_proj_weight"] = tuple(mha.o_proj.weight.shape)
    seen["output"] = tuple(out.shape)
    return seen


def projection_params(d_model: int, n_heads: int, n_kv_heads: int | None = None, bias: bool = False) -> int:
    """Parameters of the four projections of a real (grouped-query) attention module."""
    return sum(p.numel() for p in MultiHeadAttention(d_model, n_heads, n_kv_heads=n_kv_heads, bias=bias).parameters())


@functools.lru_cache(maxsize=None)
def model(name: str, **overrides) -> Seq2SeqTransformer:
    """C1 or C3 at the assignment's sizes (src vocab 1024, tgt vocab 8000, d_model 256, 8 heads, 4+4 layers)."""
    torch.manual_seed(0)
    return Seq2SeqTransformer(SRC_VOCAB, TGT_VOCAB, **CONFIGS[name], **overrides)


@functools.lru_cache(maxsize=None)
def big_decoder(n_kv_heads: int) -> Seq2SeqTransformer:
    """Drill sheet step 4's model: 80 decoder layers, 64 query heads of width 128, on the meta device.

    The meta device records shapes without allocating memory, so a model of this size
    (d_model 8192) costs nothing to build; kv_cache_bytes only reads its shapes.
    """
    with torch.device("meta"):
        return Seq2SeqTransformer(1, 1, d_model=64 * 128, n_heads=64, enc_layers=0, dec_layers=80, ffn_dim=1,
                                  attn_type="gqa", n_kv_heads=n_kv_heads, max_len=1)


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
            "epochs": row["epochs"], "c1_epochs": row["baseline_epochs"], "lines": records["c1"]["test"]["lines"],
            "c1_exact": 100 * metric(records["c1"], "sequence_accuracy"),
            "c3_exact": 100 * metric(records["c3"], "sequence_accuracy"),
            "params_saved_pct": 100 * (1 - records["c3"]["params"] / records["c1"]["params"])}


def _mb(n: int) -> float:
    return n / 1e6


FACTS = {
    # the (2, 4, 12), h = 3 trace
    "mha_trace_projected": lambda: str(trace_shapes()["projected"]),
    "mha_trace_heads": lambda: str(trace_shapes()["heads"]),
    "mha_trace_scores": lambda: str(trace_shapes()["scores"]),
    "mha_trace_head_outputs": lambda: str(trace_shapes()["head_outputs"]),
    "mha_trace_concatenated": lambda: str(trace_shapes()["concatenated"]),
    "mha_trace_wo": lambda: str(trace_shapes()["o_proj_weight"]),
    "mha_trace_output": lambda: str(trace_shapes()["output"]),
    # parameter budgets from real modules
    "mha_params_d12": lambda: projection_params(12, 3),
    "mha_params_d12_bias": lambda: projection_params(12, 3, bias=True),
    "mha_params_d12_mqa": lambda: projection_params(12, 3, n_kv_heads=1),
    "mha_params_d512": lambda: ", ".join(f"{n:,}" for n in sorted({projection_params(512, h)
                                                                   for h in (1, 2, 8, 32, 128)})),
    "mha_params_d256_mha": lambda: projection_params(256, 8, bias=True),
    "mha_params_d256_gqa": lambda: projection_params(256, 8, n_kv_heads=2, bias=True),
    "mha_params_d256_mqa": lambda: projection_params(256, 8, n_kv_heads=1, bias=True),
    "mha_o_proj_params": lambda: sum(p.numel() for p in MultiHeadAttention(256, 8).o_proj.parameters()),
    "mha_c1_params": lambda: model("C1").num_params(),
    "mha_c3_params": lambda: model("C3").num_params(),
    "mha_c1_c3_saving": lambda: model("C1").num_params() - model("C3").num_params(),
    "mha_c1_c3_saving_pct": lambda: 100 * (1 - model("C3").num_params() / model("C1").num_params()),
    # K/V head grouping
    "mha_repeat_kv_equal": lambda: str(grouping_checks()["equal"]),
    "mha_tile_equal": lambda: str(grouping_checks()["tile_equal"]),
    "mha_expand_is_view": lambda: str(grouping_checks()["expand_is_view"]),
    # KV cache: drill sheet step 4 (80 layers, bf16) ...
    "mha_cache_mha_2048": lambda: big_cache(64, 2048),
    "mha_cache_mha_32768": lambda: big_cache(64, 32768),
    "mha_cache_gqa_2048": lambda: big_cache(8, 2048),
    "mha_cache_gqa_32768": lambda: big_cache(8, 32768),
    "mha_cache_mha_2048_gb": lambda: big_cache(64, 2048) / 1e9,
    "mha_cache_mha_2048_gib": lambda: big_cache(64, 2048) / 2**30,
    "mha_cache_mha_32768_gb": lambda: big_cache(64, 32768) / 1e9,
    "mha_cache_mha_32768_gib": lambda: big_cache(64, 32768) / 2**30,
    "mha_cache_ratio": lambda: big_cache(64, 2048) // big_cache(8, 2048),
    # ... and cipherlab's own C1 / C3 (float32, a batch of 64 targets of 256 tokens)
    "mha_c1_cache_mb": lambda: _mb(kv_cache_bytes(model("C1"), 64, 256)),
    "mha_c3_cache_mb": lambda: _mb(kv_cache_bytes(model("C3"), 64, 256)),
    "mha_cross_cache_mb": lambda: _mb(cross_kv_cache_bytes(model("C1"), 64, 256)),
    # C3 against C1, measured: the controlled run (equal minutes) and equal epochs, one seed each
    "mha_c3_exact_ctrl": lambda: c3_against_c1(PRIMARY_RUN)["exact"],
    "mha_c3_se_ctrl": lambda: c3_against_c1(PRIMARY_RUN)["se"],
    "mha_c3_bit_ctrl": lambda: c3_against_c1(PRIMARY_RUN)["bit"],
    "mha_c3_reading_ctrl": lambda: c3_against_c1(PRIMARY_RUN)["reading"],
    "mha_c1_epochs_ctrl": lambda: c3_against_c1(PRIMARY_RUN)["c1_epochs"],
    "mha_c3_epochs_ctrl": lambda: c3_against_c1(PRIMARY_RUN)["epochs"],
    "mha_c1_exact_ctrl": lambda: c3_against_c1(PRIMARY_RUN)["c1_exact"],
    "mha_c3_exact_ctrl_rate": lambda: c3_against_c1(PRIMARY_RUN)["c3_exact"],
    "mha_c3_exact_eq": lambda: c3_against_c1(EQUAL_EPOCHS_RUN)["exact"],
    "mha_c3_se_eq": lambda: c3_against_c1(EQUAL_EPOCHS_RUN)["se"],
    "mha_c3_bit_eq": lambda: c3_against_c1(EQUAL_EPOCHS_RUN)["bit"],
    "mha_c3_reading_eq": lambda: c3_against_c1(EQUAL_EPOCHS_RUN)["reading"],
    "mha_epochs_eq": lambda: c3_against_c1(EQUAL_EPOCHS_RUN)["epochs"],
    "mha_c1_exact_eq": lambda: c3_against_c1(EQUAL_EPOCHS_RUN)["c1_exact"],
    "mha_c3_exact_eq_rate": lambda: c3_against_c1(EQUAL_EPOCHS_RUN)["c3_exact"],
    "mha_cpu_c3_saving_pct": lambda: c3_against_c1(PRIMARY_RUN)["params_saved_pct"],
    "mha_test_lines": lambda: c3_against_c1(PRIMARY_RUN)["lines"],
}
