"""The checks of sinusoidal positions and rotary position embedding (``positional``, "sinusoidal" or "rope").

Sinusoidal: the table added to x against cipherlab's SinusoidalPositionalEncoding (a [sin | cos] layout
passes with a note), rows at an offset, the gradient of x, positions up to 200 (angles rounded to bfloat16 are named),
float64. RoPE: a pure rotation that leaves position 0 alone, scores that depend on the offset between
positions only, cipherlab's RotaryPositionalEmbedding (interleaved pairs pass with a note), the gradients
of q and k, the keys it
returns (GQA keys with fewer heads too) at an offset, cached steps one position at a time, long
positions and float64.
"""

from __future__ import annotations

from functools import partial

import torch
from torch import nn

from cipherlab.base.errors import why
from cipherlab.models.positional import (RotaryPositionalEmbedding, SinusoidalPositionalEncoding,
                                         inverse_frequencies, rotate_half)
from cipherlab.student.check.compare import (B, DK, FLOAT32_TOL, H, L, _close, _deterministic, _finite,
                                             _float64_verdict, _gap, _in_float64, _name_the_bug)
from cipherlab.student.check.gradients import gradients
from cipherlab.student.check.report import Report, _interface, _interface_build, _label, _refuse_internals, _run
from cipherlab.student.trials import Unfit, randn

POSITION_INTERFACES = {
    "sinusoidal": "cls(d_model, max_len=64) with forward(x (B, L, D), offset=0) -> x + table[offset:offset+L]",
    "rope": "cls(head_dim, max_len=64) with forward(q (B, H, L, d), k (B, Hkv, L, d), offset=0) -> (q, k) rotated "
            "at positions offset..offset+L-1",
}


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
    built = f"{_label(cls)}({size}, max_len=64)"
    _refuse_internals(cls)
    module = _interface_build(lambda: cls(size, max_len=64), built, interface)
    _refuse_internals(cls, module)
    if isinstance(module, nn.Module):
        module.eval()
    longer = partial(_build_long, cls, size)
    if kind == "sinusoidal":
        x = randn(B, L, 16)
        _interface(lambda: module(x), f"{built}(x)", interface)
        return _run(kind, _label(cls), [
            ("shape", partial(_sinusoidal_shape, module)),
            ("eval mode", lambda: _deterministic(lambda: module(randn(B, L, 16)))),
            ("table", partial(_sinusoidal_table, module)),
            ("gradients", partial(_sinusoidal_gradients, module)),
            ("offset", partial(_sinusoidal_offset, module)),
            ("long positions", partial(_sinusoidal_long, longer)),
            ("float64", partial(_sinusoidal_float64, module)),
        ])
    q, k = randn(B, H, L, DK), randn(B, 1, L, DK, seed=1)
    _interface(lambda: module(q, k), f"{built}(q, k)", interface)
    return _run(kind, _label(cls), [
        ("shape", partial(_rope_shape, module)),
        ("rotation", partial(_rope_rotation, module)),
        ("relative", partial(_rope_relative, module)),
        ("reference", partial(_rope_reference, module)),
        ("gradients", partial(_rope_gradients, module)),
        ("keys", partial(_rope_keys, module)),
        ("offset", partial(_rope_offset, module)),
        ("cached steps", partial(_rope_steps, module)),
        ("long positions", partial(_rope_long, module, longer)),
        ("float64", partial(_rope_float64, module)),
    ])


LONG = 200  # positions 0..LONG-1, far past the 64 of the other checks: a rounded angle shows there


def _build_long(cls, size: int) -> nn.Module:
    """The student's module with max_len = 256, in eval mode; Unfit if it cannot be built so."""
    try:
        module = cls(size, max_len=256)
    except Exception as e:
        raise Unfit(f"{_label(cls)}({size}, max_len=256) raised {why(e)}; build the table for max_len positions")
    return module.eval() if isinstance(module, nn.Module) else module


def _rounded_angles(angles: torch.Tensor) -> list[torch.Tensor]:
    """``angles`` (L, n) = outer(positions, theta) as bfloat16 makes them: the product rounded, or
    positions and frequencies rounded before it."""
    positions, theta = angles[:, 0], angles[1] if angles.size(0) > 1 else angles[0]
    return [angles.bfloat16().float(),
            torch.outer(positions.bfloat16(), theta.bfloat16()).float()]


