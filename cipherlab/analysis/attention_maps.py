"""Looking inside a trained model: its attention weights, captured, mapped to characters, measured, drawn.

What a trained model attends to, in one module:

- :func:`capturing` and :func:`capture_attention` record the weights of a model's attention modules
  during one teacher-forced forward pass (``ScaledDotProductAttention.capture``), as raw
  (B, H, Lq, Lk) tensors over tokens;
- :func:`attention_view` goes one step further and maps every weight back to *characters*
  (:func:`coverage`, :func:`to_characters`), so that a BPE model and the byte-level BLT can be
  compared on one grid (:class:`AttentionView`);
- :func:`band_mass` (weight on the diagonal), :func:`same_phase_share` (weight at the cipher's
  period of 8), :func:`offset_profile` and :func:`attention_summary` / :func:`attention_table`
  measure what the pictures show;
- :func:`plot_heads` draws every head of one module, :func:`plot_head` one head large,
  :func:`plot_offsets` the weight by offset;
- :func:`example_chunks` gives a few test chunks to look at (the model to look with comes from
  ``cipherlab.runner.trained.load_trained``).

Every plotting function returns a matplotlib Figure that pyplot no longer holds: show it with
``display(fig)`` (or as a cell's last expression), save it with ``fig.savefig``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from cipherlab.data.cipher import PERIOD  # the cipher's key length: characters 8 apart share a key byte
from cipherlab.base.config import Config
from cipherlab.pipeline.codec import teacher_forcing_logits
from cipherlab.data.tokenizers.cipher_task import aligned_target_ids
from cipherlab.models.attention import ScaledDotProductAttention
from cipherlab.analysis.ablation.plots import figure
from cipherlab.base.markdown import markdown_table

__all__ = [
    "PERIOD",
    "AttentionView",
    "attention_modules",
    "attention_summary",
    "attention_table",
    "attention_view",
    "band_mass",
    "capture_attention",
    "capturing",
    "coverage",
    "example_chunks",
    "offset_profile",
    "plot_head",
    "plot_heads",
    "plot_offsets",
    "same_phase_share",
    "to_characters",
    "uniform_same_phase_share",
]


# --------------------------------------------------------------------------- capturing the weights


def attention_modules(model) -> dict[tuple[str, int], torch.nn.Module]:
    """``{(kind, layer): ScaledDotProductAttention}`` for every attention module of a cipherlab model.

    ``Seq2SeqTransformer`` (C1-C4): ``"encoder self"``, ``"decoder self"`` and ``"cross"`` (decoder
    token -> source token; a student's own self-attention, which keeps no weights, is left out).
    ``BLTModel`` (C5): ``"encoder self"`` (the local encoder over cipher bytes,
    inside windows), ``"cross"`` (the local decoder's direct path to the source, ``memory_attn``) and
    ``"global encoder self"`` (the patch-level encoder).
    Both families name their attention modules by role (``model.attention_modules()``); each
    cipherlab attention keeps its softmax in a ScaledDotProductAttention, ``.attention``.
    """
    # A student's own self-attention (train --part) keeps no weights to capture: it is left out.
    return {key: module.attention for key, module in model.attention_modules().items()
            if isinstance(getattr(module, "attention", None), ScaledDotProductAttention)}


@contextlib.contextmanager
def capturing(cores):
    """Switch on ``capture`` of some ScaledDotProductAttention modules (a dict or a list) while inside."""
    cores = list(cores.values()) if isinstance(cores, dict) else list(cores)
    for core in cores:
        core.capture = True
    try:
        yield
    finally:
        for core in cores:
            core.capture = False


def capture_attention(model, batch: dict) -> dict[tuple[str, int], torch.Tensor]:
    """One teacher-forced pass over ``batch`` (``src``, ``tgt`` and, for the BLT, the patch tensors):
    the weights (B, H, Lq, Lk) of every module of :func:`attention_modules`, over tokens.

    The BLT's local encoder attends inside windows; its maps are returned as the windows stand,
    (B * windows, H, W, W) -- :func:`attention_view` puts them back on the diagonal.
    """
    cores = attention_modules(model)
    model.eval()
    with capturing(cores), torch.no_grad():
        teacher_forcing_logits(model, batch)
    return {key: core.last_attn.float() for key, core in cores.items()}


# --------------------------------------------------------------------------- from tokens to characters


@dataclass
class AttentionView:
    """The attention weights of one model on a few chunks, mapped to characters.

    ``maps[(kind, layer)]`` is (B, H, L, L) for B chunks of L characters: row i is the query of
    (the token, patch or byte that holds) character i, column j the weight that reaches character j.
    A token's or patch's weight is shared equally among its characters (bits, for a BPE token over
    cipher bits), and a character's row is the row of the token that holds it, so every model --
    BPE tokens, bytes, patches -- lands on the same character grid and rows still sum to 1, less the
    weight on a token that holds no character (the end-of-source token, ``Config.source_eos``).
    """

    config: str
    texts: list[str]
    maps: dict[tuple[str, int], torch.Tensor]

    @property
    def kinds(self) -> list[str]:
        return list(dict.fromkeys(kind for kind, _ in self.maps))

    def layers(self, kind: str) -> int:
        return sum(k == kind for k, _ in self.maps)

    @property
    def n_heads(self) -> int:
        return next(iter(self.maps.values())).size(1)


def coverage(lengths: Sequence[int], unit: int) -> torch.Tensor:
    """(tokens, characters): how many of each token's ``unit``-sized pieces fall in each character.

    Token i covers units [start_i, start_i + lengths[i]); character c covers [c * unit, (c + 1) * unit).
    """
    total = sum(lengths)
    if total % unit:
        raise ValueError(f"tokens cover {total} units, not a whole number of {unit}-unit characters")
    cover = torch.zeros(len(lengths), total // unit)
    start = 0
    for i, length in enumerate(lengths):
        for c in range(start // unit, (start + length - 1) // unit + 1):
            cover[i, c] = min(start + length, (c + 1) * unit) - max(start, c * unit)
        start += length
    return cover


def to_characters(weights: torch.Tensor, query_cover: torch.Tensor, key_cover: torch.Tensor) -> torch.Tensor:
    """(H, Tq, Tk) token weights -> (H, L, L) character weights (see :class:`AttentionView`).

    ``*_cover`` are (tokens, L) coverage counts: a character's row is the mix of the rows of the
    tokens holding it (in proportion), a token's weight is spread over its characters (in proportion).
    """
    rows = query_cover / query_cover.sum(0, keepdim=True).clamp(min=1e-12)  # (Tq, L), columns sum to 1
    cols = key_cover / key_cover.sum(1, keepdim=True).clamp(min=1e-12)  # (Tk, L), rows sum to 1
    return rows.T @ weights @ cols  # (L, Tq) @ (H, Tq, Tk) @ (Tk, L) -> (H, L, L)


def attention_view(model, codec, chunks: Sequence, name: str = "") -> AttentionView:
    """Teacher-forced attention weights of ``model`` on ``chunks`` (all the same length), per character.

    The modules of :func:`attention_modules` except the decoder's self-attention (whose rows and
    columns are both target tokens): ``"encoder self"``, ``"cross"`` and, for the BLT,
    ``"global encoder self"``.
    """
    lengths = {len(c.plain) for c in chunks}
    if len(lengths) != 1:
        raise ValueError(f"attention_view needs chunks of one length, got lengths {sorted(lengths)}")
    data = codec.dataset(chunks)
    batch = codec.collate([data[i] for i in range(len(data))])
    raw = {key: w for key, w in capture_attention(model, batch).items() if key[0] != "decoder self"}
    if codec.kind == "blt":  # the local encoder attends inside windows: put them back on the diagonal
        window = model.window
        raw |= {key: _unwindow(w, batch["src"].size(1), window) for key, w in raw.items() if key[0] == "encoder self"}
    maps = {key: [] for key in raw}
    for b, chunk in enumerate(chunks):
        for key, (q_cover, k_cover) in _covers(codec, batch, b, chunk, model).items():
            if key not in raw:  # a student's own attention (train --part): no weights were kept
                continue
            weights = raw[key][b, :, : q_cover.size(0), : k_cover.size(0)]  # (H, Tq, Tk) without padding
            maps[key].append(to_characters(weights, q_cover, k_cover))
    name = name or ("C5" if codec.kind == "blt" else "C1-C4")
    return AttentionView(config=name, texts=[c.plain for c in chunks],
                         maps={k: torch.stack(v) for k, v in maps.items()})


def _covers(codec, batch: dict, b: int, chunk, model) -> dict:
    """{(kind, layer): (query coverage, key coverage)} of example ``b``, both (tokens, characters)."""
    if codec.kind == "bpe":
        src_ids = codec.src.encode(chunk.cipher)
        # bits each source token covers: a phase-tagged token's string carries one tag letter per 8 bits
        src_bits = [len(codec.src.token(i)) // 9 * 8 if getattr(codec, "phased", False) else len(codec.src.token(i))
                    for i in src_ids]
        # aligned targets (Config.target_tokens) are cut where the source is, not by the target's own merges
        tgt_ids = (aligned_target_ids(codec.src, codec.tgt, src_ids, chunk.plain) if getattr(codec, "aligned", False)
                   else codec.tgt.encode(chunk.plain))
        src_tokens, tgt_tokens = src_bits, [codec.tgt.token(i) for i in tgt_ids]
        if getattr(codec, "source_eos", False):  # the end-of-source token covers no character
            src_tokens = [*src_tokens, 0]
        n_src = int((batch["src"][b] != codec.src_pad_id).sum())
        if len(src_tokens) != n_src:
            raise ValueError(f"the source tokenizer cut chunk {b} into {len(src_tokens)} pieces but encoded "
                             f"{n_src} ids; attention_view cannot map its weights to characters")
        src = coverage(src_tokens, 8)  # bits per token, 8 bits per character
        # characters per token; an unknown character is one <unk> token, whose text is not the character's
        unk = [i == codec.tgt.unk_id for i in tgt_ids]
        tgt = coverage([1 if u else len(t) for t, u in zip(tgt_tokens, unk)], 1)
        # cross-attention row i predicts token i + 1 of [BOS, t1, ..., tn, EOS]: rows 0..n-1 hold t1..tn
        covers = {"encoder self": (src, src), "cross": (tgt, src)}
        return {key: covers[key[0]] for key in model.attention_modules() if key[0] in covers}
    n = len(chunk.plain)
    member = batch["src_member"][b, :, :n].float()  # (Ks, n): which bytes each source patch holds
    member = member[: int((member.sum(1) > 0).sum())]  # drop the padding patches at the end
    byte = torch.eye(n)
    # the local decoder's direct path reads the source byte states, or the patches
    source = byte if model.source_memory == "bytes" else member
    # row i of the local decoder reads [BOS] + plain[:i] and predicts plain[i]
    covers = {"encoder self": (byte, byte), "cross": (byte, source), "global encoder self": (member, member)}
    return {key: covers[key[0]] for key in model.attention_modules() if key[0] in covers}


def _unwindow(weights: torch.Tensor, L: int, window: int) -> torch.Tensor:
    """Windowed self-attention weights (B * n_win, H, W, W) -> the block-diagonal (B, H, L, L) they stand for."""
    W = min(window, L)
    n_win = -(-L // W)
    H = weights.size(1)
    blocks = weights.reshape(-1, n_win, H, W, W)  # (B, n_win, H, W, W)
    full = weights.new_zeros(blocks.size(0), H, n_win * W, n_win * W)
    for k in range(n_win):
        full[:, :, k * W:(k + 1) * W, k * W:(k + 1) * W] = blocks[:, k]
    return full[:, :, :L, :L]


# --------------------------------------------------------------------------- measuring the maps


def _offsets(L: int) -> torch.Tensor:
    """(L, L) key position minus query position."""
    idx = torch.arange(L)
    return idx[None, :] - idx[:, None]


def band_mass(weights: torch.Tensor, width: int = 0) -> torch.Tensor:
    """(..., L, L) -> (...,): mean over query rows of the weight on keys within ``width`` of the diagonal.

    1.0 means every character attends only to its own position (``width`` 0) or its neighbours.
    """
    near = (_offsets(weights.size(-1)).abs() <= width).to(weights.dtype)
    return (weights * near).sum(-1).mean(-1)


def same_phase_share(weights: torch.Tensor, period: int = PERIOD) -> torch.Tensor:
    """(..., L, L) -> (...,): of the weight a character gives to *other* positions, the share that goes
    to positions a multiple of ``period`` away -- those that share its key byte.

    Uniform attention gives about 1/period (see :func:`uniform_same_phase_share`).
    """
    offsets = _offsets(weights.size(-1))
    other = (offsets != 0).to(weights.dtype)
    same = ((offsets % period == 0) & (offsets != 0)).to(weights.dtype)
    return ((weights * same).sum(-1) / (weights * other).sum(-1).clamp(min=1e-12)).mean(-1)


def uniform_same_phase_share(L: int, period: int = PERIOD) -> float:
    """:func:`same_phase_share` of uniform attention over L positions: the share expected by chance."""
    return float(same_phase_share(torch.full((L, L), 1.0 / L), period))


def offset_profile(weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(offsets -L+1 .. L-1, mean weight at each offset (..., 2L - 1)), averaged over the query rows
    where that offset exists: a peak at multiples of 8 is the cipher's period."""
    L = weights.size(-1)
    offsets = _offsets(L)
    values = torch.arange(-L + 1, L)
    profile = torch.stack([weights[..., offsets == d].mean(-1) for d in values.tolist()], dim=-1)
    return values, profile


def attention_summary(views: dict[str, AttentionView]) -> list[dict]:
    """For every module of every view, averaged over its chunks: the best head on the diagonal
    (``band_mass``), within one character of it, and by same-key-phase share."""
    rows = []
    for name, view in views.items():
        for (kind, layer), weights in view.maps.items():
            mean = weights.mean(0)  # (H, L, L)
            diag, near, phase = band_mass(mean), band_mass(mean, 1), same_phase_share(mean)
            rows.append({"model": name, "kind": kind, "layer": layer,
                         "diagonal": diag.max().item(), "diagonal_head": int(diag.argmax()),
                         "near": near.max().item(), "phase": phase.max().item(), "phase_head": int(phase.argmax())})
    return rows


def attention_table(summary: list[dict]) -> str:
    """:func:`attention_summary` as a Markdown table."""
    rows = [[r["model"], r["kind"], r["layer"], f"{r['diagonal']:.2f} (head {r['diagonal_head']})", f"{r['near']:.2f}",
             f"{r['phase']:.2f} (head {r['phase_head']})"] for r in summary]
    return markdown_table(["model", "attention", "layer", "diagonal, best head", "±1 character",
                           "same key phase, best head"], rows)


# --------------------------------------------------------------------------- chunks to look at


def example_chunks(config: Config, n: int = 4, split: str = "test", corpus=None) -> list:
    """The first ``n`` full-length chunks (``config.chunk_chars`` characters) of a split, phase-aligned."""
    from cipherlab.data.corpus import load_corpus, make_chunks

    corpus = corpus or load_corpus()
    chunks = make_chunks(corpus.plain, corpus.cipher, corpus.splits[split], config.chunk_chars)
    full = [c for c in chunks if len(c.plain) == config.chunk_chars]
    if len(full) < n:
        raise ValueError(f"only {len(full)} full-length chunks in the {split} split; ask for fewer")
    return full[:n]


# --------------------------------------------------------------------------- plots


def _grid(ax, L: int, period: int | None) -> None:
    """A white line every ``period`` positions (the key's period), none when ``period`` is None."""
    for edge in range(period or L, L, period or L):
        ax.axvline(edge - 0.5, color="white", lw=0.4, alpha=0.6)
        ax.axhline(edge - 0.5, color="white", lw=0.4, alpha=0.6)


def plot_heads(weights: torch.Tensor, title: str, example: int = 0, *, period: int | None = None,
               vmax: float | None = 1.0, xlabel: str = "cipher byte (key)",
               ylabel: str = "output position (query)", ncols: int | None = None):
    """Every head of one attention module on one example: ``weights`` (B, H, Lq, Lk), from
    :func:`capture_attention` or an :class:`AttentionView`'s ``maps``.

    One panel per head (``ncols`` per row, all in one row by default), colours from 0 to ``vmax``
    (None: the largest weight shown); ``period`` draws a grid line every ``period`` positions.
    """
    shown = weights[example].detach().float().cpu()  # (H, Lq, Lk)
    H = shown.size(0)
    ncols = min(ncols or H, H)
    nrows = -(-H // ncols)
    fig, axes = figure(ncols, width=3.0, height=3.2, nrows=nrows)  # the panel size of one head
    top = float(shown.max()) if vmax is None else vmax
    for ax in axes[H:]:
        ax.set_visible(False)
    for h, ax in enumerate(axes[:H]):
        ax.imshow(shown[h].numpy(), cmap="viridis", vmin=0, vmax=top)
        _grid(ax, shown.size(-1), period)
        ax.set_title(f"head {h}", fontsize=10)
        if h // ncols == nrows - 1:
            ax.set_xlabel(xlabel)
        if h % ncols == 0:
            ax.set_ylabel(ylabel)
    fig.suptitle(title)
    return fig


def plot_head(view: AttentionView, kind: str, layer: int, head: int, example: int = 0):
    """One head of an :class:`AttentionView` on one chunk, large, with the chunk's text along the query axis."""
    weights = view.maps[(kind, layer)][example, head]  # (L, L)
    fig, axes = figure(1, width=4.6, height=4.4)
    ax = axes[0]
    ax.imshow(weights.numpy(), cmap="viridis", vmin=0, vmax=float(weights.max()))
    _grid(ax, weights.size(-1), PERIOD)
    text = view.texts[example]
    ax.set_yticks(range(len(text)), list(text), fontsize=6, family="monospace")
    ax.set_xlabel("key character (source position)")
    ax.set_ylabel("query character")
    ax.set_title(f"{view.config}: {kind}, layer {layer}, head {head}", fontsize=10)
    return fig


def plot_offsets(view: AttentionView, kind: str, layer: int):
    """Mean attention weight by offset (key minus query character) for every head of one module."""
    values, profile = offset_profile(view.maps[(kind, layer)].mean(0))  # (H, 2L - 1)
    fig, axes = figure(1, width=7.5, height=3.0)
    ax = axes[0]
    for h in range(profile.size(0)):
        ax.plot(values.numpy(), profile[h].numpy(), lw=1, label=f"head {h}")
    for edge in range(-values.max().item() // PERIOD * PERIOD, values.max().item() + 1, PERIOD):
        ax.axvline(edge, color="grey", lw=0.5, ls=":")
    ax.set_xlabel("key position minus query position (characters)")
    ax.set_ylabel("mean weight")
    ax.set_title(f"{view.config}: {kind}, layer {layer}", fontsize=10)
    ax.legend(fontsize=7, ncol=4)
    return fig
