"""The encoder-decoder Transformer behind configurations C1-C4.

The norms are ``cipherlab.models.norm``'s; every layer is Pre-LN (Xiong et al., 2020), and each
configuration builds this class. Pre-LN layers:

    EncoderLayer:  x <- x + Dropout(SelfAttn(Norm(x)))
                   x <- x + Dropout(FFN(Norm(x)))
    DecoderLayer:  x <- x + Dropout(SelfAttn(Norm(x), causal))
                   x <- x + Dropout(CrossAttn(Norm(x), memory))
                   x <- x + Dropout(FFN(Norm(x)))

Each stack ends with a final norm. C1-C4 differ only in one field of ModelArgs each: C2
``pos_encoding="rope"``, C3 ``attn_type="gqa"``, C4 ``norm="rmsnorm"``. Cross-attention is MHA in every configuration (C3 groups the K/V heads of self-attention only);
with RoPE it is rotated too (``rope_cross_attention``): queries at target positions, keys at
source positions. The BLT (C5) reuses Encoder and Decoder unchanged.

The model knows nothing of the cipher: its embedding modules are given to it. The recipe's
bit-factored tables and key-phase vector (:mod:`cipherlab.models.embedding`) are chosen where a
``Config`` becomes a model, :func:`cipherlab.pipeline.codec.build_model`.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from cipherlab.models.attention import KVCache, MultiHeadAttention, causal_mask, make_attention, padding_mask, select_rows
from cipherlab.models.norm import make_norm
from cipherlab.models.positional import LearnedPositionalEncoding, RotaryPositionalEmbedding, SinusoidalPositionalEncoding

POS_ENCODINGS = ("sinusoidal", "rope", "learned")


class FeedForward(nn.Module):
    """Position-wise MLP: (B, L, D) -> Linear(D, ffn_dim) -> GELU -> Dropout -> Linear(ffn_dim, D)."""

    def __init__(self, d_model: int, ffn_dim: int, dropout: float = 0.1):
        super().__init__()
        self.linear1 = nn.Linear(d_model, ffn_dim)
        self.activation = nn.GELU()
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(ffn_dim, d_model)

    def forward(self, x):
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


class EncoderLayer(nn.Module):
    """Pre-LN: bidirectional self-attention, then the FFN, each in its own residual branch."""

    def __init__(self, d_model, n_heads, ffn_dim, dropout=0.1, *, norm="layernorm", attn_type="mha",
                 n_kv_heads=None, rope=None, fused_attention=False):
        super().__init__()
        self.norm1 = make_norm(norm, d_model)
        self.self_attn = make_attention(attn_type, d_model, n_heads, n_kv_heads=n_kv_heads, dropout=dropout,
                                        rope=rope, fused=fused_attention)
        self.norm2 = make_norm(norm, d_model)
        self.ffn = FeedForward(d_model, ffn_dim, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        """x (B, L, D), mask (B, 1, 1, L) key padding -> (B, L, D)."""
        h = self.norm1(x)
        x = x + self.dropout(self.self_attn(h, h, h, mask))
        return x + self.dropout(self.ffn(self.norm2(x)))


class DecoderLayer(nn.Module):
    """Pre-LN: causal self-attention, cross-attention to the encoder memory, then the FFN."""

    def __init__(self, d_model, n_heads, ffn_dim, dropout=0.1, *, norm="layernorm", attn_type="mha",
                 n_kv_heads=None, rope=None, cross_rope=False, fused_attention=False):
        super().__init__()
        self.norm1 = make_norm(norm, d_model)
        self.self_attn = make_attention(attn_type, d_model, n_heads, n_kv_heads=n_kv_heads, dropout=dropout,
                                        rope=rope, fused=fused_attention)
        self.norm2 = make_norm(norm, d_model)
        # cross_rope: RoPE in cross-attention too (queries at target positions, keys at source
        # positions). Without it a RoPE model's cross-attention sees no position at all.
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout, rope=rope if cross_rope else None,
                                             fused=fused_attention)
        self.norm3 = make_norm(norm, d_model)
        self.ffn = FeedForward(d_model, ffn_dim, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, self_mask=None, cross_mask=None, self_cache=None, cross_cache=None):
        """x (B, Lt, D), memory (B, Ls, D), self_mask (.., Lt, Lt), cross_mask (B, 1, 1, Ls) -> (B, Lt, D)."""
        offset = 0 if self_cache is None else self_cache.length  # target position of x's first row
        h = self.norm1(x)
        x = x + self.dropout(self.self_attn(h, h, h, self_mask, self_cache))
        q_offset = offset if self.cross_attn.rope is not None else None
        x = x + self.dropout(self.cross_attn(self.norm2(x), memory, memory, cross_mask, cross_cache, q_offset))
        return x + self.dropout(self.ffn(self.norm3(x)))


class Encoder(nn.Module):
    """n_layers EncoderLayers and a final norm: (B, Ls, D) embeddings -> (B, Ls, D) memory."""

    def __init__(self, d_model, n_heads, n_layers, ffn_dim, dropout=0.1, *, norm="layernorm", **layer_options):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(d_model, n_heads, ffn_dim, dropout, norm=norm, **layer_options)
                                    for _ in range(n_layers))
        self.final_norm = make_norm(norm, d_model)

    def forward(self, x, mask=None):
        for layer in self.layers:
            x = layer(x, mask)
        return self.final_norm(x)


@dataclass
class DecoderCache:
    """What incremental decoding keeps between steps, one entry per decoder layer.

    self_attn[i]: keys/values of the target prefix (RoPE already applied), one position
    longer after every step. cross_attn[i]: keys/values of the encoder memory, projected
    on the first step and reused afterwards.
    """

    self_attn: list[KVCache]
    cross_attn: list[KVCache]

    @property
    def length(self) -> int:
        """Target positions already decoded: the position of the next token."""
        return self.self_attn[0].length

    def nbytes(self) -> dict[str, int]:
        return {"self_attn": sum(c.nbytes for c in self.self_attn),
                "cross_attn": sum(c.nbytes for c in self.cross_attn)}


@dataclass
class DecodingState:
    """One batch's incremental decoding, between two calls of a model's ``decode_step``: the encoder's
    output and mask (computed once, in ``begin_decoding``) and the decoder side's cache. :meth:`select`
    keeps the batch rows a beam search continues."""

    memory: torch.Tensor  # (B, Ls, D), or (B, Ks, D) source patches for C5
    memory_mask: torch.Tensor  # (B, 1, 1, Ls)
    cache: object
    source: tuple | None = None
    phases: torch.Tensor | None = None  # (B, Ls) phase of each source token (Seq2SeqTransformer's src_phase)

    def select(self, index: torch.Tensor) -> "DecodingState":
        return select_rows(self, index)


class Decoder(nn.Module):
    """n_layers DecoderLayers and a final norm: (B, Lt, D) target embeddings + memory -> (B, Lt, D)."""

    def __init__(self, d_model, n_heads, n_layers, ffn_dim, dropout=0.1, *, norm="layernorm", **layer_options):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(d_model, n_heads, ffn_dim, dropout, norm=norm, **layer_options)
                                    for _ in range(n_layers))
        self.final_norm = make_norm(norm, d_model)

    def new_cache(self) -> DecoderCache:
        n = len(self.layers)
        return DecoderCache([KVCache() for _ in range(n)], [KVCache(static=True) for _ in range(n)])

    def forward(self, x, memory, self_mask=None, cross_mask=None, cache: DecoderCache | None = None):
        for i, layer in enumerate(self.layers):
            self_cache, cross_cache = (None, None) if cache is None else (cache.self_attn[i], cache.cross_attn[i])
            x = layer(x, memory, self_mask, cross_mask, self_cache, cross_cache)
        return self.final_norm(x)


def init_transformer_weights(model: nn.Module) -> None:
    """Xavier-uniform linear weights, zero biases, N(0, 1/d) embeddings (std d^-1/2).

    PyTorch's default embedding init is N(0, 1). Times the sqrt(d_model) = 16 (d = 256) embedding
    scale that gives activations of std ~16, which drown the unit-amplitude sinusoidal
    positions and, through the tied output head, give hugely over-confident first
    logits. With std d^-1/2 the scaled embeddings have unit variance, the same scale as the
    positions (a sinusoidal entry has RMS 1/sqrt(2), about 0.71).
    Norm gains stay 1 and biases 0; learned position tables keep their own init.
    """
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=module.embedding_dim ** -0.5)


@dataclass(frozen=True)
class ModelArgs:
    """Everything :class:`Seq2SeqTransformer` is built from, in one frozen object (as nanoGPT's GPTConfig),
    kept as ``model.args``. The defaults are C1 at the assignment's sizes."""

    src_vocab_size: int  # source ids 0..src_vocab_size-1
    tgt_vocab_size: int  # target ids 0..tgt_vocab_size-1
    d_model: int = 256  # width of every token vector (C1: 256 at the assignment's sizes)
    n_heads: int = 8  # attention heads; must divide d_model (head_dim = d_model // n_heads = 32 in C1)
    enc_layers: int = 4  # EncoderLayers in the encoder stack (C1: 4)
    dec_layers: int = 4  # DecoderLayers in the decoder stack (C1: 4)
    ffn_dim: int = 1024  # hidden width of each FeedForward, 4 * d_model (C1: 1024)
    dropout: float = 0.1  # on embeddings, attention weights and residual branches (C1: 0.1)
    pos_encoding: str = "sinusoidal"  # "sinusoidal" (C1, C3, C4), "rope" (C2) or "learned" (no configuration)
    attn_type: str = "mha"  # self-attention: "mha" (C1, C2, C4) or "gqa" (C3); cross-attention is always MHA
    n_kv_heads: int | None = None  # GQA's key/value heads (C3: 2); None for MHA
    norm: str = "layernorm"  # "layernorm" (C1-C3) or "rmsnorm" (C4), Pre-LN plus one final norm per stack
    src_pad_id: int = 0  # the source PAD id: masked as a key, never attended to
    tgt_pad_id: int = 0  # the target PAD id: masked in the decoder; the decoding loops never predict it
    max_len: int = 4096  # positions the position modules are built for (sinusoidal/learned table, RoPE angles)
    fused_attention: bool = False  # F.scaled_dot_product_attention in place of the scratch maths (training on CUDA)
    rope_cross_attention: bool = True  # with RoPE, rotate cross-attention too (target vs source positions)


class Seq2SeqTransformer(nn.Module):
    """Encoder-decoder Transformer: source ids (B, Ls), target-input ids (B, Lt) -> logits (B, Lt, V).

    ``Seq2SeqTransformer(args, src_embed=None, tgt_embed=None, phase_embed=None)``: the sizes and
    components come from ``args``; the embedding modules from the caller, so the model does not
    choose them:

    - ``src_embed``, ``tgt_embed``: ids (B, L) -> vectors (B, L, D), with a ``weight`` (V, D) (the
      target's is also the output head: weight tying). None: a plain ``nn.Embedding`` of the vocabulary.
    - ``phase_embed``: a vector added to every token's embedding on both sides, by its position's
      phase: ``phase_embed(length, offset, device)`` (length, D) for positions offset onwards, or
      ``phase_embed.of(phases)`` for phases given per token (``src_phase``). None: nothing added.

    Token vectors are scaled by sqrt(d_model); one positional module is shared by both sides (None
    for RoPE, which lives inside the attention layers). :func:`init_transformer_weights` applies to the
    given modules too; built in the order source, target, phase, just before the model, they draw
    the same random numbers as modules the model built itself.
    """

    def __init__(self, args: ModelArgs, *, src_embed: nn.Module | None = None, tgt_embed: nn.Module | None = None,
                 phase_embed: nn.Module | None = None):
        super().__init__()
        self.args = args
        if args.pos_encoding not in POS_ENCODINGS:
            raise ValueError(f"Seq2SeqTransformer: unknown pos_encoding {args.pos_encoding!r}; "
                             f"expected one of {POS_ENCODINGS}")
        if args.d_model % args.n_heads:  # checked before head_dim = d_model // n_heads is used for RoPE
            raise ValueError(f"Seq2SeqTransformer: d_model={args.d_model} is not divisible by n_heads={args.n_heads}; "
                             f"choose n_heads that divides d_model")
        self.d_model, self.src_pad_id, self.tgt_pad_id = args.d_model, args.src_pad_id, args.tgt_pad_id
        self.src_embed = _table(src_embed, args.src_vocab_size, args.d_model, "source")
        self.tgt_embed = _table(tgt_embed, args.tgt_vocab_size, args.d_model, "target")
        self.phase_embed = phase_embed
        rope = None
        if args.pos_encoding == "sinusoidal":
            self.pos_enc = SinusoidalPositionalEncoding(args.d_model, args.max_len, args.dropout)
        elif args.pos_encoding == "learned":
            self.pos_enc = LearnedPositionalEncoding(args.d_model, args.max_len, args.dropout)
        else:
            self.pos_enc = None
            self.embed_dropout = nn.Dropout(args.dropout)
            rope = RotaryPositionalEmbedding(args.d_model // args.n_heads, args.max_len)
        stack = dict(norm=args.norm, attn_type=args.attn_type, n_kv_heads=args.n_kv_heads, rope=rope,
                     fused_attention=args.fused_attention)
        self.encoder = Encoder(args.d_model, args.n_heads, args.enc_layers, args.ffn_dim, args.dropout, **stack)
        self.decoder = Decoder(args.d_model, args.n_heads, args.dec_layers, args.ffn_dim, args.dropout, **stack,
                               cross_rope=args.rope_cross_attention and rope is not None)
        init_transformer_weights(self)

    def _embed(self, ids, table, offset=0, phases=None):
        x = table(ids) * math.sqrt(self.d_model)  # (B, L, D)
        if self.phase_embed is not None:  # the phase vector of each position (or given token), on both sides
            x = x + (self.phase_embed(ids.size(1), offset, ids.device) if phases is None else self.phase_embed.of(phases))
        return self.embed_dropout(x) if self.pos_enc is None else self.pos_enc(x, offset)

    def encode(self, src, src_phase=None):
        """src (B, Ls) -> memory (B, Ls, D) and src_mask (B, 1, 1, Ls).

        ``src_phase`` (B, Ls): each source token's phase for ``phase_embed``, for tokens that do not
        each cover one position; None: position i's phase, ``phase_embed(Ls)``.
        """
        src_mask = padding_mask(src, self.src_pad_id)
        return self.encoder(self._embed(src, self.src_embed, phases=src_phase), src_mask), src_mask

    def decode(self, tgt_in, memory, src_mask, cache: DecoderCache | None = None, src_phase=None):
        """tgt_in (B, Lt) -> logits (B, Lt, V).

        Without a cache tgt_in is the whole prefix (causal and PAD masks applied). With a
        cache it is only the next token(s), at positions cache.length onwards, and no PAD
        mask is applied: greedy decoding feeds PAD only to rows that have already emitted
        EOS, and discards what those rows compute afterwards. With ``src_phase`` (aligned
        tokens: target token t covers what source token t covers), position t's phase is source
        token t's; positions past the source take its last token's.
        """
        offset = 0 if cache is None else cache.length
        self_mask = causal_mask(tgt_in.size(1), tgt_in.device, offset=offset)
        if cache is None:
            self_mask = self_mask | padding_mask(tgt_in, self.tgt_pad_id)
        phases = None
        if src_phase is not None:
            positions = torch.arange(offset, offset + tgt_in.size(1), device=tgt_in.device).clamp(max=src_phase.size(1) - 1)
            phases = src_phase[:, positions]  # (B, Lt)
        h = self.decoder(self._embed(tgt_in, self.tgt_embed, offset, phases), memory, self_mask, src_mask, cache)
        return F.linear(h, self.tgt_embed.weight)  # (B, Lt, V): tied output head

    def forward(self, src, tgt_in, src_phase=None):
        phase = _phase(src_phase)  # passed on only when given: a subclass may override encode/decode without it
        memory, src_mask = self.encode(src, **phase)
        return self.decode(tgt_in, memory, src_mask, **phase)

    def begin_decoding(self, src, src_phase=None) -> DecodingState:
        """Encode src (B, Ls) once and start an empty decoder cache; then call :meth:`decode_step`."""
        memory, src_mask = self.encode(src, **_phase(src_phase))
        return DecodingState(memory, src_mask, self.decoder.new_cache(), phases=src_phase)

    def decode_step(self, state: DecodingState, tokens: torch.Tensor) -> torch.Tensor:
        """Feed tokens (B,), the ids at target position ``state.cache.length``; -> next-token logits (B, V).

        Only the new position runs through the decoder: its self-attention reads the cached keys and
        values of the earlier positions, and its cross-attention the memory projected at the first step.
        """
        return self.decode(tokens[:, None], state.memory, state.memory_mask, state.cache, **_phase(state.phases))[:, -1]

    def decode_prefix(self, state: DecodingState, prefix: torch.Tensor) -> torch.Tensor:
        """The whole prefix (B, t) through the decoder again, no cache -> logits (B, t, V)."""
        return self.decode(prefix, state.memory, state.memory_mask, **_phase(state.phases))

    def attention_modules(self) -> dict[tuple[str, int], nn.Module]:
        """``{(role, layer): attention module}``: "encoder self", "decoder self" and "cross"."""
        modules = {("encoder self", i): layer.self_attn for i, layer in enumerate(self.encoder.layers)}
        modules |= {("decoder self", i): layer.self_attn for i, layer in enumerate(self.decoder.layers)}
        return modules | {("cross", i): layer.cross_attn for i, layer in enumerate(self.decoder.layers)}

    def num_params(self) -> int:
        """Trainable parameters; the tied output head is counted once (it is tgt_embed)."""
        return sum(p.numel() for p in self.parameters())


def _table(embed: nn.Module | None, vocab_size: int, d_model: int, side: str) -> nn.Module:
    """``embed``, checked against its vocabulary, or a plain ``nn.Embedding(vocab_size, d_model)`` when None."""
    if embed is None:
        return nn.Embedding(vocab_size, d_model)
    rows = getattr(embed, "num_embeddings", vocab_size)
    if rows != vocab_size:
        raise ValueError(f"Seq2SeqTransformer: the {side} embedding has {rows} rows for a vocabulary of {vocab_size}")
    return embed


def _phase(src_phase) -> dict:
    """``{"src_phase": src_phase}``, or nothing when it is None."""
    return {} if src_phase is None else {"src_phase": src_phase}


def _kv_bytes(attentions, batch: int, length: int, dtype) -> int:
    """2 (K and V) * batch * n_kv_heads * length * head_dim * itemsize, summed over the modules."""
    return sum(2 * batch * a.n_kv_heads * length * a.head_dim * dtype.itemsize for a in attentions)


def kv_cache_bytes(model: Seq2SeqTransformer, batch: int, length: int, dtype=torch.float32) -> int:
    """Bytes of the decoder self-attention KV cache after `length` target positions (the part that grows
    with every token and that GQA shrinks by n_heads / n_kv_heads; cross-attention: cross_kv_cache_bytes)."""
    return _kv_bytes((layer.self_attn for layer in model.decoder.layers), batch, length, dtype)


def cross_kv_cache_bytes(model: Seq2SeqTransformer, batch: int, src_length: int, dtype=torch.float32) -> int:
    """Bytes of the cross-attention K/V of the encoder memory, computed once per source."""
    return _kv_bytes((layer.cross_attn for layer in model.decoder.layers), batch, src_length, dtype)