def _long_verdict(gap: float, where: int, rounded: bool) -> tuple[bool, str]:
    if gap <= 1e-3:
        return True, f"positions 0..{LONG - 1} agree with the reference (max difference {gap:.1e}, tolerance 1e-3)"
    return False, (f"at position {where} the rotation is off by up to {gap:.2g} (positions 0..{LONG - 1}, max_len 256)"
                   + ("; the angles rounded to bfloat16 (8 significant bits: steps of 1 radian past position 128); "
                      "build positions, frequencies and their product in float32" if rounded else
                      "; build the angles p theta_i = p * 10000^(-2i/d) in float32"))


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


def _sinusoidal_long(build) -> tuple[bool, str]:
    module = build()
    table = module(torch.zeros(1, LONG, 16))[0]  # (LONG, 16)
    expected = SinusoidalPositionalEncoding(16, max_len=LONG, dropout=0.0).table
    if not _close(table[:40], expected[:40], 1e-3):  # another layout: the table check names it
        expected = torch.cat((expected[:, 0::2], expected[:, 1::2]), dim=-1)
    error = (table - expected).abs()
    angles = torch.outer(torch.arange(LONG, dtype=torch.float32), inverse_frequencies(16))
    rounded = any(_close(table[:, 0::2], a.sin(), 1e-4) or _close(table[:, :8], a.sin(), 1e-4)
                  for a in _rounded_angles(angles))
    return _long_verdict(error.max().item(), int(error.amax(-1).argmax()), rounded)


def _sinusoidal_float64(module) -> tuple[bool, str]:
    x = randn(B, L, 16)
    return _float64_verdict(_in_float64(module)(x.double()), module(x))


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
        return False, (f"q.k changes by up to {gap:.2g} when q and k both move one position: RoPE scores must depend "
                       "on the offset n - m only; the cos/sin table's layout must match the pairs rotate_half makes")
    if _gap(scores[0, 0:1], scores[0, 5:6]) < 1e-4:
        return False, "scores do not depend on positions at all: nothing is rotated"
    return True, "q.k depends on the offset between the positions only"


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
            return False, (said + f": keys are rotated at positions {offset + 1}.. and queries at {offset}.. (an "
                           "off-by-one); rotate both at positions offset, offset + 1, ...")
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


def _rope_long(module, build) -> tuple[bool, str]:
    long = build()
    rotate = _rope_rotate(module, max_len=256)
    q, k = randn(1, 2, LONG, DK, seed=6), randn(1, 1, LONG, DK, seed=7)
    rq, rk = long(q, k)
    error = torch.maximum((rq - rotate(q)).abs().amax((0, 1, 3)), (rk - rotate(k)).abs().amax((0, 1, 3)))  # (LONG,)
    angles = torch.outer(torch.arange(LONG, dtype=torch.float32), inverse_frequencies(DK))
    rounded = False
    for a in _rounded_angles(angles):
        table = torch.cat((a, a), dim=-1)
        rounded |= _close(rq, q * table.cos() + rotate_half(q) * table.sin(), 1e-3)
        cos, sin = a.cos(), a.sin()
        even, odd = q[..., 0::2], q[..., 1::2]
        rounded |= _close(rq, torch.stack((even * cos - odd * sin, even * sin + odd * cos), -1).flatten(-2), 1e-3)
    return _long_verdict(error.max().item(), int(error.argmax()), rounded)


def _rope_float64(module) -> tuple[bool, str]:
    q, k = randn(B, H, L, DK), randn(B, 1, L, DK, seed=1)
    rq, rk = _in_float64(module)(q.double(), k.double())
    if rq.dtype != torch.float64 or rk.dtype != torch.float64:
        return _float64_verdict(rq if rq.dtype != torch.float64 else rk, rotate_half(q))
    rotate = _rope_rotate(module)
    return _float64_verdict(torch.cat((rq, rk), dim=1), torch.cat((rotate(q), rotate(k)), dim=1))


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
