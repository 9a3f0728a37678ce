"""From cipher bits to plaintext with a trained model: greedy and beam search, with or without
a KV cache.

Decoding is autoregressive: start from BOS, ask the model for the next token, append the most
likely one, repeat until EOS. Every loop here drives both model families through one incremental
interface: ``model.begin_decoding(src, **source)`` runs the encoder once and returns a
:class:`~cipherlab.models.transformer.DecodingState`; ``model.decode_step(state, tokens)`` feeds
one token per row and returns the next-token logits, reading and extending the state's cache
(C1-C4: the decoder's keys and values; C5: the local decoder's window, the global slots and the
global decoder's keys and values). ``use_cache=False`` instead runs ``model.decode_prefix`` over
the whole prefix at every step, the reference the caches are tested against. ``source`` is
whatever else the model reads of the source besides ``src``, as the codec's batch names it
(:meth:`cipherlab.pipeline.codec.Codec.model_source`; C5's ``src_member``, nothing for C1-C4): no loop
here knows which family it drives.

- :func:`greedy_decode`: batched greedy decoding; with a ``step_hook`` such as
  :class:`LengthConstraint`, length-aware greedy decoding.
- :func:`beam_search`: the ``beam_size`` best prefixes per line, a batch of lines at once.
- :func:`decode_batch`, :func:`decrypt_chunks`, :func:`decrypt_lines`: a codec's batch, chunks,
  or whole cipher lines (the last two greedy and length-aware unless told otherwise:
  :func:`length_aware_by_default`). Long lines are decoded the way the model was trained: cut into
  phase-aligned chunks with :func:`cipherlab.data.corpus.make_chunks`, decoded in length-bucketed batches,
  and put back in order with :func:`cipherlab.data.corpus.reassemble` from each chunk's (line, part) metadata.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from cipherlab.data.cipher import check_bits
from cipherlab.pipeline.codec import Codec
from cipherlab.data.corpus import BucketBatchSampler, Chunk, make_chunks, reassemble
from cipherlab.base.device import autocast
from cipherlab.models.attention import select_rows

__all__ = [
    "AlignedLengthConstraint",
    "LengthConstraint",
    "Recomputed",
    "beam_search",
    "begin_decoding",
    "decode_batch",
    "decode_step",
    "decrypt_chunks",
    "decrypt_lines",
    "foreign_note",
    "foreign_share",
    "greedy_decode",
    "length_aware_by_default",
    "trained_alphabet",
]


def length_aware_by_default(beam_size: int = 1, length_aware: bool | None = None) -> bool:
    """Whether decoding is length-aware: ``length_aware`` when given; by default (None) greedy decoding is
    (each line ends where its cipher says, 8 bits a character: the task states the length) and beam search,
    which the length constraint does not take, is free. The one default of the library and of ``python -m
    cipherlab`` train, evaluate and decrypt (``--free`` there, ``length_aware=False`` here, decodes freely).

    >>> length_aware_by_default(), length_aware_by_default(4), length_aware_by_default(1, False)
    (True, False, False)
    """
    return beam_size == 1 if length_aware is None else length_aware


@dataclass
class Recomputed:
    """The decoding state without a cache: the encoder's outputs and the prefix fed so far.

    Each step runs the model's ``decode_prefix`` over the whole prefix and keeps the last position's
    logits: the slow, obviously correct reference for the cached ``decode_step`` of both families.
    """

    encoded: object  # the model's begin_decoding state: what decode_prefix reads besides the prefix
    prefix: torch.Tensor  # (B, t) tokens fed so far

    def select(self, index: torch.Tensor) -> Recomputed:
        return select_rows(self, index)


def begin_decoding(model: nn.Module, src: torch.Tensor, *source: torch.Tensor, use_cache: bool = True,
                   **named: torch.Tensor):
    """Encode src (B, Ls) once, with what else the model reads of the source (C5: src_member
    (B, Ks, Ls), by position or by name); -> the state :func:`decode_step` reads."""
    state = model.begin_decoding(src, *source, **named)
    return state if use_cache else Recomputed(state, src.new_zeros(src.size(0), 0))


def decode_step(model: nn.Module, state, tokens: torch.Tensor) -> torch.Tensor:
    """Feed tokens (B,), one per row, at the next target position; -> next-token logits (B, V)."""
    if not isinstance(state, Recomputed):
        return model.decode_step(state, tokens)
    state.prefix = torch.cat((state.prefix, tokens[:, None]), dim=1)  # (B, t + 1)
    return model.decode_prefix(state.encoded, state.prefix)[:, -1]


def _limits(max_len: int | Sequence[int], rows: int, device) -> torch.Tensor:
    """(rows,) the most tokens each row may generate: one ``max_len`` for all, or one per row."""
    if isinstance(max_len, int):
        return torch.full((rows,), max_len, dtype=torch.long, device=device)
    if len(max_len) != rows:
        raise ValueError(f"max_len has {len(max_len)} entries for {rows} rows; give one per row, or one int")
    return torch.tensor(list(max_len), dtype=torch.long, device=device)


@torch.inference_mode()  # no autograd graph: each step's cached keys and values would keep it alive
def greedy_decode(model: nn.Module, src: torch.Tensor, bos_id: int, eos_id: int, max_len: int | Sequence[int], *,
                  use_cache: bool = True, step_hook=None, pad_id: int | None = None,
                  **source: torch.Tensor) -> torch.Tensor:
    """src (B, Ls) [and, by name, what else the model reads: C5's src_member] -> (B, <= max_len)
    generated ids, without BOS.

    Every row starts from BOS and appends its argmax token; a row that has emitted EOS (kept in
    the output) continues with PAD, and the loop stops once every row has emitted EOS or after
    max_len tokens (an int, or one limit per row: a row then stops at its own, so a line decodes the
    same alone and in any batch). PAD (``model.tgt_pad_id`` unless ``pad_id``) is never predicted: it is not a
    training target. ``step_hook(logits (B, V), ys (B, t)) -> logits`` may change the scores before
    each argmax (:class:`LengthConstraint` does). ``use_cache=False`` recomputes the whole prefix
    at every step: the same output, slower.
    """
    pad_id = model.tgt_pad_id if pad_id is None else pad_id
    state = begin_decoding(model, src, use_cache=use_cache, **source)
    B = src.size(0)
    ys = torch.full((B, 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    done = torch.zeros(B, dtype=torch.bool, device=src.device)
    limits = _limits(max_len, B, src.device)
    for step in range(int(limits.max()) if B else 0):
        done |= limits <= step  # rows at their own limit generate nothing more
        if done.all():
            break
        logits = decode_step(model, state, ys[:, -1]).clone()  # (B, V)
        logits[:, pad_id] = float("-inf")
        if step_hook is not None:
            logits = step_hook(logits, ys)
        next_id = logits.argmax(dim=-1).masked_fill(done, pad_id)  # (B,)
        ys = torch.cat((ys, next_id[:, None]), dim=1)
        done |= next_id == eos_id
        if done.all():
            break
    return ys[:, 1:]


@torch.inference_mode()
def beam_search(
    model: nn.Module,
    src: torch.Tensor,
    bos_id: int,
    eos_id: int,
    max_len: int | Sequence[int],
    beam_size: int = 4,
    pad_id: int | None = None,
    use_cache: bool = True,
    **source: torch.Tensor,
) -> list[list[int]]:
    """The most likely target ids (without BOS) of every source row of src (B, Ls), by beam search
    (``source``: what else the model reads, by name, as in :func:`greedy_decode`).

    Each line keeps ``beam_size`` prefixes (rows of one batch of B * beam_size): each step extends
    every live prefix by every token, keeps the line's ``beam_size`` candidates with the highest
    total log-probability, and retires those that end in EOS. A line stops when it has
    ``beam_size`` retired prefixes or none live; its rows then leave the batch. The winner is
    the retired (or, at its ``max_len``, live) prefix with the best log-probability per token, so
    that short outputs are not preferred merely for having fewer terms to multiply. All lines
    advance together through :func:`decode_step`, so the encoder runs once per line and each step
    costs one token per row. ``max_len``: one limit for all lines or one per line; with a limit per
    line, the result of a line does not depend on the others in the batch.
    """
    if beam_size < 1:
        raise ValueError(f"beam_size={beam_size}; a beam keeps at least 1 prefix")
    pad_id = model.tgt_pad_id if pad_id is None else pad_id
    B, k, device = src.size(0), beam_size, src.device
    state = begin_decoding(model, src, use_cache=use_cache, **source).select(
        torch.arange(B, device=device).repeat_interleave(k))  # (B * k) rows: k per line
    ys = torch.full((B * k, 1), bos_id, dtype=torch.long, device=device)  # (B * k, t)
    scores = torch.full((B, k), float("-inf"), device=device)  # (lines, k) total log-probabilities
    scores[:, 0] = 0.0  # one live prefix per line to begin with: [BOS]
    lines = list(range(B))  # the line of each group of k rows still decoding
    finished: list[list[tuple[list[int], float]]] = [[] for _ in range(B)]
    limits = _limits(max_len, B, device).tolist()
    for step in range(1, max(limits, default=0) + 1):  # step: tokens generated after this one
        log_probs = F.log_softmax(decode_step(model, state, ys[:, -1]).float(), dim=-1)  # (n * k, V)
        log_probs[:, pad_id] = float("-inf")  # PAD is never a prediction
        V = log_probs.size(1)
        total = (scores.reshape(-1, 1) + log_probs).reshape(len(lines), k * V)  # dead rows stay -inf
        top_scores, top_ids = total.topk(k, dim=1)  # (n, k)
        rows = (torch.arange(len(lines), device=device)[:, None] * k + top_ids // V).flatten()
        tokens = (top_ids % V).flatten()
        ys = torch.cat((ys[rows], tokens[:, None]), dim=1)
        state = state.select(rows)
        ended = (tokens == eos_id).reshape(len(lines), k) & torch.isfinite(top_scores)
        for n, slot in ended.nonzero().tolist():
            finished[lines[n]].append((ys[n * k + slot].tolist(), float(top_scores[n, slot])))
        scores = top_scores.masked_fill(ended, float("-inf"))
        for n, line in enumerate(lines):  # at its limit: the live prefixes compete too, if none retired
            if step >= limits[line] and not finished[line]:
                finished[line] = [(ys[n * k + slot].tolist(), float(scores[n, slot]))
                                  for slot in range(k) if torch.isfinite(scores[n, slot])]
        keep = [n for n, line in enumerate(lines)
                if len(finished[line]) < k and step < limits[line] and bool(torch.isfinite(scores[n]).any())]
        if len(keep) < len(lines):  # finished lines leave the batch
            live = torch.tensor(keep, dtype=torch.long, device=device)
            rows = (live[:, None] * k + torch.arange(k, device=device)).flatten()
            ys, scores, state = ys[rows], scores[live], state.select(rows)
            lines = [lines[n] for n in keep]
        if not lines:
            break
    out = []
    for candidates in finished:
        best, _ = max(candidates, key=lambda c: c[1] / (len(c[0]) - 1))
        out.append(best[1:])
    return out


class LengthConstraint:
    """A greedy-decoding step hook: EOS exactly when the output covers the known number of characters.

    The cipher fixes the plaintext's length: 8 bits per character. A free decoder must still
    *guess* when to stop, and a small model sometimes stops at a full stop that looks like the
    end of a line, or runs on. With the constraint, EOS (and any other id that adds no
    character, such as BOS) is forbidden while the row's decoded characters are fewer than
    ``target_chars``, and EOS is forced once they reach it; a subword token that would run past
    the length is forbidden too (a single character always fits); every other choice is still
    the argmax. ``token_chars[i]`` is the number of characters target id ``i`` decodes to.
    """

    def __init__(self, token_chars: list[int], target_chars: list[int], eos_id: int, device: torch.device):
        self.token_chars = torch.tensor(token_chars, device=device)  # (V,)
        self.target = torch.tensor(target_chars, device=device)  # (B,)
        self.eos_id = eos_id

    def __call__(self, logits: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        known = ys[:, 1:].clamp(max=self.token_chars.numel() - 1)  # (B, t) without BOS
        count = self.token_chars[known].sum(dim=1)  # (B,) characters decoded so far
        short = count < self.target
        logits = logits.clone()
        chars = self.token_chars[None, : logits.size(1)]  # (1, V)
        empty = chars == 0  # EOS and the other specials (e.g. BOS) add no character
        overshoots = chars > (self.target - count)[:, None]  # a multi-character token past the end
        logits[short[:, None] & (empty | overshoots)] = float("-inf")
        logits[~short] = float("-inf")
        logits[~short, self.eos_id] = 0.0
        return logits


class AlignedLengthConstraint:
    """:class:`LengthConstraint` for aligned targets (``Config.target_tokens="aligned"``): target token
    ``t`` must cover exactly as many characters as source token ``t`` does, and EOS comes where the
    source ends.

    With aligned tokens the cipher fixes more than the line's length: source token ``t`` covers
    ``source_chars[b, t]`` characters, and its plaintext is target token ``t``. So at step ``t`` only the
    target tokens of that many characters are allowed (the argmax among them), and EOS once the source
    tokens run out (a position that covers no character: the end-of-source token, or padding). A
    wrong token can then not shift the rest of the line.
    """

    def __init__(self, token_chars: list[int], source_chars: torch.Tensor, eos_id: int):
        self.token_chars = torch.tensor(token_chars, device=source_chars.device)  # (V,)
        self.source_chars = source_chars  # (B, Ls) characters each source token covers
        self.eos_id = eos_id

    def __call__(self, logits: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        t = ys.size(1) - 1  # the target position being decided (ys holds BOS and t tokens)
        need = (self.source_chars[:, t] if t < self.source_chars.size(1)
                else torch.zeros_like(self.source_chars[:, 0]))  # (B,)
        logits = logits.clone()
        chars = self.token_chars[None, : logits.size(1)]  # (1, V)
        logits[chars != need[:, None]] = float("-inf")
        done = need == 0
        logits[done] = float("-inf")
        logits[done, self.eos_id] = 0.0
        return logits


def decode_batch(
    model: nn.Module,
    codec: Codec,
    batch: dict[str, torch.Tensor],
    max_len: int | Sequence[int],
    beam_size: int = 1,
    target_chars: list[int] | None = None,
) -> list[list[int]]:
    """Target ids (without BOS, up to and including EOS) for every source row of ``batch``.

    ``beam_size=1`` is greedy decoding, more is beam search, both batched and cached.
    ``target_chars`` (greedy only): each row's plaintext length, enforced by :class:`LengthConstraint`
    (for aligned targets, each token's length: :class:`AlignedLengthConstraint`).
    """
    if beam_size < 1:
        raise ValueError(f"beam_size={beam_size}; use 1 for greedy decoding or more for beam search")
    source = codec.model_source(batch)  # {"src": ...} and whatever else this model reads of the source
    src = source.pop("src")
    with autocast(src.device):
        if beam_size == 1:
            hook = None
            if target_chars is not None and getattr(codec, "aligned", False):
                hook = AlignedLengthConstraint(codec.token_chars(), codec.source_chars(src), codec.eos_id)
            elif target_chars is not None:
                hook = LengthConstraint(codec.token_chars(), target_chars, codec.eos_id, src.device)
            out = greedy_decode(model, src, codec.bos_id, codec.eos_id, max_len, step_hook=hook,
                                pad_id=codec.tgt_pad_id, **source)  # (B, <= max_len)
            return [_until_eos(row, codec.eos_id) for row in out.tolist()]
        if target_chars is not None:
            raise ValueError("the length constraint is implemented for greedy decoding (beam_size=1) only")
        return beam_search(model, src, codec.bos_id, codec.eos_id, max_len, beam_size,
                           pad_id=codec.tgt_pad_id, **source)


def _until_eos(ids: list[int], eos_id: int) -> list[int]:
    return ids[: ids.index(eos_id) + 1] if eos_id in ids else ids


def decrypt_chunks(
    model: nn.Module,
    codec: Codec,
    chunks: Sequence[Chunk],
    *,
    device: torch.device,
    token_budget: int = 8192,
    max_batch_size: int = 64,
    beam_size: int = 1,
    length_aware: bool | None = None,
) -> dict[int, str]:
    """Decode every chunk and re-assemble whole lines: {line index: predicted plaintext}.

    Chunks are batched by source length (as in training, without shuffling); each batch may
    generate at most one token per plaintext character of its longest chunk, plus EOS (every
    target token covers at least one character).
    """
    model.eval()
    pieces = [(c.line, c.part, "") for c in chunks if not c.cipher]  # an empty line decodes to ""
    todo = [c for c in chunks if c.cipher]
    sources = [codec.encode_source(chunk.cipher) for chunk in todo]
    sampler = BucketBatchSampler([len(s) for s in sources], token_budget, max_batch_size, shuffle=False)
    aware = length_aware_by_default(beam_size, length_aware)
    for indices in sampler.epoch_batches(0):
        batch = {key: value.to(device) for key, value in codec.collate_sources([sources[i] for i in indices]).items()}
        max_len = [len(todo[i].cipher) // 8 + 1 for i in indices]  # per chunk: as it would decode alone
        lengths = [len(todo[i].cipher) // 8 for i in indices] if aware else None
        for i, ids in zip(indices, decode_batch(model, codec, batch, max_len, beam_size, lengths)):
            pieces.append((todo[i].line, todo[i].part, codec.decode_target(ids)))
    return reassemble(pieces)


def decrypt_lines(
    model: nn.Module,
    codec: Codec,
    cipher_lines: Sequence[str],
    *,
    chunk_chars: int,
    device: torch.device,
    token_budget: int = 8192,
    max_batch_size: int = 64,
    beam_size: int = 1,
    length_aware: bool | None = None,
) -> list[str]:
    """Decrypt whole cipher lines (strings of '0'/'1'), chunk by chunk; one plaintext per line.

    ``length_aware``: greedy decoding that stops exactly at each chunk's known length
    (:class:`LengthConstraint`); the default (None) is that for greedy decoding and free beam search
    (:func:`length_aware_by_default`); ``False`` decodes freely, until EOS or the length limit.

    Raises cipherlab.data.cipher.DatasetError naming the line for a character other than 0/1 or a
    length that is not a multiple of 8.
    """
    for n, bits in enumerate(cipher_lines, start=1):
        check_bits(bits, path="input", line=n)
    chunks = make_chunks(None, cipher_lines, range(len(cipher_lines)), chunk_chars)  # the cipher alone
    lines = decrypt_chunks(
        model,
        codec,
        chunks,
        device=device,
        token_budget=token_budget,
        max_batch_size=max_batch_size,
        beam_size=beam_size,
        length_aware=length_aware,
    )
    return [lines[i] for i in range(len(cipher_lines))]


# --------------------------------------------------------------------------- text the model never saw

FOREIGN_WARNING = 0.10
"""The share of characters outside the model's training alphabet above which decrypt and evaluate say so: English
in the training alphabet has none; a cipher made with another key decrypts (with cipherlab's key) to bytes mostly
outside it."""


def trained_alphabet(codec: Codec) -> frozenset[str] | None:
    """The characters the model's target side was trained on (its target tokenizer's base alphabet), or None where
    it has no alphabet of characters (C5 writes any byte)."""
    alphabet = getattr(getattr(codec, "tgt", None), "alphabet", None)
    if not alphabet or any(len(symbol) != 1 for symbol in alphabet):
        return None
    return frozenset(alphabet)


def foreign_share(lines: Sequence[str], alphabet: frozenset[str] | None) -> tuple[float, str]:
    """(the share of the characters of ``lines`` outside ``alphabet``, a few of them as examples); with no alphabet,
    the control characters (tab aside), which text has next to none of."""
    chars = sum(map(len, lines))
    outside = [c for line in lines for c in line
               if (c not in alphabet if alphabet is not None else not c.isprintable() and c != "\t")]
    examples = "".join(sorted(set(outside))[:5])
    return (len(outside) / chars if chars else 0.0), examples


def foreign_note(lines: Sequence[str], alphabet: frozenset[str] | None, where: str, what: str) -> str | None:
    """One line for stderr when more than :data:`FOREIGN_WARNING` of the characters of ``lines`` (``what`` they
    are, from ``where``) lie outside the training alphabet; None when they do not."""
    share, examples = foreign_share(lines, alphabet)
    if share <= FOREIGN_WARNING:
        return None
    known = (f"the {len(alphabet)} characters the model was trained on" if alphabet is not None
             else "text (they are control characters)")
    return (f"cipherlab: note: {where}: {100 * share:.0f} % of the characters {what} are outside {known} (e.g. "
            f"{examples!r}); a cipher made with another key than cipherlab's, or text of characters the model never "
            "saw, decrypts to nonsense, so its output cannot be trusted")
