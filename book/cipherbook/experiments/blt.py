"""The BLT chapter's experiments: what its cells call and print, and what its facts quote.

Every function runs cipherlab's own code (``cipherlab.models.blt``) or reads the BLT and BPE
benchmark files and ``results/calibration/calibration.json`` (runs D and F compare what the local
decoder's second cross-attention reads); the BLT chapter calls the same functions, so the book and the
answers show the same numbers. The entropy model is fitted as training fits it (``cipherlab.pipeline.codec.ByteCodec.fit``):
on the cipher bytes of the training split's whole lines, never on validation or test lines. Every number
that depends on the fit (the threshold, patch lengths, patches per chunk, the share at the cap) comes from
ONE fit, the assignment preset's, on all training lines; the ``cpu`` preset fits its own, on its first
``max_train_lines`` training lines (``threshold_at_preset``). ``benchmarks/bench_blt.py`` fits on the
training chunks instead and so records a slightly different threshold: its patch figures are not quoted.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import torch

from cipherlab.data.cipher import bits_to_bytes
from cipherlab.pipeline.codec import ByteCodec, build_model, select_lines
from cipherlab.base.config import DEFAULT_RECIPE, TOKENIZATIONS, make_config
from cipherlab.data.corpus import CHUNK_CHARS, load_corpus, make_chunks, shuffle_chunks
from cipherbook.experiments.common import (calibration_bits, calibration_lines,  # noqa: F401 -- the BLT chapter's cells call them here
                                          calibration_run, scored_step)  # noqa: F401
from cipherlab.models.blt import BLTModel, ByteEntropyModel, WindowedSelfAttention, fixed_patch_membership
from cipherlab.data.tokenizers.bytes import PAD_ID

RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results"
SETTINGS = make_config("c5", "assignment")  # the assignment's sizes and C5 settings: window, patch sizes, percentile
ABSOLUTE_CUTOFF = 7.0  # the course notes' example of a cutoff in bits that never fires (§4.3)


# --------------------------------------------------------------------------- data and the entropy model

@functools.lru_cache(maxsize=1)
def corpus():
    return load_corpus()


@functools.lru_cache(maxsize=None)
def cipher_bytes(split: str) -> tuple[tuple[int, ...], ...]:
    """The cipher lines of one split as byte values 0..255 (eight bits -> one byte)."""
    return tuple(tuple(bits_to_bytes(bits)) for bits in corpus().lines(split)[1])


@functools.lru_cache(maxsize=1)
def entropy_model() -> ByteEntropyModel:
    """The order-2 byte model, counted on the training split's cipher bytes (as training does)."""
    return ByteEntropyModel().fit(cipher_bytes("train"))


def threshold() -> float:
    """The boundary threshold in bits at the assignment preset: the configured percentile of the
    entropies of all training lines."""
    return entropy_model().threshold_at(SETTINGS.blt_entropy_percentile)


@functools.lru_cache(maxsize=None)
def threshold_at_preset(preset: str) -> float:
    """The threshold a C5 run at ``preset`` trains with: ``ByteCodec.fit`` on that preset's training lines."""
    config = make_config("c5", preset)
    return ByteCodec.fit(config, select_lines(corpus(), config)).threshold


