"""From two text files to padded batches: load, verify, split, chunk, bucket, collate.

1. :func:`load_corpus` reads ``brown_plain.txt`` / ``brown_cipher.txt`` (creating the cipher file
   if it is missing) and verifies every pair;
2. the split is of whole lines, 80/10/10 with a fixed seed, saved in ``splits.json``, so all five
   configurations see the same examples and nothing learned from the test lines leaks into training;
3. :func:`make_chunks` cuts long lines into phase-aligned chunks, remembering (line, part);
4. :class:`BucketBatchSampler` groups chunks of similar length under a token budget, and
   :func:`collate` pads them into rectangular tensors.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.utils.data import Dataset, Sampler

from cipherlab.data.cipher import PERIOD, DatasetError, bits_to_bytes, encrypt, verify_dataset
from cipherlab.base.files import strip_bom, write_atomic

PLAIN_FILE = "brown_plain.txt"
CIPHER_FILE = "brown_cipher.txt"
SPLITS_FILE = "splits.json"
SPLIT_FRACTIONS = {"train": 0.8, "val": 0.1, "test": 0.1}
SPLIT_SEED = 0
MIN_LINES = 8  # the fewest lines for which the 80/10/10 split gives every split a line
_SPLIT_ROLES = {"train": "training", "val": "validation", "test": "test"}
CHUNK_CHARS = 256  # characters per chunk: a multiple of PERIOD = 8, so every chunk starts at key phase 0

DATA_DIR_ENV = "CIPHERLAB_DATA_DIR"
REPO_DATA_DIR = Path(__file__).resolve().parents[2] / "data"


# --------------------------------------------------------------------------- files


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """The data folder: the argument, else $CIPHERLAB_DATA_DIR, else the repository's ``data/``."""
    if data_dir is None:
        data_dir = os.environ.get(DATA_DIR_ENV) or REPO_DATA_DIR
    path = Path(data_dir).expanduser()
    if not (path / PLAIN_FILE).is_file():
        raise FileNotFoundError(f"{path / PLAIN_FILE}: no plaintext file; point cipherlab at a folder holding "
                                f"{PLAIN_FILE} (and optionally {CIPHER_FILE}) with --data-dir DIR or {DATA_DIR_ENV}=DIR")
    return path


