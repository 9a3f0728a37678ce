"""The positions chapter's experiments: what its cells call and print, and what its facts quote.

Every function runs cipherlab's own modules (``cipherlab.models.positional``,
``cipherlab.models.attention`` and ``cipherlab.models.transformer``) or reads committed results:
``results/calibration/calibration.json`` (the short runs that chose the cpu preset) and, through
``cipherlab.analysis.ablation``, the C1/C2 records of ``results/notes/equal-epochs/cpu`` and ``results/notes/cpu-bits``
(the readers chapters share live in ``cipherbook.experiments.common``).
"""

from __future__ import annotations

import functools
import math

import torch

from cipherlab.base.config import make_config
from cipherlab.data.corpus import CHUNK_CHARS
from cipherlab.pipeline.decode import LengthConstraint, greedy_decode
# (the calibration readers too: the positions chapter's cells call them through this module)
from cipherbook.experiments.common import (BITS, D_MODEL, KEY_PERIOD, MAX_LEN, N_HEADS, baseline_model, calibration,  # noqa: F401
                                          calibration_bits, calibration_lines, calibration_run, first_epoch_loss,  # noqa: F401
                                          run_records, scored_step, sinusoidal_table)  # noqa: F401
from cipherlab.models.attention import MultiHeadAttention, causal_mask
from cipherlab.models.positional import RotaryPositionalEmbedding, interleaved_to_half_split, inverse_frequencies
from cipherlab.models.transformer import ModelArgs, Seq2SeqTransformer
from cipherbook.runs import EQUAL_EPOCHS_RUN, load_committed_model

HEAD_DIM = D_MODEL // N_HEADS
CPU_C2 = make_config("c2", "cpu", recipe="notes")  # the course notes' recipe, as the committed C2; the reference run's C2: the sizes the cross-attention probe uses
EQUAL_EPOCHS = EQUAL_EPOCHS_RUN  # every cpu configuration trained to the same number of epochs (bytes mode)


def wavelengths(dim: int = D_MODEL) -> torch.Tensor:
    """(dim/2,) positions per full turn of each frequency pair: 2*pi / theta_i."""
    return 2 * math.pi / inverse_frequencies(dim)


def pairs_near_period(period: float = KEY_PERIOD, d_model: int = D_MODEL) -> dict:
    """The two sinusoidal pairs whose wavelengths bracket ``period``: {"below": (i, wl), "above": (i, wl)}."""
    wl = wavelengths(d_model)
    above = int(torch.searchsorted(wl, torch.tensor(float(period))))  # first pair with wavelength >= period
    return {"below": (above - 1, wl[above - 1].item()), "above": (above, wl[above].item())}


def pair_dims(i: int) -> str:
    return f"{2 * i}–{2 * i + 1}"  # sinusoidal pair i occupies columns 2i (sin) and 2i+1 (cos)


def nonpersistent_buffer_bytes(module: torch.nn.Module) -> int:
    """Bytes held in buffers that state_dict() leaves out (persistent=False)."""
    saved = module.state_dict()
    return sum(b.numel() * b.element_size() for name, b in module.named_buffers() if name not in saved)


