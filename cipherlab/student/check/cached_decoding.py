"""The check of a whole model's incremental decoding (``decoding``): ``begin_decoding`` and ``decode_step``.

A model (a class built at small sizes, or a function returning one; a BLT too) must give with its
cache, one token at a time, the logits of its full teacher-forced pass; its full pass must be causal;
greedy decoding through the cache must pick the tokens full passes pick; batch rows must decode as they
would alone; and PAD ids appended to the source must change no logit. When the cache differs from the
full pass, the position modules that ignore their offset are named.
"""

from __future__ import annotations

import inspect
from functools import partial

import torch
from torch import nn

from cipherlab.data.tokenizers.bytes import BOS_ID, SPECIAL_IDS, VOCAB_SIZE
from cipherlab.models.blt import BLTArgs, BLTModel, patch_membership
from cipherlab.models.transformer import ModelArgs, Seq2SeqTransformer
from cipherlab.student.check.compare import Guarded, _close, _finite, _gap, skip
from cipherlab.student.check.report import Report, _interface, _interface_build, _label, _run, _takes
from cipherlab.student.trials import randn

DECODING_SIZES = dict(d_model=32, n_heads=4, enc_layers=1, dec_layers=1, ffn_dim=64, dropout=0.0)
BLT_SIZES = {**DECODING_SIZES, "local_layers": 1, "window": 8, "patch_tgt": 4, "source_memory": "bytes",
             "max_len": 128, **SPECIAL_IDS}
DECODING_INTERFACE = (f"a model class built as cls(ModelArgs({VOCAB_SIZE}, {VOCAB_SIZE}, d_model=32, n_heads=4, "
                      "enc_layers=1, dec_layers=1, ffn_dim=64, dropout=0.0)) (cipherlab.models.ModelArgs) or, when "
                      f"its constructor takes two arguments, as cls({VOCAB_SIZE}, {VOCAB_SIZE}, d_model=32, ...); or "
                      "a function with no arguments returning a model, with "
                      "model(src, tgt_in) -> logits (B, Lt, V), model.begin_decoding(src) -> state and "
                      "model.decode_step(state, tokens (B,)) -> logits (B, V); a BLT takes src_member after src")
DECODE_TOL = 1e-4  # cached against full-pass logits: the same sums in another order


def decoding(obj) -> Report:
    """Check a whole model's incremental decoding: ``begin_decoding`` and ``decode_step`` with a cache.

    ``obj`` is a model class, built (seeded) as ``cls(ModelArgs(259, 259, d_model=32, n_heads=4, enc_layers=1,
    dec_layers=1, ffn_dim=64, dropout=0.0))`` like cipherlab's Seq2SeqTransformer (a BLTModel
    subclass as ``cls(BLTArgs(d_model=32, ..., window=8, patch_tgt=4))``), or a function with no arguments
    that returns a model; it is put in eval mode. Ids are bytes: source 0..255, target BOS = 257
    then lowercase letters. ``model(src, tgt_in)`` -> teacher-forced logits (B, Lt, V), position i
    predicting tgt_in[i + 1]; ``model.begin_decoding(src)`` -> a state (encoder run once, empty
    cache); ``model.decode_step(state, tokens)`` feeds tokens (B,), the ids at the next target
    position, and returns that position's logits (B, V), as cipherlab.pipeline.decode drives every model.
    A BLT takes ``src_member`` (B, Ks, Ls) after ``src`` in the call and in begin_decoding.
    """
    model = _interface_build(lambda: _build_model(obj), _decoding_call(obj), DECODING_INTERFACE)
    if isinstance(model, nn.Module):
        model.eval()
    blt = _takes(model.begin_decoding, "src_member") if hasattr(model, "begin_decoding") else False
    src, member, tgt_in = _decoding_batch(2, 8, blt)
    head = (src, member) if blt else (src,)
    _interface(lambda: model(*head, tgt_in), f"{_label(obj)} model(src{', src_member' * blt}, tgt_in)",
               DECODING_INTERFACE)
    _interface(lambda: model.decode_step(model.begin_decoding(*head), tgt_in[:, 0]),
               f"model.decode_step(model.begin_decoding(src{', src_member' * blt}), tokens)", DECODING_INTERFACE)
    model = Guarded(model, "model", methods=("begin_decoding", "decode_step"))  # an exception names the call
    return _run("decoding", _label(obj), [
        ("shape", partial(_decoding_shape, model, head, tgt_in)),
        ("causality", partial(_decoding_causality, model, head, tgt_in)),
        ("cache", partial(_decoding_cache, model, head, tgt_in)),
        ("greedy", partial(_decoding_greedy, model, head, tgt_in)),
        ("batch rows", partial(_decoding_rows, model, head, tgt_in)),
        ("source padding", partial(_decoding_padding, model, src, tgt_in) if not blt else lambda: skip(
            "a BLT's source is whole patches of bytes (src_member says which), with no PAD ids to append; its "
            "pooling of empty patches is `check pooling`'s")),
    ])


