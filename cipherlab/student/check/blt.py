"""The checks of the Byte Latent Transformer's parts: the entropy patcher, patch pooling, the patch-causal mask.

``patcher``: where source patches begin, against ByteEntropyModel.patch_boundaries on a real entropy
curve and a grid of them, with the usual wrong patchers named (>= for >, the forced starts at multiples
of max_patch, ...). ``pooling``: one vector per patch from its own bytes only and their order, zeros for
an empty patch, and cipherlab's PatchPooling with the same weights, forward and backward, every norm inside
given a random gain and shift first (so a patch zeroed before the norm, which then adds its shift, shows). ``patch_mask``: which
global slots each target byte may read, against ``patch_causal_mask`` and inside a tiny BLT, where a
leak shows as logits that change with the byte they predict.
"""

from __future__ import annotations

import inspect
import itertools
import math
import operator
from collections.abc import Callable
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from cipherlab.models.blt import BLTArgs, BLTModel, ByteEntropyModel, PatchPooling, patch_causal_mask, patch_membership
from cipherlab.models.positional import SinusoidalPositionalEncoding
from cipherlab.student.check.cached_decoding import BLT_SIZES, _decoding_batch
from cipherlab.student.check.compare import D_MODEL, FLOAT32_TOL, N_HEADS, Guarded, _changed_inputs, _close, _gap
from cipherlab.student.check.gradients import gradients
from cipherlab.student.check.report import Report, _interface, _interface_build, _interface_value, _label, _run
from cipherlab.student.check.tokenizer import BPE_CORPUS, BPE_UNSEEN
from cipherlab.student.trials import Unfit, randn

# --------------------------------------------------------------------------- BLT: the entropy patcher

PATCHER_INTERFACE = ("fn(entropies, threshold, max_patch) -> the patch start indices: entropies (L,) floats, byte i's "
                     "entropy in bits given the bytes before it; a patch starts at 0, at each i with entropies[i] > "
                     "threshold, and after max_patch bytes without a start; a class is built with no arguments")
MAX_PATCHES = (3, 5)  # the max_patch values the patcher is checked at


def patcher(obj) -> Report:
    """Check an entropy patcher: where the BLT's source patches begin.

    ``obj``: a function (or an object, or a class built with no arguments, that is called)
    ``fn(entropies, threshold, max_patch)`` -> the start index of every patch, 0 first, rising
    (a list of ints; none for an empty sequence). ``entropies`` (L,) float64, a numpy array as
    ``ByteEntropyModel.entropy_curve`` returns it: the entropy in bits of byte i's distribution
    given the bytes before it. A patch starts at i when ``entropies[i] > threshold`` or when the
    running patch already holds ``max_patch`` bytes, as ``ByteEntropyModel.patch_boundaries``.
    """
    fn = _interface_build(lambda: obj(), f"{obj.__name__}()", PATCHER_INTERFACE) if inspect.isclass(obj) else obj
    curve = _entropy_curves()[0]
    _interface_value(lambda: fn(curve, float(np.median(curve)), 4), f"{_label(obj)}(entropies, threshold, 4)",
                     PATCHER_INTERFACE, _int_list, "a list of int start indices")
    return _run("patcher", _label(obj), [
        ("starts", partial(_patcher_starts, fn)),
        ("reference", partial(_patcher_reference, fn)),
        ("max patch", partial(_patcher_max_patch, fn)),
        ("threshold", partial(_patcher_threshold, fn)),
        ("prefix", partial(_patcher_prefix, fn)),
    ])


def _int_list(out) -> bool:
    return all(float(s) == int(s) for s in out)


def _starts(fn, curve, threshold: float, max_patch: int) -> list[int]:
    return [int(s) for s in fn(np.asarray(curve, dtype=np.float64), float(threshold), max_patch)]