def count_parameters(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def embedding_std(model) -> float:
    """Standard deviation, after the sqrt(d_model) factor, of a model's source embedding over its whole
    vocabulary (a plain table or the bit-factored one: both are read through the module)."""
    with torch.inference_mode():
        tokens = model.src_embed(torch.arange(model.args.src_vocab_size))
    return (tokens * math.sqrt(model.d_model)).std().item()


def scaled_embedding_std() -> float:
    """Standard deviation of the C1 source embedding after the sqrt(d_model) factor."""
    return embedding_std(baseline_model())


@functools.cache
def recipe_embedding_std() -> dict[str, float]:
    """Standard deviations, after the sqrt(d_model) factor, of what the default recipe adds to the position
    code in a fresh ``assignment``-preset C1: the bit-factored source embedding over its whole vocabulary,
    and the key-phase vector over the key's period."""
    from cipherbook.experiments.training import preset_model

    model = preset_model()
    with torch.inference_mode():
        phases = model.phase_embed(KEY_PERIOD, 0, torch.device("cpu"))
    return {"tokens": embedding_std(model), "phase": phases.std().item()}


def cpu_head_dim() -> int:
    """The head width of the ``cpu`` preset's C2: d_model // n_heads."""
    config = make_config("c2", "cpu")
    return config.d_model // config.n_heads


def rope_scores(q: torch.Tensor, k: torch.Tensor, rope: RotaryPositionalEmbedding) -> torch.Tensor:
    """(L, L) scores between the same query vector placed at every position and the same key vector.

    q, k: (head_dim,). Entry [m, n] is rotated-q at position m dotted with rotated-k at position n,
    so if RoPE works, entry [m, n] depends on n - m only.
    """
    L = rope.max_len
    rq = rope.rotate(q.expand(1, 1, L, -1))[0, 0]  # (L, head_dim)
    rk = rope.rotate(k.expand(1, 1, L, -1))[0, 0]
    return rq @ rk.T  # (L, L)


Q_PAIR, K_PAIR = (1.0, 0.3), (0.6, 0.8)  # the animation's query and key, one 2-D pair each


def rotated_pair(rope: RotaryPositionalEmbedding, pair: tuple, i: int, position: int) -> tuple[float, float]:
    """Pair i of a head vector that is zero elsewhere, after cipherlab's RoPE at ``position``."""
    half = rope.head_dim // 2
    x = torch.zeros(1, 1, 1, rope.head_dim)
    x[..., i], x[..., i + half] = pair
    y = rope.rotate(x, offset=position)[0, 0, 0]
    return y[i].item(), y[i + half].item()


def pair_score(rope: RotaryPositionalEmbedding, m: int, n: int, i: int = 1) -> float:
    """Pair i's share of the score: Q_PAIR rotated to query position m dotted with K_PAIR at key position n."""
    (qx, qy), (kx, ky) = rotated_pair(rope, Q_PAIR, i, m), rotated_pair(rope, K_PAIR, i, n)
    return qx * kx + qy * ky


def draw_pair(ax, rope: RotaryPositionalEmbedding, m: int, n: int, i: int = 1) -> None:
    """Draw pair i of the query at m (blue) and of the key at n (orange) as arrows, the score in the title."""
    import matplotlib.pyplot as plt

    ax.clear()
    ax.add_patch(plt.Circle((0, 0), 1.1, fill=False, color="0.85"))
    for pair, position, colour in ((Q_PAIR, m, "tab:blue"), (K_PAIR, n, "tab:orange")):
        ax.annotate("", rotated_pair(rope, pair, i, position), (0, 0), arrowprops=dict(color=colour, width=2, headwidth=8))
    ax.set(xlim=(-1.3, 1.3), ylim=(-1.3, 1.3), aspect="equal", xticks=[], yticks=[])
    ax.set_title(f"m={m}, n={n}, pair {i}: score {pair_score(rope, m, n, i):+.3f}", fontsize=11)


def toeplitz_error(scores: torch.Tensor) -> float:
    """How far (..., Lq, Lk) scores are from depending on (key position - query position) alone.

    Each diagonal holds one offset; its entries must all be equal, so each is compared with the
    diagonal's first entry. 0 up to float rounding means a function of the offset only.
    """
    Lq, Lk = scores.shape[-2:]
    worst = 0.0
    for offset in range(-(Lq - 1), Lk):
        diagonal = scores.diagonal(offset, -2, -1)  # (..., n): the entries with key - query = offset
        worst = max(worst, (diagonal - diagonal[..., :1]).abs().max().item())
    return worst


def rope_offset_error(length: int = 512, seed: int = 0) -> float:
    """Largest change of a RoPE score when both positions move together: |S[m, n] - S[m+s, n+s]|, all m, n, s."""
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(HEAD_DIM, generator=g), torch.randn(HEAD_DIM, generator=g)
    return toeplitz_error(rope_scores(q, k, RotaryPositionalEmbedding(HEAD_DIM, max_len=length)))


def halfsplit_vs_interleaved_error(seed: int = 0) -> float:
    """max |rotate(x[perm]) - rotate_interleaved(x)[perm]|: the two conventions agree up to a permutation."""
    g = torch.Generator().manual_seed(seed)
    rope = RotaryPositionalEmbedding(HEAD_DIM, max_len=64)
    x = torch.randn(2, N_HEADS, 64, HEAD_DIM, generator=g)  # (B, H, L, head_dim)
    perm = interleaved_to_half_split(HEAD_DIM)
    return (rope.rotate(x[..., perm]) - rope.rotate_interleaved(x)[..., perm]).abs().max().item()


def _small_attention(seed: int = 0) -> MultiHeadAttention:
    torch.manual_seed(seed)
    return MultiHeadAttention(32, 4, dropout=0.0).eval()


def permutation_checks(length: int = 10, seed: int = 0) -> dict:
    """Self-attention with no positions is permutation-equivariant; cross-attention ignores memory order.

    Returns the largest differences for: self-attention, out(x[perm]) vs out(x)[perm]; the same under
    a causal mask (NOT equivariant); cross-attention with the memory rows shuffled vs not.
    """
    attn = _small_attention(seed)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, length, 32, generator=g)  # (B, L, D)
    memory = torch.randn(1, length + 3, 32, generator=g)
    perm = torch.randperm(length, generator=g)
    shuffle = torch.randperm(length + 3, generator=g)
    with torch.no_grad():
        equivariance = (attn(x[:, perm], x[:, perm], x[:, perm]) - attn(x, x, x)[:, perm]).abs().max()
        mask = causal_mask(length)
        causal = (attn(x[:, perm], x[:, perm], x[:, perm], mask) - attn(x, x, x, mask)[:, perm]).abs().max()
        mem = memory[:, shuffle]
        cross = (attn(x, mem, mem) - attn(x, memory, memory)).abs().max()
    return {"equivariance": equivariance.item(), "causal": causal.item(), "cross_shuffle": cross.item()}