@functools.lru_cache(maxsize=1)
def chunk_patch_stats() -> dict:
    """Mean lengths per training chunk (at most CHUNK_CHARS characters) under the assignment's fit.

    "source_bytes" and "source_patches" (entropy patches with the cap), "target_bytes_with_bos" (the
    decoder input: BOS + plaintext) and "target_global_slots" (Lt // patch_tgt + 1), plus "chunks",
    "share_at_cap" (share of the chunks' patches exactly max_patch bytes long) and "mean_patch".
    """
    model, cutoff = entropy_model(), threshold()
    chunks = make_chunks(corpus().plain, corpus().cipher, corpus().splits["train"], CHUNK_CHARS)
    sources = [bits_to_bytes(c.cipher) for c in chunks]
    starts = [model.patch_boundaries(s, cutoff, SETTINGS.blt_max_patch) for s in sources]
    lengths = np.concatenate([np.diff(b + [len(s)]) for b, s in zip(starts, sources) if s])
    target = [len(c.plain) + 1 for c in chunks]
    return {"chunks": len(chunks), "source_bytes": float(np.mean([len(s) for s in sources])),
            "source_patches": float(np.mean([len(b) for b in starts])),
            "target_bytes_with_bos": float(np.mean(target)),
            "target_global_slots": float(np.mean([n // SETTINGS.blt_patch_tgt + 1 for n in target])),
            "share_at_cap": float(np.mean(lengths == SETTINGS.blt_max_patch)), "mean_patch": float(lengths.mean())}


RECIPE_STATS_LINES = 300  # training lines cut into chunks by recipe_chunk_patch_stats: a few seconds


@functools.lru_cache(maxsize=None)
def recipe_chunk_patch_stats(n_lines: int = RECIPE_STATS_LINES, seed: int = 0) -> dict:
    """Source patches on the assignment preset's training chunks of the first ``n_lines`` training lines,
    as English and as the default recipe makes them (phase-shuffled, letters case-flipped), under the
    assignment's fit (whole English training lines).

    For each kind ("English", "recipe-shuffled"): "mean_patch" (bytes per patch, cap included) and
    "after_letter" (share of positions i >= 1 after a letter that start a patch).
    """
    config, model, cutoff = SETTINGS, entropy_model(), threshold()
    lines = corpus().splits["train"][:n_lines]
    english = make_chunks(corpus().plain, corpus().cipher, lines, config.chunk_chars)
    kinds = {"English": english,
             "recipe-shuffled": shuffle_chunks(english, config.phase_shuffle, seed, flip_case=config.case_flip)}
    out = {}
    for kind, chunks in kinds.items():
        lengths, after, started = [], 0, 0
        for c in chunks:
            seq = bits_to_bytes(c.cipher)
            if not seq:
                continue
            starts = model.patch_boundaries(seq, cutoff, config.blt_max_patch)
            lengths.append(np.diff(starts + [len(seq)]))
            is_start = set(starts)
            for i in range(1, len(seq)):
                if c.plain[i - 1].isalpha():
                    after += 1
                    started += i in is_start
        out[kind] = {"mean_patch": float(np.concatenate(lengths).mean()), "after_letter": started / after,
                     "chunks": len(chunks)}
    return out


@functools.lru_cache(maxsize=1)
def max_entropy_with_context() -> float:
    """The largest entropy at a training position that has at least one byte of context (i >= 1)."""
    return max(float(entropy_model().entropy_curve(seq)[1:].max(initial=0.0)) for seq in cipher_bytes("train"))


@functools.lru_cache(maxsize=None)
def patch_stats(cutoff: float, max_patch: int) -> dict:
    """Source patches of the validation lines under one threshold (bits) and cap.

    Returns the number of patches, their mean length, the longest, the share that are exactly
    ``max_patch`` bytes long, how many patch starts the entropy rule itself made (the other
    starts are position 0 of each line or the cap), and every patch length (for a histogram).
    """
    model = entropy_model()
    lengths, entropy_starts = [], 0
    for seq in cipher_bytes("val"):
        starts = model.patch_boundaries(seq, cutoff, max_patch)
        lengths.append(np.diff(starts + [len(seq)]))
        entropy_starts += int((model.entropy_curve(seq)[1:] > cutoff).sum())
    lengths = np.concatenate(lengths)
    return {"patches": int(lengths.size), "mean": float(lengths.mean()), "longest": int(lengths.max()),
            "share_at_cap": float(np.mean(lengths == max_patch)), "entropy_starts": entropy_starts,
            "lengths": lengths}


@functools.lru_cache(maxsize=1)
def boundary_share_by_previous_char() -> dict:
    """Share of validation positions i >= 1 that start a source patch, by plaintext character i - 1.

    "space", "letter or digit", "other". The entropy model never sees the plaintext; it is
    used here only to say, in words a reader knows, where the boundaries fall.
    """
    model, cutoff = entropy_model(), threshold()
    starts, seen = {}, {}
    for text, seq in zip(corpus().lines("val")[0], cipher_bytes("val")):
        is_start = np.zeros(len(seq), dtype=bool)
        is_start[model.patch_boundaries(seq, cutoff, SETTINGS.blt_max_patch)] = True
        for prev, start in zip(text, is_start[1:]):
            kind = "space" if prev == " " else "letter or digit" if prev.isalnum() else "other"
            starts[kind] = starts.get(kind, 0) + int(start)
            seen[kind] = seen.get(kind, 0) + 1
    return {kind: starts[kind] / seen[kind] for kind in seen}


def longest_line() -> int:
    """The longest line of the embedded corpus, in characters = grouped cipher bytes."""
    return max(map(len, corpus().plain))


# --------------------------------------------------------------------------- windowed attention

@functools.lru_cache(maxsize=None)
def windowed_vs_full(length: int | None = None, window: int = SETTINGS.blt_window) -> dict:
    """Run one WindowedSelfAttention of the assignment's width on ``length`` random byte vectors (by
    default as many as the corpus's longest line), then the same module's attention over the whole
    sequence under a block-diagonal mask.

    Returns the largest difference between the two outputs and the bytes of the attention
    weights each computed (captured from the attention module, one example, all heads).
    """
    length = length or longest_line()
    torch.manual_seed(0)
    layer = WindowedSelfAttention(SETTINGS.d_model, SETTINGS.n_heads, window, causal=False, dropout=0.0).eval()
    x = torch.randn(1, length, SETTINGS.d_model)  # (B, L, D)
    pad = torch.zeros(1, length, dtype=torch.bool)
    block = torch.arange(length) // window
    block_diagonal = (block[:, None] != block[None, :])[None, None]  # (1, 1, L, L), True = blocked
    core = layer.attn.attention
    core.capture = True
    with torch.no_grad():
        windowed = layer(x, pad)
        windowed_scores = core.last_attn.nbytes  # (windows, H, W, W) float32
        full = layer.attn(x, x, x, block_diagonal)
        full_scores = core.last_attn.nbytes  # (1, H, L, L) float32
    core.capture, core.last_attn = False, None
    return {"max_diff": float((windowed - full).abs().max()),
            "windowed_bytes": windowed_scores, "full_bytes": full_scores}


def mib(n_bytes: int) -> float:
    return n_bytes / 2**20


# --------------------------------------------------------------------------- pooling and the patch-causal mask

def max_change(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest absolute difference between two tensors of one shape."""
    return (a - b).abs().max().item()


def pooling_swap_effect(model: BLTModel, ids: torch.Tensor, order: list[int]) -> dict:
    """How far reordering the decoder-input bytes ``ids`` (1, 2P) by ``order`` moves the pooled patches.

    ``order`` swaps bytes inside patch 0. Returns the change of attention pooling (patches 0 and 1),
    of the mean of patch 0, and of attention pooling of the *unswapped* vectors (positions
    included) listed in the swapped order: attention over a set is order-blind.
    """
    member = fixed_patch_membership(ids != PAD_ID, model.patch_tgt)  # (1, 2, 2P)
    P = model.patch_tgt
    with torch.no_grad():
        h = model.local_decoder.embed_bytes(ids)  # (1, 2P, D): byte + position
        h_swapped = model.local_decoder.embed_bytes(ids[:, order])
        pooled, _ = model.tgt_pooling(h, member)  # (1, 2, D)
        pooled_swapped, _ = model.tgt_pooling(h_swapped, member)
        pooled_permuted, _ = model.tgt_pooling(h[:, order], member)
    return {"attention, patch 0": max_change(pooled[0, 0], pooled_swapped[0, 0]),
            "attention, patch 1": max_change(pooled[0, 1], pooled_swapped[0, 1]),
            "mean, patch 0": max_change(h[0, :P].mean(0), h_swapped[0, :P].mean(0)),
            "attention, same vectors reordered": max_change(pooled[0, 0], pooled_permuted[0, 0])}


def slot_dependencies(model: BLTModel, tgt_in: torch.Tensor, memory, memory_mask) -> torch.Tensor:
    """(slots, Lt) bool, measured: True where global slot j moves when decoder-input byte p changes.

    ``tgt_in`` is one decoder input (1, Lt); every byte is changed in turn, alone.
    """
    with torch.no_grad():
        _, g = model.global_states(tgt_in, memory, memory_mask)  # (1, Lt // P + 1, D)
        depends = torch.zeros(g.size(1), tgt_in.size(1), dtype=torch.bool)
        for p in range(tgt_in.size(1)):
            changed = tgt_in.clone()
            changed[0, p] = (changed[0, p] + 1) % 256
            _, g_changed = model.global_states(changed, memory, memory_mask)
            depends[:, p] = (g_changed - g)[0].abs().amax(-1) > 0
    return depends


def last_position_read(depends: torch.Tensor) -> list[int]:
    """For each slot of ``slot_dependencies``, the last input position it depends on (-1: none)."""
    return [max(torch.nonzero(row).flatten().tolist(), default=-1) for row in depends]


def strict_patch_mask(Lt: int, K: int, P: int) -> torch.Tensor:
    """The course notes' derivation (from j * P - 1 < i): byte i reads slot j iff j <= i // P. True = blocked."""
    return (torch.arange(K)[None, :] > torch.arange(Lt)[:, None] // P)[None, None]


def one_slot_more_mask(Lt: int, K: int, P: int) -> torch.Tensor:
    """One slot looser than cipherlab's: byte i reads slot j iff j <= (i + 1) // P + 1. True = blocked."""
    return (torch.arange(K)[None, :] > (torch.arange(Lt)[:, None] + 1) // P + 1)[None, None]


def decode_with_mask(model: BLTModel, mask_fn, tgt: torch.Tensor, memory, memory_mask, source=None):
    """``BLTModel.decode`` with the patch-causal mask replaced by ``mask_fn(Lt, K, P)``: logits (B, Lt, V)."""
    h, g = model.global_states(tgt, memory, memory_mask)
    g_mask = mask_fn(tgt.size(1), g.size(1), model.patch_tgt)
    read, read_mask = source if source is not None else (memory, memory_mask)
    return model.local_decoder(h, tgt == PAD_ID, g, g_mask, read, read_mask)


def worst_leak(model: BLTModel, mask_fn, tgt: torch.Tensor, memory, memory_mask, source=None, seed: int = 0) -> float:
    """Largest change of the logits at 0..i when every decoder-input byte after i is replaced, over all i.

    Zero means no logit can see the future under ``mask_fn``; ``tgt`` is one decoder input (1, Lt).
    """
    gen = torch.Generator().manual_seed(seed)
    length, worst = tgt.size(1), 0.0
    with torch.no_grad():
        base = decode_with_mask(model, mask_fn, tgt, memory, memory_mask, source)
        for i in range(length - 1):
            changed = tgt.clone()
            changed[0, i + 1:] = torch.randint(0, 256, (length - i - 1,), generator=gen)
            moved = decode_with_mask(model, mask_fn, changed, memory, memory_mask, source)[:, :i + 1] - base[:, :i + 1]
            worst = max(worst, moved.abs().max().item())
    return worst


# --------------------------------------------------------------------------- parameter counts

def counted_recipe(preset: str) -> str:
    """The recipe the parameter counts use: at the assignment's sizes the course notes' (free embedding rows,
    the model their counts describe); at the cpu preset the default recipe, the models the reference ablation
    trained (results/reference records the same counts)."""
    return "notes" if preset == "assignment" else DEFAULT_RECIPE


@functools.lru_cache(maxsize=None)
def c5_model(preset: str) -> BLTModel:
    """C5 at ``preset``'s sizes, built as training builds it (:func:`cipherlab.pipeline.codec.build_model`), seeded,
    with the recipe :func:`counted_recipe` names (as :func:`c1_params` counts C1)."""
    torch.manual_seed(0)
    return build_model(make_config("c5", preset, recipe=counted_recipe(preset)))


@functools.lru_cache(maxsize=None)
def c1_params(preset: str) -> int:
    """Parameters of C1 at ``preset``, with the vocabularies its tokenizers have there.

    A BPE vocabulary of size N (the assignment's 1024 / 8000) has exactly N ids; a merge-free one
    (vocab None, the cpu preset) has its base symbols and specials, which only fitting it tells:
    cheap without merges.
    """
    # the recipe c5_model counts with; at the assignment's sizes the course notes' 1024 / 8000 BPEs
    c = make_config("c1", preset, recipe=counted_recipe(preset),
                    **(TOKENIZATIONS["notes"] if preset == "assignment" else {}))
    if c.src_vocab is None or c.tgt_vocab is None:
        from cipherlab.pipeline.codec import fit_codec, select_lines
        return build_model(c, fit_codec(c, select_lines(corpus(), c))).num_params()
    return build_model(c, vocab_sizes=(c.src_vocab, c.tgt_vocab), pad_id=0).num_params()


def c5_parts(preset: str) -> dict:
    """C5's parameters by top-level part: local encoder, target pooling, global stack, local decoder, rest."""
    model = c5_model(preset)
    parts = {"local encoder": model.local_encoder, "target pooling": model.tgt_pooling,
             "global encoder": model.global_encoder, "global decoder": model.global_decoder,
             "local decoder": model.local_decoder}
    counts = {name: sum(p.numel() for p in part.parameters()) for name, part in parts.items()}
    counts["start patch"] = model.start_patch.numel()
    assert sum(counts.values()) == model.num_params()
    return counts


# --------------------------------------------------------------------------- benchmark files

def benchmark(name: str) -> dict:
    """benchmarks/results/<name>.json (blt: bench_blt.py, bpe: bench_bpe.py)."""
    return json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))


def per_chunk(side: str) -> dict:
    """Mean lengths per training chunk from bench_blt.py: side "patches" (C5) or "bpe" (C1)."""
    return benchmark("blt")[side]["per_chunk_mean"]