class _GivenCurve(ByteEntropyModel):
    """A ByteEntropyModel whose entropy curve is given: cipherlab's own patch_boundaries on any curve."""

    def __init__(self, curve):
        super().__init__()
        self.curve = np.asarray(curve, dtype=np.float64)

    def entropy_curve(self, seq=None) -> np.ndarray:
        return self.curve


def _reference_starts(curve, threshold: float, max_patch: int) -> list[int]:
    return _GivenCurve(curve).patch_boundaries(None, threshold, max_patch)


def _entropy_curves() -> list[np.ndarray]:
    """Two curves: a real one (an order-2 byte model of the BPE corpus on an unseen line) and random
    entropies on a 0.25-bit grid, so that thresholds equal to an entropy occur."""
    model = ByteEntropyModel(min_count=1).fit([line.encode() for line in BPE_CORPUS])
    real = model.entropy_curve(BPE_UNSEEN.encode())
    grid = np.random.default_rng(0).integers(0, 13, 40) / 4
    return [real, grid]


def _patcher_cases():
    """(curve, threshold, max_patch): each curve at thresholds on, between and around its values."""
    for curve in _entropy_curves():
        for threshold in (*np.quantile(curve, [0.3, 0.6]), float(curve[5]), float(np.median(curve))):
            for max_patch in MAX_PATCHES:
                yield curve, float(threshold), max_patch


def _patcher_starts(fn) -> tuple[bool, str]:
    curve = _entropy_curves()[0]
    if _starts(fn, curve[:0], 1.0, 4) != []:
        return False, "an empty sequence gives patches; it has none (an empty list)"
    for curve, threshold, max_patch in _patcher_cases():
        starts = _starts(fn, curve, threshold, max_patch)
        if not starts or starts[0] != 0 or any(a >= b for a, b in zip(starts, starts[1:])) or starts[-1] >= len(curve):
            return False, (f"starts {starts[:12]} for {len(curve)} bytes: the first patch starts at 0, and the "
                           f"starts rise strictly and stay below the length")
    return True, "starts at 0, rising strictly, below the length; none for an empty sequence"


def _loop_starts(curve, threshold: float, max_patch: float, starts_at=operator.gt) -> list[int]:
    """Byte by byte: a patch starts at 0, where ``starts_at(entropy, threshold)``, or after ``max_patch`` bytes."""
    starts, run = [], 0
    for i, h in enumerate(curve):
        if i == 0 or starts_at(h, threshold) or run >= max_patch:
            starts.append(i)
            run = 0
        run += 1
    return starts


def _patcher_suspects(curve, threshold: float, max_patch: int) -> dict[str, list[int]]:
    """The starts of the usual wrong patchers, by their bug."""
    fixed = sorted({0, *np.flatnonzero(curve > threshold).tolist(), *range(0, len(curve), max_patch)})
    return {"a patch starts where the entropy EQUALS the threshold too (>=); it starts only above it (>)":
            _loop_starts(curve, threshold, max_patch, operator.ge),
            "patches start where the entropy is BELOW the threshold; a boundary goes where the next byte is hard "
            "to predict, entropy > threshold": _loop_starts(curve, threshold, max_patch, operator.lt),
            "max_patch is not applied: a patch must end after max_patch bytes":
            _loop_starts(curve, threshold, math.inf),
            "the patches hold max_patch + 1 bytes: start a new patch once the running one holds max_patch":
            _loop_starts(curve, threshold, max_patch + 1),
            "the forced starts sit at multiples of max_patch; count max_patch bytes from each patch's own start":
            fixed}