def sinusoidal_table64(d_model: int = D_MODEL, length: int = 2 * CHUNK_CHARS) -> torch.Tensor:
    """(length, d_model): the sinusoidal formula computed in float64 (the module stores float32)."""
    p = torch.arange(length, dtype=torch.float64)
    theta = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    angles = p[:, None] * theta  # (L, D/2)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # columns 2i: sin, 2i+1: cos


def min_row_distance(positions: int = CHUNK_CHARS, d_model: int = D_MODEL) -> float:
    """Smallest Euclidean distance between two different rows 0 .. positions-1 of the sinusoidal
    table (float64): above 0, so the code fixes the position, and the phase p mod 8, uniquely."""
    table = sinusoidal_table64(d_model, positions)
    distances = torch.cdist(table, table)
    distances.fill_diagonal_(float("inf"))
    return distances.min().item()


def nearest_pair(period: float = KEY_PERIOD, d_model: int = D_MODEL) -> int:
    """Index of the sinusoidal pair whose wavelength is nearest ``period``."""
    return int((wavelengths(d_model) - period).abs().argmin())


def phase_codes(length: int = 2 * CHUNK_CHARS, d_model: int = D_MODEL, seed: int = 0) -> dict:
    """Position codes (length, dims), float64, to read the key phase p mod 8 from.

    The module's own float32 table; the same formula in float64; a random Gaussian code of the
    same width (no structure at all); the pair [sin, cos](pi p / 4), wavelength exactly 8; and
    the table's pair nearest wavelength 8, alone.
    """
    g = torch.Generator().manual_seed(seed)
    p = torch.arange(length, dtype=torch.float64)
    exact = sinusoidal_table64(d_model, length)
    i = nearest_pair(KEY_PERIOD, d_model)
    return {"table, float32": sinusoidal_table(d_model, length).double(),
            "table, float64": exact,
            "Gaussian, same width": torch.randn(length, d_model, generator=g, dtype=torch.float64),
            "[sin, cos](pi p/4)": torch.stack(((math.pi * p / 4).sin(), (math.pi * p / 4).cos()), dim=-1),
            f"pair {i} alone": exact[:, 2 * i: 2 * i + 2]}