def _takes_args_object(cls) -> bool:
    """Whether a model class is built from one object (``cls(ModelArgs(...))``, as cipherlab's models and
    their subclasses are) rather than ``cls(src_vocab, tgt_vocab, d_model=..., ...)``, the course notes' way:
    a constructor with fewer than two positional parameters takes the one object."""
    if issubclass(cls, (Seq2SeqTransformer, BLTModel)):
        return True
    try:
        parameters = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return True
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) < 2 and not any(p.kind is p.VAR_POSITIONAL for p in parameters)


def _decoding_call(obj) -> str:
    if not inspect.isclass(obj):
        return f"{_label(obj)}()"
    if issubclass(obj, BLTModel):
        return f"{obj.__name__}(BLTArgs({', '.join(f'{k}={v}' for k, v in BLT_SIZES.items())}))"
    sizes = ", ".join(f"{k}={v}" for k, v in DECODING_SIZES.items())
    if _takes_args_object(obj):
        return f"{obj.__name__}(ModelArgs({VOCAB_SIZE}, {VOCAB_SIZE}, {sizes}))"
    return f"{obj.__name__}({VOCAB_SIZE}, {VOCAB_SIZE}, {sizes})"


def _build_model(obj):
    """The model ``obj`` builds (see :func:`decoding`), its weights drawn from seed 0."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        if not inspect.isclass(obj):
            return obj()
        if issubclass(obj, BLTModel):
            return obj(BLTArgs(**BLT_SIZES))
        if _takes_args_object(obj):
            return obj(ModelArgs(VOCAB_SIZE, VOCAB_SIZE, **DECODING_SIZES))
        return obj(VOCAB_SIZE, VOCAB_SIZE, **DECODING_SIZES)


def _decoding_batch(n: int, length: int, blt: bool):
    """src (n, 12) cipher bytes 1..255 (never 0, a default PAD id), src_member (n, 4, 12) 3-byte patches
    for a BLT (else None), tgt_in (n, length) = BOS + lowercase letters."""
    gen = torch.Generator().manual_seed(n * 100 + length)
    src = torch.randint(1, 256, (n, 12), generator=gen)
    member = patch_membership([[0, 3, 6, 9]] * n, [12] * n, 12) if blt else None
    letters = torch.randint(ord("a"), ord("z") + 1, (n, length - 1), generator=gen)
    return src, member, torch.cat([torch.full((n, 1), BOS_ID), letters], dim=1)


def _step_all(model, head, tgt_in: torch.Tensor) -> torch.Tensor:
    """(B, Lt, V): the logits of decode_step fed tgt_in one position at a time from a fresh state."""
    state = model.begin_decoding(*head)
    return torch.stack([model.decode_step(state, tgt_in[:, t]) for t in range(tgt_in.size(1))], dim=1)


def _decoding_shape(model, head, tgt_in) -> tuple[bool, str]:
    full = _finite(model(*head, tgt_in))
    step = _finite(model.decode_step(model.begin_decoding(*head), tgt_in[:, 0]))
    B, Lt = tgt_in.shape
    if full.dim() != 3 or full.shape[:2] != (B, Lt) or tuple(step.shape) != (B, full.size(-1)):
        return False, (f"model(..., tgt_in {tuple(tgt_in.shape)}) gives {tuple(full.shape)} and decode_step "
                       f"{tuple(step.shape)}; expected (B, Lt, V) and (B, V)")
    return True, f"model(...) gives (B, Lt, V) = {tuple(full.shape)} and decode_step (B, V) = {tuple(step.shape)}"


def _decoding_causality(model, head, tgt_in) -> tuple[bool, str]:
    base = model(*head, tgt_in)
    for at in range(1, tgt_in.size(1)):
        changed = tgt_in.clone()
        changed[:, at:] = changed[:, at:] % 26 + ord("a")  # other letters from position at on
        gap = _gap(model(*head, changed)[:, :at], base[:, :at])
        if gap > 1e-6:
            where = "position 0" if at == 1 else f"positions 0..{at - 1}"
            return False, (f"the teacher-forced logits at target {where} change by up to {gap:.2g} when only "
                           f"positions {at}.. change: a later target position leaks backwards; position i "
                           "predicts tgt_in[i + 1] and may read tgt_in[0..i] only (a causal mask on the decoder's "
                           "self-attention, and nothing else that mixes target positions)")
    return True, "no teacher-forced logit changes when only later target positions change"


def _decoding_cache(model, head, tgt_in) -> tuple[bool, str]:
    stepped, full = _step_all(model, head, tgt_in), model(*head, tgt_in)
    gaps = (stepped - full).abs().flatten(2).amax(-1).amax(0)  # (Lt,) per position
    if gaps.max() <= DECODE_TOL:
        return True, (f"decode_step, fed one token at a time through the cache, gives the full pass's logits "
                      f"(max difference {gaps.max():.1e}, tolerance {DECODE_TOL:g})")
    t = int((gaps > DECODE_TOL).nonzero()[0])
    said = (f"decode_step's logits at target position {t} differ from the full teacher-forced pass by "
            f"{gaps[t]:.2g} (tolerance {DECODE_TOL:g})")
    if not _decoding_causality(model, head, tgt_in)[0]:
        return False, said + "; the full pass is not causal (see 'causality'), so no cache can match it"
    if t == 0:
        return False, (said + ": already the first step differs, where no cached key is read yet: what begin_decoding "
                       "and the first decode_step compute differs from the full pass at position 0 (the encoding of "
                       "the source, or the first token's embedding and position)")
    ignored = _offset_ignored(model, head, tgt_in)
    if ignored:
        return False, (said + f" (position 0 agrees): the cache ignores the position offset: {ignored}; a step at "
                       "target position t must be embedded and rotated at position t (offset = the cache's length)")
    return False, (said + " (position 0 agrees): each step must see the keys and values of every earlier position "
                   "(appended to the cache) at their own positions, the new token at position t")


def _offset_ignored(model, head, tgt_in) -> str:
    """Words for the position modules (those whose forward takes ``offset``) that ignore it: called
    with offset 0 at a cached step t > 0, or giving at offset 7 what they give at 0. "" if none."""
    found, seen = [], {}

    def record(name):
        def hook(module, args, kwargs):
            try:
                bound = inspect.signature(module.forward).bind(*args, **kwargs)
                seen.setdefault(name, set()).add(int(bound.arguments.get("offset", 0) or 0))
            except (TypeError, ValueError):
                pass
        return hook

    modules = [(n, m) for n, m in model.named_modules() if n and _takes(m.forward, "offset")]
    handles = [m.register_forward_pre_hook(record(n), with_kwargs=True) for n, m in modules]
    try:
        state = model.begin_decoding(*head)
        seen.clear()
        for t in range(tgt_in.size(1)):
            model.decode_step(state, tgt_in[:, t])
    finally:
        for h in handles:
            h.remove()
    found += [f"{n} is only ever called with offset 0" for n, offsets in seen.items() if offsets == {0}]
    found += [f"{n}(..., offset=7) gives what offset=0 gives" for n, m in modules if _blind_to_offset(m)]
    return "; ".join(found)


def _blind_to_offset(module) -> bool:
    """Whether a RoPE (it has head_dim) or absolute position module (a 2-D table) gives the same at offsets 0 and 7."""
    try:
        if isinstance(getattr(module, "head_dim", None), int):
            q = randn(1, 1, 3, module.head_dim)
            return _close(module(q, q, offset=7)[0], module(q, q, offset=0)[0])
        table = getattr(module, "table", None)
        if isinstance(table, torch.Tensor) and table.dim() == 2:
            x = randn(1, 3, table.size(1))
            return _close(module(x, offset=7), module(x, offset=0))
    except Exception:
        return False
    return False


def _greedy(model, head, bos: torch.Tensor, steps: int, cached: bool) -> torch.Tensor:
    """(B, steps) argmax tokens after ``bos`` (B, 1): through the cache, or a full pass per step."""
    ys = bos
    state = model.begin_decoding(*head) if cached else None
    for _ in range(steps):
        logits = model.decode_step(state, ys[:, -1]) if cached else model(*head, ys)[:, -1]
        ys = torch.cat([ys, logits.argmax(-1, keepdim=True)], dim=1)
    return ys[:, 1:]


def _decoding_greedy(model, head, tgt_in) -> tuple[bool, str]:
    steps = 8
    cached, recomputed = (_greedy(model, head, tgt_in[:, :1], steps, c) for c in (True, False))
    if torch.equal(cached, recomputed):
        return True, f"greedy decoding of {steps} tokens through the cache picks the same tokens as full passes"
    t = int((cached != recomputed).any(0).nonzero()[0])
    return False, (f"greedy decoding through the cache picks {cached[:, t].tolist()} at step {t} where a full pass "
                   f"over the prefix picks {recomputed[:, t].tolist()}")


def _decoding_rows(model, head, tgt_in) -> tuple[bool, str]:
    together = _step_all(model, head, tgt_in)
    alone = torch.cat([_step_all(model, tuple(h[b:b + 1] for h in head), tgt_in[b:b + 1]) for b in range(2)])
    gap = _gap(together, alone)
    if gap <= DECODE_TOL:
        return True, "each row decodes as it would alone: the cache keeps the batch rows apart"
    return False, (f"a row's cached logits change by up to {gap:.2g} with the other row of the batch: the state mixes "
                   "rows; keep the batch dimension first in every cached tensor")


def _decoding_padding(model, src, tgt_in, extra: int = 3) -> tuple[bool, str]:
    """PAD ids appended to every source line (a batch padded to a longer line) change no logit."""
    pad = int(getattr(model, "src_pad_id", 0))
    padded = torch.cat([src, torch.full((src.size(0), extra), pad)], dim=1)
    gap = _gap(model(padded, tgt_in), model(src, tgt_in))
    if gap <= DECODE_TOL:
        return True, f"{extra} PAD ids (id {pad}) appended to each source line change no logit: padding is masked"
    return False, (f"{extra} PAD ids (id {pad}) appended to each source line change the logits by up to {gap:.2g}: the "
                   "encoder or the cross-attention reads PAD as if it were text; mask the PAD keys "
                   "(padding_mask(src, pad_id)) in the encoder's self-attention and in the cross-attention")