def _patcher_reference(fn) -> tuple[bool, str]:
    cases = list(_patcher_cases())
    for curve, threshold, max_patch in cases:
        mine, theirs = _starts(fn, curve, threshold, max_patch), _reference_starts(curve, threshold, max_patch)
        if mine != theirs:
            first = next((k for k, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
            bugs = _patcher_suspects(curve, threshold, max_patch)
            bug = next((f"; {name}" for name, starts in bugs.items() if starts == mine), "")
            return False, (f"at threshold {threshold:.3g}, max_patch {max_patch}: starts {mine[first:first + 6]} "
                           f"(from patch {first}) where ByteEntropyModel.patch_boundaries gives "
                           f"{theirs[first:first + 6]}{bug}")
    return True, f"agrees with ByteEntropyModel.patch_boundaries on {len(cases)} curves, thresholds and max_patch"


def _patcher_max_patch(fn) -> tuple[bool, str]:
    for curve in _entropy_curves():
        for max_patch in MAX_PATCHES:
            lengths = np.diff([*_starts(fn, curve, curve.max() + 1, max_patch), len(curve)]).tolist()
            if lengths[:-1] != [max_patch] * (len(lengths) - 1) or lengths[-1] > max_patch:
                return False, (f"with the threshold above every entropy and max_patch {max_patch}, the patches hold "
                               f"{lengths[:8]} bytes: each must end after max_patch bytes (the last may be shorter)")
    return True, f"above every entropy, patches of exactly max_patch bytes ({', '.join(map(str, MAX_PATCHES))})"


def _patcher_threshold(fn) -> tuple[bool, str]:
    for curve in _entropy_curves():
        levels = [curve.min() - 1, *np.unique(curve), curve.max() + 1]
        counts = [len(_starts(fn, curve, t, 4)) for t in levels]
        if counts[0] != len(curve):
            return False, (f"with the threshold below every entropy, {counts[0]} patches for {len(curve)} bytes: "
                           "every byte's entropy is above it, so every byte starts a patch")
        rise = next((k for k in range(1, len(counts)) if counts[k] > counts[k - 1]), None)
        if rise is not None:
            return False, (f"raising the threshold from {levels[rise - 1]:.3g} to {levels[rise]:.3g} bits makes "
                           f"{counts[rise - 1]} patches {counts[rise]}: a higher threshold may only merge patches")
    return True, "a higher threshold never makes more patches; below every entropy every byte starts one"


def _patcher_prefix(fn) -> tuple[bool, str]:
    for curve, threshold, max_patch in list(_patcher_cases())[:: len(MAX_PATCHES)]:
        whole = _starts(fn, curve, threshold, max_patch)
        for n in range(1, len(curve)):
            if _starts(fn, curve[:n], threshold, max_patch) != [s for s in whole if s < n]:
                return False, (f"the patches of the first {n} bytes are not those of the whole sequence cut at {n}: "
                               "a boundary at i depends on entropies after i; it may read entropies[0..i] only, so "
                               "that the patches of a prefix never change as bytes are appended")
    return True, "the patches of every prefix are those of the whole sequence: no boundary looks ahead"


# --------------------------------------------------------------------------- BLT: patch pooling

POOLING_INTERFACE = ("cls(d_model, n_heads) with forward(x (B, L, D), member (B, K, L) bool) -> (pooled (B, K, D), "
                     "empty (B, K) bool): patch k pools the bytes i with member[b, k, i], an empty patch gives zeros")


def pooling(cls) -> Report:
    """Check patch pooling: one vector per patch from the vectors of its bytes (the BLT's PatchPooling).

    ``cls(d_model, n_heads)``, put in eval mode, with forward(x (B, L, D) byte vectors,
    member (B, K, L) bool, True where byte i is in patch k) -> (pooled (B, K, D), empty (B, K) bool,
    True for a patch with no bytes, whose vector is zeros). Each patch reads its own bytes only, and
    its vector depends on their order (the byte vectors carry their positions). As cipherlab's
    PatchPooling: a learned query (D,) attends over the patch's bytes, then a LayerNorm; with its
    parameter names (query, attn.q_proj ... attn.o_proj, norm.gamma, norm.beta) the weights are copied
    into the reference for the comparison.
    """
    build = f"{_label(cls)}({D_MODEL}, {N_HEADS})"
    module = _interface_build(lambda: cls(D_MODEL, N_HEADS), build, POOLING_INTERFACE)
    if isinstance(module, nn.Module):
        module.eval()
        _randomise_norms(module)
    x, member = _pooling_input()
    _interface_value(lambda: module(x, member), f"{build}(x, member)", POOLING_INTERFACE,
                     lambda out: isinstance(out, tuple) and all(isinstance(t, torch.Tensor) for t in out)
                     and len(out) == 2, "a pair of tensors (pooled, empty)")
    raw, module = module, Guarded(module, "forward")  # the checks call it on copies; 'inputs' on the tensors
    return _run("pooling", _label(cls), [
        ("shape", partial(_pooling_shape, module)),
        ("inputs", lambda: _changed_inputs(lambda x, member: raw(x, member), dict(zip(("x", "member"),
                                                                                        _pooling_input())))),
        ("empty patches", partial(_pooling_empty, module)),
        ("own bytes", partial(_pooling_own_bytes, module)),
        ("order", partial(_pooling_order, module)),
        ("reference", partial(_pooling_reference, module)),
        ("gradients", partial(_pooling_gradients, raw)),
    ])


def _randomise_norms(module: nn.Module) -> None:
    """Random gain (about 1) and shift (about 0) in every norm inside ``module`` (a submodule whose class or
    attribute name holds "norm"), as a trained model has them: a norm's output at construction (gain 1, shift 0) hides where a vector
    is zeroed, before the norm (which then adds the shift) or after it."""
    gen = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for path, sub in sorted(module.named_modules(), key=lambda item: item[0]):
            if "norm" not in type(sub).__name__.lower() and "norm" not in path.rsplit(".", 1)[-1].lower():
                continue
            for name, p in sorted(sub.named_parameters(recurse=False)):
                gain = name in ("gamma", "weight", "scale")
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5 + (1.0 if gain else 0.0))


def _pooling_input(content: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """x (2, 10, D): content plus sinusoidal byte positions, as the BLT pools them; member (2, 4, 10):
    row 0 patches [0, 3) [3, 4) [4, 8) [8, 10); row 1 patches [0, 5) [5, 7), two empty patches and
    three padding bytes."""
    content = randn(2, 10, D_MODEL, seed=11) if content is None else content
    positions = SinusoidalPositionalEncoding(D_MODEL, max_len=16, dropout=0.0)
    return positions(content), patch_membership([[0, 3, 4, 8], [0, 5]], [10, 7], 10)


def _pooling_out(module, content=None) -> torch.Tensor:
    return module(*_pooling_input(content))[0]


def _pooling_shape(module) -> tuple[bool, str]:
    x, member = _pooling_input()
    pooled, empty = module(x, member)
    expected = torch.tensor([[False] * 4, [False, False, True, True]])
    if tuple(pooled.shape) != (2, 4, D_MODEL) or pooled.dtype != torch.float32:
        return False, f"pooled is {tuple(pooled.shape)} {str(pooled.dtype)[6:]}; expected (2, 4, {D_MODEL}) float32"
    if not isinstance(empty, torch.Tensor) or empty.dtype != torch.bool or not torch.equal(empty, expected):
        return False, f"empty is {empty!r}; expected (B, K) bool, True exactly for the patches with no byte"
    return True, f"pooled (2, 4, {D_MODEL}) float32 and empty (2, 4) bool for 2 rows of 4 patches (2 empty)"


def _pooling_empty(module) -> tuple[bool, str]:
    pooled = _pooling_out(module)
    if not torch.isfinite(pooled).all():
        return False, ("an empty patch gives NaN or inf: its attention sees no key (a softmax over nothing); output "
                       "zeros for it, as ScaledDotProductAttention does for a row that sees no key")
    if pooled[1, 2:].abs().max() > 1e-6:
        return False, f"an empty patch gives values up to {pooled[1, 2:].abs().max():.2g}, not zeros"
    return True, "an empty patch gives a zero vector, no NaN"


def _pooling_own_bytes(module) -> tuple[bool, str]:
    content = randn(2, 10, D_MODEL, seed=11)
    base = _pooling_out(module, content)
    for (row, bytes_, patch), what in (((0, [3], 1), "the byte of patch 1"), ((1, [7, 8, 9], None), "padding bytes")):
        changed = content.clone()
        changed[row, bytes_] = randn(len(bytes_), D_MODEL, seed=12)
        moved = (_pooling_out(module, changed) - base).abs().amax(-1)  # (2, 4)
        if patch is not None:
            moved[row, patch] = 0
        if moved.max() > 1e-6:
            b, k = divmod(int(moved.argmax()), moved.size(1))
            return False, (f"changing only {what} (row {row}) changes pooled patch {k} of row {b} by "
                           f"{moved.max():.2g}: "
                           "a patch reads bytes outside it; attend over member[b, k]'s bytes only (mask the others)")
    return True, "each patch reads its own bytes only: changing one patch's bytes, or padding, moves no other patch"


def _pooling_order(module) -> tuple[bool, str]:
    content = randn(2, 10, D_MODEL, seed=11)
    swapped = content[:, [2, 1, 0, *range(3, 10)]]  # bytes 0 and 2 of patch 0 swap places, positions stay
    gap = (_pooling_out(module, swapped)[0, 0] - _pooling_out(module, content)[0, 0]).abs().max().item()
    if gap > 1e-4:
        return True, f"swapping two bytes inside a patch changes its vector (by up to {gap:.2g}): it sees their order"
    x, member = _pooling_input(content)
    mean = member.float() @ x / member.sum(-1, keepdim=True).clamp(min=1)
    pooled = _pooling_out(module, content)[0]
    attn = getattr(module, "attn", None)
    v_proj, o_proj = getattr(attn, "v_proj", None), getattr(attn, "o_proj", None)
    means = [mean]
    if callable(v_proj) and callable(o_proj):
        try:  # uniform weights over its own value vectors: the mean through v_proj and o_proj (affine maps)
            means.append(o_proj(v_proj(mean)))
        except Exception:
            pass
    norms = [*means, *[F.layer_norm(m, (D_MODEL,), eps=1e-5) for m in means]]
    own = getattr(module, "norm", None)
    if callable(own):
        norms += [own(m) for m in means]  # the mean through the module's own (randomised) norm
    said = "swapping two bytes inside a patch (bytes 0 and 2 of patch 0, row 0) leaves its vector unchanged"
    if any(_close(pooled, m[0], 1e-4) for m in norms):  # the mean-pooling variant reproduces it: name the cause
        return False, (said + ": it is the mean of its bytes' vectors, blind to their order, as a mean of (content "
                       "+ position) vectors is (the 'bag of bits' bug); pool with attention, a learned query over the "
                       "patch's bytes")
    changed = content.clone()
    changed[0, :3] = randn(3, D_MODEL, seed=13)  # every byte of patch 0 replaced
    moved = (_pooling_out(module, changed)[0, 0] - pooled[0]).abs().max().item()
    if moved <= 1e-6:
        return False, (said + "; replacing all three of its bytes leaves it unchanged too: patch 0's vector does not "
                       "depend on its own bytes")
    return False, (said + f", though replacing its bytes moves it (by up to {moved:.2g}): its vector does not depend "
                   "on the order of its bytes; the reference's does (a learned query attends over the bytes, which "
                   "carry their positions)")


def _pooling_gradients(module) -> tuple[bool, str]:
    """The gradients of the byte vectors and of every parameter against cipherlab's PatchPooling with the same
    weights (when they can be copied; the backward runs either way)."""
    ref = PatchPooling(D_MODEL, N_HEADS, dropout=0.0).eval()
    try:
        ref.load_state_dict(module.state_dict())
    except Exception:
        ref = None
    x, member = _pooling_input()
    shared = {n: n for n, _ in ref.named_parameters()} if ref is not None else {}
    return gradients(module, lambda m, x: m(x, member)[0], ref, lambda r, x: r(x, member)[0], {"x": x}, shared)


def _pooling_reference(module) -> tuple[bool, str]:
    ref = PatchPooling(D_MODEL, N_HEADS, dropout=0.0).eval()
    try:
        ref.load_state_dict(module.state_dict())
    except Exception as e:
        names = sorted({n.rsplit(".", 1)[0] if n.startswith("attn.") else n for n in module.state_dict()})
        raise Unfit(f"cannot copy its weights ({', '.join(names) or 'none'}) into cipherlab's PatchPooling "
                    f"({type(e).__name__}); name them as it does: query (D,), attn.q_proj, attn.k_proj, attn.v_proj, "
                    "attn.o_proj (nn.Linear), norm.gamma, norm.beta") from None
    x, member = _pooling_input()
    gap = _gap(module(x, member)[0], ref(x, member)[0])
    if gap <= FLOAT32_TOL:
        return True, f"with its weights copied, agrees with cipherlab's PatchPooling (max difference {gap:.1e})"
    return False, f"with its weights copied, differs from cipherlab's PatchPooling by up to {gap:.2g}"


# --------------------------------------------------------------------------- BLT: the patch-causal mask

PATCH_MASK_INTERFACE = ("fn(Lt, K, patch) -> (1, 1, Lt, K) bool (or anything that broadcasts to (Lt, K)), True = "
                        "BLOCKED: decoder-input byte i may read global slot j iff slot j pools only bytes 0..i")


def patch_mask(fn) -> Report:
    """Check the BLT's patch-causal mask: which global slots each target byte may read.

    ``fn(Lt, K, patch)`` -> bool, (1, 1, Lt, K) as cipherlab's ``patch_causal_mask`` or anything
    that broadcasts to (Lt, K), True = BLOCKED. Slot 0 is the start patch; slot j >= 1 pools target
    patch j - 1, decoder-input positions (j - 1) * patch .. j * patch - 1. Byte i predicts byte
    i + 1, so it may read exactly the slots that pool nothing after i: j <= (i + 1) // patch.
    """
    _interface(lambda: fn(8, 3, 4), f"{_label(fn)}(8, 3, 4)", PATCH_MASK_INTERFACE)
    return _run("patch_mask", _label(fn), [
        ("shape", partial(_mask_shape, fn)),
        ("no leak", partial(_mask_no_leak, fn)),
        ("no over-blocking", partial(_mask_complete, fn)),
        ("reference", partial(_mask_reference, fn)),
        ("in a model", partial(_mask_in_model, fn)),
    ])


def _mask_grid():
    """(Lt, K, patch) for patch 1..4 and Lt up to 13, K = Lt // patch + 1 slots, as BLTModel makes them."""
    return [(lt, lt // p + 1, p) for p in range(1, 5) for lt in range(1, 14)]


def _mask(fn, lt: int, k: int, p: int) -> torch.Tensor:
    """(Lt, K) bool, True = blocked."""
    return torch.as_tensor(fn(lt, k, p)).expand(1, 1, lt, k)[0, 0]


def _mask_shape(fn) -> tuple[bool, str]:
    out = torch.as_tensor(fn(13, 4, 4))
    try:
        out.expand(1, 1, 13, 4)
    except RuntimeError:
        return False, f"fn(13, 4, 4) is {tuple(out.shape)}; expected (1, 1, 13, 4) (Lt rows, K slots)"
    if out.dtype != torch.bool:
        return False, f"fn(13, 4, 4) is {str(out.dtype)[6:]}; expected bool, True = blocked"
    return True, f"fn(13, 4, 4) is {tuple(out.shape)} bool"


def _first_wrong(fn, wrong: Callable[[bool, int, int, int], bool]):
    """The first (Lt, K, patch, i, j) over the grid where ``wrong(byte i may read slot j, i, j, patch)``, else None."""
    for lt, k, p in _mask_grid():
        allowed = ~_mask(fn, lt, k, p)
        for i, j in itertools.product(range(lt), range(k)):
            if wrong(bool(allowed[i, j]), i, j, p):
                return lt, k, p, i, j
    return None


def _mask_no_leak(fn) -> tuple[bool, str]:
    found = _first_wrong(fn, lambda allowed, i, j, p: allowed and j * p - 1 > i)
    if found is None:
        return True, "no byte i may read a slot that pools a position after i"
    lt, k, p, i, j = found
    own = " (the slot of its own patch)" if j == i // p + 1 else ""
    return False, (f"byte {i} may read slot {j}{own}, which pools positions {(j - 1) * p}..{j * p - 1} (patch = {p}, "
                   f"Lt = {lt}): it sees bytes after itself, byte {i + 1}, the one it must predict, among them, so "
                   "under teacher forcing the answer leaks; block slot j unless j <= (i + 1) // patch")


def _mask_complete(fn) -> tuple[bool, str]:
    found = _first_wrong(fn, lambda allowed, i, j, p: not allowed and j * p - 1 <= i)
    if found is None:
        return True, "every byte may read every slot whose bytes it has read, slot 0 (the start patch) included"
    lt, k, p, i, j = found
    return False, (f"byte {i} is blocked from slot {j}, which pools only positions up to {j * p - 1} <= {i} (patch = "
                   f"{p}, Lt = {lt}): it loses a complete patch it is entitled to (j <= (i + 1) // patch, "
                   "not i // patch)" + ("; slot 0 must be open to every byte" if j == 0 else ""))


def _mask_reference(fn) -> tuple[bool, str]:
    grid = _mask_grid()
    for lt, k, p in grid:
        mine, theirs = _mask(fn, lt, k, p), patch_causal_mask(lt, k, p)[0, 0]
        if not torch.equal(mine, theirs):
            i, j = (int(t) for t in (mine != theirs).nonzero()[0])
            keep = " (read as True = keep: cipherlab's masks are True = BLOCKED)" if torch.equal(mine, ~theirs) else ""
            return False, (f"differs from patch_causal_mask at Lt = {lt}, K = {k}, patch = {p}: byte {i}, slot {j} is "
                           f"{'blocked' if mine[i, j] else 'open'}{keep}")
    return True, f"equals cipherlab's patch_causal_mask on {len(grid)} sizes (patch 1..4, Lt 1..13)"


def _mask_in_model(fn) -> tuple[bool, str]:
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = BLTModel(BLTArgs(**{**BLT_SIZES, "patch_tgt": 3})).eval()
    # fn in place of patch_causal_mask: BLTModel.decode reads its mask from model.patch_mask
    model.patch_mask = lambda lt, k, device=None: torch.as_tensor(fn(lt, k, model.patch_tgt))
    src, member, tgt_in = _decoding_batch(1, 13, blt=True)

    def logits(tgt):
        return model(src, member, tgt)

    base = logits(tgt_in)
    leaks = []
    for i in range(tgt_in.size(1) - 1):
        changed = tgt_in.clone()
        changed[0, i + 1] = changed[0, i + 1] % 26 + ord("a")  # another letter
        leaks += [i] if _gap(logits(changed)[0, i], base[0, i]) > 1e-6 else []
    if leaks:
        return False, (f"in a tiny BLT (patch_tgt = 3) with this mask, the logits at positions {leaks} change when "
                       "only tgt_in[i + 1], the byte position i must predict, changes: the answer leaks")
    return True, "in a tiny BLT (patch_tgt = 3), no position's logits change when only the byte it predicts changes"