def phase_readout(code: torch.Tensor, fit_positions: int = CHUNK_CHARS, rcond: float | None = None) -> dict:
    """Least-squares linear read-out of the key phase (position mod 8) from a (L, dims) code.

    Fitted on positions 0 .. fit_positions-1 (one-hot targets, ``torch.linalg.lstsq``; rcond:
    singular values below rcond times the largest are treated as 0); returns the share of
    positions whose phase it gets right there ("fit") and on fit_positions .. L-1 ("beyond").
    """
    phase = torch.arange(code.size(0)) % KEY_PERIOD
    target = torch.nn.functional.one_hot(phase, KEY_PERIOD).double()  # (L, 8)
    weights = torch.linalg.lstsq(code[:fit_positions], target[:fit_positions], rcond=rcond,
                                 driver="gelsd").solution  # (dims, 8)
    correct = (code @ weights).argmax(-1) == phase  # (L,)
    return {"fit": correct[:fit_positions].double().mean().item(),
            "beyond": correct[fit_positions:].double().mean().item()}


def phase_readout_table() -> dict:
    """{code name: phase_readout(...)} for every code of phase_codes, and the float32 table with
    singular values under 1e-6 of the largest dropped."""
    codes = phase_codes()
    table = {name: phase_readout(code) for name, code in codes.items()}
    table["table, float32, rcond 1e-6"] = phase_readout(codes["table, float32"], rcond=1e-6)
    return table


def table_rank(double: bool, positions: int = CHUNK_CHARS, d_model: int = D_MODEL) -> int:
    """Numerical rank (torch.linalg.matrix_rank) of the table's rows 0 .. positions-1, built in
    float64 (double=True) or taken from the float32 module."""
    table = sinusoidal_table64(d_model, positions) if double else sinusoidal_table(d_model, positions).double()
    return int(torch.linalg.matrix_rank(table))


def pair_phase_reading(i: int | None = None, length: int = CHUNK_CHARS) -> torch.Tensor:
    """(length,) bool: at which positions the nearest multiple of pi/4 to pair i's angle p*theta_i
    is the key phase's angle (pi/4) * (p mod 8). i=None: the pair nearest wavelength 8."""
    i = nearest_pair() if i is None else i
    theta = 10000.0 ** (-2 * i / D_MODEL)
    p = torch.arange(length, dtype=torch.float64)
    read = torch.round(p * theta / (math.pi / 4)).long() % KEY_PERIOD
    return read == torch.arange(length) % KEY_PERIOD


def first_misread(i: int | None = None) -> int:
    """The first position where pair i (default: nearest wavelength 8) reads the wrong phase."""
    return int((~pair_phase_reading(i)).nonzero()[0])


def preset_positions() -> int:
    """Positions of the longest sequence a preset's chunk makes: BOS, its ``chunk_chars`` characters, EOS."""
    return preset_chunk_chars() + 2


PRESET_READOUT_CODES = ("table, float64", "Gaussian, same width", "[sin, cos](pi p/4)")


def phase_readout_preset(length: int = CHUNK_CHARS) -> dict:
    """:func:`phase_readout` fitted on the positions a preset's chunk occupies (0 .. preset_positions()-1) and
    scored there ("fit") and on the rest of 0 .. length-1 ("beyond"): the float64 table, a random Gaussian
    code of the same width, the pair of wavelength exactly 8 and the table's pair nearest 8, alone."""
    codes = phase_codes(length)
    names = (*PRESET_READOUT_CODES, f"pair {nearest_pair()} alone")
    return {name: phase_readout(codes[name], fit_positions=preset_positions()) for name in names}


# --------------------------------------------------------------------------- where C2 finds the phase

ASSIGNMENT_C2 = make_config("c2", "assignment")  # the preset students train, default recipe


def assignment_head_dim() -> int:
    return ASSIGNMENT_C2.d_model // ASSIGNMENT_C2.n_heads


