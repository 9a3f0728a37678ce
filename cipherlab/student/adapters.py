"""How a student's classes go into cipherlab's model: built as the model builds its own, wrapped where
cipherlab's code asks more of a module than the part's interface, and put in place of cipherlab's modules.

The reference model (:class:`cipherlab.models.Seq2SeqTransformer`) knows nothing of students. The model
is built as usual; :func:`put_parts` then replaces the modules a part stands for:

==========  =========================================================================================
attention   every encoder and decoder self-attention; the decoder's in a :class:`PrefixAttention`
norm        every norm of the encoder and the decoder, in the layers and at the end of each stack
positional  the absolute position encoding shared by both sides (``model.pos_enc``)
rope        the rotary embedding every attention shares, in a :class:`RotaryAdapter`
==========  =========================================================================================

The ``build_own_*`` functions are the only place that calls a student's constructor, so the checks
before training (:mod:`cipherlab.student.parts`) build a class exactly as the model does.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from cipherlab.models.attention import KVCache, causal_mask
from cipherlab.models.transformer import ModelArgs, Seq2SeqTransformer, init_transformer_weights

__all__ = ["MAX_LEN", "NORM_EPS", "PrefixAttention", "RotaryAdapter", "build_own_attention", "build_own_norm",
           "build_own_positional", "build_own_rope", "put_parts"]

MAX_LEN = ModelArgs.max_len  # the positions build_model's models build their position modules for (the default)
NORM_EPS = 1e-5  # the eps make_norm gives LayerNorm and RMSNorm


# --------------------------------------------------------------------------- building a student's class


def build_own_attention(cls, d_model, n_heads, *, dropout, attn_type="mha", n_kv_heads=None, rope=None):
    """``cls(d_model, n_heads, dropout=p)``, plus ``n_kv_heads=`` for GQA and ``rope=`` with RoPE.

    Only what the configuration uses is passed, so a class written for MHA with absolute
    positions need not accept ``n_kv_heads`` or ``rope``.
    """
    options = {"dropout": dropout}
    if attn_type == "gqa":
        options["n_kv_heads"] = n_kv_heads
    if rope is not None:
        options["rope"] = rope
    return cls(d_model, n_heads, **options)


def build_own_norm(cls, d_model):
    """``cls(d_model, eps=1e-5)``, as make_norm builds LayerNorm and RMSNorm."""
    return cls(d_model, eps=NORM_EPS)


def build_own_positional(cls, d_model, max_len, dropout):
    """``cls(d_model, max_len=..., dropout=p)``, as SinusoidalPositionalEncoding is built."""
    return cls(d_model, max_len=max_len, dropout=dropout)


def build_own_rope(cls, head_dim, max_len):
    """``cls(head_dim, max_len=...)`` in a :class:`RotaryAdapter`, which cipherlab's attention can use."""
    return RotaryAdapter(cls(head_dim, max_len=max_len), head_dim)


# --------------------------------------------------------------------------- adapters


class RotaryAdapter(nn.Module):
    """A rotary module with only ``forward(q, k, offset=0) -> (q, k)``, given what MultiHeadAttention
    also reads: ``head_dim`` and ``rotate(x, offset)`` (cross-attention rotates queries and keys
    apart). ``inner`` is the student's module; its ``rotate`` is used if it has one."""

    def __init__(self, inner: nn.Module, head_dim: int):
        super().__init__()
        self.inner, self.head_dim = inner, head_dim

    def forward(self, q, k, offset: int = 0):
        q, k = self.inner(q, k, offset=offset)
        return q, k

    def rotate(self, x, offset: int = 0):
        if callable(getattr(self.inner, "rotate", None)):
            return self.inner.rotate(x, offset)
        return self.inner(x, x, offset=offset)[0]


class PrefixAttention(nn.Module):
    """A decoder self-attention that keeps no KV cache (a student's ``inner``) as cipherlab's decoder calls it.

    Without a cache it is ``inner(query, key, value, mask)``. In incremental decoding the cache holds
    the normalised inputs of every earlier position, as (B, 1, L, D) in both its k and v; ``inner`` runs
    over the whole prefix under a causal mask and the rows of the new positions are kept: what a full
    pass gives them, at the cost of recomputing the prefix.
    """

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, query, key, value, mask=None, cache: KVCache | None = None):
        if cache is None:
            return self.inner(query, key, value, mask)
        prefix = cache.update(query[:, None], query[:, None])[0][:, 0]  # (B, L, D), the new rows last
        out = self.inner(prefix, prefix, prefix, causal_mask(prefix.size(1), query.device))
        return out[:, -query.size(1):]  # (B, Lq, D)


# --------------------------------------------------------------------------- putting them in the model


def put_parts(model: Seq2SeqTransformer, parts: Mapping[str, type]) -> Seq2SeqTransformer:
    """``model`` with each of ``parts`` (``{"attention": MyAttention, ...}``) in place of cipherlab's modules.

    The sizes are the model's own (``model.args``, its :class:`~cipherlab.models.ModelArgs`). Every
    module of the student's gets cipherlab's weight initialisation (:func:`init_transformer_weights`);
    the rest of the model keeps the weights it was built with. Which configuration has a place for which
    part is :func:`cipherlab.student.parts.check_names`'s to say, before this is called.
    """
    args = model.args
    d_model, n_heads, dropout = args.d_model, args.n_heads, args.dropout
    built = []
    if "rope" in parts:  # first: a student's attention is given the rotary module in use
        old = model.encoder.layers[0].self_attn.rope
        rope = build_own_rope(parts["rope"], d_model // n_heads, args.max_len)
        for module in list(model.modules()):
            if getattr(module, "rope", None) is old:
                module.rope = rope
        built.append(rope)
    if "positional" in parts:
        model.pos_enc = build_own_positional(parts["positional"], d_model, args.max_len, dropout)
        built.append(model.pos_enc)
    if "attention" in parts:
        for stack in (model.encoder, model.decoder):
            for layer in stack.layers:
                own = build_own_attention(parts["attention"], d_model, n_heads, dropout=dropout,
                                          attn_type=args.attn_type, n_kv_heads=args.n_kv_heads,
                                          rope=layer.self_attn.rope)
                layer.self_attn = own if stack is model.encoder else PrefixAttention(own)
                built.append(own)
    if "norm" in parts:
        for stack in (model.encoder, model.decoder):
            places = [(layer, name) for layer in stack.layers for name in ("norm1", "norm2", "norm3")
                      if hasattr(layer, name)] + [(stack, "final_norm")]
            for parent, name in places:
                setattr(parent, name, build_own_norm(parts["norm"], d_model))
                built.append(getattr(parent, name))
    for module in built:
        init_transformer_weights(module)
    return model
