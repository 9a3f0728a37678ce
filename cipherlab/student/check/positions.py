"""The checks of sinusoidal positions and rotary position embedding (``positional``, "sinusoidal" or "rope").

Each class is built with exactly the arguments train passes (``cls(d_model, max_len=MAX_LEN, dropout=p)``,
``cls(head_dim, max_len=MAX_LEN)``) and called on copies of its inputs (an input changed in place is the 'inputs'
check's; an exception names the call). Positions run up to LONG, the corpus's longest line plus BOS and EOS (angles
rounded to bfloat16, or positions that wrap around at n rows, are named only when the module reproduces them), and
a module built with max_len=SHORT must grow its table or raise past it ('past max_len').
Sinusoidal: the table added to x against cipherlab's SinusoidalPositionalEncoding (a [sin | cos] layout
passes with a note), rows at an offset, the gradient of x, long positions, past max_len, float64 (a WARN where only
float64 differs). RoPE: a pure rotation that leaves position 0 alone, scores that depend on the offset between
positions only, cipherlab's RotaryPositionalEmbedding (interleaved pairs pass with a note), the gradients
of q and k, the keys it
returns (GQA keys with fewer heads too) at an offset, cached steps one position at a time, long
positions, long positions in bfloat16 against the reference in bfloat16 ('long bfloat16': angles built in the
input's dtype show only there) and float64.
"""

from __future__ import annotations

import functools
from functools import partial

import torch
from torch import nn

from cipherlab.base.config import Config
from cipherlab.runner.errors import why
from cipherlab.data.corpus import PLAIN_FILE, read_lines, resolve_data_dir
from cipherlab.models.positional import (RotaryPositionalEmbedding, SinusoidalPositionalEncoding,
                                         inverse_frequencies, rotate_half)
from cipherlab.student.adapters import MAX_LEN, build_own_positional, build_own_rope
from cipherlab.student.check.compare import (B, BF16_TOL, DK, FLOAT32_TOL, H, L, Guarded, _changed_inputs, _close,
                                             _deterministic, _finite, _float64_verdict, _gap, _in_float64,
                                             _name_the_bug, _tolerance_used, _wrap_period)
from cipherlab.student.check.gradients import gradients
from cipherlab.student.check.report import Report, _interface, _interface_build, _label, _refuse_internals, _run
from cipherlab.student.trials import Unfit, randn

POSITION_INTERFACES = {
    "sinusoidal": f"cls(d_model, max_len={MAX_LEN}, dropout=p) with forward(x (B, L, D), offset=0) -> x + "
                  "table[offset:offset+L] (as train builds it)",
    "rope": f"cls(head_dim, max_len={MAX_LEN}) with forward(q (B, H, L, d), k (B, Hkv, L, d), offset=0) -> (q, k) "
            "rotated at positions offset..offset+L-1 (as train builds it)",
}
SHORT = 64  # the max_len of the check 'past max_len': a table that short, called on longer inputs
DROPOUT = Config.dropout  # the dropout= train passes (the configurations' default); the checks run in eval mode


@functools.cache
def longest_sequence() -> int:
    """The most positions the assignment's models are ever given: the longest line of the corpus, in characters
    (a position per character at most: a source byte or a target character), plus BOS and EOS; MAX_LEN, the
    positions every model is built for, when the corpus cannot be read."""
    try:
        lines = read_lines(resolve_data_dir() / PLAIN_FILE)
    except Exception:
        return MAX_LEN
    return min(max(map(len, lines), default=0) + 2, MAX_LEN)


LONG = longest_sequence()  # positions 0..LONG-1: a rounded angle, or a table that wraps, shows there