def read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 text file, without their newlines (CRLF and a byte-order mark accepted)."""
    try:
        raw = strip_bom(Path(path).read_bytes(), path)
    except OSError as e:
        raise DatasetError(f"{path}: cannot read ({e.strerror}); pass a readable text file") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise DatasetError(f"{path}, line {line}: not valid UTF-8 ({e.reason} at byte {e.start}); "
                           "save the file as UTF-8 text") from None
    text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def write_cipher(data_dir: str | os.PathLike | None = None) -> Path:
    """Create ``brown_cipher.txt`` from ``brown_plain.txt``; byte-for-byte deterministic."""
    folder = resolve_data_dir(data_dir)
    plain = read_lines(folder / PLAIN_FILE)
    if not plain:
        raise DatasetError(
            f"{folder / PLAIN_FILE}: no lines (the file is empty); a dataset needs one line of text per example"
        )
    try:
        cipher = [encrypt(line) for line in plain]
    except ValueError as e:
        n = next(i for i, line in enumerate(plain, 1) if any(ord(c) >= 256 for c in line))
        raise DatasetError(f"{folder / PLAIN_FILE}, line {n}: {e}") from None
    out = folder / CIPHER_FILE
    try:
        write_atomic(out, "".join(line + "\n" for line in cipher), newline="\n")
    except OSError as e:
        raise DatasetError(f"{out}: cannot write the cipher file ({e.strerror}); copy {folder} somewhere you can "
                           "write to and give the command the copy's path in its place") from None
    return out


def file_sha256(*paths: Path) -> str:
    """One SHA-256 over the contents of the given files, in order, separated by a NUL byte."""
    h = hashlib.sha256()
    for n, p in enumerate(paths):
        if n:
            h.update(b"\0")
        h.update(Path(p).read_bytes())
    return h.hexdigest()


# --------------------------------------------------------------------------- the corpus


@dataclass
class Corpus:
    """A verified parallel corpus and its fixed split."""

    plain: list[str]
    cipher: list[str]
    splits: dict[str, list[int]]
    sha256: str
    data_dir: Path
    _cache_dir: Path | None = field(default=None, repr=False)

    @property
    def cache_dir(self) -> Path:
        """Where derived artefacts (tokenizers, entropy tables) are cached for this data."""
        path = self._cache_dir or self.data_dir / "cache"
        with contextlib.suppress(OSError):  # a read-only data folder: what is cached is read, nothing written
            path.mkdir(parents=True, exist_ok=True)
        return path

    def lines(self, split: str) -> tuple[list[str], list[str]]:
        """(plaintext lines, cipher lines) of one split, in line order."""
        if split not in self.splits:
            raise KeyError(f"unknown split {split!r}; expected one of {sorted(self.splits)}")
        ids = self.splits[split]
        return [self.plain[i] for i in ids], [self.cipher[i] for i in ids]

    def __len__(self) -> int:
        return len(self.plain)

    def __post_init__(self) -> None:  # also refuses a selection (dataclasses.replace) that empties a split
        empty = [name for name in SPLIT_FRACTIONS if not self.splits.get(name)]
        if empty:
            sizes = ", ".join(f"{name} {len(self.splits.get(name, []))}" for name in SPLIT_FRACTIONS)
            raise DatasetError(f"{self.data_dir / PLAIN_FILE}: no {_SPLIT_ROLES[empty[0]]} lines are selected ({sizes} "
                               f"of its {len(self.plain)} lines); training, validation and testing each need at "
                               "least one line, so max_train_lines and max_eval_lines must be at least 1")


def load_pairs(data_dir: str | os.PathLike | None = None) -> tuple[list[str], list[str]]:
    """The verified (plaintext lines, cipher lines) of a data folder, creating the cipher file if missing
    (no split, so no minimum line count)."""
    folder = resolve_data_dir(data_dir)
    plain_path, cipher_path = folder / PLAIN_FILE, folder / CIPHER_FILE
    if not cipher_path.exists():
        write_cipher(folder)
    plain, cipher = read_lines(plain_path), read_lines(cipher_path)
    verify_dataset(plain, cipher, plain_path=str(plain_path), cipher_path=str(cipher_path))
    return plain, cipher


def load_corpus(data_dir: str | os.PathLike | None = None) -> Corpus:
    """Load and verify the parallel corpus; create the cipher file and the split when missing."""
    folder = resolve_data_dir(data_dir)
    plain_path, cipher_path = folder / PLAIN_FILE, folder / CIPHER_FILE
    plain, cipher = load_pairs(folder)
    check_line_count(len(plain), plain_path)
    sha = file_sha256(plain_path, cipher_path)
    splits = get_splits(len(plain), sha, folder / SPLITS_FILE)
    return Corpus(plain=plain, cipher=cipher, splits=splits, sha256=sha, data_dir=folder)


def split_lines(n_lines: int, seed: int = SPLIT_SEED) -> dict[str, list[int]]:
    """Shuffle line indices with a fixed seed and cut them 80/10/10 (each split sorted)."""
    order = list(range(n_lines))
    random.Random(seed).shuffle(order)
    n_train = round(SPLIT_FRACTIONS["train"] * n_lines)
    n_val = round(SPLIT_FRACTIONS["val"] * n_lines)
    return {
        "train": sorted(order[:n_train]),
        "val": sorted(order[n_train : n_train + n_val]),
        "test": sorted(order[n_train + n_val :]),
    }


def check_line_count(n_lines: int, path: str | os.PathLike = PLAIN_FILE) -> None:
    """Raise DatasetError unless ``n_lines`` lines split 80/10/10 give every split at least one line."""
    if n_lines >= MIN_LINES:
        return
    lines = f"{n_lines} line{'' if n_lines == 1 else 's'}"
    shares = "/".join(f"{round(100 * f)}" for f in SPLIT_FRACTIONS.values())
    sizes = ", ".join(f"{name} {len(ids)}" for name, ids in split_lines(n_lines).items())
    raise DatasetError(
        f"{path} has {lines}; the splits need at least {MIN_LINES}: {shares} of {lines} gives {sizes}, "
        "and training, validation (best.pt, early stopping) and the test scores each need at least one line"
    )


def get_splits(n_lines: int, sha256: str, path: Path, seed: int = SPLIT_SEED) -> dict[str, list[int]]:
    """The split saved in ``path`` if it was made from this very data, else a fresh one, saved (a
    read-only folder: used unsaved, the seed makes it the same every time)."""
    path = Path(path)
    splits = split_lines(n_lines, seed)  # the seed fixes it: the file is a record of it
    if path.exists():
        try:
            saved = json.loads(path.read_text(encoding="utf-8-sig"))  # a BOM: an editor on Windows saved it
            fresh = (saved["sha256"], saved["n_lines"], saved["seed"]) == (sha256, n_lines, seed)
            changed = fresh and any(saved[name] != splits[name] for name in SPLIT_FRACTIONS)
        except (ValueError, KeyError, TypeError):
            fresh = changed = False
        if fresh and not changed:
            return splits
        print(f"cipherlab: {path} " + ("was changed by hand: its lists of lines are not the split of its seed "
                                        f"{seed}" if changed else "was made from other data")
              + "; writing a new split", file=sys.stderr)
    record = {"sha256": sha256, "n_lines": n_lines, "seed": seed, **splits}
    try:
        write_atomic(path, json.dumps(record), newline="\n")
    except OSError as e:
        print(f"cipherlab: note: cannot save the split to {path} ({e.strerror or e}); using it unsaved, "
              "the same lines every time (its seed fixes it)", file=sys.stderr)
    return splits


def corpus_stats(corpus: Corpus) -> dict:
    """Line count, length statistics (characters), alphabet and digests: what `data verify` prints."""
    lengths = [len(line) for line in corpus.plain]
    return {
        "lines": len(lengths),
        "chars_total": sum(lengths),
        "chars_min": min(lengths, default=0),
        "chars_median": statistics.median(lengths) if lengths else 0,
        "chars_mean": round(statistics.fmean(lengths), 1) if lengths else 0,
        "chars_max": max(lengths, default=0),
        "alphabet": "".join(sorted(set("".join(corpus.plain)))),
        "split_sizes": {name: len(ids) for name, ids in corpus.splits.items()},
        "sha256_plain": file_sha256(corpus.data_dir / PLAIN_FILE),
        "sha256_pair": corpus.sha256,
    }


# --------------------------------------------------------------------------- chunks


@dataclass(frozen=True)
class Chunk:
    """A piece of one line: characters [part*CHUNK, (part+1)*CHUNK) and their cipher bits."""

    line: int
    part: int
    plain: str
    cipher: str


def make_chunks(plain: Sequence[str] | None, cipher: Sequence[str], line_ids: Iterable[int],
                chunk_chars: int = CHUNK_CHARS) -> list[Chunk]:
    """Cut the selected lines into chunks of ``chunk_chars`` characters (8x as many bits).

    Character slice [s, s + n) pairs with bit slice [8s, 8(s + n)); since chunk_chars is a multiple
    of PERIOD, every chunk starts at key phase 0. An empty line gives one empty chunk.
    ``plain=None`` cuts the cipher alone, leaving each chunk's plaintext "".
    """
    if chunk_chars <= 0 or chunk_chars % PERIOD:
        raise ValueError(f"chunk_chars={chunk_chars} must be a positive multiple of len(KEY)={PERIOD}: chunk k "
                         f"starts at key phase (k * chunk_chars) % {PERIOD}, and only a multiple of {PERIOD} "
                         "keeps every chunk at phase 0")
    chunks = []
    for line in line_ids:
        bits = cipher[line]
        text = plain[line] if plain is not None else ""
        n_chars = len(text) if plain is not None else len(bits) // 8
        for part, start in enumerate(range(0, max(n_chars, 1), chunk_chars)):
            stop = start + chunk_chars
            chunks.append(Chunk(line, part, text[start:stop], bits[8 * start : 8 * stop]))
    return chunks


def phase_shuffle(chunk: Chunk, rng: random.Random) -> Chunk:
    """A copy of ``chunk`` whose characters are permuted among positions with the same index
    mod 8, its 8-bit cipher groups permuted the same way.

    Every position keeps its key phase, so every (character, cipher byte) pair stays a valid pair
    of the cipher; the text is no longer English, so it can only be decrypted character by character.
    """
    n = len(chunk.plain)
    order = list(range(n))
    for phase in range(PERIOD):
        slots = list(range(phase, n, PERIOD))
        moved = slots[:]
        rng.shuffle(moved)
        for slot, source in zip(slots, moved):
            order[slot] = source
    plain = "".join(chunk.plain[i] for i in order)
    cipher = "".join(chunk.cipher[8 * i: 8 * i + 8] for i in order)
    return Chunk(chunk.line, chunk.part, plain, cipher)


# Bit 5 (value 0x20) of a character code is its case for an ASCII letter; in the 8-bit groups of
# the cipher, written most significant bit first, it is the third bit.
CASE_BIT = 0x20
_CASE_BIT_INDEX = 8 - CASE_BIT.bit_length()


def case_flip(chunk: Chunk, probability: float, rng: random.Random) -> Chunk:
    """A copy of ``chunk`` in which each ASCII letter has its case flipped with ``probability``,
    and bit 5 of that character's 8-bit cipher group with it.

    ``(p ^ 0x20) ^ k == (p ^ k) ^ 0x20`` for any key byte ``k``, so a flipped pair is still a pair of the cipher.
    """
    if probability <= 0:
        return chunk
    plain, groups = list(chunk.plain), [chunk.cipher[8 * i: 8 * i + 8] for i in range(len(chunk.plain))]
    for i, ch in enumerate(plain):
        if ch.isascii() and ch.isalpha() and rng.random() < probability:
            plain[i] = ch.swapcase()
            g = groups[i]
            groups[i] = g[:_CASE_BIT_INDEX] + ("1" if g[_CASE_BIT_INDEX] == "0" else "0") + g[_CASE_BIT_INDEX + 1:]
    return Chunk(chunk.line, chunk.part, "".join(plain), "".join(groups))


def substitute(chunk: Chunk, probability: float, alphabet: str, rng: random.Random) -> Chunk:
    """A copy of ``chunk`` in which each character is replaced, with ``probability``, by one drawn
    uniformly from ``alphabet``, and its 8-bit cipher group XORed with the same mask.

    ``(p ^ m) ^ k == (p ^ k) ^ m`` for the mask ``m = p ^ q``, so the new pair is valid without the key.
    """
    if probability <= 0:
        return chunk
    plain, groups = list(chunk.plain), [chunk.cipher[8 * i: 8 * i + 8] for i in range(len(chunk.plain))]
    for i, ch in enumerate(plain):
        if rng.random() < probability:
            new = rng.choice(alphabet)
            mask = ord(ch) ^ ord(new)
            plain[i], groups[i] = new, format(int(groups[i], 2) ^ mask, "08b")
    return Chunk(chunk.line, chunk.part, "".join(plain), "".join(groups))


def shuffle_chunks(chunks: Sequence[Chunk], share: float, seed: int, flip_case: float = 0.0,
                   substitution: float = 0.0, alphabet: str | None = None) -> list[Chunk]:
    """Replace a ``share`` of the chunks (chosen with ``seed``) by their :func:`phase_shuffle`, then
    :func:`case_flip` and :func:`substitute` (``alphabet``: default, every character of ``chunks``).
    Drawn once, so every epoch sees the same copies."""
    if share <= 0:
        return list(chunks)
    if substitution > 0 and alphabet is None:
        alphabet = "".join(sorted({ch for c in chunks for ch in c.plain}))
    rng = random.Random(seed)

    def augment(c: Chunk) -> Chunk:
        return substitute(case_flip(phase_shuffle(c, rng), flip_case, rng), substitution, alphabet, rng)

    return [augment(c) if rng.random() < share else c for c in chunks]


def reassemble(pieces: Iterable[tuple[int, int, str]]) -> dict[int, str]:
    """Join (line, part, text) pieces back into whole lines, in part order; ValueError for a lost or
    duplicated part."""
    by_line: dict[int, dict[int, str]] = defaultdict(dict)
    for line, part, text in pieces:
        if part in by_line[line]:
            raise ValueError(f"line {line}: part {part} appears twice")
        by_line[line][part] = text
    lines = {}
    for line, parts in by_line.items():
        if sorted(parts) != list(range(len(parts))):
            missing = sorted(set(range(max(parts) + 1)) - set(parts))
            raise ValueError(f"line {line}: parts {missing} are missing; cannot re-assemble")
        lines[line] = "".join(parts[p] for p in range(len(parts)))
    return lines


# --------------------------------------------------------------------------- datasets


class _ChunkDataset(Dataset):
    """``examples[i]``: (source ids, target ids) of chunk i; ``src_lengths``: for the batch sampler."""

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> tuple[list[int], list[int]]:
        return self.examples[i]


class SubwordChunkDataset(_ChunkDataset):
    """C1-C4: (source token ids, [BOS] + target token ids + [EOS]) for each chunk.

    ``encode_target(source_ids, plain)``, when given, cuts the target where the source is cut (aligned
    targets). ``dropout`` > 0 cuts each chunk with BPE-dropout, drawn once with ``seed``.
    """

    def __init__(self, chunks: Sequence[Chunk], src_tokenizer, tgt_tokenizer, source_eos: bool = False,
                 encode_target=None, dropout: float = 0.0, seed: int = 0):
        self.chunks = list(chunks)
        bos, eos = tgt_tokenizer.bos_id, tgt_tokenizer.eos_id
        end = [src_tokenizer.eos_id] if source_eos else []  # Config.source_eos
        self.examples = []
        rng = random.Random(seed)  # BPE-dropout (Config.bpe_dropout): drawn once, as the shuffled chunks are
        for c in self.chunks:
            src = src_tokenizer.encode(c.cipher, dropout, rng) if dropout else src_tokenizer.encode(c.cipher)
            if encode_target is not None:
                tgt = encode_target(src, c.plain)
            else:
                tgt = tgt_tokenizer.encode(c.plain, dropout, rng) if dropout else tgt_tokenizer.encode(c.plain)
            self.examples.append(([*src, *end], [bos, *tgt, eos]))
        self.src_lengths = [len(src) for src, _ in self.examples]


class ByteChunkDataset(_ChunkDataset):
    """C5: (cipher byte values, [BOS] + plaintext bytes + [EOS]) for each chunk."""

    def __init__(self, chunks: Sequence[Chunk]):
        from cipherlab.data.tokenizers.bytes import BOS_ID, EOS_ID

        self.chunks = list(chunks)
        self.examples = [(bits_to_bytes(c.cipher), [BOS_ID, *c.plain.encode("latin-1"), EOS_ID]) for c in self.chunks]
        self.src_lengths = [len(src) for src, _ in self.examples]


# --------------------------------------------------------------------------- batching


class BucketBatchSampler(Sampler[list[int]]):
    """Batches of similar-length examples under a token budget, in a new order every epoch.

    Examples are sorted by length and cut greedily into batches whose padded size (batch size x
    longest source) stays within ``token_budget`` and whose size stays within ``max_batch_size``.
    The order of the batches is shuffled with ``Random(seed + epoch)``: call :meth:`set_epoch` first.
    """

    def __init__(self, lengths: Sequence[int], token_budget: int = 8192, max_batch_size: int = 64,
                 shuffle: bool = True, seed: int = 0):
        self.lengths = list(lengths)
        self.token_budget, self.max_batch_size = token_budget, max_batch_size
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0
        self.batches = self._make_batches()

    def _make_batches(self) -> list[list[int]]:
        order = sorted(range(len(self.lengths)), key=lambda i: (self.lengths[i], i))
        batches: list[list[int]] = []
        batch: list[int] = []
        for i in order:  # ascending, so the newest example is the longest in its batch
            grown = len(batch) + 1
            if batch and (grown > self.max_batch_size or grown * self.lengths[i] > self.token_budget):
                batches.append(batch)
                batch = []
            batch.append(i)
        if batch:
            batches.append(batch)
        return batches

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def epoch_batches(self, epoch: int | None = None) -> list[list[int]]:
        """The batches of an epoch, in that epoch's order (deterministic)."""
        epoch = self.epoch if epoch is None else epoch
        batches = [list(b) for b in self.batches]
        if self.shuffle:
            random.Random(self.seed + epoch).shuffle(batches)
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.epoch_batches())

    def __len__(self) -> int:
        return len(self.batches)


