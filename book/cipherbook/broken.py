"""Deliberately broken variants of cipherlab's modules, and the checks that catch them (the broken-models chapter).

The viva asks "what would break if...". Each answer here is demonstrated, not asserted: a broken
variant is a small subclass or function wrapping cipherlab's real module (the real modules have no
flag that turns a bug on), and a check is a fast measurement that the real module passes and the
variant fails. ``tests/test_broken.py`` runs every check on both, so the chapter's claims cannot
silently rot. No cipherlab model uses anything defined here.

    variant                   what it breaks                    check
    NoCausalMask              decoder reads future targets      future_leak, train_and_decode
    SoftmaxOverQueries        weights normalised per key        sdpa_gap, attention_future_leak
    Unscaled                  no 1/sqrt(d) in the scores        sdpa_gap, saturation
    UnmaskedPadding           source PAD read as content        padding_gap
    c2_without_cross_positions  cross-attention sees no order   memory_permutation_gap
    MeanPooling               BLT patch pooled by a mean        pooling_swap_gap
    chunks_253                chunks at 253 characters          masks_per_slot
    DefaultEmbeddingInit      nn.Embedding's N(0, 1)            init_scale
    RopeOnValues              RoPE rotates V too                shift_gap
    OwnPatchBLT               byte i reads its own patch        blt_answer_leak

The classic slips of a first implementation, each as a student writes it:

    unshifted_pair            tgt_out = tgt_in, no shift        answer_in_input, train_and_decode
    loss_counting_pad         PAD targets in the mean loss      pad_loss_gap
    HeadsWithoutTranspose     heads split by view, no transpose attention_future_leak
    RopeCacheWithoutOffset    cached steps rotated at 0         cache_gap
    decode_without_eval       decoding with dropout still on    repeat_gap
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn

from cipherlab.data.cipher import KEY, PERIOD
from cipherlab.data.corpus import Chunk
from cipherlab.pipeline.decode import greedy_decode
from cipherlab.models.attention import MultiHeadAttention, ScaledDotProductAttention, padding_mask
from cipherlab.models.blt import BLTArgs, BLTModel, PatchPooling
from cipherlab.models.blt_patching import patch_membership
from cipherlab.models.positional import RotaryPositionalEmbedding, SinusoidalPositionalEncoding
from cipherlab.models.transformer import ModelArgs, Seq2SeqTransformer
from cipherlab.data.tokenizers.bytes import BOS_ID, EOS_ID, PAD_ID, SPECIAL_IDS, VOCAB_SIZE

# Tiny byte-level models: source = cipher bytes 0..255, target = plaintext bytes, PAD/BOS/EOS 256-258.
TINY = dict(d_model=32, n_heads=4, enc_layers=1, dec_layers=1, ffn_dim=64, dropout=0.0, max_len=128,
            src_pad_id=PAD_ID, tgt_pad_id=PAD_ID)
TINY_BLT = dict(d_model=32, n_heads=4, enc_layers=1, dec_layers=1, ffn_dim=64, dropout=0.0, window=8,
                patch_tgt=4, max_len=128, local_layers=1, source_memory="bytes", **SPECIAL_IDS)


def tiny(cls=Seq2SeqTransformer, seed: int = 0, **overrides) -> Seq2SeqTransformer:
    """A seeded tiny byte-level model of class ``cls`` (the real one or a broken subclass), in eval mode."""
    torch.manual_seed(seed)
    return cls(ModelArgs(VOCAB_SIZE, VOCAB_SIZE, **{**TINY, **overrides})).eval()


def cipher_batch(n: int, length: int, seed: int = 0):
    """n random lowercase lines of ``length`` characters, encrypted with the key:
    src (n, length) cipher bytes, tgt (n, length + 2) = [BOS] + plain bytes + [EOS]."""
    gen = torch.Generator().manual_seed(seed)
    plain = torch.randint(ord("a"), ord("z") + 1, (n, length), generator=gen)
    key = torch.tensor([KEY[i % PERIOD] for i in range(length)])
    bos, eos = torch.full((n, 1), BOS_ID), torch.full((n, 1), EOS_ID)
    return plain ^ key, torch.cat([bos, plain, eos], dim=1)


# --------------------------------------------------------------------------- 1. the causal mask

class NoCausalMask(Seq2SeqTransformer):
    """BROKEN: the decoder's self-attention masks padding only, so position i reads tgt_in[i + 1:]."""

    def decode(self, tgt_in, memory, src_mask, cache=None):
        self_mask = padding_mask(tgt_in, self.tgt_pad_id)  # no causal_mask(...) | ...
        h = self.decoder(self._embed(tgt_in, self.tgt_embed), memory, self_mask, src_mask)
        return F.linear(h, self.tgt_embed.weight)


