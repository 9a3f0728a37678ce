"""cipherlab.models: the from-scratch Transformer pieces (attention, positional, norm, transformer: C1-C4)
and the BLT (blt, blt_patching: C5). Imports nothing of the rest of cipherlab."""

from cipherlab.models.attention import (GroupedQueryAttention, KVCache, MultiHeadAttention, ScaledDotProductAttention,
                        causal_mask, make_attention, padding_mask, repeat_kv, select_rows)
from cipherlab.models.norm import LayerNorm, RMSNorm, make_norm
from cipherlab.models.positional import (AbsolutePositionalEncoding, LearnedPositionalEncoding, RotaryPositionalEmbedding,
                         SinusoidalPositionalEncoding, interleaved_to_half_split, rotate_half)
from cipherlab.models.transformer import (Decoder, DecoderCache, DecoderLayer, DecodingState, Encoder, EncoderLayer, FeedForward,
                          ModelArgs, Seq2SeqTransformer, cross_kv_cache_bytes, init_transformer_weights,
                          kv_cache_bytes)
from cipherlab.models.blt import BLTArgs, BLTModel

__all__ = [
    "ScaledDotProductAttention", "MultiHeadAttention", "GroupedQueryAttention", "KVCache",
    "padding_mask", "causal_mask", "repeat_kv", "make_attention", "select_rows",
    "AbsolutePositionalEncoding", "SinusoidalPositionalEncoding", "LearnedPositionalEncoding", "RotaryPositionalEmbedding",
    "rotate_half", "interleaved_to_half_split",
    "LayerNorm", "RMSNorm", "make_norm",
    "FeedForward", "EncoderLayer", "DecoderLayer", "Encoder", "Decoder", "DecoderCache", "DecodingState",
    "ModelArgs", "Seq2SeqTransformer", "init_transformer_weights", "kv_cache_bytes", "cross_kv_cache_bytes",
    "BLTArgs", "BLTModel",
]