def positional(cls, kind: str) -> Report:
    """Check sinusoidal positions ("sinusoidal") or rotary position embedding ("rope").

    "sinusoidal": ``cls(d_model, max_len=64)`` (dropout off in eval mode), forward(x (B, L, D),
    offset=0) -> x + table[offset : offset + L], table[p, 2i] = sin(p theta_i), table[p, 2i+1] =
    cos(p theta_i), theta_i = 10000^(-2i/D), as cipherlab's SinusoidalPositionalEncoding.
    "rope": ``cls(head_dim, max_len=64)``, forward(q (B, H, L, d), k (B, Hkv, L, d), offset=0) ->
    (q, k) each rotated at positions offset .. offset + L - 1, as cipherlab's RotaryPositionalEmbedding
    (half-split pairs i, i + d/2; interleaved pairs pass too, with a note).
    """
    if kind not in POSITION_INTERFACES:
        raise ValueError(f"check.positional: unknown kind {kind!r}; expected one of {sorted(POSITION_INTERFACES)}")
    interface, size = POSITION_INTERFACES[kind], 16 if kind == "sinusoidal" else DK
    built = (f"{_label(cls)}({size}, max_len={MAX_LEN}, dropout={DROPOUT})" if kind == "sinusoidal"
             else f"{_label(cls)}({size}, max_len={MAX_LEN})")
    _refuse_internals(cls)
    make = partial(_build, cls, kind, size)
    module = _interface_build(make, built, interface)
    _refuse_internals(cls, module)
    if isinstance(module, nn.Module):
        module.eval()
    raw, module = module, Guarded(module, "forward")  # the checks call it on copies; 'inputs' on the tensors
    if kind == "sinusoidal":
        x = randn(B, L, 16)
        _interface(lambda: raw(x), f"{built}(x)", interface)
        return _run(kind, _label(cls), [
            ("shape", partial(_sinusoidal_shape, module)),
            ("inputs", lambda: _changed_inputs(lambda x: raw(x), {"x": randn(B, L, 16)})),
            ("eval mode", lambda: _deterministic(lambda: module(randn(B, L, 16)))),
            ("table", partial(_sinusoidal_table, module)),
            ("gradients", partial(_sinusoidal_gradients, raw)),
            ("offset", partial(_sinusoidal_offset, module)),
            ("long positions", partial(_sinusoidal_long, module)),
            ("past max_len", partial(_past_max_len, make, kind)),
            ("float64", partial(_sinusoidal_float64, module)),
        ])
    q, k = randn(B, H, L, DK), randn(B, 1, L, DK, seed=1)
    _interface(lambda: raw(q, k), f"{built}(q, k)", interface)
    return _run(kind, _label(cls), [
        ("shape", partial(_rope_shape, module)),
        ("inputs", lambda: _changed_inputs(lambda q, k: raw(q, k), {"q": randn(B, H, L, DK), "k": randn(B, 1, L, DK)})),
        ("rotation", partial(_rope_rotation, module)),
        ("relative", partial(_rope_relative, module)),
        ("reference", partial(_rope_reference, module)),
        ("gradients", partial(_rope_gradients, raw)),
        ("keys", partial(_rope_keys, module)),
        ("offset", partial(_rope_offset, module)),
        ("cached steps", partial(_rope_steps, module)),
        ("long positions", partial(_rope_long, module)),
        ("long bfloat16", partial(_rope_long_bf16, module)),
        ("past max_len", partial(_past_max_len, make, kind)),
        ("float64", partial(_rope_float64, module)),
    ])


def _build(cls, kind: str, size: int, max_len: int = MAX_LEN):
    """The student's module built with exactly the arguments train passes (:mod:`cipherlab.student.adapters`:
    dropout=p for sinusoidal positions), at ``max_len`` (train's MAX_LEN unless told)."""
    if kind == "sinusoidal":
        return build_own_positional(cls, size, max_len, DROPOUT)
    return build_own_rope(cls, size, max_len).inner