@torch.no_grad()
def future_leak(model: Seq2SeqTransformer, at: int = 4, seed: int = 0) -> float:
    """Largest change of the logits at target positions < ``at`` when the tokens from ``at`` on change."""
    src, tgt = cipher_batch(2, 10, seed)
    tgt_in = tgt[:, :-1]
    changed = tgt_in.clone()
    changed[:, at:] = cipher_batch(2, 10, seed + 1)[1][:, at:-1]
    return (model(src, changed)[:, :at] - model(src, tgt_in)[:, :at]).abs().max().item()


def teacher_forcing_pair(tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(tgt_in, tgt_out) as cipherlab trains: read [BOS] + y, predict y + [EOS], one position later
    (``codec.teacher_forcing_logits`` and ``train.Trainer._step``)."""
    return tgt[:, :-1], tgt[:, 1:]  # (B, Lt - 1) each


def train_and_decode(model: Seq2SeqTransformer, steps: int = 80, batch: int = 32, length: int = 8,
                     seed: int = 0, pair=teacher_forcing_pair) -> dict:
    """Train ``model`` on random encrypted lines with teacher forcing, (tgt_in, tgt_out) = ``pair(tgt)``;
    then, on fresh lines, its teacher-forced loss and character accuracy (with the right shift) and
    the character accuracy of greedy decoding. "train_loss": the last training step's loss, on the
    targets ``pair`` made (what a training log would show)."""
    src, tgt = cipher_batch(batch * steps, length, seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for s in range(steps):
        x, y = src[batch * s: batch * (s + 1)], tgt[batch * s: batch * (s + 1)]
        tgt_in, tgt_out = pair(y)
        loss = F.cross_entropy(model(x, tgt_in).transpose(1, 2), tgt_out)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    src, tgt = cipher_batch(256, length, seed + 1)
    with torch.no_grad():
        logits = model(src, tgt[:, :-1])
        greedy = greedy_decode(model, src, BOS_ID, EOS_ID, length, use_cache=False)
    plain = tgt[:, 1:-1]
    greedy = F.pad(greedy, (0, length - greedy.size(1)), value=PAD_ID)[:, :length]  # stopped early: wrong
    return {"teacher_forced_loss": F.cross_entropy(logits.transpose(1, 2), tgt[:, 1:]).item(),
            "teacher_forced_acc": (logits[:, :length].argmax(-1) == plain).float().mean().item(),
            "greedy_acc": (greedy == plain).float().mean().item(), "train_loss": loss.item()}


# --------------------------------------------------------------------------- 2-3. softmax axis and scaling

class SoftmaxOverQueries(ScaledDotProductAttention):
    """BROKEN: softmax over the query axis (dim=-2), so each KEY's weights sum to 1, not each query's."""

    def forward(self, q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Lq, Lk)
        if mask is not None:
            scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        return torch.softmax(scores, dim=-2) @ v  # dim=-2: over queries


class Unscaled(ScaledDotProductAttention):
    """BROKEN: scores q.k without the 1/sqrt(d) (the real module divides a sqrt(d)-times-larger q)."""

    def forward(self, q, k, v, mask=None):
        return super().forward(q * math.sqrt(q.size(-1)), k, v, mask)


def _qkv(d: int, L: int = 12, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(2, 4, L, d, generator=gen) for _ in range(3)]  # unit-variance q, k, v


def causal(L: int) -> torch.Tensor:
    """(1, 1, L, L) bool, True = blocked: cipherlab's causal mask."""
    return torch.ones(L, L, dtype=torch.bool).triu(1)[None, None]


@torch.no_grad()
def sdpa_gap(attention: ScaledDotProductAttention, d: int = 16) -> float:
    """Largest difference from PyTorch's F.scaled_dot_product_attention under a causal mask (the oracle)."""
    q, k, v = _qkv(d)
    ours = attention(q, k, v, causal(q.size(-2)))
    return (ours - F.scaled_dot_product_attention(q, k, v, is_causal=True)).abs().max().item()


@torch.no_grad()
def attention_future_leak(attention: ScaledDotProductAttention, d: int = 16) -> float:
    """Largest change of the outputs of queries 0..L-2 when only the LAST query changes (causal mask)."""
    q, k, v = _qkv(d)
    changed = q.clone()
    changed[..., -1, :] = torch.randn(changed[..., -1, :].shape, generator=torch.Generator().manual_seed(1))
    mask = causal(q.size(-2))
    return (attention(changed, k, v, mask) - attention(q, k, v, mask))[..., :-1, :].abs().max().item()


@torch.no_grad()
def saturation(attention: ScaledDotProductAttention, d: int) -> dict:
    """For unit-variance q, k of width d: a query's largest attention weight (1 = one-hot), and the
    size of the softmax's Jacobian ||diag(p) - p p^T|| (what passes a gradient back to the scores;
    0 for a one-hot row), each averaged over the queries."""
    q, k, v = _qkv(d, L=64)
    attention.capture = True
    attention(q, k, v)
    attention.capture = False
    p = attention.last_attn  # (B, H, Lq, Lk)
    jacobian = torch.diag_embed(p) - p[..., :, None] * p[..., None, :]  # (B, H, Lq, Lk, Lk)
    return {"max_weight": p.amax(-1).mean().item(), "jacobian": jacobian.flatten(-2).norm(dim=-1).mean().item()}


# --------------------------------------------------------------------------- 4. padding

class UnmaskedPadding(Seq2SeqTransformer):
    """BROKEN: no source padding mask; the encoder and cross-attention read PAD as if it were text."""

    def encode(self, src):
        return self.encoder(self._embed(src, self.src_embed), None), None  # src_mask = None


@torch.no_grad()
def padding_gap(model: Seq2SeqTransformer, extra: int = 5, seed: int = 0) -> float:
    """Largest change of the logits when ``extra`` PAD tokens are appended to every source line."""
    src, tgt = cipher_batch(2, 8, seed)
    padded = torch.cat([src, torch.full((2, extra), PAD_ID)], dim=1)
    return (model(padded, tgt[:, :-1]) - model(src, tgt[:, :-1])).abs().max().item()


# --------------------------------------------------------------------------- 5. cross-attention positions

def c2_without_cross_positions(seed: int = 0) -> Seq2SeqTransformer:
    """BROKEN: C2 (RoPE) built with ``rope_cross_attention=False``. RoPE lives inside the attention
    layers, so this cross-attention sees no source position at all."""
    return tiny(seed=seed, pos_encoding="rope", rope_cross_attention=False)


@torch.no_grad()
def memory_permutation_gap(model: Seq2SeqTransformer, seed: int = 0) -> float:
    """Largest change of the logits when the rows of the encoder memory (and its mask) are shuffled.

    0 means the decoder reads the memory as a set: target position t cannot ask for source
    position t, only for content."""
    src, tgt = cipher_batch(2, 12, seed)
    memory, mask = model.encode(src)
    perm = torch.randperm(src.size(1), generator=torch.Generator().manual_seed(seed))
    shuffled = model.decode(tgt[:, :-1], memory[:, perm], mask[..., perm])
    return (shuffled - model.decode(tgt[:, :-1], memory, mask)).abs().max().item()


# --------------------------------------------------------------------------- 6. BLT pooling

class MeanPooling(PatchPooling):
    """BROKEN: a patch's vector is the mean of its bytes' vectors (the course notes' "bag of bits")."""

    def forward(self, x, member):
        weights = member.to(x.dtype)  # (B, K, L)
        sizes = weights.sum(-1, keepdim=True)  # (B, K, 1)
        pooled = weights @ x / sizes.clamp(min=1)  # (B, K, D)
        empty = sizes[..., 0] == 0
        return self.norm(pooled).masked_fill(empty[..., None], 0.0), empty


@torch.no_grad()
def pooling_swap_gap(pooling: PatchPooling, seed: int = 0) -> float:
    """Change of a patch's pooled vector when two of its bytes swap places (positions added, as in the BLT)."""
    torch.manual_seed(seed)
    positions = SinusoidalPositionalEncoding(32, dropout=0.0)
    content = torch.randn(1, 8, 32)
    member = patch_membership([[0, 4]], [8], 8)  # patches [0, 4) and [4, 8)
    swapped = content[:, [0, 2, 1, 3, 4, 5, 6, 7]]  # bytes 1 and 2 of patch 0 swapped
    a, _ = pooling.eval()(positions(content), member)
    b, _ = pooling(positions(swapped), member)
    return (a[0, 0] - b[0, 0]).abs().max().item()


# --------------------------------------------------------------------------- 7. chunk size

def chunks_253(plain, cipher, line_ids, chunk_chars: int = 253) -> list[Chunk]:
    """BROKEN: ``data.make_chunks`` without its multiple-of-8 check (it refuses 253 with a ValueError)."""
    return [Chunk(line, part, plain[line][s:s + chunk_chars], cipher[line][8 * s: 8 * (s + chunk_chars)])
            for line in line_ids for part, s in enumerate(range(0, max(len(plain[line]), 1), chunk_chars))]


def masks_per_slot(chunks: list[Chunk]) -> int:
    """The most distinct XOR masks (cipher byte ^ plaintext byte) seen at any one index of a chunk.

    1 means the index in the chunk determines the key byte, as the model is told; more means the
    same slot is encrypted with different key bytes in different chunks."""
    seen: dict[int, set[int]] = {}
    for c in chunks:
        for j, ch in enumerate(c.plain):
            seen.setdefault(j, set()).add(int(c.cipher[8 * j: 8 * j + 8], 2) ^ ord(ch))
    return max(len(masks) for masks in seen.values())


# --------------------------------------------------------------------------- 8. embedding init

class DefaultEmbeddingInit(Seq2SeqTransformer):
    """BROKEN: the embedding tables keep PyTorch's default N(0, 1) instead of cipherlab's N(0, 1/d)."""

    def __init__(self, args: ModelArgs):
        super().__init__(args)
        for table in (self.src_embed, self.tgt_embed):
            nn.init.normal_(table.weight, 0.0, 1.0)  # nn.Embedding's own initialisation


@torch.no_grad()
def init_scale(model: Seq2SeqTransformer, seed: int = 0) -> dict:
    """At initialisation: RMS of the scaled token embeddings next to the position code's, the
    cross-entropy of the first forward pass (chance is ln V), and its largest logit."""
    src, tgt = cipher_batch(8, 32, seed)
    tokens = model.tgt_embed(tgt) * math.sqrt(model.d_model)
    logits = model(src, tgt[:, :-1])
    return {"embed_rms": tokens.pow(2).mean().sqrt().item(),
            "position_rms": model.pos_enc.table[:32].pow(2).mean().sqrt().item(),
            "first_loss": F.cross_entropy(logits.transpose(1, 2), tgt[:, 1:]).item(),
            "chance_loss": math.log(VOCAB_SIZE), "max_logit": logits.abs().max().item()}


# --------------------------------------------------------------------------- 9. RoPE on V

class _RotatedValues(nn.Module):
    """v_proj followed by RoPE on each head's values at positions 0 .. L - 1."""

    def __init__(self, proj: nn.Linear, rope: RotaryPositionalEmbedding, n_heads: int):
        super().__init__()
        self.proj, self.rope, self.n_heads = proj, rope, n_heads

    def forward(self, x):
        B, L, _ = x.shape
        v = self.proj(x).view(B, L, self.n_heads, -1).transpose(1, 2)  # (B, H, L, d)
        return self.rope.rotate(v, 0).transpose(1, 2).reshape(B, L, -1)


class RopeOnValues(MultiHeadAttention):
    """BROKEN: self-attention with RoPE on the values as well as on queries and keys."""

    def __init__(self, d_model, n_heads, rope):
        super().__init__(d_model, n_heads, dropout=0.0, rope=rope)
        self.v_proj = _RotatedValues(self.v_proj, rope, n_heads)


@torch.no_grad()
def shift_gap(attention: MultiHeadAttention, shift: int = 5, seed: int = 0) -> float:
    """Largest change of self-attention outputs when the same tokens sit ``shift`` positions later
    (behind ``shift`` masked-out slots). RoPE on q and k alone makes attention shift-invariant: 0."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 10, attention.d_model, generator=gen)
    later = torch.cat([torch.zeros(2, shift, attention.d_model), x], dim=1)
    blocked = torch.arange(later.size(1)) < shift  # the empty slots are blocked keys
    out = attention(later, later, later, blocked[None, None, None, :])[:, shift:]
    return (out - attention(x, x, x)).abs().max().item()


# --------------------------------------------------------------------------- 10. BLT patch-causal mask

def own_patch_mask(Lt: int, K: int, patch: int, device=None) -> torch.Tensor:
    """BROKEN patch-causal mask: byte i may read slot j iff j <= i // patch + 1, the slot of its own
    patch, which pools bytes after i (the real rule: j <= (i + 1) // patch)."""
    i = torch.arange(Lt, device=device)[:, None]
    j = torch.arange(K, device=device)[None, :]
    return (j > i // patch + 1)[None, None]


class OwnPatchBLT(BLTModel):
    """BROKEN: BLTModel with ``own_patch_mask`` in place of ``patch_causal_mask`` (its ``patch_mask``)."""

    def patch_mask(self, Lt, K, device=None):
        return own_patch_mask(Lt, K, self.patch_tgt, device)


def tiny_blt(cls=BLTModel, seed: int = 0, **overrides) -> BLTModel:
    """A seeded tiny BLT of class ``cls`` (the real one or OwnPatchBLT), in eval mode."""
    torch.manual_seed(seed)
    return cls(BLTArgs(**{**TINY_BLT, **overrides})).eval()


@torch.no_grad()
def blt_answer_leak(model: BLTModel, length: int = 16, seed: int = 0) -> float:
    """Share of positions i whose logits change when only tgt_in[i + 1], the byte they must
    predict, changes: under teacher forcing those positions can read their answer."""
    src, tgt = cipher_batch(1, length, seed)
    member = patch_membership([list(range(0, length, 3))], [length], length)  # 3-byte source patches
    tgt_in = tgt[:, :-1]
    base = model(src, member, tgt_in)
    leaks = 0
    for i in range(tgt_in.size(1) - 1):
        changed = tgt_in.clone()
        changed[0, i + 1] = (changed[0, i + 1] + 1) % 256
        leaks += not torch.equal(model(src, member, changed)[0, i], base[0, i])
    return leaks / (tgt_in.size(1) - 1)


# --------------------------------------------------------------------------- 11. the target shift

SHIFT_STEPS = 40  # training steps for the unshifted run: copying is learned long before this

def unshifted_pair(tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """BROKEN: tgt_out = tgt_in. Position i is asked for the token it is reading, not the next one."""
    return tgt[:, :-1], tgt[:, :-1]  # should be tgt[:, :-1], tgt[:, 1:]


def answer_in_input(pair, length: int = 10, seed: int = 0) -> float:
    """Share of target positions whose answer is among the inputs they may read.

    Changes one token of ``tgt`` at a time and looks at the (tgt_in, tgt_out) that ``pair`` makes:
    when tgt_out[i] changes, position i is leaking if tgt_in[0..i] (what a causal decoder at i
    reads) changed too. 0 for the right shift, whatever the model."""
    _, tgt = cipher_batch(1, length, seed)
    tgt_in, tgt_out = pair(tgt)
    answered = leaking = 0
    for j in range(tgt.size(1)):
        changed = tgt.clone()
        changed[0, j] = (changed[0, j] + 1) % 256
        new_in, new_out = pair(changed)
        for i in (new_out[0] != tgt_out[0]).nonzero().flatten().tolist():
            answered += 1
            leaking += bool((new_in[0, :i + 1] != tgt_in[0, :i + 1]).any())
    return leaking / answered


# --------------------------------------------------------------------------- 12. PAD in the loss

def masked_loss(logits: torch.Tensor, target: torch.Tensor, pad_id: int) -> torch.Tensor:
    """cipherlab's loss (``train.sequence_loss``): the mean cross-entropy over the non-PAD targets."""
    from cipherlab.pipeline.train import sequence_loss

    return sequence_loss(logits, target, pad_id)[0]


def loss_counting_pad(logits: torch.Tensor, target: torch.Tensor, pad_id: int) -> torch.Tensor:
    """BROKEN: the mean over every target position, PAD included (no ``ignore_index=pad_id``)."""
    return F.cross_entropy(logits.flatten(0, 1), target.flatten())


def ragged_batch(seed: int = 0):
    """Four lines of 3, 5, 7 and 9 characters, padded to the longest: src (4, 9), tgt (4, 11)."""
    src, tgt = cipher_batch(4, 9, seed)
    for row, n in enumerate((3, 5, 7, 9)):
        src[row, n:] = PAD_ID
        tgt[row, n + 1] = EOS_ID
        tgt[row, n + 2:] = PAD_ID
    return src, tgt


@torch.no_grad()
def pad_loss_gap(loss_fn, model: Seq2SeqTransformer | None = None, extra: int = 8, seed: int = 0) -> dict:
    """The loss of the same four lines (``ragged_batch``) as batched, and with ``extra`` more PAD
    columns on the target (as when a longer line joins the batch): "gap" is the change, "pad_share"
    the share of PAD among the targets of the longer batch."""
    model = tiny() if model is None else model
    src, tgt = ragged_batch(seed)
    longer = torch.cat([tgt, torch.full((tgt.size(0), extra), PAD_ID)], dim=1)
    losses = []
    for batch in (tgt, longer):
        tgt_in, tgt_out = teacher_forcing_pair(batch)
        losses.append(loss_fn(model(src, tgt_in), tgt_out, PAD_ID).item())
    pad_share = (teacher_forcing_pair(longer)[1] == PAD_ID).float().mean().item()
    return {"loss": losses[0], "loss_longer": losses[1], "gap": abs(losses[1] - losses[0]), "pad_share": pad_share}


# --------------------------------------------------------------------------- 13. heads without transpose

class HeadsWithoutTranspose(MultiHeadAttention):
    """BROKEN: (B, L, D) -> (B, H, L, d) by ``view`` alone. The shape is right and nothing raises,
    but "head h, position l" now holds pieces of other positions' features."""

    def _split_heads(self, x, n_heads):
        B, L, _ = x.shape
        return x.view(B, n_heads, L, self.head_dim)  # should be .view(B, L, n_heads, d).transpose(1, 2)


def tiny_attention(cls=MultiHeadAttention, seed: int = 0, **overrides) -> MultiHeadAttention:
    """A seeded multi-head attention layer of class ``cls`` (the real one or a broken subclass):
    width 32, 4 heads of 8, no dropout."""
    torch.manual_seed(seed)
    return cls(**{"d_model": 32, "n_heads": 4, "dropout": 0.0, **overrides})


@torch.no_grad()
def mha_future_leak(attention: MultiHeadAttention, length: int = 8, seed: int = 0) -> float:
    """Causal self-attention through a whole multi-head layer: the largest change of the outputs at
    positions 0..L-2 when only the input at the LAST position changes (0 for a causal layer)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, length, attention.d_model, generator=gen)
    changed = x.clone()
    changed[:, -1] = torch.randn(2, attention.d_model, generator=gen)
    mask = causal(length)
    out, out_changed = attention(x, x, x, mask), attention(changed, changed, changed, mask)
    return (out_changed - out)[:, :-1].abs().max().item()


# --------------------------------------------------------------------------- 14. RoPE under the KV cache

class _RopeWithoutOffset(RotaryPositionalEmbedding):
    def forward(self, q, k, offset: int = 0):
        return self.rotate(q, 0), self.rotate(k, 0)  # BROKEN: should rotate at offset, offset + 1, ...


class RopeCacheWithoutOffset(Seq2SeqTransformer):
    """BROKEN: C2 whose decoder self-attention rotates q and k at position 0 on every cached step,
    as if ``self.rope(q, k)`` were called without ``offset=cache.length``. Without a cache the
    offset is 0 anyway, so training and teacher-forced validation are untouched."""

    def __init__(self, args: ModelArgs):
        super().__init__(dataclasses.replace(args, pos_encoding="rope"))
        rope = self.decoder.layers[0].self_attn.rope
        for layer in self.decoder.layers:
            layer.self_attn.rope = _RopeWithoutOffset(rope.head_dim, rope.max_len)


@torch.no_grad()
def cache_gap(model: Seq2SeqTransformer, length: int = 8, seed: int = 0) -> float:
    """Largest difference between the logits of incremental decoding (the KV cache, one token per
    step through ``decode_step``) and of one teacher-forced pass over the same target prefix."""
    src, tgt = cipher_batch(2, length, seed)
    tgt_in = tgt[:, :-1]
    state = model.begin_decoding(src)
    stepped = torch.stack([model.decode_step(state, tgt_in[:, t]) for t in range(tgt_in.size(1))], dim=1)
    return (stepped - model(src, tgt_in)).abs().max().item()


# --------------------------------------------------------------------------- 15. dropout at evaluation

def decode_in_eval_mode(model: Seq2SeqTransformer, src: torch.Tensor, length: int) -> torch.Tensor:
    """Greedy decoding as cipherlab's evaluation does it: ``model.eval()`` first, dropout off."""
    model.eval()
    return greedy_decode(model, src, BOS_ID, EOS_ID, length)


def decode_without_eval(model: Seq2SeqTransformer, src: torch.Tensor, length: int) -> torch.Tensor:
    """BROKEN: greedy decoding straight after training, the model still in train mode (dropout on).
    ``torch.no_grad`` and ``inference_mode`` do not switch dropout off; only ``model.eval()`` does."""
    model.train()  # where the training loop left it
    return greedy_decode(model, src, BOS_ID, EOS_ID, length)


EVAL_DROPOUT = 0.1  # the assignment's dropout, for the tiny model of the check below


def repeat_gap(decode, dropout: float = EVAL_DROPOUT, n: int = 64, length: int = 8, seed: int = 0) -> float:
    """Share of the characters that differ when ``decode`` runs twice over the same ``n`` lines,
    on a tiny model built with ``dropout`` (0 for a deterministic decoder)."""
    model = tiny(dropout=dropout, seed=seed)
    src, _ = cipher_batch(n, length, seed)
    torch.manual_seed(seed)  # dropout draws from the global generator
    first, second = decode(model, src, length), decode(model, src, length)
    width = max(first.size(1), second.size(1))
    first, second = (F.pad(out, (0, width - out.size(1)), value=PAD_ID) for out in (first, second))
    return (first != second).float().mean().item()
