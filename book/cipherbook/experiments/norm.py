"""The normalisation chapter's experiments: what its cells call and print, and what its facts quote.

Every function runs cipherlab's own modules; the normalisation chapter calls the same functions, so the book
and the answers show the same numbers.

cipherlab's layers are Pre-LN only. To measure what Pre-LN buys, this module also wires the
*same* parts (cipherlab's MultiHeadAttention, FeedForward and LayerNorm) the two other ways:
Post-LN, as in the original Transformer, and Pre-LN without residual connections.
``ContrastEncoderLayer`` exists for these measurements only; no model in cipherlab uses it.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn

from cipherbook.experiments.common import D_MODEL, FFN_DIM, N_HEADS, SRC_VOCAB, TGT_VOCAB
from cipherlab.models.attention import MultiHeadAttention
from cipherlab.models.norm import LayerNorm, RMSNorm, make_norm
from cipherlab.models.transformer import Encoder, FeedForward, ModelArgs, Seq2SeqTransformer, init_transformer_weights
from cipherlab.analysis.ablation import load_run, metric, single_change_rows

# The depth experiments use small layers (the effect is about depth, not width) and no dropout.
SMALL = dict(d_model=64, n_heads=4, ffn_dim=256)
DEPTH = 24
WIRINGS = ("pre", "post", "no-residual")


# --------------------------------------------------------------------------- bf16 statistics

def layernorm_bf16_statistics(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm (gamma=1, beta=0) with every intermediate stored in bf16: the thing NOT to do in bf16.

    Each statistic is summed in float32 and rounded to bf16 where it is stored. The rounding points are
    written out because PyTorch's own bf16 reductions sum in an order and precision that depend on the CPU.
    """
    bf16 = torch.bfloat16
    mean = x.float().mean(dim=-1, keepdim=True).to(bf16)
    centred = (x.float() - mean.float()).to(bf16)
    var = (centred.float() ** 2).mean(dim=-1, keepdim=True).to(bf16)
    return (centred.float() * torch.rsqrt(var.float() + eps)).to(bf16)


def bf16_statistics_errors(offset: float = 30.0, n_tokens: int = 64, seed: int = 0) -> dict:
    """Mean |error| of LayerNorm on bf16 tokens (features ~ offset + N(0, 1)) against a float64 reference.

    "fp32": cipherlab's LayerNorm (statistics in fp32, result cast to bf16); "bf16": statistics in
    bf16; "naive_var_min": the smallest one-pass variance mean(x^2) - mean(x)^2 computed in bf16
    (the true variances are all near 1).
    """
    g = torch.Generator().manual_seed(seed)
    x = (offset + torch.randn(n_tokens, D_MODEL, generator=g)).to(torch.bfloat16)  # (N, D)
    reference = F.layer_norm(x.double(), (D_MODEL,), eps=1e-5)
    ours = LayerNorm(D_MODEL)(x)
    in_bf16 = layernorm_bf16_statistics(x)
    naive_var = (x * x).mean(dim=-1) - x.mean(dim=-1) ** 2
    return {"fp32": (ours.double() - reference).abs().mean().item(),
            "bf16": (in_bf16.double() - reference).abs().mean().item(),
            "naive_var_min": naive_var.min().item(),
            "true_var_min": x.double().var(dim=-1, unbiased=False).min().item()}


# --------------------------------------------------------------------------- depth experiments

class ContrastEncoderLayer(nn.Module):
    """An encoder layer made of cipherlab's parts but wired differently from cipherlab's EncoderLayer.

    wiring="post":        x <- Norm(x + SelfAttn(x));  x <- Norm(x + FFN(x))        (Vaswani et al.)
    wiring="no-residual": x <- SelfAttn(Norm(x));      x <- FFN(Norm(x))            (Pre-LN, no skips)
    For measurements only (the normalisation chapter); cipherlab's models use the Pre-LN EncoderLayer.
    """

    def __init__(self, d_model: int, n_heads: int, ffn_dim: int, wiring: str):
        super().__init__()
        if wiring not in ("post", "no-residual"):
            raise ValueError(f"ContrastEncoderLayer: wiring={wiring!r}; use 'post' or 'no-residual' "
                             "(Pre-LN is cipherlab's own EncoderLayer)")
        self.wiring = wiring
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=0.0)
        self.ffn = FeedForward(d_model, ffn_dim, dropout=0.0)
        self.norm1, self.norm2 = make_norm("layernorm", d_model), make_norm("layernorm", d_model)

    def forward(self, x, mask=None):
        if self.wiring == "post":
            x = self.norm1(x + self.self_attn(x, x, x, mask))
            return self.norm2(x + self.ffn(x))
        h = self.norm1(x)
        x = self.self_attn(h, h, h, mask)
        return self.ffn(self.norm2(x))


