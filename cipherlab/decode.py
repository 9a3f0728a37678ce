"""From cipher bits to plaintext with a trained model (chapter 8 decodes; chapter 9 evaluates).

Decoding is autoregressive: start from BOS, ask the model for the next token, append the most
likely one, repeat until EOS. :func:`decode_batch` does that for a whole batch at once through
the model's own greedy decoder. Each encodes the source once and reuses that memory at every
step; C1-C4 (``Seq2SeqTransformer.greedy_decode``) also cache the decoder's keys and values,
so each step processes only the newest token, while C5 (``greedy_decode_blt``) recomputes its
byte and patch decoder over the prefix. :func:`beam_search` keeps the ``beam_size`` best
prefixes instead of one; the ablation decodes greedily throughout, beam search is only for the
book's comparison.

Long lines are decoded the way the model was trained: cut into phase-aligned chunks with
:func:`cipherlab.data.make_chunks`, decoded in length-bucketed batches, and put back in order
with :func:`cipherlab.data.reassemble` from each chunk's (line, part) metadata.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from cipherlab.cipher import check_bits
from cipherlab.codec import Codec
from cipherlab.data import BucketBatchSampler, Chunk, make_chunks, reassemble
from cipherlab.device import autocast

__all__ = ["LengthConstraint", "beam_search", "decode_batch", "decrypt_chunks", "decrypt_lines"]


@torch.no_grad()
def beam_search(
    model: nn.Module,
    src: torch.Tensor,
    bos_id: int,
    eos_id: int,
    max_len: int,
    beam_size: int = 4,
    src_member: torch.Tensor | None = None,
    pad_id: int | None = None,
) -> list[int]:
    """The most likely target ids (without BOS) for one source ``src`` (1, Ls) under beam search.

    Each step extends every live prefix by every token, keeps the ``beam_size`` prefixes with the
    highest total log-probability, and retires prefixes that end in EOS. The winner is the
    retired (or, at ``max_len``, live) prefix with the best log-probability per token, so that
    short outputs are not preferred merely for having fewer terms to multiply. Needs the
    model's ``encode(src)`` and ``decode(tgt_in, memory, src_mask)`` (C1-C4), or, given
    ``src_member`` (1, Ks, Ls), a BLTModel's ``encode_source`` and ``decode`` (C5). No KV cache:
    the prefix is recomputed each step, which is fine for the lines it is used on.
    """
    if src_member is None:
        memory, src_mask = model.encode(src)  # (1, Ls, D), (1, 1, 1, Ls)
        source = None
    else:
        memory, src_mask, source = model.encode_source(src, src_member)
    pad_id = model.tgt_pad_id if pad_id is None else pad_id
    beams = [([bos_id], 0.0)]  # (prefix, total log-probability)
    finished: list[tuple[list[int], float]] = []
    for _ in range(max_len):
        prefixes = torch.tensor([p for p, _ in beams], device=src.device)  # (k, t)
        k = prefixes.size(0)
        memory_k, mask_k = memory.expand(k, -1, -1), src_mask.expand(k, -1, -1, -1)
        if src_member is None:
            logits = model.decode(prefixes, memory_k, mask_k)[:, -1]  # (k, V)
        else:
            source_k = None if source is None else (source[0].expand(k, -1, -1), source[1].expand(k, -1, -1, -1))
            logits = model.decode(prefixes, memory_k, mask_k, source=source_k)[:, -1]  # (k, V)
        log_probs = F.log_softmax(logits.float(), dim=-1)
        log_probs[:, pad_id] = float("-inf")  # PAD is never a prediction
        scores = log_probs + torch.tensor([s for _, s in beams], device=src.device)[:, None]  # (k, V)
        top_scores, top_ids = scores.flatten().topk(beam_size)
        candidates = []
        for score, flat in zip(top_scores.tolist(), top_ids.tolist()):
            beam, token = divmod(flat, scores.size(1))
            candidates.append((beams[beam][0] + [token], score))
        beams = []
        for prefix, score in candidates:
            (finished if prefix[-1] == eos_id else beams).append((prefix, score))
        if len(finished) >= beam_size or not beams:
            break
    best, _ = max(finished or beams, key=lambda b: b[1] / (len(b[0]) - 1))
    return best[1:]


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


def decode_batch(
    model: nn.Module,
    codec: Codec,
    batch: dict[str, torch.Tensor],
    max_len: int,
    beam_size: int = 1,
    target_chars: list[int] | None = None,
) -> list[list[int]]:
    """Target ids (without BOS, up to and including EOS) for every source row of ``batch``.

    ``beam_size=1`` is greedy decoding, batched, with the model's KV cache. ``target_chars``
    (greedy only): each row's plaintext length, enforced by :class:`LengthConstraint`.
    """
    if beam_size < 1:
        raise ValueError(f"beam_size={beam_size}; use 1 for greedy decoding or more for beam search")
    if beam_size == 1:
        hook = None
        if target_chars is not None:
            hook = LengthConstraint(codec.token_chars(), target_chars, codec.eos_id, batch["src"].device)
        with autocast(batch["src"].device):
            out = codec.greedy_decode(model, batch, max_len, step_hook=hook)  # (B, <= max_len)
        return [_until_eos(row, codec.eos_id) for row in out.tolist()]
    if target_chars is not None:
        raise ValueError("the length constraint is implemented for greedy decoding (beam_size=1) only")
    out = []
    for row in range(batch["src"].size(0)):
        src = batch["src"][row : row + 1]
        member = None
        if codec.kind == "blt":
            member = batch["src_member"][row : row + 1]
            real = src[0] != codec.src_pad_id  # drop this row's padding: beam search sees one line
            src, member = src[:, real], member[:, member[0].any(-1)][:, :, real]
        out.append(beam_search(model, src, codec.bos_id, codec.eos_id, max_len, beam_size,
                               src_member=member, pad_id=codec.tgt_pad_id))
    return out


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
    length_aware: bool = False,
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
    for indices in sampler.epoch_batches(0):
        batch = {key: value.to(device) for key, value in codec.collate_sources([sources[i] for i in indices]).items()}
        max_len = max(len(todo[i].cipher) // 8 for i in indices) + 1
        lengths = [len(todo[i].cipher) // 8 for i in indices] if length_aware else None
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
    length_aware: bool = False,
) -> list[str]:
    """Decrypt whole cipher lines (strings of '0'/'1'), chunk by chunk; one plaintext per line.

    ``length_aware``: greedy decoding that stops exactly at each chunk's known length
    (:class:`LengthConstraint`); the default decodes freely, as the course notes do.

    Raises cipherlab.cipher.DatasetError naming the line for a character other than 0/1 or a
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