def long_pairs(chars: int, head_dim: int = D_MODEL // N_HEADS) -> int:
    """How many RoPE pairs of a head of ``head_dim`` have wavelengths beyond ``chars`` positions."""
    return int((wavelengths(head_dim) > chars).sum())


def assignment_tokens(n: int = 12) -> list[tuple[int, str, int, int, int]]:
    """The first ``n`` source tokens of the opening validation line under the assignment preset's aligned BPE
    over phase-tagged bytes: (index, plaintext it covers, first character, last character, key phase), the phase
    being what the codec hands the model as ``src_phase`` (``SubwordCodec.source_phase``)."""
    from cipherbook.experiments import bpe
    from cipherlab.pipeline.codec import SubwordCodec

    src, tgt = bpe.tokenizers("aligned")
    plain, cipher = bpe.opening_line()
    codec = SubwordCodec(src, tgt, aligned=True)
    ids = torch.tensor([src.encode(cipher)[:n]])
    chars, phases = codec.source_chars(ids)[0].tolist(), codec.source_phase(ids)[0].tolist()
    rows, start = [], 0
    for index, (c, phase) in enumerate(zip(chars, phases)):
        rows.append((index, plain[start:start + c], start, start + c - 1, phase))
        start += c
    return rows


def start_marker_spread(causal: bool, marker: bool, length: int = ASSIGNMENT_C2.chunk_chars, seed: int = 0) -> float:
    """How much a fresh RoPE self-attention's output, at the assignment's C2 sizes, varies over positions 1 .. length-1.

    The input is one vector at every position; marker=True puts a different vector at position
    0, as BOS starts every decoder input. causal: with the decoder's causal mask (else none, as
    in the encoder). Returns the largest range, over positions 1 .. length-1, of an output
    coordinate: 0 up to rounding means the layer's output says nothing about where it is.
    """
    torch.manual_seed(seed)
    rope = RotaryPositionalEmbedding(assignment_head_dim(), max_len=length)
    attn = MultiHeadAttention(ASSIGNMENT_C2.d_model, ASSIGNMENT_C2.n_heads, dropout=0.0, rope=rope).eval()
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 1, ASSIGNMENT_C2.d_model, generator=g).repeat(1, length, 1)  # (1, L, D)
    if marker:
        x[:, 0] = torch.randn(ASSIGNMENT_C2.d_model, generator=g)
    with torch.no_grad():
        out = attn(x, x, x, causal_mask(length) if causal else None)[0, 1:]  # (L - 1, D)
    return (out.amax(0) - out.amin(0)).max().item()


def padding_shift_check(shift: int = KEY_PERIOD, n_chunks: int = 4) -> dict:
    """The reference C2 (results/checkpoints/c2.safetensors, bytes mode) on test chunks as they are and with
    ``shift`` PAD ids in front of their source ids (the positions chapter, exercise 2).

    Returns the largest difference between the encoder memory of the real tokens with and
    without the padding, the plaintexts, the texts decoded both ways with the length fixed
    (length-aware greedy, cipherlab's default), the share of characters decoded right without
    padding ("right"), and with padding, the share of outputs shift..end equal to the plaintext
    ``shift`` characters earlier ("delayed"); and how many characters free greedy decoding (EOS where
    the model puts it) writes for each padded chunk ("free_chars").
    """
    from cipherlab.analysis.attention_maps import example_chunks

    model, codec, config = load_committed_model("c2")  # results/checkpoints/c2.safetensors
    chunks = example_chunks(config, n_chunks)  # full chunks: config.chunk_chars characters each
    ids = torch.tensor([codec.encode_source(chunk.cipher) for chunk in chunks])  # (n, Ls)
    shifted = torch.cat([torch.full((len(chunks), shift), codec.src_pad_id), ids], dim=1)  # (n, shift + Ls)
    fixed = LengthConstraint(codec.token_chars(), [config.chunk_chars] * len(chunks), codec.eos_id, ids.device)

    def text(row: torch.Tensor) -> str:
        return codec.decode_target([t for t in row.tolist() if t not in (codec.eos_id, codec.tgt_pad_id)])

    texts = {}
    with torch.no_grad():
        memory, _ = model.encode(ids)
        memory_shifted, _ = model.encode(shifted)
        for name, src in (("as is", ids), ("shifted", shifted)):
            out = greedy_decode(model, src, codec.bos_id, codec.eos_id, config.chunk_chars + 1, step_hook=fixed)
            texts[name] = [text(row) for row in out]
        free = greedy_decode(model, shifted, codec.bos_id, codec.eos_id, config.chunk_chars + 1)
    plains = [chunk.plain for chunk in chunks]

    def share(decoded: str, expected: str) -> float:
        return sum(a == b for a, b in zip(decoded, expected)) / len(expected)

    return {"memory_diff": (memory_shifted[:, shift:] - memory).abs().max().item(), "plain": plains, "texts": texts,
            "right": share("".join(texts["as is"]), "".join(plains)),
            "delayed": share("".join(t[shift:] for t in texts["shifted"]), "".join(p[:-shift] for p in plains)),
            "free_chars": [len(text(row)) for row in free]}