def build_stack(wiring: str, depth: int = DEPTH, seed: int = 0) -> tuple[nn.ModuleList, nn.Module]:
    """(layers, final norm) for one wiring, initialised like cipherlab's models (Xavier), no dropout.

    "pre" is cipherlab's Encoder itself; "post" has no final norm (its last step already is one).
    """
    if wiring not in WIRINGS:
        raise ValueError(f"build_stack: wiring={wiring!r}; use one of {WIRINGS}")
    torch.manual_seed(seed)
    if wiring == "pre":
        encoder = Encoder(SMALL["d_model"], SMALL["n_heads"], depth, SMALL["ffn_dim"], dropout=0.0)
        layers, final = encoder.layers, encoder.final_norm
    else:
        layers = nn.ModuleList(ContrastEncoderLayer(**SMALL, wiring=wiring) for _ in range(depth))
        final = make_norm("layernorm", SMALL["d_model"]) if wiring == "no-residual" else nn.Identity()
    init_transformer_weights(layers)
    return layers, final


def toy_batch(batch: int = 8, length: int = 32, n_classes: int = 10, seed: int = 1):
    """Unit-scale inputs (like the scaled embeddings) and random class targets."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, length, SMALL["d_model"], generator=g)  # (B, L, D)
    y = torch.randint(0, n_classes, (batch, length), generator=g)  # (B, L)
    return x, y


def depth_profile(wiring: str, depth: int = DEPTH, seed: int = 0) -> dict:
    """One forward/backward pass at initialisation through a stack of ``depth`` layers.

    Returns per layer (bottom first): "grad" the norm of the gradient of all that layer's
    parameters; "stream_grad" the norm of the loss's gradient with respect to the stream after
    the layer (what the layer's output is pushed by); "rms" the root-mean-square of the residual
    stream after the layer; "spreads"
    how different the positions' vectors are after the layer (``position_spread``). Also
    "final_rms" after the final norm, and "input_spread" / "spread" before the first layer and
    after the final norm.
    """
    layers, final = build_stack(wiring, depth, seed)
    torch.manual_seed(seed)
    head = nn.Linear(SMALL["d_model"], 10)
    x, y = toy_batch()
    rms, spreads, outputs = [], [], []
    h = x
    for layer in layers:
        h = layer(h)
        h.retain_grad()
        outputs.append(h)
        rms.append(h.pow(2).mean().sqrt().item())
        spreads.append(position_spread(h.detach()))
    out = final(h)  # (B, L, D)
    F.cross_entropy(head(out).flatten(0, 1), y.flatten()).backward()
    grads = [torch.cat([p.grad.flatten() for p in layer.parameters()]).norm().item() for layer in layers]
    return {"grad": grads, "stream_grad": [h.grad.norm().item() for h in outputs], "rms": rms, "spreads": spreads, "final_rms": out.pow(2).mean().sqrt().item(),
            "input_spread": position_spread(x), "spread": position_spread(out.detach())}


def position_spread(x: torch.Tensor) -> float:
    """|x - its mean over positions| / |x| for x (B, L, D): near 1 for unrelated positions, 0 when
    every position holds the same vector (the output could no longer say which token was where)."""
    return ((x - x.mean(dim=1, keepdim=True)).norm() / x.norm()).item()


def majority_batch(batch: int, length: int, vocab: int, g: torch.Generator):
    """A toy task that needs attention: every position must output the sequence's most frequent token."""
    ids = torch.randint(0, vocab, (batch, length), generator=g)  # (B, L)
    return ids, ids.mode(dim=1).values[:, None].expand(batch, length)  # (B, L) targets


def train_small_stack(wiring: str, *, warmup_steps: int = 0, depth: int = 6, lr: float = 3e-3, steps: int = 150,
                      vocab: int = 8, batch: int = 32, length: int = 16, seed: int = 0) -> list[float]:
    """Train embedding + stack + head on ``majority_batch`` with Adam; return the loss at every step.

    The learning rate is ``lr`` from the first step (warmup_steps=0), or rises linearly to it over
    ``warmup_steps``. Chance level is ln(vocab).
    """
    layers, final = build_stack(wiring, depth, seed)
    embed, head = nn.Embedding(vocab, SMALL["d_model"]), nn.Linear(SMALL["d_model"], vocab)
    params = [*embed.parameters(), *layers.parameters(), *final.parameters(), *head.parameters()]
    optimizer = torch.optim.Adam(params, lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / (warmup_steps + 1)))
    g = torch.Generator().manual_seed(seed + 1)
    losses = []
    for _ in range(steps):
        ids, target = majority_batch(batch, length, vocab, g)
        h = embed(ids)
        for layer in layers:
            h = layer(h)
        loss = F.cross_entropy(head(final(h)).flatten(0, 1), target.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    return losses


# --------------------------------------------------------------------------- C1 vs C4

@functools.lru_cache(maxsize=None)
def ablation_model(norm: str) -> Seq2SeqTransformer:
    """A freshly initialised model with the assignment's sizes and the course notes' BPE vocabularies, seeded."""
    torch.manual_seed(0)
    return Seq2SeqTransformer(ModelArgs(SRC_VOCAB, TGT_VOCAB, d_model=D_MODEL, n_heads=N_HEADS, ffn_dim=FFN_DIM,
                                        norm=norm))


def count_norm_layers(model: nn.Module) -> int:
    return sum(isinstance(m, (LayerNorm, RMSNorm)) for m in model.modules())


def c4_parameters_saved() -> int:
    return ablation_model("layernorm").num_params() - ablation_model("rmsnorm").num_params()


def first_norm_inputs(batch: int = 4, length: int = 200, seed: int = 0) -> torch.Tensor:
    """(B*L, D): what the first norm of a fresh C1 encoder sees (scaled embeddings + sinusoidal code)."""
    model = ablation_model("layernorm").eval()
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(1, SRC_VOCAB, (batch, length), generator=g)  # no PAD
    with torch.no_grad():
        return model._embed(src, model.src_embed).flatten(0, 1)


def mean_over_rms(x: torch.Tensor) -> torch.Tensor:
    """|mean| / RMS of each row: 0 when LayerNorm and RMSNorm agree exactly, 1 for a constant row."""
    return x.mean(-1).abs() / x.pow(2).mean(-1).sqrt()


def layernorm_vs_rmsnorm(x: torch.Tensor) -> torch.Tensor:
    """Per row, |LayerNorm(x) - RMSNorm(x)| / |LayerNorm(x)| with cipherlab's modules at initialisation."""
    with torch.no_grad():
        ln, rms = LayerNorm(x.size(-1))(x), RMSNorm(x.size(-1))(x)
    return (ln - rms).norm(dim=-1) / ln.norm(dim=-1)


@functools.lru_cache(maxsize=None)
def c4_against_c1(run: str) -> dict:
    """C4 - C1 in a committed run (``cipherlab.analysis.ablation.single_change_rows``, as the results chapter): "exact" in
    percentage points with "se", its binomial standard error, "reading", and each model's exact-line
    rate (percent), epochs and seconds per epoch."""
    records = load_run(run)
    row = next(r for r in single_change_rows(records) if r["config"] == "c4")
    c1, c4 = records["c1"], records["c4"]
    return {"exact": 100 * row["exact"], "se": 100 * row["se"], "reading": row["reading"],
            "c1_exact": 100 * metric(c1, "sequence_accuracy"), "c4_exact": 100 * metric(c4, "sequence_accuracy"),
            "c1_epochs": c1["epochs"], "c4_epochs": c4["epochs"],
            "c1_s_per_epoch": c1["seconds_per_epoch"], "c4_s_per_epoch": c4["seconds_per_epoch"],
            "budget_s": c1["hyperparameters"]["time_budget_s"]}