def padding_waste(lengths: Sequence[int], batches: Iterable[Sequence[int]]) -> float:
    """The fraction of padded cells that are padding, for a list of batches of example indices."""
    real = padded = 0
    for batch in batches:
        lens = [lengths[i] for i in batch]
        real += sum(lens)
        padded += len(lens) * max(lens)
    return 1 - real / padded if padded else 0.0


def collate(batch: Sequence[tuple[Sequence[int], Sequence[int]]], src_pad_id: int, tgt_pad_id: int
            ) -> dict[str, torch.Tensor]:
    """Pad a list of (src ids, tgt ids) into LongTensors src (B, Ls) and tgt (B, Lt)."""
    ls = max(len(src) for src, _ in batch)
    lt = max(len(tgt) for _, tgt in batch)
    src = torch.full((len(batch), ls), src_pad_id, dtype=torch.long)
    tgt = torch.full((len(batch), lt), tgt_pad_id, dtype=torch.long)
    for row, (s, t) in enumerate(batch):
        src[row, : len(s)] = torch.as_tensor(s, dtype=torch.long)
        tgt[row, : len(t)] = torch.as_tensor(t, dtype=torch.long)
    return {"src": src, "tgt": tgt}


def split_overlap(corpus: Corpus) -> dict[str, int]:
    """How many distinct plaintext lines each pair of splits shares, for the pairs that share any (``{"train/test": 3}``)."""
    texts = {name: {corpus.plain[i] for i in ids} for name, ids in corpus.splits.items()}
    names = list(texts)
    shared = {f"{a}/{b}": len(texts[a] & texts[b]) for n, a in enumerate(names) for b in names[n + 1:]}
    return {pair: count for pair, count in shared.items() if count}
