"""The command ``python -m cipherlab report RUNS_DIR --out DIR`` (the results chapter).

The report is :mod:`cipherlab.analysis.report`'s (:func:`~cipherlab.analysis.report.build_report`, then
:func:`~cipherlab.analysis.report.write_report`); here are its flags, and the check of ``--out`` before any
input is read.
"""

from __future__ import annotations

from cipherlab.analysis.report import DEFAULT_CHUNK_CHARS, build_report, check_out, write_report

__all__ = ["register_cli"]


def _cmd_report(args) -> int:
    """``python -m cipherlab report``: check --out, build the report, write it, say where."""
    import matplotlib

    matplotlib.use("Agg")  # figures go to files; no window is ever opened
    check_out(args.out, args.force)  # before reading the inputs
    report = build_report(args.runs_dir, args.references, chunk_chars=args.chunk_chars, baseline=args.baseline)
    path = write_report(report, args.out, args.force)
    tables = len(report.tables()) + 1 + bool(report.missing)  # with the inputs and the "Not available" tables
    print(f"{path}: {tables} tables, {len(report.figures)} figure(s), "
          f"{len(report.missing)} section(s) not available")
    return 0


def register_cli(subparsers) -> None:
    """Add ``python -m cipherlab report``."""
    p = subparsers.add_parser(
        "report",
        help="the results chapter's tables and figures for your own runs or prediction files",
        description="Write DIR/report.md (Markdown tables and figures only) from the run records in RUNS_DIR "
        "(c1.json ... from train/ablate, or <name>-c1-seed0.json from results/learn/probe.py) or from prediction "
        "files (c1.txt ..., one line per reference line, with --references): the results in every unit, each "
        "configuration against C1 on the same lines (McNemar's exact test), where the errors are, the "
        "random-string probe, free against length-aware decoding and the training curves, each where the "
        "inputs hold the data; a 'Not available' table says what is missing. Never writes inside the "
        "repository's results/.",
    )
    p.add_argument("runs_dir", metavar="RUNS_DIR", help="the folder of run records or prediction files")
    p.add_argument("--out", required=True, metavar="DIR", help="the folder to write report.md and its figures in")
    p.add_argument("--references", metavar="FILE",
                   help="reference plaintext lines: read RUNS_DIR's .txt files as predictions of them")
    p.add_argument("--baseline", default="c1", help="the configuration every other is compared with "
                   "(default: %(default)s)")
    p.add_argument("--chunk-chars", type=int, default=DEFAULT_CHUNK_CHARS, metavar="N",
                   help="prediction files: the chunk length of the error analysis (default: %(default)s, the cpu "
                   "preset's)")
    p.add_argument("--force", action="store_true", help="write into an --out folder that is not empty")
    p.set_defaults(func=_cmd_report)
