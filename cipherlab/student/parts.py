"""Train with your own components: the parts of C1-C4 that a class of yours can replace.

``python -m cipherlab check PART FILE.py:NAME`` checks the maths of a class; ``--part`` trains with it::

    python -m cipherlab train --config c1 --preset cpu --part attention=my_attention.py:MyAttention
    python -m cipherlab decrypt --checkpoint runs/cpu/c1/best.pt --part attention=my_attention.py:MyAttention BITS

From Python, :class:`PartsBuilder` takes the classes themselves: ``PartsBuilder({"attention": MyAttention})``
builds the model, and ``train_config(config, out, builder=...)`` (:mod:`cipherlab.runner.training`) trains with it.

==========  ===============================================  ==========================================
PART        replaces (in C1-C4; C5, the BLT, takes none)     the class is built and called as
==========  ===============================================  ==========================================
attention   every self-attention: MultiHeadAttention (C1,    ``cls(d_model, n_heads, dropout=p)``, plus
            C2, C4) or GroupedQueryAttention (C3), encoder   ``n_kv_heads=k`` in C3 and ``rope=R`` in C2;
            and decoder; cross-attention stays cipherlab's   ``forward(query, key, value, mask)``
norm        every LayerNorm (C1-C3) or RMSNorm (C4)          ``cls(d_model, eps=1e-5)``; ``forward(x)``
positional  SinusoidalPositionalEncoding (C1, C3, C4)        ``cls(d_model, max_len=4096, dropout=p)``;
                                                             ``forward(x, offset)``
rope        RotaryPositionalEmbedding (C2)                   ``cls(head_dim, max_len=4096)``;
                                                             ``forward(q, k, offset=0)``
==========  ===============================================  ==========================================

Shapes and masks are cipherlab's (:data:`PARTS` holds each interface in full): masks are bool, True =
BLOCKED. A class must be an ``nn.Module`` subclass, so that its weights train and are saved. Your
attention is never given a KV cache: when decoding, cipherlab runs it over the whole prefix again at
each step (slower, the same result; :class:`cipherlab.student.adapters.PrefixAttention`). A rotary class
needs no ``rotate`` method or ``head_dim``: :class:`cipherlab.student.adapters.RotaryAdapter` supplies what
cipherlab's attention reads.

Before any training starts each class is built with the configuration's sizes and run once on small
random inputs (:func:`validate_parts`), then once more with gradients on and one backward pass (a loss on
its output, ``.backward()``), as training will: a part that does not fit its interface is one line naming
the part, the file and class, and the call or shape that went wrong; so is one that breaks autograd (an
in-place ``/=`` on a tensor the backward pass needs, named with the line that made it; an output or a
parameter that gets no gradient, computed under ``torch.no_grad()`` or detached), one that changes PyTorch's
global settings and leaves them so (``torch.set_default_dtype(torch.float64)`` would make the whole model
float64, ``torch.set_grad_enabled(False)`` would stop training: each is undone and named, as at import),
and one whose calls do not end within :data:`TRIAL_TIME_LIMIT_S` seconds. That checks the interface only;
``python -m cipherlab check`` checks the maths.

Later, an exception raised inside a part's file, at any point of training, evaluation or decoding, is
named as the student's with its file, line and class (:func:`cipherlab.runner.errors.blame`: the files
loaded here are registered with it), never as a bug in cipherlab.

The checkpoint and the results record name each replaced part: ``{"part", "file", "class", "sha256",
"class_sha256"}`` (:func:`part_records`; ``sha256`` is the file's, ``class_sha256`` the class's own source,
both read when it was loaded). A model trained with a part loads again only with the same part, whose
class has the same source (an edit elsewhere in its file does not matter; a checkpoint that records no
``class_sha256`` needs the same file): the commands take ``--part`` and say which one is missing; from
Python, ``load_trained(path, builder=PartsBuilder(parts))``. ``CIPHERLAB_EDITED_PARTS=1`` loads it with the class edited.

A part travels as an argument only (``builder=PartsBuilder(parts)``); nothing is registered in between. In the
flow of the package this module sits above ``cipherlab.models``, the pipeline that builds cipherlab's model and
the runner that trains and loads whatever :class:`~cipherlab.pipeline.codec.ModelBuilder` it is given; beside
it :mod:`cipherlab.student.adapters` puts the classes in a built model. What a
model trained with parts needs, and the ``--part`` that puts a class back, are said here (:func:`mismatch`).
Loading ``FILE.py:NAME`` is ``cipherlab.student.check.load_target``'s, a tool above both: the command line
passes it in (``load=``).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import sys
import warnings
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from cipherlab.base.config import COMPONENTS, Config, ConfigError
from cipherlab.runner.errors import PartError, describe, register_student_code, student_line, student_line_in, why
from cipherlab.models.attention import causal_mask, padding_mask
from cipherlab.models.positional import RotaryPositionalEmbedding
from cipherlab.pipeline.codec import build_model
from cipherlab.student.adapters import (MAX_LEN, RotaryAdapter, build_own_attention, build_own_norm,
                                       build_own_positional, build_own_rope, put_parts)
from cipherlab.student.trials import TooLong, Unfit, randn, state_change, time_limit, torch_state

__all__ = [
    "EDITED_PARTS",
    "IMPORT_TIME_LIMIT_S",
    "MAX_LEN",
    "PARTS",
    "Part",
    "PartError",
    "PartsBuilder",
    "TRIAL_TIME_LIMIT_S",
    "check_names",
    "class_sha256",
    "import_parts",
    "internals_refusal",
    "load_parts",
    "mismatch",
    "mixed_parts",
    "overridden_internals",
    "parse_part",
    "part_places",
    "part_records",
    "parts_lines",
    "require_trained_parts",
    "shadowed_internals",
    "unused_parts",
    "validate_parts",
]

B, L = 2, 5  # the batch and length of the trial inputs
EXAMPLE = "--part attention=my_attention.py:MyAttention"




# --------------------------------------------------------------------------- trial calls


TRIAL_TIME_LIMIT_S = 60.0
"""Seconds a part's trial calls (building it, its forward calls and a backward pass on small inputs, well under
a second as written) may take before they are stopped: a loop that never ends would hang the command."""

_doing = ["building it"]  # the trial call running now, for the time limit's message


@contextlib.contextmanager
def _kept(what: str):
    """Run the body (a call of the student's, written out as ``what``); Unfit when it changed PyTorch's global
    settings (:func:`cipherlab.student.trials.state_change`), which are put back in any case."""
    _doing[0] = what
    before = torch_state()
    try:
        yield
    except BaseException:
        state_change(before)
        raise
    change = state_change(before)
    if change:
        raise _Beyond(f"{what} {change}")


def _build(make: Callable[[], object], call: str) -> nn.Module:
    """``make()``, a constructor call written out as ``call``; it must give an nn.Module (put in eval mode)."""
    try:
        with _kept(call):
            module = make()
    except Unfit:
        raise
    except NotImplementedError:
        raise Unfit(f"{call} raised NotImplementedError: a stub still to be written") from None
    except Exception as e:
        raise Unfit(f"{call} raised {why(e)}{student_line(e)}") from None
    if not isinstance(module, nn.Module):
        raise Unfit(f"{call} gave a {type(module).__name__}, not an nn.Module")
    _refuse_internals(type(module.inner if isinstance(module, RotaryAdapter) else module), module)
    return module.eval()


def _run(call: Callable[[], object], what: str):
    """``call()`` without gradients; an exception is Unfit naming ``what``."""
    try:
        with torch.no_grad(), _kept(what):
            return call()
    except Unfit:
        raise
    except NotImplementedError:
        raise Unfit(f"{what} raised NotImplementedError: a stub still to be written") from None
    except Exception as e:
        raise Unfit(f"{what} raised {why(e)}{student_line(e)}") from None


NO_GRAD_CAUSES = "computed under torch.no_grad(), through .detach(), .data or .item(), or not used at all?"


def _backprop(module: nn.Module, call: Callable[..., object], inputs: tuple[torch.Tensor, ...], what: str) -> None:
    """One backward pass as training makes: ``call(*inputs)`` with gradients on, a loss on its output (a random
    weighting of it), ``.backward()``. Unfit when the call or the backward pass raises (an in-place change of a
    tensor autograd saved is named with the line that made it, from PyTorch's anomaly mode), when the output
    carries no gradient, or when a parameter of ``module`` or an input gets none."""
    inputs = tuple(t.detach().clone().requires_grad_() for t in inputs)
    module.zero_grad(set_to_none=True)
    what = f"{what} with gradients on"
    with torch.enable_grad(), warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        with torch.autograd.detect_anomaly(check_nan=False):
            try:
                with _kept(what):
                    out = call(*inputs)
            except Unfit:
                raise
            except Exception as e:
                raise _Beyond(f"{what} raised {why(e)}{student_line(e)}") from None
            outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(o, torch.Tensor)]
            if not any(o.requires_grad for o in outs):
                raise _Beyond(f"{what} returned an output that carries no gradient, so nothing before it would train: "
                              f"is it {NO_GRAD_CAUSES}")
            _doing[0] = f"the backward pass through {what}"
            loss = sum((o.float() * randn(*o.shape, seed=2)).sum() for o in outs if o.requires_grad)
            try:
                with _kept(_doing[0]):
                    loss.backward()
            except Unfit:
                raise
            except Exception as e:
                made = student_line_in("\n".join(str(w.message) for w in warned))
                if "modified by an inplace operation" in str(e):
                    advice = (f"; a tensor autograd saved{' (made' + made + ')' if made else ''} was changed in place "
                              "afterwards: write `x = x / s`, not `x /= s` (nor x[...] = ..., x.add_(...) or "
                              "masked_fill_ on it)")
                else:
                    advice = f" (in the backward of the operation{made})" if made else ""
                raise _Beyond(f"{_doing[0]} (a loss on its output, .backward()) raised {why(e)}{advice}") from None
    missing = [name.removeprefix("inner.") for name, p in module.named_parameters()
               if p.requires_grad and p.grad is None]
    if missing:
        listed = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        raise _Beyond(f"its parameter{'s' if len(missing) > 1 else ''} {listed} got no gradient from a backward pass "
                      f"through {what}, so training would never change {'them' if len(missing) > 1 else 'it'}: "
                      f"{'are they' if len(missing) > 1 else 'is it'} {NO_GRAD_CAUSES}")
    if any(t.grad is None for t in inputs):
        raise _Beyond(f"no gradient reaches its input{'s' if len(inputs) > 1 else ''} through {what}, so nothing "
                      "before it would train: is the output made from x.detach(), x.data or x.tolist(), under "
                      "torch.no_grad(), or without the input at all?")
    module.zero_grad(set_to_none=True)


def _expect(out, what: str, shape: tuple[int, ...]) -> None:
    """``out`` must be a finite float tensor of ``shape``."""
    if not isinstance(out, torch.Tensor):
        raise Unfit(f"{what} returned a {type(out).__name__}, not a tensor of shape {shape}")
    if tuple(out.shape) != shape:
        raise Unfit(f"{what} returned shape {tuple(out.shape)}, expected {shape}")
    if not torch.isfinite(out).all():
        raise Unfit(f"{what} returned NaN or inf on ordinary inputs (unit-variance random values); look for "
                     "a division by zero, a log of 0 or a softmax over all -inf")


def _rope_for(config: Config) -> RotaryPositionalEmbedding | None:
    """The rotary embedding a configuration's attention is built with (None with absolute positions)."""
    if config.pos_encoding != "rope":
        return None
    return RotaryPositionalEmbedding(config.d_model // config.n_heads, MAX_LEN)


def _try_attention(cls, config: Config) -> None:
    d, h = config.d_model, config.n_heads
    rope = _rope_for(config)
    extra = (f", n_kv_heads={config.n_kv_heads}" if config.attn_type == "gqa" else "") + \
        (", rope=RotaryPositionalEmbedding(...)" if rope is not None else "")
    module = _build(lambda: build_own_attention(cls, d, h, dropout=config.dropout, attn_type=config.attn_type,
                                                n_kv_heads=config.n_kv_heads, rope=rope),
                    f"{cls.__name__}({d}, {h}, dropout={config.dropout}{extra})")
    x = randn(B, L, d)
    pad = padding_mask(torch.tensor([[1] * (L - 2) + [0] * 2, [1] * L]), 0)  # (B, 1, 1, L): the encoder's
    for name, mask in (("padding", pad), ("causal", pad | causal_mask(L))):  # and the decoder's masks
        what = f"forward(query, key, value, mask) on ({B}, {L}, {d}) inputs with a {name} mask"
        _expect(_run(lambda: module(x, x, x, mask), what), what, (B, L, d))
    _backprop(module, lambda q, kv: module(q, kv, kv, pad | causal_mask(L)), (x, randn(B, L, d, seed=1)),
              f"forward(query, key, value, mask) on ({B}, {L}, {d}) inputs with a causal mask")


def _try_norm(cls, config: Config) -> None:
    d = config.d_model
    module = _build(lambda: build_own_norm(cls, d), f"{cls.__name__}({d}, eps=1e-5)")
    x = randn(B, L, d) * 3 + 1
    what = f"forward(x) on a ({B}, {L}, {d}) input"
    _expect(_run(lambda: module(x), what), what, (B, L, d))
    _backprop(module, module, (x,), what)


def _try_positional(cls, config: Config) -> None:
    d = config.d_model
    module = _build(lambda: build_own_positional(cls, d, MAX_LEN, config.dropout),
                    f"{cls.__name__}({d}, max_len={MAX_LEN}, dropout={config.dropout})")
    x = randn(B, L, d)
    for offset in (0, 3):  # decoding adds the rows of later positions, one step at a time
        what = f"forward(x, {offset}) on a ({B}, {L}, {d}) input"
        _expect(_run(lambda: module(x, offset), what), what, (B, L, d))
    _backprop(module, lambda x: module(x, 3), (x,), f"forward(x, 3) on a ({B}, {L}, {d}) input")


def _try_rope(cls, config: Config) -> None:
    hd = config.d_model // config.n_heads
    n_kv = config.n_kv_heads if config.attn_type == "gqa" else config.n_heads
    module = _build(lambda: build_own_rope(cls, hd, MAX_LEN), f"{cls.__name__}({hd}, max_len={MAX_LEN})")
    q, k = randn(B, config.n_heads, L, hd), randn(B, n_kv, L, hd, seed=1)
    for offset in (0, 3):
        what = f"forward(q {tuple(q.shape)}, k {tuple(k.shape)}, offset={offset})"
        out = _run(lambda: module.inner(q, k, offset=offset), what)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise Unfit(f"{what} returned a {type(out).__name__}, not the pair (q, k)")
        _expect(out[0], f"{what}'s q", tuple(q.shape))
        _expect(out[1], f"{what}'s k", tuple(k.shape))
    if callable(getattr(module.inner, "rotate", None)):  # cross-attention calls it (RotaryAdapter.rotate)
        what = f"rotate(x {tuple(q.shape)}, 3)"
        _expect(_run(lambda: module.rotate(q, 3), what), what, tuple(q.shape))
    _backprop(module, lambda q, k: module.inner(q, k, offset=3), (q, k),
              f"forward(q {tuple(q.shape)}, k {tuple(k.shape)}, offset=3)")


# --------------------------------------------------------------------------- the registry


def _bpe_only(config: Config) -> str | None:
    if config.tokenization == "blt":
        return (f"{config.name} (the BLT) is built from modules of its own; --part replaces pieces of "
                "C1-C4's Seq2SeqTransformer only")
    return None


def _absolute_only(config: Config) -> str | None:
    if config.pos_encoding == "rope":
        return (f"{config.name} adds no position encoding to its embeddings (pos_encoding='rope'); "
                "replace its rotary embedding with --part rope=FILE.py:NAME")
    return _bpe_only(config)


def _rotary_only(config: Config) -> str | None:
    if config.pos_encoding != "rope":
        return (f"{config.name} has no rotary embedding (pos_encoding={config.pos_encoding!r}); c2 has one, "
                f"and --part positional=FILE.py:NAME replaces {config.name}'s sinusoidal encoding")
    return _bpe_only(config)


@dataclass(frozen=True)
class Part:
    """One replaceable part: what it replaces, its interface, how it is tried, and which configurations use it.

    ``check(config)`` is the
    ``python -m cipherlab check`` part that checks its maths; ``unused_by(config)`` why ``config`` has no
    such part (None when it has one); ``trial(cls, config)`` builds the class with ``config``'s sizes as
    the model will and runs it once on small random inputs, raising Unfit with what went wrong.
    """

    name: str
    replaces: str
    interface: str
    check: Callable[[Config], str]
    unused_by: Callable[[Config], str | None]
    trial: Callable[[type, Config], None]


PARTS: dict[str, Part] = {p.name: p for p in (
    Part("attention", "every self-attention layer (MultiHeadAttention in C1, C2, C4; GroupedQueryAttention in C3)",
         "cls(d_model, n_heads, dropout=p) (plus n_kv_heads=k in C3 and rope=R in C2, R a rotary module "
         "with R(q, k, offset=0) -> (q, k)) with forward(query (B, Lq, D), key (B, Lk, D), value (B, Lk, D), "
         "mask=None) -> (B, Lq, D), mask bool True = blocked, broadcast to (B, H, Lq, Lk)",
         lambda c: c.attn_type, _bpe_only, _try_attention),
    Part("norm", "every LayerNorm (C1-C3) or RMSNorm (C4), in the layers and at the end of each stack",
         "cls(d_model, eps=1e-5) with forward(x (..., D)) -> (..., D)",
         lambda c: c.norm, _bpe_only, _try_norm),
    Part("positional", "SinusoidalPositionalEncoding (C1, C3, C4), added to both sides' embeddings",
         f"cls(d_model, max_len={MAX_LEN}, dropout=p) with forward(x (B, L, D), offset=0) -> (B, L, D), "
         "x + the rows offset .. offset+L-1 of its table",
         lambda c: "sinusoidal", _absolute_only, _try_positional),
    Part("rope", "RotaryPositionalEmbedding (C2), inside every attention layer",
         f"cls(head_dim, max_len={MAX_LEN}) with forward(q (B, H, L, d), k (B, Hkv, L, d), offset=0) -> (q, k), "
         "each rotated at positions offset .. offset+L-1",
         lambda c: "rope", _rotary_only, _try_rope),
)}


# --------------------------------------------------------------------------- records of the parts used

_LOADED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # class -> (file, name, sha256) as loaded
_SOURCES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # class -> class_sha256 as loaded


def _sha256_of(path: str | None) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else None
    except OSError:
        return None


def _source_of(cls) -> tuple[str | None, str, str | None]:
    """(file, class name, the file's sha256) of a class: as :func:`load_parts` loaded it, else where Python says."""
    if cls in _LOADED:
        return _LOADED[cls]
    try:
        file = inspect.getfile(cls)
    except (TypeError, OSError):  # defined in a notebook or at the prompt: no file
        file = None
    return file, getattr(cls, "__name__", type(cls).__name__), _sha256_of(file)


def _label(part: str, cls) -> str:
    file, name, _ = _source_of(cls)
    return f"{part}={file}:{name}" if file else f"{part}={name}"


def part_records(parts: Mapping[str, type]) -> list[dict]:
    """``[{"part", "file", "class", "sha256", "class_sha256"}, ...]``: what the checkpoint and the results record
    say of each part (``sha256``: the file's; ``class_sha256``: the class's own source, :func:`class_sha256`)."""
    records = []
    for part in sorted(parts, key=lambda name: list(PARTS).index(name) if name in PARTS else len(PARTS)):
        file, name, sha256 = _source_of(parts[part])
        records.append({"part": part, "file": file, "class": name, "sha256": sha256,
                        "class_sha256": _SOURCES.get(parts[part]) or class_sha256(parts[part])})
    return records


def part_places(components: Mapping[str, str] | None) -> dict[str, str]:
    """The parts a configuration with these ablated components (:meth:`Config.components`, a record's
    ``components``) has a place for, each with the component it stands for there (the part's ``check``):
    ``{"attention": "mha", "norm": "layernorm", "positional": "sinusoidal"}`` for C1, ``{}`` for C5, which
    takes none. Components not known (None, or values no Config takes): every part, standing for "?"."""
    if components is None:
        return dict.fromkeys(PARTS, "?")
    try:
        config = Config(**{field: components[field] for field in COMPONENTS if field in components})
    except ConfigError:  # a value this version does not know
        return dict.fromkeys(PARTS, "?")
    return {name: spec.check(config) for name, spec in PARTS.items() if spec.unused_by(config) is None}


def _version(record: dict) -> tuple:
    return record.get("class"), record.get("class_sha256") or record.get("sha256")


def mixed_parts(runs: Mapping[str, tuple[Mapping[str, str] | None, Iterable[dict]]]) -> list[str]:
    """What a comparison between ``runs`` (label -> (components, part records as :func:`part_records` writes
    them)) would compare besides the configurations, one phrase each; [] when nothing.

    A part is compared only among the runs that have a place for it, and there only among those where it stands
    for the same component (:func:`part_places`): C2 has no sinusoidal encoding that could be cipherlab's, C1 no
    rotary one, and C4's RMSNorm differs from C1's LayerNorm (C3's GQA from C1's MHA) by design. Within such a
    group the part is mixed when it is the student's in some runs and cipherlab's in others, or two classes or
    versions of one; across groups, when one class of one file has a different source in two runs (edited
    between them)."""
    places = {label: part_places(components) for label, (components, _) in runs.items()}
    own = {label: {p["part"]: p for p in records if isinstance(p, dict) and "part" in p}
           for label, (_, records) in runs.items()}
    mixed = []
    for part in dict.fromkeys(part for parts in own.values() for part in parts):
        held = [label for label in runs if part in places[label]]
        kinds = list(dict.fromkeys(places[label][part] for label in held))
        for kind in kinds:
            name = f"{part} ({kind})" if len(kinds) > 1 else part
            group = [label for label in held if places[label][part] == kind]
            yours = [label for label in group if part in own[label]]
            theirs = [label for label in group if part not in own[label]]
            if yours and theirs:
                mixed.append(f"{name} is yours in {', '.join(yours)} and cipherlab's in {', '.join(theirs)}")
            versions = {_version(own[label][part]) for label in yours}
            if len(versions) > 1:
                mixed.append(f"{name} is {len(versions)} different classes or versions of one in {', '.join(yours)} "
                             "(see the sha256s)")
        sources: dict = {}  # (file, class) -> the runs that use it, across the kinds
        for label in held:
            if part in own[label]:
                sources.setdefault((own[label][part].get("file"), own[label][part].get("class")), []).append(label)
        for (file, cls), labels in sources.items():
            versions = {_version(own[label][part]) for label in labels}
            if len(versions) > 1 and len({places[label][part] for label in labels}) > 1:
                mixed.append(f"{part} is {cls} of {file or '?'} in {len(versions)} versions in {', '.join(labels)}, "
                             "edited between the runs (see the sha256s)")
    return mixed


def parts_lines(records: list[dict]) -> list[str]:
    """table.md's lines on the student's parts (``parts`` of the records, :func:`part_records`): each run's class,
    file and source hash, and whether the table mixes them with cipherlab's own or two versions of one class where
    the runs hold the same component (:func:`mixed_parts`); [] when every run used cipherlab's own. The notes of
    :func:`cipherlab.runner.evaluate.write_table`."""
    own = {r["config"]: [p for p in r.get("parts") or [] if isinstance(p, dict)] for r in records}
    if not any(own.values()):
        return []
    lines = ["Parts (--part): " + "; ".join(
        f"{config.upper()}: " + (", ".join(f"{p.get('part')} = {p.get('class')} of {p.get('file') or '?'} "
                                           f"(class sha256 {(p.get('class_sha256') or p.get('sha256') or '?')[:12]})"
                                           for p in parts) if parts else "cipherlab's own")
        for config, parts in own.items()) + "."]
    mixed = mixed_parts({r["config"].upper(): (r.get("components"), own[r["config"]]) for r in records})
    if mixed:
        lines.append("Mixed: " + "; ".join(mixed) + "; their differences include the parts'.")
    return [*lines, ""]


# --------------------------------------------------------------------------- checks before training


def unused_parts(parts: Iterable[str], config: Config) -> dict[str, str]:
    """Each of ``parts`` that ``config`` has no place for, with why."""
    reasons = {part: PARTS[part].unused_by(config) for part in parts if part in PARTS}
    return {part: reason for part, reason in reasons.items() if reason}


def check_names(parts: Mapping[str, type], config: Config) -> None:
    """PartError for a part name cipherlab does not know, or a part ``config`` does not use."""
    for part, cls in parts.items():
        if part not in PARTS:
            raise PartError(f"unknown part {part!r}; choose one of {', '.join(PARTS)}")
        reason = PARTS[part].unused_by(config)
        if reason:
            raise PartError(f"{_label(part, cls)}: {reason}")


def validate_parts(parts: Mapping[str, type], config: Config) -> None:
    """Build each class with ``config``'s sizes and run it once on small random inputs, as the model will.

    A PartError (one line) names the part, file and class, what went wrong and the interface. The
    trials use their own random numbers: the global generators, hence the model's initial weights,
    are as they were.
    """
    check_names(parts, config)
    for part, cls in parts.items():
        spec, label = PARTS[part], _label(part, cls)
        if not inspect.isclass(cls):
            raise PartError(f"{label}: a {type(cls).__name__}, not a class; {part} must be a class, {spec.interface}")
        if not issubclass(cls, nn.Module):
            raise PartError(f"{label}: not a subclass of torch.nn.Module, so its weights would neither train nor "
                            f"be saved; write class {cls.__name__}(nn.Module)")
        if cls in _LOADED:  # an exception in its file is the student's: say which check tries it
            file, name, _ = _LOADED[cls]
            register_student_code(file, part, name, f"python -m cipherlab check {spec.check(config)} {file}:{name}")
        _doing[0] = "building it"
        with torch.random.fork_rng(devices=[]):
            try:
                _refuse_internals(cls)
                with time_limit(TRIAL_TIME_LIMIT_S):
                    spec.trial(cls, config)
            except Unfit as e:
                raise PartError(f"{label}: {e}" + ("" if isinstance(e, (_Renamed, _Beyond)) else
                                                   f"; the interface is {spec.interface}")) from None
            except TooLong:
                raise PartError(f"{label}: {_doing[0]} did not end within {TRIAL_TIME_LIMIT_S:g} s on small inputs "
                                "(it takes well under a second when written as the interface says) and was stopped: a "
                                f"loop that never ends? `python -m cipherlab check {spec.check(config)} "
                                f"{_source_of(cls)[0] or 'FILE.py'}:{cls.__name__}` tries it step by step") from None


# --------------------------------------------------------------------------- the --part option


def parse_part(value: str) -> tuple[str, str]:
    """``PART=FILE.py:NAME`` -> (PART, FILE.py:NAME); a malformed value or unknown part is a PartError."""
    part, sep, target = value.partition("=")
    part = part.strip()
    if not sep or not part or ":" not in target:
        raise PartError(f"--part {value}: expected PART=FILE.py:NAME, e.g. {EXAMPLE} (parts: {', '.join(PARTS)})")
    if part not in PARTS:
        raise PartError(f"--part {value}: unknown part {part!r}; choose one of {', '.join(PARTS)}")
    return part, target.strip()


def import_parts(values: Iterable[str] | None, *, load: Callable[[str], object],
                 config: Config | None = None) -> dict[str, type]:
    """The classes of ``--part PART=FILE.py:NAME`` values, imported by ``load``; not yet tried.

    ``load(FILE.py:NAME)`` is :func:`cipherlab.student.check.load_target` (its errors: one-line ValueError or
    OSError). Each way a value can fail is one line naming it: malformed, an unknown or repeated part, a
    missing file or class, an import error, an import that calls ``sys.exit`` or runs past
    :data:`IMPORT_TIME_LIMIT_S`; with ``config``, a part it has no place for (before its file is imported).
    """
    parts = {}
    for value in values or ():
        part, target = parse_part(value)
        label = f"{part}={target}"
        if part in parts:
            raise PartError(f"--part {value}: a second {part}; give each part once")
        reason = PARTS[part].unused_by(config) if config is not None else None
        if reason:
            raise PartError(f"{label}: {reason}")
        try:
            cls = _load_in_time(load, target)
        except (ValueError, OSError) as e:
            raise PartError(f"{label}: {describe(e)}") from None
        file, name = target.rpartition(":")[::2]
        if inspect.isclass(cls):
            _LOADED[cls], _SOURCES[cls] = (file, name, _sha256_of(file)), class_sha256(cls)
        register_student_code(file, part, name, f"python -m cipherlab check {_CHECK_NAMES[part]} {file}:{name}")
        parts[part] = cls
    return parts


def load_parts(values: Iterable[str] | None, config: Config, *, load: Callable[[str], object]) -> dict[str, type]:
    """:func:`import_parts`, then each class tried with ``config``'s sizes (:func:`validate_parts`): what
    ``train`` does with its ``--part`` values before any data is read."""
    parts = import_parts(values, load=load, config=config)
    validate_parts(parts, config)
    return parts


_CHECK_NAMES = {"attention": "mha", "norm": "layernorm", "positional": "sinusoidal", "rope": "rope"}
"""The ``check`` part of each ``--part`` before a configuration says which (gqa in C3, rmsnorm in C4)."""

IMPORT_TIME_LIMIT_S = 60.0
"""Seconds a ``--part`` file may take to import (its top-level code: a loop there would hang the command)."""


def _load_in_time(load: Callable[[str], object], target: str):
    """``load(target)``; a ValueError naming the file when importing it calls ``sys.exit``, takes longer than
    :data:`IMPORT_TIME_LIMIT_S` seconds, or changes PyTorch's global settings (``torch.set_default_dtype``,
    ``torch.set_grad_enabled``: put back, and named). The time limit is ``SIGALRM``'s, on the main thread of a
    POSIX system where no other alarm is running (a test runner's, say); elsewhere the import runs without one
    (:func:`cipherlab.student.trials.time_limit`)."""
    file = target.rpartition(":")[0]
    fix = 'importing a part\'s file should only define its classes: put what it runs under `if __name__ == "__main__":`'
    before = torch_state()
    try:
        with time_limit(IMPORT_TIME_LIMIT_S), contextlib.redirect_stdout(sys.stderr):  # a print: not output
            loaded = load(target)
    except SystemExit as e:
        state_change(before)
        raise ValueError(f"importing {file} called sys.exit({'' if e.code is None else repr(e.code)}), "
                         f"which would end cipherlab; {fix}") from None
    except TooLong:
        state_change(before)
        raise ValueError(f"importing {file} took more than {IMPORT_TIME_LIMIT_S:g} s and was stopped (a loop "
                         f"or a long computation at its top level?); {fix}") from None
    except BaseException:
        state_change(before)
        raise
    change = state_change(before)
    if change:
        raise ValueError(f"importing {file} {change}")
    return loaded


# --------------------------------------------------------------------------- a model trained with parts

def part_option(record: dict) -> str:
    """The ``--part`` that puts back the class a builder recorded (one of :func:`part_records`)."""
    return f"--part {record['part']}={record['file'] or 'FILE.py'}:{record['class']}"


def trained_with_own(record: dict) -> str:
    """Why a model trained with the class of ``record`` in place of cipherlab's needs it again, and how."""
    return f"it was trained with its own {record['part']}, {record['class']} of {record['file']}; pass {part_option(record)}"

def _one_mismatch(part: str, trained: dict | None, given: dict | None) -> str | None:
    if trained is None:
        return f"it was trained with cipherlab's own {part}; leave out {part_option(given)}"
    if given is None:
        return trained_with_own(trained)
    if given["class"] != trained["class"]:
        return f"its {part} was {trained['class']} of {trained['file']}, not {given['class']}; pass {part_option(trained)}"
    return _source_mismatch(part, trained, given)


def mismatch(trained: list[dict], given: list[dict]) -> str | None:
    """What differs between the parts a model was trained with and those given now (records of
    :func:`part_records`), as one line that says which ``--part`` to pass; None when they agree."""
    trained_by, given_by = {r["part"]: r for r in trained}, {r["part"]: r for r in given}
    found = (_one_mismatch(part, trained_by.get(part), given_by.get(part)) for part in PARTS
             if part in trained_by or part in given_by)
    return "; ".join(m for m in found if m) or None


def require_trained_parts(trained: Iterable[dict], parts: Mapping[str, type], where: str) -> None:
    """A PartError, ``"{where}: ..."``, when ``parts`` are not the parts a model was trained with (its
    records, ``artifacts["parts"]``): it names any part missing, different or extra and the ``--part`` to pass."""
    problem = mismatch(list(trained), part_records(parts))
    if problem:
        raise PartError(f"{where}: {problem}")


# --------------------------------------------------------------------------- the one way parts enter a model

class PartsBuilder:
    """Where a student's classes enter cipherlab's model, and the only place: a
    :class:`~cipherlab.pipeline.codec.ModelBuilder` that builds cipherlab's model
    (:func:`cipherlab.pipeline.codec.build_model`) and puts ``parts`` (``{"attention": MyAttention, ...}``) in
    place of its modules (:func:`cipherlab.student.adapters.put_parts`). Each class is tried once per
    configuration (:func:`validate_parts`, in :meth:`prepare`, which training and loading call before reading
    any data). Pass it to :func:`cipherlab.runner.training.train_config`,
    :func:`cipherlab.runner.trained.load_trained` or :func:`cipherlab.runner.evaluate.evaluate_checkpoint`
    as ``builder=``. With no parts it builds cipherlab's own model and still names the ``--part`` that a model
    trained with parts needs (:meth:`refuse`)."""

    def __init__(self, parts: Mapping[str, type] | None = None):
        self.parts = dict(parts or {})
        self.records = part_records(self.parts)  # what the checkpoints record (artifacts["parts"])
        self._tried: set[str] = set()  # the configurations (their repr) the classes were tried with

    def prepare(self, config: Config) -> None:
        if repr(config) not in self._tried:
            validate_parts(self.parts, config)
            self._tried.add(repr(config))

    def __call__(self, config: Config, codec, *, fused_attention: bool = False) -> nn.Module:
        self.prepare(config)  # validated once per configuration: a no-op after the run's own prepare()
        model = build_model(config, codec, fused_attention=fused_attention)
        return put_parts(model, self.parts) if self.parts else model

    def refuse(self, trained: list[dict]) -> str | None:
        return mismatch(list(trained), self.records)


# --------------------------------------------------------------------------- names nn.Module already has

# What a subclass may (or is meant to) define although nn.Module has it too.
OVERRIDABLE = {"forward", "extra_repr", "_load_from_state_dict", "_save_to_state_dict", "_version", "dump_patches",
               "call_super_init", "training", "T_destination"}
RISKY_DUNDERS = {"__call__", "__getattr__", "__setattr__", "__delattr__", "__dir__"}


def _internal(name: str) -> bool:
    if name.startswith("__") and name.endswith("__"):
        return name in RISKY_DUNDERS
    return name in _MODULE_NAMES and name not in OVERRIDABLE


_MODULE_NAMES = set(dir(nn.Module))


def overridden_internals(cls) -> list[str]:
    """The names that ``cls`` (or a base class of its own, not torch's or cipherlab's) defines and that
    nn.Module already has: a method ``_apply`` or ``train`` replaces the one PyTorch calls in .to(),
    .eval(), training and checkpoints. [] for anything that is not an nn.Module class."""
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        return []
    found = []
    for klass in cls.__mro__:
        if klass is object or klass.__module__.split(".")[0] in ("torch", "cipherlab"):
            continue
        found += [name for name in vars(klass) if _internal(name)]
    return sorted(set(found))


def shadowed_internals(module: nn.Module) -> list[str]:
    """Names of sub-modules, parameters, buffers or plain attributes set on ``module`` that nn.Module
    already has (``self.apply = nn.Linear(...)``: ``self.apply`` then still finds nn.Module.apply)."""
    if not isinstance(module, nn.Module):
        return []
    base = set(vars(nn.Module()))
    held = [*module._modules, *module._parameters, *module._buffers, *(n for n in vars(module) if n not in base)]
    return sorted({name for name in held if _internal(name)})


def internals_refusal(names: Iterable[str]) -> str:
    """"defines NAME, which nn.Module already has: ...; rename it": what follows a class's name when it
    defines or sets names of :func:`overridden_internals` or :func:`shadowed_internals`."""
    names = sorted(set(names))
    listed = ", ".join(names)
    return (f"defines {listed}, which nn.Module already has: PyTorch calls its own {listed} in .to(), .double(), "
            f".eval(), training or loading a checkpoint, and would get yours; rename "
            f"{'it' if len(names) == 1 else 'them'} (e.g. {names[0].lstrip('_')}_step)")


class _Renamed(Unfit):
    """A trial's module sets a name nn.Module already has (:func:`shadowed_internals`)."""


class _Beyond(Unfit):
    """A trial found more than a misfit of the interface (a backward pass that fails, PyTorch's settings changed):
    the message names the operation, the parameter or the setting, and the interface is not repeated."""


def _refuse_internals(cls, module=None) -> None:
    """_Renamed when class ``cls`` defines, or the ``module`` built from it (or a module inside) sets, a name
    nn.Module already has."""
    names = overridden_internals(cls) + [name for inner in (module.modules() if module is not None else ())
                                         for name in shadowed_internals(inner)]
    if names:
        raise _Renamed(f"{getattr(cls, '__name__', cls)} {internals_refusal(names)}")


# --------------------------------------------------------------------------- a part's own source

EDITED_PARTS = "CIPHERLAB_EDITED_PARTS"  # set to 1: a checkpoint loads with its parts' classes edited since


def class_sha256(cls) -> str | None:
    """The sha256 of the class's own source (``inspect.getsource``), with that of each base class of the
    student's own (not torch's or cipherlab's) it inherits from: an edit elsewhere in its file leaves it
    unchanged. None where Python has no source (a class made at the prompt)."""
    if not inspect.isclass(cls):
        return None
    digest = hashlib.sha256()
    for klass in cls.__mro__:
        if klass is object or klass.__module__.split(".")[0] in ("torch", "cipherlab", "builtins"):
            continue
        try:
            digest.update(inspect.getsource(klass).encode("utf-8"))
        except (TypeError, OSError):
            return None
    return digest.hexdigest()


def _source_mismatch(part: str, trained: dict, given: dict) -> str | None:
    """Why the class given is not the source ``part`` was trained with: the class's own source when both records
    have its hash (:func:`class_sha256`), else the file's (records written before); None when they agree or
    CIPHERLAB_EDITED_PARTS=1 says to load it anyway."""
    if os.environ.get(EDITED_PARTS, "") not in ("", "0"):
        return None
    anyway = (f"restore the class as it was trained, or to load it anyway with the class as it is now (the trained "
              f"weights, your edited code) set {EDITED_PARTS}=1, e.g. `{EDITED_PARTS}=1 python -m cipherlab ...`")
    then, now = trained.get("class_sha256"), given.get("class_sha256")
    if then and now:
        if then == now:
            return None
        return (f"{trained['class']} in {given['file']} is not the source its {part} was trained with (the class's "
                f"sha256 {now[:12]} now, {then[:12]} then: the class itself was edited); {anyway}")
    then, now = trained.get("sha256"), given.get("sha256")
    if then and now and then != now:
        return (f"{given['file']} differs from the file its {part} {trained['class']} was trained in (the file's "
                f"sha256 {now[:12]} now, {then[:12]} then; this checkpoint records no hash of the class alone); "
                f"{anyway}")
    return None