def _past_max_len(make, kind: str) -> tuple[bool, str]:
    """Built with max_len = SHORT and called on SHORT + 16 positions, a module must give the right values (its
    table grows) or raise (it refuses): a table that silently gives other rows there is a FAIL."""
    n = SHORT + 16
    try:
        module = make(max_len=SHORT)
    except Exception as e:
        raise Unfit(f"built with max_len={SHORT} it raised {why(e)}") from None
    if isinstance(module, nn.Module):
        module.eval()
    try:
        if kind == "sinusoidal":
            values = module(torch.zeros(1, n, 16))[0]
            expected = _sinusoid_like(values, n)
        else:
            q = randn(1, 1, n, DK, seed=6)
            values, expected = module(q, q)[0][0, 0], _rope_rotate(module, max_len=n)(q)[0, 0]
    except Exception as e:
        return True, (f"built with max_len={SHORT}, {n} positions raise ({why(e)}): it refuses positions past its "
                      "table, as it should rather than give wrong ones (train builds it with max_len = "
                      f"{MAX_LEN})")
    error = (values - expected).abs().amax(-1)  # (n,)
    if error.max() <= 1e-4:
        return True, f"built with max_len={SHORT}, positions {SHORT}..{n - 1} come back right: the table grows"
    first = int((error > 1e-4).nonzero()[0])
    period = _wrap_period(values, expected)
    return False, (f"built with max_len={SHORT}, called on {n} positions it raises nothing but gives other values from "
                   f"position {first} on (off by up to {error.max():.2g})"
                   + (f": rows {period}.. repeat rows 0.., the table wraps around at {period} rows" if period else "")
                   + f"; past max_len, grow the table or raise an error that says max_len={SHORT} is too short")


def _sinusoid_like(values: torch.Tensor, n: int) -> torch.Tensor:
    """The reference's table (n, 16), in the layout of ``values`` (interleaved, or [sin | cos])."""
    expected = SinusoidalPositionalEncoding(16, max_len=n, dropout=0.0).table
    concatenated = torch.cat((expected[:, 0::2], expected[:, 1::2]), dim=-1)
    return concatenated if _close(values[:8], concatenated[:8], 1e-3) else expected


def _rounded_angles(angles: torch.Tensor) -> list[torch.Tensor]:
    """``angles`` (L, n) = outer(positions, theta) as bfloat16 makes them: the product rounded, or
    positions and frequencies rounded before it."""
    positions, theta = angles[:, 0], angles[1] if angles.size(0) > 1 else angles[0]
    return [angles.bfloat16().float(),
            torch.outer(positions.bfloat16(), theta.bfloat16()).float()]


def _long_verdict(error: torch.Tensor, rounded: bool, period: int | None) -> tuple[bool, str]:
    """The verdict on positions 0..LONG-1 from ``error`` (LONG,), the largest difference at each position."""
    span = f"positions 0..{LONG - 1} (the corpus's longest line plus BOS and EOS), built with max_len={MAX_LEN}"
    gap = error.max().item()
    if gap <= 1e-3:
        return True, f"{span}, agree with the reference (max difference {gap:.1e}, tolerance 1e-3)"
    first, where = int((error > 1e-3).nonzero()[0]), int(error.argmax())
    said = f"{span}: from position {first} on, off by up to {gap:.2g} (at position {where})"
    if rounded:
        return False, (said + "; the angles rounded to bfloat16 give these values (8 significant bits: steps of 1 "
                       "radian past position 128); build positions, frequencies and their product in float32")
    if period:
        return False, (said + f"; rows {period}.. repeat rows 0..: the positions wrap around at {period}, whatever "
                       f"max_len={MAX_LEN} says; build the table (or the angles) for max_len positions")
    return False, said


def _sinusoidal_shape(module) -> tuple[bool, str]:
    x = randn(B, L, 16)
    out, low = _finite(module(x)), module(x.bfloat16())
    if out.shape != x.shape or out.dtype != torch.float32 or low.dtype != torch.bfloat16:
        return False, (f"x {tuple(x.shape)} float32 gives {tuple(out.shape)} {str(out.dtype)[6:]}, bfloat16 gives "
                       f"{str(low.dtype)[6:]}; expected the input's shape and dtype (cast the table: .to(x.dtype))")
    return True, f"x {tuple(x.shape)} gives the same shape, in float32 and in bfloat16"


