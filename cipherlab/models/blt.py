"""C5, after the Byte Latent Transformer (Pagnoni et al., 2024): no tokenizer, bytes in and bytes out.

An encoder-decoder, unlike the paper's decoder-only LM; order-2 byte counts for the entropy; one
attention pooling after non-overlapping local windows; fixed target patches, and a second
cross-attention from every target byte to the source.  B examples, Ls source bytes in Ks entropy
patches, Lt target bytes, P = patch_tgt:

    src (B, Ls) --LocalEncoder: embed, windowed self-attention, PatchPooling--> (B, Ks, D)
                --+ patch positions, global Encoder---------------------------> memory (B, Ks, D)
    tgt_in (B, Lt) --embed + byte positions--> h (B, Lt, D)
                --PatchPooling over the Lt // P complete fixed patches-----> (B, Lt // P, D)
                --behind a learned start patch, + patch positions,
                  global Decoder reading memory------------------------------> g (B, Lt // P + 1, D)
    h --LocalDecoder: causal windowed self-attention, cross-attention to g under the
                      patch-causal mask, cross-attention to the source, tied head--> logits (B, Lt, V)

Teacher forcing is C1's: the logits at position i predict ``tgt_in[i + 1]``, so nothing computed
from ``tgt_in[i + 1:]`` may reach them (:func:`patch_causal_mask`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from dataclasses import dataclass

from cipherlab.models.attention import KVCache, MultiHeadAttention, causal_mask
from cipherlab.models.embedding import BitFactoredEmbedding, key_phase_embedding
from cipherlab.models.blt_patching import (
    DEFAULT_MIN_COUNT,
    N_BYTES,
    ByteEntropyModel,
    fixed_patch_membership,
    patch_membership,
)
from cipherlab.models.norm import make_norm
from cipherlab.models.positional import SinusoidalPositionalEncoding
from cipherlab.models.transformer import (Decoder, DecoderCache, DecodingState, Encoder, FeedForward,
                                          init_transformer_weights)

__all__ = [
    "DEFAULT_MIN_COUNT", "N_BYTES", "ByteEntropyModel", "fixed_patch_membership", "patch_membership",
    "patch_causal_mask", "WindowedSelfAttention", "LocalTransformerLayer", "PatchPooling", "LocalModel",
    "LocalEncoder", "LocalDecoderLayer", "LocalDecoder", "BLTArgs", "BLTModel", "BLTDecoderCache", "SOURCE_MEMORIES",
]

NORM = "layernorm"  # C5 changes the tokenisation only; every other component is C1's


def _check_ids(ids: torch.Tensor, allowed_max: int, name: str, specials: dict[str, int], also: int | None = None) -> None:
    """Raise ValueError naming the first id of ``ids`` (B, L) outside 0..allowed_max and not PAD
    (nor ``also``, the EOS that may end a source)."""
    pad, bos, eos = specials["pad_id"], specials["bos_id"], specials["eos_id"]
    bad = ((ids < 0) | (ids > allowed_max)) & (ids != pad) & (ids != (pad if also is None else also))
    if bool(bad.any()):
        b, i = (int(x) for x in bad.nonzero()[0])
        raise ValueError(f"{name}[{b}, {i}] = {int(ids[b, i])} is not a valid id here (0..{allowed_max}, or PAD={pad}); "
                         f"source ids are cipher byte values 0..255 (and EOS={eos} at the end), target ids are "
                         f"plaintext bytes plus BOS={bos}/EOS={eos}")


def patch_causal_mask(Lt: int, K: int, patch: int, device=None) -> torch.Tensor:
    """(1, 1, Lt, K) bool, True = blocked: byte i may read global slot j iff j <= (i + 1) // patch.

    Slot 0 is the start patch, slot j >= 1 the pooled target patch j - 1, which holds input
    positions up to j * P - 1.  Byte i knows positions 0..i, so it may read slot j exactly when
    j * P - 1 <= i.  Slot 0 is open to every byte, so no row is ever fully blocked.
    """
    i = torch.arange(Lt, device=device)[:, None]  # (Lt, 1)
    j = torch.arange(K, device=device)[None, :]  # (1, K)
    return (j > (i + 1) // patch)[None, None]  # (1, 1, Lt, K)


# What the LocalDecoder's second cross-attention reads: the local encoder's source byte states
# (one vector per cipher byte) or the global encoder's source-patch memory (one per patch).
SOURCE_MEMORIES = ("bytes", "patches")


class WindowedSelfAttention(nn.Module):
    """Self-attention inside non-overlapping windows of ``window`` positions.

    The windows become extra batch rows, (B, L, D) -> (B * n_windows, W, D), so one
    MultiHeadAttention call handles them all at a cost of O(L * W), not O(L^2).  Bytes on
    either side of a window edge cannot see each other here.  ``causal=True`` also blocks later
    positions inside each window.
    """

    def __init__(self, d_model: int, n_heads: int, window: int, causal: bool, dropout: float = 0.1):
        super().__init__()
        self.window, self.causal = window, causal
        self.attn = MultiHeadAttention(d_model, n_heads, dropout)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        """x (B, L, D), pad (B, L) bool (True = padding) -> (B, L, D)."""
        B, L, D = x.shape
        W = min(self.window, L)  # a sequence shorter than one window is one window
        n_win = -(-L // W)
        extra = n_win * W - L
        x = F.pad(x, (0, 0, 0, extra))  # (B, n_win * W, D)
        pad = F.pad(pad, (0, extra), value=True)  # (B, n_win * W)
        xw = x.reshape(B * n_win, W, D)  # (B * n_win, W, D): each window is its own row
        mask = pad.reshape(B * n_win, 1, 1, W)  # key padding per window
        if self.causal:
            mask = mask | causal_mask(W, x.device)  # (B * n_win, 1, W, W)
        out = self.attn(xw, xw, xw, mask)  # (B * n_win, W, D)
        return out.reshape(B, n_win * W, D)[:, :L]  # (B, L, D)


class LocalTransformerLayer(nn.Module):
    """Pre-LN layer of the LocalEncoder: windowed self-attention, then the C1 FeedForward."""

    def __init__(self, d_model: int, n_heads: int, ffn_dim: int, window: int, dropout: float = 0.1):
        super().__init__()
        self.norm1 = make_norm(NORM, d_model)
        self.self_attn = WindowedSelfAttention(d_model, n_heads, window, causal=False, dropout=dropout)
        self.norm2 = make_norm(NORM, d_model)
        self.ffn = FeedForward(d_model, ffn_dim, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        """x (B, L, D), pad (B, L) -> (B, L, D)."""
        x = x + self.dropout(self.self_attn(self.norm1(x), pad))
        return x + self.dropout(self.ffn(self.norm2(x)))


class PatchPooling(nn.Module):
    """One vector per patch: a learned query cross-attends over the patch's bytes.

    The attention weights depend on each byte's content and position together, so swapping
    two bytes inside a patch changes the result; a mean of (content + position) vectors would
    not change.  Each patch's bytes (a contiguous run of at most P) are gathered into a
    (B * K, P, D) tensor and pooled by one MultiHeadAttention call.  Empty patches (padding
    slots) come out as zero vectors.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.1):
        super().__init__()
        self.query = nn.Parameter(torch.randn(d_model) * 0.02)
        self.attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm = make_norm(NORM, d_model)

    def forward(self, x: torch.Tensor, member: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, L, D) byte vectors, member (B, K, L) bool -> pooled (B, K, D), empty (B, K) bool."""
        B, L, D = x.shape
        K = member.size(1)
        sizes = member.sum(-1)  # (B, K) bytes per patch
        empty = sizes == 0
        if K == 0:  # e.g. a target prefix shorter than one patch
            return x.new_zeros(B, 0, D), empty
        P = max(int(sizes.max()), 1)
        start = member.to(torch.uint8).argmax(-1)  # (B, K) first byte of each patch (0 if empty)
        offsets = torch.arange(P, device=x.device)
        idx = (start[..., None] + offsets).clamp(max=max(L - 1, 0))  # (B, K, P) byte index
        inside = offsets < sizes[..., None]  # (B, K, P) real byte of the patch
        if not bool(member.gather(2, idx)[inside].all()):
            raise ValueError("PatchPooling: a patch in `member` is not a contiguous run of bytes; "
                             "build memberships with patch_membership or fixed_patch_membership")
        gathered = x.gather(1, idx.reshape(B, K * P, 1).expand(B, K * P, D))  # (B, K * P, D)
        kv = gathered.reshape(B * K, P, D)  # (B * K, P, D): one row per patch
        q = self.query.to(x.dtype).expand(B * K, 1, D)  # (B * K, 1, D)
        mask = ~inside.reshape(B * K, 1, 1, P)  # empty patches: all blocked -> zero rows
        pooled = self.attn(q, kv, kv, mask).reshape(B, K, D)  # (B, K, D)
        return self.norm(pooled).masked_fill(empty[..., None], 0.0), empty


def byte_embedding(d_model: int, vocab_size: int, bit_embeddings: bool = False) -> nn.Module:
    """The table of the byte ids: free rows, or bit-factored ones (bytes by their bits, the specials free)."""
    if not bit_embeddings:
        return nn.Embedding(vocab_size, d_model)
    return BitFactoredEmbedding([*range(N_BYTES), *[None] * (vocab_size - N_BYTES)], d_model)


def _with_phase(x: torch.Tensor, phase_embed, offset: int = 0) -> torch.Tensor:
    """x (B, L, D) plus the key-phase vector of each position offset .. offset + L - 1."""
    return x if phase_embed is None else x + phase_embed(x.size(1), offset, x.device)


class LocalModel(nn.Module):
    """What the LocalEncoder and the LocalDecoder share: the byte embedding (scaled by sqrt(d_model)),
    the optional key-phase vectors, sinusoidal byte positions, ``n_layers`` layers of ``layer_cls``
    and a final norm."""

    def __init__(self, layer_cls: type[nn.Module], d_model: int, n_heads: int, ffn_dim: int, n_layers: int,
                 window: int, *, vocab_size: int, pad_id: int, dropout: float = 0.1, max_len: int = 4096,
                 bit_embeddings: bool = False, phase_embedding: bool = False, key_period: int | None = None):
        super().__init__()
        self.d_model, self.pad_id = d_model, pad_id
        self.embed = byte_embedding(d_model, vocab_size, bit_embeddings)
        self.phase_embed = key_phase_embedding(d_model, phase_embedding, key_period)
        self.pos = SinusoidalPositionalEncoding(d_model, max_len, dropout)
        self.layers = nn.ModuleList(layer_cls(d_model, n_heads, ffn_dim, window, dropout) for _ in range(n_layers))
        self.final_norm = make_norm(NORM, d_model)

    def embed_bytes(self, ids: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """ids (B, L) at positions offset .. offset + L - 1 -> byte vectors with positions (B, L, D)."""
        x = _with_phase(self.embed(ids) * math.sqrt(self.d_model), self.phase_embed, offset)
        return self.pos(x, offset)


class LocalEncoder(LocalModel):
    """Source bytes -> patch vectors: embedding, byte positions, windowed layers, PatchPooling."""

    def __init__(self, d_model: int, n_heads: int, ffn_dim: int, n_layers: int, window: int,
                 dropout: float = 0.1, **kwargs):
        super().__init__(LocalTransformerLayer, d_model, n_heads, ffn_dim, n_layers, window, dropout=dropout, **kwargs)
        self.pooling = PatchPooling(d_model, n_heads, dropout)

    def forward(self, src: torch.Tensor, member: torch.Tensor, return_bytes: bool = False):
        """src (B, Ls), member (B, Ks, Ls) -> patches (B, Ks, D), empty (B, Ks)
        [, byte states (B, Ls, D) when return_bytes]."""
        pad = src == self.pad_id
        x = self.embed_bytes(src)  # (B, Ls, D)
        for layer in self.layers:
            x = layer(x, pad)
        x = self.final_norm(x)
        patches, empty = self.pooling(x, member)
        return (patches, empty, x) if return_bytes else (patches, empty)


class LocalDecoderLayer(nn.Module):
    """Pre-LN layer of the LocalDecoder; every byte reads three things, each in its own residual branch.

    1. earlier target bytes (causal windowed self-attention);
    2. the global target-patch states g, only the slots the patch-causal mask allows;
    3. the source directly: the local encoder's source byte states (``source_memory="bytes"``)
       or the global encoder's source-patch memory (``"patches"``), named ``memory`` either way.
       Without this path, source information reaches a byte only through g, a summary of
       *target* patches.  The source holds no target information, so it cannot leak.
    """

    def __init__(self, d_model: int, n_heads: int, ffn_dim: int, window: int, dropout: float = 0.1):
        super().__init__()
        self.norm1 = make_norm(NORM, d_model)
        self.self_attn = WindowedSelfAttention(d_model, n_heads, window, causal=True, dropout=dropout)
        self.norm2 = make_norm(NORM, d_model)
        self.global_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm3 = make_norm(NORM, d_model)
        self.memory_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm4 = make_norm(NORM, d_model)
        self.ffn = FeedForward(d_model, ffn_dim, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, pad, g, g_mask, memory, memory_mask):
        """x (B, Lt, D), pad (B, Lt), g (B, Kt, D), g_mask (1, 1, Lt, Kt),
        memory (B, Ks, D), memory_mask (B, 1, 1, Ks) -> (B, Lt, D)."""
        x = x + self.dropout(self.self_attn(self.norm1(x), pad))
        x = x + self.dropout(self.global_attn(self.norm2(x), g, g, g_mask))
        x = x + self.dropout(self.memory_attn(self.norm3(x), memory, memory, memory_mask))
        return x + self.dropout(self.ffn(self.norm4(x)))

    def step(self, x, position, self_cache, g, g_cache, memory, memory_mask, memory_cache):
        """forward for one new byte x (B, 1, D) at target position ``position``, with caches.

        self_cache holds the keys/values of the earlier bytes of this byte's window; it is emptied
        when a new window begins, because no byte reads across a window edge. g (B, S, D) is every
        global slot built so far, and they are exactly the slots this byte may read: a slot is added
        as soon as its patch is complete, and (i + 1) // P of the patch-causal mask is then the newest
        one. g_cache and memory_cache are static caches of their projected keys/values.
        """
        if position % self.self_attn.window == 0:
            self_cache.k = self_cache.v = None
        h = self.norm1(x)
        x = x + self.dropout(self.self_attn.attn(h, h, h, None, self_cache))
        x = x + self.dropout(self.global_attn(self.norm2(x), g, g, None, g_cache))
        x = x + self.dropout(self.memory_attn(self.norm3(x), memory, memory, memory_mask, memory_cache))
        return x + self.dropout(self.ffn(self.norm4(x)))


class LocalDecoder(LocalModel):
    """Target bytes -> per-byte logits; the output head is tied to its byte embedding, as in C1."""

    def __init__(self, d_model: int, n_heads: int, ffn_dim: int, n_layers: int, window: int, **kwargs):
        super().__init__(LocalDecoderLayer, d_model, n_heads, ffn_dim, n_layers, window, **kwargs)

    def forward(self, h, pad, g, g_mask, memory, memory_mask):
        """h (B, Lt, D) from embed_bytes, pad (B, Lt), the rest as LocalDecoderLayer -> (B, Lt, V)."""
        for layer in self.layers:
            h = layer(h, pad, g, g_mask, memory, memory_mask)
        return F.linear(self.final_norm(h), self.embed.weight)  # (B, Lt, V): tied output head

    def step(self, x, position, cache: "BLTDecoderCache", memory, memory_mask) -> torch.Tensor:
        """forward for one new byte x (B, 1, D) at ``position``, reading ``cache`` -> logits (B, 1, V)."""
        for i, layer in enumerate(self.layers):
            x = layer.step(x, position, cache.self_attn[i], cache.slots, cache.global_attn[i],
                           memory, memory_mask, cache.memory_attn[i])
        return F.linear(self.final_norm(x), self.embed.weight)


@dataclass
class BLTDecoderCache:
    """What C5 keeps between decoding steps: the global decoder's cache and its output slots, the
    bytes of the patch in progress, and per local layer the window's keys/values, the projected
    slots and the projected source."""

    global_cache: DecoderCache
    self_attn: list[KVCache]
    global_attn: list[KVCache]
    memory_attn: list[KVCache]
    slots: torch.Tensor | None = None  # (B, S, D)
    patch: torch.Tensor | None = None  # (B, n < patch_tgt, D)
    length: int = 0  # target bytes fed so far: the position of the next one

    def nbytes(self) -> int:
        """Bytes held by every tensor of the cache."""
        caches = [*self.global_cache.self_attn, *self.global_cache.cross_attn, *self.self_attn,
                  *self.global_attn, *self.memory_attn]
        extra = sum(t.nbytes for t in (self.slots, self.patch) if t is not None)
        return sum(c.nbytes for c in caches) + extra


@dataclass(frozen=True, kw_only=True)
class BLTArgs:
    """Everything :class:`BLTModel` is built from: ``BLTModel(BLTArgs(...))``, kept as ``model.args``.
    The C5-only sizes and the special ids have no default."""

    d_model: int = 256  # width of byte vectors and patch vectors, as C1's d_model (256 at the assignment's sizes)
    n_heads: int = 8  # attention heads in every attention and in the pooling; must divide d_model
    enc_layers: int = 4  # layers of the global encoder over source patches (C1's Encoder)
    dec_layers: int = 4  # layers of the global decoder over target patch slots (C1's Decoder)
    ffn_dim: int = 1024  # hidden width of every FeedForward, global and local
    dropout: float = 0.1  # on embeddings, attention weights and residual branches, as in C1 (0.1)
    local_layers: int  # windowed layers of the local encoder and of the local decoder (Config.blt_local_layers: 1)
    window: int  # bytes each local self-attention window holds (Config.blt_window: 32)
    patch_tgt: int  # bytes per fixed target patch, P (Config.blt_patch_tgt: 4)
    source_memory: str  # what target bytes cross-attend to besides the slots: "bytes" (C5) or "patches"
    pad_id: int  # the target/source PAD id, after the 256 byte values (cipherlab's: 256)
    bos_id: int  # the id that starts every target (cipherlab's: 257)
    eos_id: int  # the id that ends every target, and a source under Config.source_eos (cipherlab's: 258)
    max_len: int = 4096  # byte positions (local) and patch positions (global) the sinusoidal tables hold
    bit_embeddings: bool = False  # bit-factored byte tables in place of plain ones (Config.bit_embeddings)
    phase_embedding: bool = False  # a learned vector per key phase added to the byte vectors
    key_period: int | None = None  # the cipher's period, 8 (cipherlab.data.cipher.PERIOD); needed by phase_embedding


class BLTModel(nn.Module):
    """The C5 model.  ``forward(src, src_member, tgt_in, tgt_member=None) -> logits (B, Lt, V)``.

    src (B, Ls) cipher byte values, PAD-padded; src_member (B, Ks, Ls) its entropy patches;
    tgt_in (B, Lt) = [BOS] + plain bytes; tgt_member (B, Lt // patch_tgt, Lt), optional, the
    complete fixed patches of tgt_in (built here when None).  The global encoder and decoder are
    C1's Encoder and Decoder at patch level.  V = the largest special id + 1.
    """

    def __init__(self, args: BLTArgs):
        super().__init__()
        self.args = args
        if args.source_memory not in SOURCE_MEMORIES:
            raise ValueError(f"BLTModel: source_memory={args.source_memory!r}; expected one of {SOURCE_MEMORIES}")
        self.specials = {"pad_id": args.pad_id, "bos_id": args.bos_id, "eos_id": args.eos_id}
        self.vocab_size = max(self.specials.values()) + 1
        d_model, n_heads, ffn_dim, dropout = args.d_model, args.n_heads, args.ffn_dim, args.dropout
        self.d_model, self.patch_tgt = d_model, args.patch_tgt
        self.source_memory, self.window = args.source_memory, args.window
        self.pad_id, self.eos_id = args.pad_id, args.eos_id
        self.tgt_pad_id = args.pad_id  # the decoding loops never predict it (as Seq2SeqTransformer.tgt_pad_id)
        local = dict(d_model=d_model, n_heads=n_heads, ffn_dim=ffn_dim, n_layers=args.local_layers,
                     window=args.window, dropout=dropout, max_len=args.max_len, bit_embeddings=args.bit_embeddings,
                     phase_embedding=args.phase_embedding, key_period=args.key_period, vocab_size=self.vocab_size,
                     pad_id=args.pad_id)
        self.local_encoder = LocalEncoder(**local)
        self.local_decoder = LocalDecoder(**local)
        self.tgt_pooling = PatchPooling(d_model, n_heads, dropout)
        self.start_patch = nn.Parameter(torch.randn(d_model))  # unit scale, like the normed patches
        self.patch_pos = SinusoidalPositionalEncoding(d_model, args.max_len, dropout)
        self.global_encoder = Encoder(d_model, n_heads, args.enc_layers, ffn_dim, dropout, norm=NORM)
        self.global_decoder = Decoder(d_model, n_heads, args.dec_layers, ffn_dim, dropout, norm=NORM)
        init_transformer_weights(self)

    def encode(self, src: torch.Tensor, src_member: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, Ls), src_member (B, Ks, Ls) -> memory (B, Ks, D), memory_mask (B, 1, 1, Ks)."""
        memory, memory_mask, _ = self.encode_source(src, src_member)
        return memory, memory_mask

    def encode_source(self, src: torch.Tensor, src_member: torch.Tensor):
        """-> memory, memory_mask as :meth:`encode`, and what the local decoder's second
        cross-attention reads: ``None`` with source_memory="patches" (it reads the memory), or
        (source byte states (B, Ls, D), their padding mask (B, 1, 1, Ls)) with "bytes"."""
        _check_ids(src, N_BYTES - 1, "src", self.specials, also=self.eos_id)
        patches, empty, byte_states = self.local_encoder(src, src_member, return_bytes=True)  # (B, Ks, D), (B, Ks)
        memory_mask = empty[:, None, None, :]  # (B, 1, 1, Ks): padding patches are blocked keys
        memory = self.global_encoder(self.patch_pos(patches), memory_mask)
        source = None
        if self.source_memory == "bytes":
            source = (byte_states, (src == self.pad_id)[:, None, None, :])  # (B, Ls, D), (B, 1, 1, Ls)
        return memory, memory_mask, source

    def global_states(self, tgt_in, memory, memory_mask, tgt_member=None):
        """tgt_in (B, Lt) -> byte vectors h (B, Lt, D) and global patch states g (B, K + 1, D).

        K = Lt // patch_tgt complete target patches; g_j depends on decoder-input
        positions 0 .. j * patch_tgt - 1 only.
        """
        _check_ids(tgt_in, self.vocab_size - 1, "tgt_in", self.specials)
        B, Lt = tgt_in.shape
        if tgt_member is None:
            tgt_member = fixed_patch_membership(tgt_in != self.pad_id, self.patch_tgt)
        elif tgt_member.shape != (B, Lt // self.patch_tgt, Lt):
            raise ValueError(f"tgt_member has shape {tuple(tgt_member.shape)}, expected (B, Lt // patch_tgt, Lt) = "
                             f"{(B, Lt // self.patch_tgt, Lt)}: the complete patch_tgt={self.patch_tgt} patches "
                             f"of tgt_in; build it with collate_bytes(..., patch_tgt={self.patch_tgt}) or pass None")
        h = self.local_decoder.embed_bytes(tgt_in)  # (B, Lt, D)
        patches, _ = self.tgt_pooling(h, tgt_member)  # (B, K, D)
        K = patches.size(1)
        start = self.start_patch.to(h.dtype).expand(B, 1, self.d_model)
        slots = torch.cat((start, patches), dim=1)  # (B, K + 1, D): slot j holds patch j - 1
        # Causal over slots is enough: a slot a real byte may read only looks back at real patches.
        g = self.global_decoder(self.patch_pos(slots), memory, causal_mask(K + 1, h.device), memory_mask)
        return h, g

    def patch_mask(self, Lt: int, K: int, device=None) -> torch.Tensor:
        """(1, 1, Lt, K) bool, True = blocked: :func:`patch_causal_mask` at ``patch_tgt``."""
        return patch_causal_mask(Lt, K, self.patch_tgt, device)

    def decode(self, tgt_in, memory, memory_mask, tgt_member=None, source=None) -> torch.Tensor:
        """tgt_in (B, Lt) with the encoder's memory -> logits (B, Lt, V).

        ``source``: the third output of :meth:`encode_source`, needed with source_memory="bytes".
        """
        h, g = self.global_states(tgt_in, memory, memory_mask, tgt_member)
        g_mask = self.patch_mask(tgt_in.size(1), g.size(1), tgt_in.device)
        if self.source_memory == "bytes":
            if source is None:
                raise ValueError("BLTModel.decode: source_memory='bytes' reads the source byte states; pass "
                                 "source=, the third output of encode_source(src, src_member)")
            read, read_mask = source
        else:
            read, read_mask = memory, memory_mask
        return self.local_decoder(h, tgt_in == self.pad_id, g, g_mask, read, read_mask)

    def begin_decoding(self, src: torch.Tensor, src_member: torch.Tensor) -> DecodingState:
        """Encode the source once, build the start slot g_0; then call :meth:`decode_step` byte by byte."""
        memory, memory_mask, source = self.encode_source(src, src_member)
        n = len(self.local_decoder.layers)
        cache = BLTDecoderCache(self.global_decoder.new_cache(), [KVCache() for _ in range(n)],
                                [KVCache(static=True) for _ in range(n)], [KVCache(static=True) for _ in range(n)])
        state = DecodingState(memory, memory_mask, cache, source)
        self._add_slot(state, self.start_patch.expand(src.size(0), 1, self.d_model))
        return state

    def _add_slot(self, state: DecodingState, slot: torch.Tensor) -> None:
        """Run one new slot (B, 1, D) through the global decoder (causal over slots, so the earlier
        slots' outputs do not change) and append its output to the cache's slots."""
        cache = state.cache
        j = 0 if cache.slots is None else cache.slots.size(1)  # its slot index and patch position
        g = self.global_decoder(self.patch_pos(slot, j), state.memory, None, state.memory_mask, cache.global_cache)
        cache.slots = g if cache.slots is None else torch.cat((cache.slots, g), dim=1)
        for projected in cache.global_attn:  # the local layers project the slots again at the next byte
            projected.k = projected.v = None

    def decode_step(self, state: DecodingState, tokens: torch.Tensor) -> torch.Tensor:
        """Feed tokens (B,), the bytes at target position ``state.cache.length``; -> next-byte logits (B, V).

        Equal to the last position of :meth:`decode` over the whole prefix (``test_blt`` checks it
        byte by byte), at the cost of one byte: the byte is embedded; if it completes a target patch,
        the patch is pooled and becomes the next global slot; then it runs through the local decoder
        against the cached window, slots and source.
        """
        _check_ids(tokens[:, None], self.vocab_size - 1, "tokens", self.specials)
        cache = state.cache
        position = cache.length
        x = self.local_decoder.embed_bytes(tokens[:, None], position)  # (B, 1, D)
        cache.patch = x if cache.patch is None else torch.cat((cache.patch, x), dim=1)
        cache.length += 1
        if cache.patch.size(1) == self.patch_tgt:  # bytes position + 1 - P .. position: a complete patch
            whole = torch.ones(x.size(0), 1, self.patch_tgt, dtype=torch.bool, device=x.device)
            pooled, _ = self.tgt_pooling(cache.patch, whole)  # (B, 1, D)
            self._add_slot(state, pooled)
            cache.patch = None
        read, read_mask = state.source if self.source_memory == "bytes" else (state.memory, state.memory_mask)
        return self.local_decoder.step(x, position, cache, read, read_mask)[:, -1]

    def decode_prefix(self, state: DecodingState, prefix: torch.Tensor) -> torch.Tensor:
        """The whole prefix (B, t) through the decoder again, no cache -> logits (B, t, V)."""
        return self.decode(prefix, state.memory, state.memory_mask, source=state.source)

    def attention_modules(self) -> dict[tuple[str, int], nn.Module]:
        """``{(role, layer): attention module}``: "encoder self" (the local encoder, inside windows
        of ``window`` bytes), "cross" (the local decoder's direct path to the source) and
        "global encoder self" (over source patches)."""
        modules = {("encoder self", i): layer.self_attn.attn for i, layer in enumerate(self.local_encoder.layers)}
        modules |= {("cross", i): layer.memory_attn for i, layer in enumerate(self.local_decoder.layers)}
        return modules | {("global encoder self", i): layer.self_attn
                          for i, layer in enumerate(self.global_encoder.layers)}

    def forward(self, src, src_member, tgt_in, tgt_member=None) -> torch.Tensor:
        memory, memory_mask, source = self.encode_source(src, src_member)
        return self.decode(tgt_in, memory, memory_mask, tgt_member, source)

    def num_params(self) -> int:
        """Trainable parameters; the tied output head is counted once."""
        return sum(p.numel() for p in self.parameters())
