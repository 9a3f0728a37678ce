"""Codecs: everything between strings and tensors for one configuration: tokenizers, batches,
models.

A codec turns the cipher and the plaintext into what a model reads and writes, and back:

- :class:`SubwordCodec` (C1-C4): the cipher through the source BPE, the plaintext through the
  target BPE, a :class:`~cipherlab.models.Seq2SeqTransformer`;
- :class:`ByteCodec` (C5): bytes, no vocabulary, source patches cut by an entropy model, a
  :class:`~cipherlab.models.blt.BLTModel`.

Each gives datasets and batches for training, source ids and target text for decoding, and
what a checkpoint must carry to do the same later (``artifacts``) and to recognise itself
(``identity``). :func:`build_model` builds any of the five models from a ``Config``, from the
args object :func:`model_args` (C1-C4) or :func:`blt_args` (C5) makes of the ``Config`` and, for C1-C4, the
embedding modules :func:`model_embeddings` picks (the recipe's bit-factored tables and key-phase vector); a
:class:`ModelBuilder` is what training and loading call to build one (:data:`OWN_MODEL`, or one made above
the pipeline that puts other classes in place of some of cipherlab's);
:func:`select_lines` is the part of the corpus a ``Config`` learns from; :func:`collate_source`
and :func:`collate_bytes` make C5's padded byte batches with their entropy patches; and
:func:`teacher_forcing_logits` is how every model is called on a batch.

In the flow of the package this module comes after the data and the tokenizers and before
training: ``cipher/data -> tokenizers -> codec -> train -> decode -> evaluate -> results``.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from typing import Protocol

import torch
from torch import nn

from cipherlab.data.cipher import PERIOD, bits_to_bytes
from cipherlab.base.config import Config
from cipherlab.data.corpus import ByteChunkDataset, SubwordChunkDataset, collate, make_chunks, shuffle_chunks
from cipherlab.models import ModelArgs, ScaledDotProductAttention, Seq2SeqTransformer
from cipherlab.models.blt import BLTArgs, BLTModel, ByteEntropyModel, fixed_patch_membership, patch_membership
from cipherlab.models.embedding import BitFactoredEmbedding, key_phase_embedding
from cipherlab.models.blt_patching import as_byte_array
from cipherlab.data.tokenizers import BPETokenizer, get_tokenizers
from cipherlab.data.tokenizers.cipher_task import aligned_target_ids
from cipherlab.data.tokenizers.pretokenize import phase_symbols
from cipherlab.data.tokenizers.bytes import BOS_ID, EOS_ID, PAD_ID, SPECIAL_IDS, ByteTokenizer

__all__ = [
    "ByteCodec",
    "ModelBuilder",
    "OWN_MODEL",
    "Codec",
    "SubwordCodec",
    "blt_args",
    "build_model",
    "collate_bytes",
    "collate_source",
    "codec_from_artifacts",
    "fit_codec",
    "model_args",
    "model_embeddings",
    "select_lines",
    "teacher_forcing_logits",
]


class SubwordCodec:
    """C1-C4: the cipher through the source BPE, the plaintext through the target BPE.

    A codec is everything between strings and tensors for one configuration: datasets and
    batches for training, source ids and target text for decoding, and what a checkpoint
    must carry to do the same later (``artifacts``) and to recognise itself (``identity``).
    """

    kind = "bpe"
    source_keys = ("src",)  # the batch tensors the model reads of the source (model_source)
    def __init__(self, src_tokenizer, tgt_tokenizer, source_eos: bool = False, aligned: bool = False):
        self.src, self.tgt = src_tokenizer, tgt_tokenizer
        self.source_eos = source_eos  # Config.source_eos: every source ends with the source EOS token
        self.aligned = aligned  # Config.target_tokens == "aligned": target token i is source token i's plaintext
        # Phase-tagged tokens cover one or more characters: the model is told each token's key phase
        # (src_phase, that of its first character), not position mod 8 (cipherlab.models.Seq2SeqTransformer).
        self.phased = getattr(src_tokenizer, "unit", None) == "byte8-phase"
        if self.phased:
            self.source_keys = ("src", "src_phase")
            self._src_chars = torch.tensor([0 if i in (src_tokenizer.pad_id, src_tokenizer.bos_id, src_tokenizer.eos_id)
                                            else len(src_tokenizer.token(i)) // 9 for i in range(src_tokenizer.vocab_size)])
        self.src_pad_id, self.tgt_pad_id = src_tokenizer.pad_id, tgt_tokenizer.pad_id
        self.bos_id, self.eos_id = tgt_tokenizer.bos_id, tgt_tokenizer.eos_id

    @classmethod
    def fit(cls, config: Config, corpus) -> SubwordCodec:
        """Train (or load from the corpus cache) both tokenizers on the training split only."""
        return cls(*get_tokenizers(corpus, config.source_mode, config.src_vocab, config.tgt_vocab,
                                   config.target_tokens, merge_texts(config, corpus)),
                   source_eos=config.source_eos, aligned=config.target_tokens == "aligned")

    def build_model(self, config: Config) -> nn.Module:
        return build_model(config, self)

    def codes(self, tokenizer) -> list:
        """Each id's code for ``Config.bit_embeddings`` (:func:`cipherlab.models.embedding.bit_features`):
        the byte of a source token of exactly one 8-bit group, (byte, key phase) of one phase-tagged
        group, the character code of a one-character target token; None for specials. A merged
        token is None (a free row), except in the aligned tokenisation (phase-tagged source,
        aligned target), where it is ((its bytes or character codes), its phase or None)."""
        codes = []
        composed = tokenizer.unit == "byte8-phase" or (self.aligned and tokenizer is self.tgt)
        for i in range(tokenizer.vocab_size):
            if i in (tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id, tokenizer.unk_id):
                codes.append(None)
                continue
            if tokenizer.unit == "char":
                units = [ord(ch) for ch in tokenizer.decode([i])]
                code = (units[0] if len(units) == 1 else (tuple(units), None)) if max(units) < 256 else None
            elif tokenizer.unit == "byte8-phase":
                symbols = phase_symbols(tokenizer.token(i))
                bytes_ = tuple(byte for _, byte in symbols)
                code = (bytes_[0], symbols[0][0]) if len(bytes_) == 1 else (bytes_, symbols[0][0])
            else:  # source tokens are strings of bits
                token = tokenizer.token(i)
                code = int(token, 2) if tokenizer.unit == "byte8" and len(token) == 8 else None
            codes.append(code if composed or isinstance(code, int) or code is None else None)
        return codes

    def dataset(self, chunks, dropout: float = 0.0, seed: int = 0):
        """The chunks as (source ids, target ids) pairs; ``dropout``: BPE-dropout (training chunks only)."""
        encode_target = (lambda src, plain: aligned_target_ids(self.src, self.tgt, src, plain)) if self.aligned else None
        return SubwordChunkDataset(chunks, self.src, self.tgt, self.source_eos, encode_target, dropout, seed)

    def collate(self, examples) -> dict[str, torch.Tensor]:
        return self._with_phases(collate(examples, self.src_pad_id, self.tgt_pad_id))

    def source_chars(self, src: torch.Tensor) -> torch.Tensor:
        """(B, Ls) source ids -> the characters each phase-tagged token covers (0 for specials and padding)."""
        return self._src_chars.to(src.device)[src]

    def source_phase(self, src: torch.Tensor) -> torch.Tensor:
        """(B, Ls) source ids -> the key phase of each token's first character (phase-tagged tokens):
        the characters before it, mod 8. The end-of-source token's is the phase after the last character."""
        chars = self.source_chars(src)
        return (chars.cumsum(dim=1) - chars) % PERIOD

    def _with_phases(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        if self.phased:
            batch["src_phase"] = self.source_phase(batch["src"])
        return batch

    def encode_source(self, bits: str) -> list[int]:
        return [*self.src.encode(bits), *([self.src.eos_id] if self.source_eos else [])]

    def model_source(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """What the model reads of the source, by name: ``model.begin_decoding(**model_source(batch))``."""
        return {key: batch[key] for key in self.source_keys}

    def collate_sources(self, sources: list[list[int]]) -> dict[str, torch.Tensor]:
        return self._with_phases({"src": collate([(s, []) for s in sources], self.src_pad_id, self.tgt_pad_id)["src"]})

    def token_chars(self) -> list[int]:
        """Plaintext characters of each target id (0 for <pad>/<bos>/<eos>, 1 for <unk>); computed once."""
        if getattr(self, "_token_chars", None) is None:
            self._token_chars = [len(self.tgt.decode([i])) for i in range(self.tgt.vocab_size)]
        return self._token_chars

    def decode_target(self, ids: Sequence[int]) -> str:
        return self.tgt.decode(ids)

    def artifacts(self) -> dict:
        """Both tokenizers as the text of their files: a checkpoint can then decrypt on its own."""
        return {"src_tokenizer": _tokenizer_text(self.src), "tgt_tokenizer": _tokenizer_text(self.tgt)}

    @classmethod
    def from_artifacts(cls, artifacts: dict, config: Config) -> SubwordCodec:
        return cls(_tokenizer_from_text(artifacts["src_tokenizer"]), _tokenizer_from_text(artifacts["tgt_tokenizer"]),
                   source_eos=config.source_eos, aligned=config.target_tokens == "aligned")

    def identity(self) -> dict:
        return {key: _sha256(text) for key, text in self.artifacts().items()}


class ByteCodec:
    """C5: cipher bytes and plaintext bytes, no vocabulary; source patches from an entropy model.

    The entropy model is counted on the training split's cipher bytes only; its tables and the
    threshold (a percentile of the training entropies) travel in the checkpoint.
    """

    kind = "blt"
    source_keys = ("src", "src_member")  # the cipher bytes and their entropy patches (model_source)

    def __init__(self, entropy_model, threshold: float, config: Config):
        self.entropy_model, self.threshold = entropy_model, threshold
        self.max_patch, self.patch_tgt = config.blt_max_patch, config.blt_patch_tgt
        self.source_eos = config.source_eos  # every source ends with EOS, in a patch of its own
        self.src_pad_id = self.tgt_pad_id = PAD_ID
        self.bos_id, self.eos_id = BOS_ID, EOS_ID
        self.bytes = ByteTokenizer()

    @classmethod
    def fit(cls, config: Config, corpus) -> ByteCodec:
        _, cipher = corpus.lines("train")
        model = ByteEntropyModel().fit(bits_to_bytes(bits) for bits in cipher)
        return cls(model, model.threshold_at(config.blt_entropy_percentile), config)

    def build_model(self, config: Config) -> nn.Module:
        return build_model(config, self)

    def dataset(self, chunks, dropout: float = 0.0, seed: int = 0):
        return ByteChunkDataset(chunks)  # bytes: no merges for BPE-dropout to skip

    def collate(self, examples) -> dict[str, torch.Tensor]:
        return collate_bytes(
            examples, self.entropy_model, self.threshold, max_patch=self.max_patch, patch_tgt=self.patch_tgt,
            source_eos=self.source_eos,
        )

    def encode_source(self, bits: str) -> list[int]:
        return self.bytes.encode_cipher(bits)

    model_source = SubwordCodec.model_source

    def collate_sources(self, sources: list[list[int]]) -> dict[str, torch.Tensor]:
        src, src_member = collate_source(sources, self.entropy_model, self.threshold, self.max_patch, self.source_eos)
        return {"src": src, "src_member": src_member}

    def token_chars(self) -> list[int]:
        """Plaintext characters of each target id: 1 for a byte, 0 for PAD/BOS/EOS."""
        return [1 if i < 256 else 0 for i in range(max(PAD_ID, BOS_ID, EOS_ID) + 1)]

    def decode_target(self, ids: Sequence[int]) -> str:
        return self.bytes.decode(ids)

    def artifacts(self) -> dict:
        m = self.entropy_model
        return {
            "min_count": m.min_count,
            "unigram_entropy": m.unigram_entropy,
            "bigram_table": torch.from_numpy(m.bigram_table),
            "trigram_table": torch.from_numpy(m.trigram_table),
            "threshold": self.threshold,
        }

    @classmethod
    def from_artifacts(cls, artifacts: dict, config: Config) -> ByteCodec:
        model = ByteEntropyModel(min_count=artifacts["min_count"])
        model.unigram_entropy = artifacts["unigram_entropy"]
        model.bigram_table = artifacts["bigram_table"].numpy()
        model.trigram_table = artifacts["trigram_table"].numpy()
        return cls(model, artifacts["threshold"], config)

    def identity(self) -> dict:
        m = self.entropy_model
        digest = hashlib.sha256(repr((m.min_count, m.unigram_entropy, self.threshold)).encode())
        digest.update(m.bigram_table.tobytes())
        digest.update(m.trigram_table.tobytes())
        return {"entropy_model": digest.hexdigest()}


Codec = SubwordCodec | ByteCodec
_CODECS = {"bpe": SubwordCodec, "blt": ByteCodec}


def merge_texts(config: Config, corpus) -> tuple[list[str], list[str], str] | None:
    """What the BPEs of ``config`` learn from (:func:`cipherlab.data.tokenizers.get_tokenizers`'s ``texts``):
    None for the training lines; with ``merges_on="chunks"`` the training chunks as the recipe shows
    them to the model, drawn with seed 0 whatever the run's seed, so that every seed shares one BPE."""
    if config.merges_on == "lines":
        return None
    chunks = make_chunks(corpus.plain, corpus.cipher, corpus.splits["train"], config.chunk_chars)
    chunks = shuffle_chunks(chunks, config.phase_shuffle, 0, config.case_flip, config.substitution)
    description = (f"train chunks of {config.chunk_chars} characters, phase_shuffle={config.phase_shuffle}, "
                   f"case_flip={config.case_flip}, substitution={config.substitution}, seed 0")
    return [c.plain for c in chunks], [c.cipher for c in chunks], description


def fit_codec(config: Config, corpus) -> Codec:
    """The codec of ``config``, learned from the training split of ``corpus``."""
    return _CODECS[config.tokenization].fit(config, corpus)


def codec_from_artifacts(config: Config, artifacts: dict) -> Codec:
    """The codec a checkpoint was trained with, rebuilt from the checkpoint alone."""
    return _CODECS[config.tokenization].from_artifacts(artifacts, config)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _tokenizer_text(tokenizer) -> str:
    return tokenizer.to_text()


def _tokenizer_from_text(text: str):
    return BPETokenizer.from_text(text, "checkpoint tokenizer")


def build_model(
    config: Config,
    codec: Codec | None = None,
    *,
    vocab_sizes: tuple[int, int] | None = None,
    pad_id: int | None = None,
    fused_attention: bool = False,
) -> nn.Module:
    """The model of ``config``, any of the five, with fresh weights (seed first for the same ones).

    C5 (``tokenization="blt"``) needs nothing else: bytes have no vocabulary. C1-C4 take their
    (source, target) vocabulary sizes, padding ids and, for ``bit_embeddings``, each id's byte
    or character code from ``codec``; without a codec, pass ``vocab_sizes`` and ``pad_id``
    (e.g. bytes on both sides). ``fused_attention=True`` runs every attention
    through ``F.scaled_dot_product_attention`` instead of the scratch maths (the same weights and,
    up to float rounding, the same outputs; training on CUDA asks for it,
    :func:`cipherlab.base.device.fused_attention_on`).
    """
    if config.tokenization == "blt":
        model = BLTModel(blt_args(config))
        for module in model.modules():  # BLTArgs has no fused_attention field: set each kernel
            if isinstance(module, ScaledDotProductAttention):
                module.fused = fused_attention
        return model
    if codec is not None:
        vocab_sizes = codec.src.vocab_size, codec.tgt.vocab_size
        pads = codec.src_pad_id, codec.tgt_pad_id
        codes = (codec.codes(codec.src), codec.codes(codec.tgt)) if config.bit_embeddings else (None, None)
    elif vocab_sizes is None or pad_id is None:
        raise ValueError(f"build_model({config.name}): a {config.tokenization} model needs its codec, "
                         "or vocab_sizes=(source, target) and pad_id")
    elif config.bit_embeddings:
        raise ValueError(f"build_model({config.name}): bit_embeddings need each id's code; pass the codec")
    else:
        pads, codes = (pad_id, pad_id), (None, None)
    args = model_args(config, vocab_sizes, pads, fused_attention=fused_attention)
    return Seq2SeqTransformer(args, **model_embeddings(config, args, codes))


class ModelBuilder(Protocol):
    """What builds a run's model: :data:`OWN_MODEL` (:func:`build_model`), or one made above the pipeline with
    other classes in place of some of cipherlab's. Training and loading call it; they know nothing else of what
    it puts in."""

    records: list[dict]
    """What a checkpoint records of the builder (``artifacts["parts"]``): [] for cipherlab's own model; else one
    record per class put in, ``{"part", "file", "class", ...}`` (the builder's own fields past those three)."""

    def prepare(self, config: Config) -> None:
        """Raise (one line) when it cannot build ``config``'s model: called once, before any data is read."""

    def __call__(self, config: Config, codec: Codec | None, *, fused_attention: bool = False) -> nn.Module:
        """The model, with fresh weights (seed first for the same ones)."""

    def refuse(self, trained: list[dict]) -> str | None:
        """Why a model file whose builder recorded ``trained`` cannot be rebuilt by this one; None if it can."""


class _OwnModel:
    """:data:`OWN_MODEL`: cipherlab's own model, :func:`build_model`."""

    records: list[dict] = []

    def prepare(self, config: Config) -> None:
        pass

    def __call__(self, config: Config, codec: Codec | None, *, fused_attention: bool = False) -> nn.Module:
        return build_model(config, codec, fused_attention=fused_attention)

    def refuse(self, trained: list[dict]) -> str | None:
        return _built_with_others(trained)


OWN_MODEL: ModelBuilder = _OwnModel()


def _built_with_others(trained: list[dict]) -> str | None:
    """Why cipherlab's own model cannot load a file whose builder recorded ``trained`` (its ``records``), and how
    to load it; None when it recorded none."""
    if not trained:
        return None
    classes = "; ".join(f"{r['part']}: {r['class']}" + (f" of {r['file']}" if r.get("file") else "") for r in trained)
    return (f"it was built with other classes in place of cipherlab's ({classes}); load it with a builder= that "
            "puts those classes back")


def model_args(config: Config, vocab_sizes: tuple[int, int], pad_ids: tuple[int, int] = (0, 0), *,
               fused_attention: bool = False) -> ModelArgs:
    """The :class:`~cipherlab.models.ModelArgs` of C1-C4 ``config``: its sizes and its four components,
    with what only the codec knows, the (source, target) ``vocab_sizes`` and ``pad_ids``."""
    return ModelArgs(
        *vocab_sizes,
        **config.model_hyperparameters(),
        pos_encoding=config.pos_encoding,
        attn_type=config.attn_type,
        n_kv_heads=config.n_kv_heads if config.attn_type == "gqa" else None,
        norm=config.norm,
        src_pad_id=pad_ids[0],
        tgt_pad_id=pad_ids[1],
        fused_attention=fused_attention,
        rope_cross_attention=config.rope_cross_attention,
    )


def model_embeddings(config: Config, args: ModelArgs, codes: tuple = (None, None)) -> dict[str, nn.Module | None]:
    """The embedding modules of C1-C4 ``config``'s model, ``Seq2SeqTransformer(args, **model_embeddings(...))``:

    - ``src_embed``, ``tgt_embed``: with a side's ``codes`` (each id's byte or character code, given for
      ``bit_embeddings``: :meth:`SubwordCodec.codes`), a :class:`~cipherlab.models.embedding.BitFactoredEmbedding`;
      without, a plain ``nn.Embedding``;
    - ``phase_embed``: for ``phase_embedding``, a :class:`~cipherlab.models.embedding.KeyPhaseEmbedding` of the
      cipher's period (position mod 8, or each token's phase, ``src_phase``); else None.

    Built in that order, as the model would build its own, so that a seed gives the same weights.
    """
    tables = [nn.Embedding(size, args.d_model) if side is None else BitFactoredEmbedding(side, args.d_model)
              for size, side in ((args.src_vocab_size, codes[0]), (args.tgt_vocab_size, codes[1]))]
    return {"src_embed": tables[0], "tgt_embed": tables[1],
            "phase_embed": key_phase_embedding(args.d_model, config.phase_embedding, PERIOD)}


def blt_args(config: Config) -> BLTArgs:
    """The :class:`~cipherlab.models.BLTArgs` of C5 ``config``: its sizes, its ``blt_*`` fields and the
    byte path's special ids (``SPECIAL_IDS``)."""
    return BLTArgs(
        **config.model_hyperparameters(),
        local_layers=config.blt_local_layers,
        window=config.blt_window,
        patch_tgt=config.blt_patch_tgt,
        source_memory=config.blt_source_memory,
        **SPECIAL_IDS,
        bit_embeddings=config.bit_embeddings,
        phase_embedding=config.phase_embedding,
        key_period=PERIOD,
    )


def collate_source(
    sources: Sequence,
    entropy_model: ByteEntropyModel,
    threshold: float,
    max_patch: int = Config.blt_max_patch,
    source_eos: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """C5's sources -> (src (B, Ls) long, PAD-padded; src_member (B, Ks, Ls) bool).

    Each source is either a cipher bit string ('0'/'1', grouped 8 bits -> one byte;
    a length that is not a multiple of 8 raises ``cipher.DatasetError``, a ValueError)
    or its byte values.  Ls is at least 1, so a batch of empty lines still has a shape.
    ``source_eos`` (``Config.source_eos``) ends every source with EOS_ID in a patch of its own,
    after the entropy patches of its bytes.
    """
    arrays = [as_byte_array(bits_to_bytes(s) if isinstance(s, str) else s, f"source {b}")
              for b, s in enumerate(sources)]
    starts = [entropy_model.patch_boundaries(a, threshold, max_patch) for a in arrays]
    rows = [a.tolist() for a in arrays]
    if source_eos:
        starts = [[*(st if a.size else []), a.size] for st, a in zip(starts, arrays)]
        rows = [[*row, EOS_ID] for row in rows]
    padded = collate([(row, []) for row in rows], PAD_ID, PAD_ID)["src"]
    if padded.size(1) == 0:
        padded = torch.full((len(arrays), 1), PAD_ID, dtype=torch.long)
    return padded, patch_membership(starts, [len(row) for row in rows], padded.size(1))


def collate_bytes(
    batch: Sequence[tuple[Sequence[int], Sequence[int]]],
    entropy_model: ByteEntropyModel,
    threshold: float,
    *,
    max_patch: int = Config.blt_max_patch,
    patch_tgt: int = Config.blt_patch_tgt,
    source_eos: bool = False,
) -> dict[str, torch.Tensor]:
    """Batch ``(cipher, [BOS] + plain bytes + [EOS])`` pairs for C5 (cipher as in :func:`collate_source`).

    Returns a dict of
      src        (B, Ls)      long, cipher bytes, PAD_ID after the end
      src_member (B, Ks, Ls)  bool, entropy patches of the source
      tgt        (B, Lt)      long, [BOS] + plain + [EOS], PAD_ID after the end
      tgt_member (B, (Lt-1) // patch_tgt, Lt-1) bool, the complete fixed patches of
                              the decoder input ``tgt[:, :-1]`` (what ``BLTModel``
                              computes itself when it is not given one)
    Teacher forcing: ``model(src, src_member, tgt[:, :-1])`` predicts ``tgt[:, 1:]``.
    """
    src, src_member = collate_source([s for s, _ in batch], entropy_model, threshold, max_patch, source_eos)
    tgt = collate([([], t) for _, t in batch], PAD_ID, PAD_ID)["tgt"]
    tgt_member = fixed_patch_membership(tgt[:, :-1] != PAD_ID, patch_tgt)
    return {"src": src, "src_member": src_member, "tgt": tgt, "tgt_member": tgt_member}


def select_lines(corpus, config: Config):
    """The corpus limited to the first ``max_train_lines`` training and ``max_eval_lines`` val/test lines.

    Fewer training lines make a different training set: it gets its own digest, so tokenizers
    and entropy models learned from it are never mistaken for the full corpus's. The val/test
    limits change nothing that is learned, so they keep the digest.
    """
    limits = {"train": config.max_train_lines, "val": config.max_eval_lines, "test": config.max_eval_lines}
    splits = {name: ids[: limits[name]] for name, ids in corpus.splits.items()}
    digest = corpus.sha256
    if config.max_train_lines is not None:
        digest = _sha256(f"{corpus.sha256}:train[:{config.max_train_lines}]")
    return dataclasses.replace(corpus, splits=splits, sha256=digest)


def teacher_forcing_logits(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """``model(src=src, tgt_in=tgt[:, :-1], **extra)``: predict each target token from those before it.

    ``extra`` is every other tensor of the batch, e.g. the BLT's ``src_member``/``tgt_member``.
    """
    extra = {key: value for key, value in batch.items() if key not in ("src", "tgt")}
    return model(src=batch["src"], tgt_in=batch["tgt"][:, :-1], **extra)  # (B, Lt-1, V)