# --------------------------------------------------------------------------- bits mode: which source token a target token needs

BITS_CHUNK_LINES = 100  # validation lines the alignment is measured on


@functools.cache
def bits_source_tokenizer(vocab: int):
    """A bits-mode source BPE of ``vocab`` tokens trained on the tokenisation chapter's few training lines
    (``cipherbook.experiments.bpe``: seconds, where the full-size one takes minutes)."""
    from cipherbook.experiments import bpe
    from cipherlab.data.tokenizers import BPETokenizer

    if vocab == bpe.SRC_VOCAB:
        return bpe.small_cipher_tokenizer("bits")
    _, cipher = bpe.corpus().lines("train")
    return BPETokenizer.train(cipher[:bpe.SMALL_CIPHER_LINES], vocab, pretokenizer="cipher", unit="char",
                              alphabet="01")


def aligned_source(src_tokens: list[str], tgt_tokens: list[str]) -> list[int]:
    """For target token i, the index of the source token holding the first bit of its first
    character: the cipher token that decoder position i needs (8 cipher bits per character)."""
    starts, bit = [], 0
    for token in src_tokens:
        starts.append(bit)
        bit += len(token)
    needed, char = [], 0
    for token in tgt_tokens:
        needed.append(int(torch.searchsorted(torch.tensor(starts), torch.tensor(8 * char), right=True)) - 1)
        char += len(token)
    return needed


@functools.cache
def bits_alignment(chunk_chars: int, src_vocab: int, tgt_vocab: int | None) -> dict:
    """Where the source token each target token needs sits, in bits mode, over full chunks of the
    first validation lines.

    tgt_vocab None: one character per target token (the cpu preset); else the tokenisation chapter's small
    target BPE (1000 tokens). Returns the mean source and target tokens a chunk, their ratio,
    the mean offset j - i of the last target token of a chunk (0 all along would be a diagonal),
    and the share of target tokens whose source token j is within one position of i ("diagonal")
    or of round(r i) with r the chunk's own ratio ("scaled").
    """
    from cipherlab.data.corpus import make_chunks
    from cipherbook.experiments import bpe

    src = bits_source_tokenizer(src_vocab)
    tgt = None if tgt_vocab is None else bpe.small_plain_tokenizer()
    plain, cipher = bpe.corpus().lines("val")
    chunks = [c for c in make_chunks(plain, cipher, range(BITS_CHUNK_LINES), chunk_chars) if len(c.plain) == chunk_chars]
    n_src = n_tgt = near = scaled = 0
    last = []
    for chunk in chunks:
        src_tokens = src.tokenize(chunk.cipher)
        tgt_tokens = list(chunk.plain) if tgt is None else tgt.tokenize(chunk.plain)
        needed = aligned_source(src_tokens, tgt_tokens)
        ratio = len(src_tokens) / len(tgt_tokens)
        n_src, n_tgt = n_src + len(src_tokens), n_tgt + len(tgt_tokens)
        near += sum(abs(j - i) <= 1 for i, j in enumerate(needed))
        scaled += sum(abs(j - round(ratio * i)) <= 1 for i, j in enumerate(needed))
        last.append(needed[-1] - (len(needed) - 1))
    return {"chunks": len(chunks), "src": n_src / len(chunks), "tgt": n_tgt / len(chunks), "ratio": n_src / n_tgt,
            "last_offset": sum(last) / len(last), "diagonal": near / n_tgt, "scaled": scaled / n_tgt}