def _sinusoid_suspects(length: int, d: int) -> dict[str, torch.Tensor]:
    """Tables (length, d) of the usual wrong layouts, by the bug they have."""
    angles = torch.outer(torch.arange(length, dtype=torch.float32), inverse_frequencies(d))  # (L, d/2)
    swapped = torch.stack((angles.cos(), angles.sin()), dim=-1).flatten(-2)
    slow = torch.outer(torch.arange(length, dtype=torch.float32), inverse_frequencies(2 * d)[: d // 2])
    return {"sin and cos are swapped: even columns 2i hold sin(p theta_i), odd columns 2i+1 cos(p theta_i)": swapped,
            "the frequencies are 10000^(-i/D); they are theta_i = 10000^(-2i/D), one per sin/cos pair":
            torch.stack((slow.sin(), slow.cos()), dim=-1).flatten(-2)}


def _sinusoidal_table(module) -> tuple[bool, str]:
    x = randn(1, 40, 16)
    table = module(torch.zeros(1, 40, 16))[0]  # (40, 16): what it adds
    expected = SinusoidalPositionalEncoding(16, max_len=40, dropout=0.0).table
    added = _gap(module(x) - x, table[None])
    concatenated = torch.cat((expected[:, 0::2], expected[:, 1::2]), dim=-1)
    if _close(table, expected) or _close(table, concatenated):
        if added > FLOAT32_TOL:
            return False, f"the table is right, but x + table is off by {added:.2g}: add the table to x, do not scale x"
        if _close(table, concatenated):
            return True, ("adds [sin(p theta_i) | cos(p theta_i)], sines in the first half and cosines in the second, "
                          "to x: a valid layout (a fixed permutation of the columns, which the first layer absorbs); "
                          "cipherlab interleaves them, even columns sin, odd columns cos")
        return True, "adds table[p, 2i] = sin(p theta_i), table[p, 2i+1] = cos(p theta_i), as the reference, to x"
    error = (table - expected).abs()
    p, c = divmod(error.argmax().item(), 16)
    return False, (f"the table differs from sin/cos(p theta_i) by up to {error.max().item():.2g} (position {p}, "
                   f"column {c}: {table[p, c].item():.4f}, expected {expected[p, c].item():.4f})"
                   + _name_the_bug(table, _sinusoid_suspects(40, 16)))


def _sinusoidal_gradients(module) -> tuple[bool, str]:
    """The gradient of x through x + table: the cotangent itself, as through the reference's x + table (the
    student's own table, so that a layout the book allows is compared too)."""
    x = randn(B, L, 16)
    table = module(torch.zeros_like(x)).detach()
    return gradients(module, lambda m, x: m(x), None, lambda _, x: x + table, {"x": x}, {})


def _sinusoidal_offset(module) -> tuple[bool, str]:
    x = randn(B, 10, 16)
    gap = _gap(module(x[:, 7:], offset=7), module(x)[:, 7:])
    if gap <= FLOAT32_TOL:
        return True, "forward(x, offset=7) adds rows 7.. of the table, as incremental decoding needs"
    return False, f"forward(x, offset=7) differs from rows 7.. of a full pass by {gap:.2g}: add table[offset:offset+L]"


def _sinusoidal_long(module) -> tuple[bool, str]:
    table = module(torch.zeros(1, LONG, 16))[0]  # (LONG, 16)
    expected = _sinusoid_like(table, LONG)
    error = (table - expected).abs().amax(-1)
    angles = torch.outer(torch.arange(LONG, dtype=torch.float32), inverse_frequencies(16))
    rounded = any(_mostly(table[:, 0::2], a.sin()) or _mostly(table[:, :8], a.sin()) for a in _rounded_angles(angles))
    return _long_verdict(error, rounded, _wrap_period(table, expected))


def _mostly(values: torch.Tensor, expected: torch.Tensor, tol: float = 1e-3) -> bool:
    """Whether 90% of the positions (the first axis but one, ..., L, d) agree: bfloat16's rounding of a product
    may fall the other way where the two frequency formulas differ in their last bit."""
    agree = torch.isclose(values, expected, rtol=tol, atol=tol).all(-1).float()
    return agree.mean().item() >= 0.9


def _sinusoidal_float64(module) -> tuple[bool, str]:
    x = randn(B, L, 16)
    return _float64_verdict(_in_float64(module)(x.double()), module(x), module._obj)


def _rope_shape(module) -> tuple[bool, str]:
    q, k = randn(B, H, L, DK), randn(B, 1, L, DK, seed=1)  # fewer K heads, as in GQA
    rq, rk = _finite(*module(q, k))
    low = module(q.bfloat16(), k.bfloat16())[0]
    if rq.shape != q.shape or rk.shape != k.shape or rq.dtype != torch.float32 or low.dtype != torch.bfloat16:
        return False, (f"q {tuple(q.shape)}, k {tuple(k.shape)} give {tuple(rq.shape)}, {tuple(rk.shape)} "
                       f"{str(rq.dtype)[6:]} (bfloat16 in: {str(low.dtype)[6:]} out); expected their shapes and dtypes")
    return True, f"q {tuple(q.shape)} and k {tuple(k.shape)} keep their shapes and dtypes, float32 and bfloat16"


def _rope_rotation(module) -> tuple[bool, str]:
    q = randn(1, 1, 40, DK)
    rq = module(q, q)[0]
    stretch = _gap(rq.norm(dim=-1), q.norm(dim=-1))
    if stretch > 1e-4:
        return False, (f"the rotation changes vector lengths by up to {stretch:.2g}: each pair's two coordinates must "
                       "turn by the same angle, x cos + rotate_half(x) sin, with the cos/sin table laid out like "
                       "the pairs (cat(angles, angles) for half-split pairs)")
    if _gap(rq[..., 0, :], q[..., 0, :]) > 1e-6:
        return False, "position 0 is rotated; the angle at position p is p theta_i, 0 at p = 0"
    return True, "a pure rotation: lengths unchanged, position 0 untouched"


def _rope_relative(module) -> tuple[bool, str]:
    n = 40
    q, k = randn(DK).expand(1, 1, n, DK), randn(DK, seed=1).expand(1, 1, n, DK)  # one vector at every position
    rq, rk = module(q.contiguous(), k.contiguous())
    scores = rq[0, 0] @ rk[0, 0].T  # (n, n): q at position m against k at position n
    gap = _gap(scores[1:, 1:], scores[:-1, :-1])
    if gap > 1e-4:
        said = (f"q.k changes by up to {gap:.2g} when q and k both move one position (first from position "
                f"{_first_moved(scores)} on): RoPE scores must depend on the offset n - m only")
        period = _rope_wrap(module, n)
        if period:
            return False, said + f"; rows {period}.. are rotated as rows 0..: the positions wrap around at {period}"
        if _close(rq, _mismatched_rope(q.contiguous()), 1e-4):
            return False, (said + "; it rotates interleaved pairs (x0, x1), (x2, x3) ... with a cos/sin table laid out "
                           "for half-split pairs (cat(angles, angles)): the table's layout must match the pairs")
        return False, said
    if _gap(scores[0, 0:1], scores[0, 5:6]) < 1e-4:
        return False, "scores do not depend on positions at all: nothing is rotated"
    return True, "q.k depends on the offset between the positions only"


def _first_moved(scores: torch.Tensor) -> int:
    """The first position m at which scores[m + 1, n + 1] differs from scores[m, n] for some n."""
    moved = ((scores[1:, 1:] - scores[:-1, :-1]).abs() > 1e-4).any(-1)
    return int(moved.nonzero()[0]) + 1 if moved.any() else 0


def _mismatched_rope(x: torch.Tensor) -> torch.Tensor:
    """``x`` (..., L, d) rotated with interleaved pairs but a half-split table (cat(angles, angles))."""
    ref = RotaryPositionalEmbedding(DK, max_len=x.size(-2))
    pairs = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    return x * ref.cos[:x.size(-2)] + pairs * ref.sin[:x.size(-2)]


def _rope_reference(module) -> tuple[bool, str]:
    ref = RotaryPositionalEmbedding(DK, max_len=64)
    q = randn(B, H, L, DK)
    out = module(q, q)[0]
    if _close(out, ref.rotate(q)):
        return True, "agrees with cipherlab's RotaryPositionalEmbedding (half-split pairs i, i + d/2)"
    if _close(out, ref.rotate_interleaved(q)):
        return True, ("agrees with cipherlab's rotate_interleaved: pairs (x0, x1), (x2, x3), ..., a valid RoPE; "
                      "cipherlab's default pairs coordinates i and i + d/2")
    cos, sin = ref.cos[:L], ref.sin[:L]
    bug = _name_the_bug(out, {"it rotates the other way (the sign of sin is flipped): x cos + rotate_half(x) sin":
                              q * cos - rotate_half(q) * sin})
    return False, f"differs from cipherlab's RotaryPositionalEmbedding by up to {_gap(out, ref.rotate(q)):.2g}{bug}"


def _rope_gradients(module) -> tuple[bool, str]:
    """The gradients of q and k (fewer heads, as in GQA) against the reference's rotation (in the module's pairing)."""
    rotate = _rope_rotate(module)

    def both(m, q, k):
        return torch.cat([t.flatten() for t in m(q, k)])

    return gradients(module, both, None, lambda _, q, k: both(lambda q, k: (rotate(q), rotate(k)), q, k),
                     {"q": randn(B, H, L, DK, seed=8), "k": randn(B, 1, L, DK, seed=9)}, {})


def _rope_rotate(module, max_len: int = 64):
    """The reference's rotation in the module's convention: rotate (half-split pairs) or rotate_interleaved."""
    ref = RotaryPositionalEmbedding(DK, max_len=max_len)
    q = randn(B, H, L, DK, seed=3)
    return ref.rotate_interleaved if _close(module(q, q)[0], ref.rotate_interleaved(q)) else ref.rotate


def _rope_keys(module) -> tuple[bool, str]:
    """The returned keys: rotated as the queries, GQA keys (fewer heads) too, at the offset given."""
    rotate = _rope_rotate(module)
    q, k_full, k_few = randn(B, H, L, DK), randn(B, H, L, DK, seed=1), randn(B, 1, L, DK, seed=2)
    for k, offset in ((k_full, 0), (k_few, 0), (k_full, 7), (k_few, 7)):
        rq, rk = module(q, k, offset=offset)
        if _close(rk, rotate(k, offset)) or (offset and not _close(rq, rotate(q, offset))):
            continue  # the queries wrong at an offset too: the 'offset' check names that
        gqa = k.size(1) < q.size(1)
        said = (f"the keys returned for k {tuple(k.shape)}{' (GQA: fewer heads than q)' if gqa else ''} at offset "
                f"{offset} differ from the reference's by {_gap(rk, rotate(k, offset)):.2g}")
        if _close(rk, k):
            if gqa and _close(module(q, k_full, offset=offset)[1], rotate(k_full, offset)):
                return False, (said + ": keys with fewer heads than the queries (GQA) are returned unrotated; rotate "
                               "k whatever its head count (cos and sin broadcast over the heads)")
            return False, said + ": the keys are returned unrotated; rotate k exactly as q, RoPE turns both"
        if offset and _close(rk, rotate(k, 0)) and _close(rq, rotate(q, offset)):
            return False, (said + ": the offset is applied to the queries only, keys are rotated from position 0; "
                           "a cached step then scores its query against a key at the wrong position: rotate q and k "
                           "at positions offset..")
        if _close(rk, rotate(k, offset + 1)):
            if _close(rq, rotate(q, offset + 1)):
                return False, (said + f": queries and keys are both rotated at positions {offset + 1}.., the "
                               f"reference at {offset}.. (an off-by-one); rotate at positions offset, offset + 1, ...")
            if _close(rq, rotate(q, offset)):
                return False, (said + f": keys are rotated at positions {offset + 1}.. and queries at {offset}.. "
                               "(an off-by-one); rotate both at positions offset, offset + 1, ...")
            return False, (said + f": the keys are rotated at positions {offset + 1}.., the reference's at "
                           f"{offset}..; rotate k as q, at positions offset .. offset + L - 1")
        if _close(rk, _rotate_back(k, offset, rotate)):
            return False, said + ": the keys are rotated the other way (angle -p theta); turn k by +p theta, as q"
        return False, said + "; rotate k as q, at positions offset .. offset + L - 1"
    return True, ("returns the keys rotated as the reference's, at offset 0 and 7, with as many heads as q and with "
                  "fewer (GQA)")


def _rotate_back(x: torch.Tensor, offset: int, rotate) -> torch.Tensor:
    """``x`` rotated by -p theta, in the convention of ``rotate``: the rotation R_p is linear and
    orthogonal, so R(-p theta) x = R_p^T x."""
    eye = torch.eye(DK).expand(x.size(-2), DK, DK)  # (L, d, d): e_j at every position
    basis = rotate(eye.transpose(0, 1).contiguous(), offset).transpose(0, 1)  # (L, d, d): R_p e_j, row j
    return torch.einsum("...ld,ljd->...lj", x, basis)  # x . (R_p e_j) = (R_p^T x)_j


def _rope_steps(module) -> tuple[bool, str]:
    """Scores of cached steps (one position per call, offset = cached length, keys kept) against a full pass."""
    q, k = randn(1, H, 12, DK, seed=4), randn(1, 1, 12, DK, seed=5)
    rq, rk = module(q, k)
    full = rq @ rk.transpose(-2, -1)  # (1, H, 12, 12)
    keys = []
    for t in range(12):
        sq, sk = module(q[:, :, t:t + 1], k[:, :, t:t + 1], offset=t)
        keys.append(sk)
        row = sq @ torch.cat(keys, dim=-2).transpose(-2, -1)  # (1, H, 1, t + 1)
        gap = _gap(row[..., 0, :], full[..., t, :t + 1])
        if gap > 1e-4:
            return False, (f"a cached step (q and k of position {t} rotated at offset {t}, earlier keys kept) scores "
                           f"differently from the full pass by {gap:.2g} at step {t}: cached and uncached decoding "
                           "would pick different tokens; rotate each step's q and k at offset = the cache's length")
    return True, "12 cached steps, one position per call at offset = cached length, score as the full pass"


def _rope_long(module) -> tuple[bool, str]:
    rotate = _rope_rotate(module, max_len=LONG)
    q, k = randn(1, 2, LONG, DK, seed=6), randn(1, 1, LONG, DK, seed=7)
    rq, rk = module(q, k)
    error = torch.maximum((rq - rotate(q)).abs().amax((0, 1, 3)), (rk - rotate(k)).abs().amax((0, 1, 3)))  # (LONG,)
    angles = torch.outer(torch.arange(LONG, dtype=torch.float32), inverse_frequencies(DK))
    rounded = False
    for a in _rounded_angles(angles):
        table = torch.cat((a, a), dim=-1)
        rounded |= _mostly(rq, q * table.cos() + rotate_half(q) * table.sin())
        cos, sin = a.cos(), a.sin()
        even, odd = q[..., 0::2], q[..., 1::2]
        rounded |= _mostly(rq, torch.stack((even * cos - odd * sin, even * sin + odd * cos), -1).flatten(-2))
    return _long_verdict(error, rounded, _rope_wrap(module, LONG))


def _rope_long_bf16(module) -> tuple[bool, str]:
    """Positions 0..LONG-1 in bfloat16 against the reference in bfloat16 (which rotates in float32 and casts back),
    at BF16_TOL, the tolerance the reference itself meets against the float32 rotation: angles built in the input's
    dtype (bfloat16 positions or frequencies) show only here, as the other checks run long positions in float32."""
    rotate = _rope_rotate(module, max_len=LONG)
    q, k = randn(1, 2, LONG, DK, seed=6).bfloat16(), randn(1, 1, LONG, DK, seed=7).bfloat16()
    rq, rk = module(q, k)
    span = f"positions 0..{LONG - 1} in bfloat16"
    if rq.dtype != torch.bfloat16 or rk.dtype != torch.bfloat16:
        return False, f"{span}: bfloat16 in gives {str(rq.dtype)[6:]}, {str(rk.dtype)[6:]} out; return q's and k's dtype"
    out, ref = torch.cat((rq, rk), dim=1), torch.cat((rotate(q), rotate(k)), dim=1)
    used = _tolerance_used(out, ref, BF16_TOL)
    said = (f"max difference {_gap(out, ref):.2g}, {used:.0%} of the tolerance there ({BF16_TOL:g} + {BF16_TOL:g} x "
            "|reference|, bfloat16's 8 significant bits)")
    if used <= 1:
        return True, f"{span} agree with the reference in bfloat16 ({said})"
    error = (out.float() - ref.float()).abs().amax((0, 1, 3))  # (LONG,)
    bad = (~torch.isclose(out.float(), ref.float(), rtol=BF16_TOL, atol=BF16_TOL).all(-1)).flatten(0, 1).any(0)
    first, where = int(bad.nonzero()[0]), int(error.argmax())
    said = f"{span} differ from the reference in bfloat16 ({said}) from position {first} on (most at position {where})"
    angles = torch.outer(torch.arange(LONG, dtype=torch.float32), inverse_frequencies(DK))
    x = q.float()
    for a in _rounded_angles(angles):
        table = torch.cat((a, a), dim=-1)
        cos, sin = a.cos(), a.sin()
        even, odd = x[..., 0::2], x[..., 1::2]
        for wrong in (x * table.cos() + rotate_half(x) * table.sin(),
                      torch.stack((even * cos - odd * sin, even * sin + odd * cos), -1).flatten(-2)):
            if _mostly(rq.float(), wrong, BF16_TOL):
                return False, (said + "; the angles rounded to bfloat16 give these values (8 significant bits: steps "
                               "of 1 radian past position 128): positions or frequencies are built in the input's "
                               "dtype; build positions, frequencies and their product in float32")
    in32 = torch.cat(module(q.float(), k.float()), dim=1)
    if _close(in32, torch.cat((rotate(q.float()), rotate(k.float())), dim=1), 1e-3):
        return False, said + "; in float32 the same positions agree: only bfloat16 inputs differ"
    return False, said


def _rope_wrap(module, n: int) -> int | None:
    """The period at which ``module``'s rotation of positions 0..n-1 wraps around (see _wrap_period), or None:
    read off as the rotation of the identity basis at every position."""
    eye = torch.eye(DK).expand(1, n, DK, DK).transpose(1, 2).contiguous()  # (1, d, n, d): e_j at every position
    mine = module(eye, eye)[0].transpose(0, 1)[0].transpose(0, 1)  # (n, d, d)
    theirs = _rope_rotate(module, max_len=n)(eye).transpose(0, 1)[0].transpose(0, 1)
    return _wrap_period(mine.flatten(1), theirs.flatten(1))


def _rope_float64(module) -> tuple[bool, str]:
    q, k = randn(B, H, L, DK), randn(B, 1, L, DK, seed=1)
    rq, rk = _in_float64(module)(q.double(), k.double())
    if rq.dtype != torch.float64 or rk.dtype != torch.float64:
        return _float64_verdict(rq if rq.dtype != torch.float64 else rk, rotate_half(q))
    rotate = _rope_rotate(module)
    return _float64_verdict(torch.cat((rq, rk), dim=1), torch.cat((rotate(q), rotate(k)), dim=1), module._obj)


def _rope_offset(module) -> tuple[bool, str]:
    q = randn(1, H, 10, DK)
    tail = module(q[:, :, 7:], q[:, :, 7:], offset=7)[0]
    gap = _gap(tail, module(q, q)[0][:, :, 7:])
    if gap <= FLOAT32_TOL:
        return True, "forward(q, k, offset=7) rotates at positions 7.., as the KV cache needs"
    ignored = _close(tail, module(q[:, :, 7:], q[:, :, 7:])[0])
    return False, (f"forward(q, k, offset=7) differs from positions 7.. of a full pass by {gap:.2g}"
                   + (": the offset is ignored, every cached decoding step is rotated as position 0" if ignored else "")
                   + "; rotate at positions offset .. offset + L - 1")