def bits_alignments() -> dict:
    """bits_alignment for the course notes' shape (256-character chunks, their bits BPE) and for the cpu
    preset's (results/notes/cpu-bits)."""
    from cipherbook.experiments import bpe

    return {"notes shape": bits_alignment(CHUNK_CHARS, bpe.SRC_VOCAB, bpe.SMALL_TGT_VOCAB),
            "cpu-bits shape": bits_alignment(CPU_C2.chunk_chars, run_records(BITS)["c2"]["hyperparameters"]["src_vocab"],
                                             None)}


def shift_map_error(shift: int = KEY_PERIOD, d_model: int = D_MODEL, length: int = MAX_LEN) -> float:
    """max_p |R PE(p) - PE(p + shift)| for the fixed block rotation R by shift * theta_i: exact at every p."""
    pe = sinusoidal_table(d_model, length).double()
    angle = shift * inverse_frequencies(d_model).double()  # (D/2,)
    sin_p, cos_p = pe[:-shift, 0::2], pe[:-shift, 1::2]  # (L - shift, D/2): sin(p w), cos(p w)
    sin_next = sin_p * angle.cos() + cos_p * angle.sin()  # sin((p + shift) w)
    cos_next = cos_p * angle.cos() - sin_p * angle.sin()  # cos((p + shift) w)
    return max((sin_next - pe[shift:, 0::2]).abs().max().item(), (cos_next - pe[shift:, 1::2]).abs().max().item())


# --------------------------------------------------------------------------- RoPE in cross-attention

def cross_attention_probe(rope_cross: bool, target_len: int = 24, source_len: int = 32, *,
                          aligned: bool = False, gain: float = 1.0, seed: int = 0) -> dict:
    """Scores and weights (H, Lt, Ls) of the cross-attention of a fresh C2 decoder, cpu preset sizes.

    The same vector sits at every target position and the same vector at every source position,
    so whatever varies across a head's score matrix comes from positions alone. The model is
    built as training builds C2 (``Seq2SeqTransformer(ModelArgs(..., pos_encoding="rope",
    rope_cross_attention=rope_cross))``) and its first decoder layer's ``cross_attn`` runs its own
    forward with the ``q_offset`` that ``DecoderLayer`` passes (0 for a full target, None
    without RoPE). The raw scores are q k^T / sqrt(d) of the q and k that forward hands to
    ``ScaledDotProductAttention``, rotated or not; the weights are what that module captures.

    aligned=True copies the key projection into the query projection and uses one vector on
    both sides, so query and key are equal before rotation; gain scales that vector (a larger
    gain gives a sharper softmax, as larger learned weights would).
    """
    torch.manual_seed(seed)
    model = Seq2SeqTransformer(ModelArgs(8, 8, d_model=CPU_C2.d_model, n_heads=CPU_C2.n_heads, enc_layers=1,
                                         dec_layers=1, dropout=0.0, pos_encoding="rope",
                                         rope_cross_attention=rope_cross)).eval()
    # (vocabularies of 8: unused, the vectors below go straight into the cross-attention)
    attn = model.decoder.layers[0].cross_attn
    g = torch.Generator().manual_seed(seed)
    target_vector = gain * torch.randn(1, 1, CPU_C2.d_model, generator=g)
    source_vector = target_vector if aligned else torch.randn(1, 1, CPU_C2.d_model, generator=g)
    x = target_vector.expand(1, target_len, -1)  # (1, Lt, D): one vector at every target position
    memory = source_vector.expand(1, source_len, -1)  # (1, Ls, D)
    seen = {}
    hook = attn.attention.register_forward_pre_hook(lambda module, args: seen.update(q=args[0], k=args[1]))
    attn.attention.capture = True
    try:
        with torch.no_grad():
            if aligned:
                attn.q_proj.load_state_dict(attn.k_proj.state_dict())
            attn(x, memory, memory, q_offset=0 if attn.rope is not None else None)
    finally:
        hook.remove()
        attn.attention.capture = False
    q, k = seen["q"][0], seen["k"][0]  # (H, Lt, d), (H, Ls, d)
    return {"scores": q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), "weights": attn.attention.last_attn[0]}


def cross_rope_checks() -> dict:
    """What the cross-attention probe shows, as numbers.

    diagonal_err: with RoPE in cross-attention, how far the scores are from depending on
    (target - source) position only (float32 rounding). flat_spread: without it, the largest
    range of one head's scores (0: no position at all). aligned_diag_share: with RoPE and equal
    query and key, the share of target positions whose largest weight falls on the source
    position with the same index; aligned_uniform_err: the same layer without RoPE, the largest
    distance of a weight from 1 / Ls (0: every source position weighted alike).
    """
    with_rope, without = cross_attention_probe(True)["scores"], cross_attention_probe(False)["scores"]
    aligned = cross_attention_probe(True, aligned=True)["weights"]  # (H, Lt, Ls)
    uniform = cross_attention_probe(False, aligned=True)["weights"]
    on_diagonal = aligned.argmax(-1) == torch.arange(aligned.size(1))  # (H, Lt)
    return {"diagonal_err": toeplitz_error(with_rope),
            "flat_spread": (without.amax((-2, -1)) - without.amin((-2, -1))).max().item(),
            "aligned_diag_share": on_diagonal.double().mean().item(),
            "aligned_uniform_err": (uniform - 1 / uniform.size(-1)).abs().max().item()}


# --------------------------------------------------------------------------- the committed runs

def shared_value(what: str, values: dict):
    """The one value every configuration in ``values`` shares; an error naming them where they differ
    (a sentence such as "both decode N lines" or "N epochs each" would no longer be true)."""
    if len(set(values.values())) != 1:
        raise ValueError(f"{what} differs between configurations: {values}; reword the answer that says they agree")
    return next(iter(values.values()))


def cross_rotation(folder: str, config: str = "c2") -> str:
    """"on" where a run's C2 rotated cross-attention too (hyperparameters.rope_cross_attention), else "off"."""
    return "on" if run_records(folder)[config]["hyperparameters"]["rope_cross_attention"] else "off"


def preset_chunk_chars() -> int:
    """``chunk_chars`` of every preset (``cipherlab.base.config.PRESETS``): the one value they share."""
    from cipherlab.base.config import PRESETS, make_config

    values = {name: make_config("c1", name).chunk_chars for name in PRESETS}
    if len(set(values.values())) != 1:
        raise ValueError(f"the presets' chunk_chars differ ({values}); one number for all of them would be wrong")
    return next(iter(values.values()))


def reference_totals(config: str) -> dict[int, dict]:
    """``config`` against C1 in the reference ablation (results/reference), summed over its probe sets, seed by
    seed: ``{seed: {"lines": ..., "base_exact": C1's exact lines, "exact": config's}}``."""
    from cipherbook.experiments.common import reference_paired

    totals: dict[int, dict] = {}
    for row in reference_paired():
        if row["config"] == config:
            seed = totals.setdefault(row["seed"], {"lines": 0, "base_exact": 0, "exact": 0})
            for key in seed:
                seed[key] += row[key]
    if not totals:
        raise ValueError(f"results/reference has no paired outcomes of {config} and c1")
    return dict(sorted(totals.items()))


def reference_lowest_set_p(config: str = "c2") -> list[float]:
    """McNemar p-values of ``config`` against C1 in the reference ablation, one per seed in seed order, on the
    probe set where its lowest p-value falls (:func:`common.reference_against_c1`)."""
    from cipherbook.experiments import common

    low_set = common.reference_against_c1(config)["set"]
    rows = [row for row in common.paired_rows(common.reference_runs())
            if row["config"] == config and row["label"] == low_set]
    return [row["p"] for row in sorted(rows, key=lambda row: row["seed"])]
