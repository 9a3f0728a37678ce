"""The command ``python -m cipherlab report RUNS_DIR --out DIR``.

The report is :mod:`cipherlab.analysis.report`'s (:func:`~cipherlab.analysis.report.build_report`, then
:func:`~cipherlab.analysis.report.write_report`); here are its flags, and the check of every output folder
before any input is read. It prints the course handout's tables (:mod:`cipherlab.analysis.handout`: the
metrics of every greedy decoding the records hold, the costs, each configuration's costs over the baseline's);
``--figures DIR`` writes the handout's figures as PNG and PDF sized for a 12-point report, and ``--latex DIR``
its tables as booktabs tabulars, one ``.tex`` file per table so that each is ``\\input`` where the report
discusses it.
"""

from __future__ import annotations

from pathlib import Path

from cipherlab.analysis import handout
from cipherlab.analysis.report import DEFAULT_CHUNK_CHARS, build_report, check_out, write_report
from cipherlab.runner.errors import writable_folder

__all__ = ["register_cli"]


def _extra_folders(args) -> dict[str, Path]:
    """``{flag: folder}`` of --figures and --latex, each checked as --out is (never inside results/, a folder that
    is not empty only with --force), before any input is read; one that is --out itself was checked as --out."""
    folders = {}
    for flag, value in (("--figures", args.figures), ("--latex", args.latex)):
        if value is None:
            continue
        if args.references is not None:
            raise ValueError(f"{flag} {value}: the handout's tables and figures are made from run records, and "
                             "prediction files (--references) hold no training; leave it out, or report on records")
        folder = Path(value)
        if folder.resolve() != Path(args.out).resolve() and folder.resolve() not in (
                f.resolve() for f in folders.values()):
            check_out(folder, args.force, flag)  # the same rules as --out
        folders[flag] = folder
    return folders


def _cmd_report(args) -> int:
    """``python -m cipherlab report``: check the output folders, build the report, print the handout's tables,
    write report.md (and the figures and LaTeX asked for), say where."""
    import matplotlib

    matplotlib.use("Agg")  # figures go to files; no window is ever opened
    check_out(args.out, args.force)  # before reading the inputs
    extra = _extra_folders(args)
    report = build_report(args.runs_dir, args.references, chunk_chars=args.chunk_chars, baseline=args.baseline,
                          plan=args.plan)
    for number, table in enumerate(report.handout, start=1):
        print(f"Handout table {number}. {table.caption}\n\n{table.markdown()}\n")
    path = write_report(report, args.out, args.force)
    tables = len(report.tables()) + 1 + bool(report.missing)  # with the inputs and the "Not available" tables
    print(f"{path}: {tables} tables, {len(report.figures)} figure(s), "
          f"{len(report.missing)} section(s) not available")
    if "--figures" in extra:
        folder = writable_folder(extra["--figures"], "--figures")
        written = handout.write_figures(report.handout_figures, folder)
        print(f"{folder}: {len(written)} figure file(s), {handout.FIGURE_INCHES[0]} x {handout.FIGURE_INCHES[1]} in "
              f"each: {', '.join(p.name for p in written) or 'none (the records hold no curves, tests or costs)'}")
    if "--latex" in extra:
        folder = writable_folder(extra["--latex"], "--latex")
        written = handout.write_latex(report.handout, folder)
        print(f"{folder}: {len(written)} LaTeX table(s) to \\input (\\usepackage{{booktabs}}): "
              f"{', '.join(p.name for p in written)}")
    return 0


def register_cli(subparsers) -> None:
    """Add ``python -m cipherlab report``."""
    p = subparsers.add_parser(
        "report",
        help="the ablation's tables and figures for your own runs or prediction files",
        description="Write DIR/report.md (Markdown tables and figures only) from the run records in RUNS_DIR "
        "(c1.json ... from train/ablate, or <name>-c1-seed0.json ..., one record per configuration and seed) or from prediction "
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
    p.add_argument("--figures", metavar="DIR", help="also write the handout's figures (learning curves, test "
                   "metrics, cost ratios) to DIR as PNG and PDF, 6.3 x 2.6 in with 9-point text: the text width of "
                   "a 12-point report with 1-inch margins")
    p.add_argument("--latex", metavar="DIR", help="also write the handout's tables to DIR as booktabs tabulars, one "
                   ".tex file per table (metrics_test.tex, costs.tex, cost_ratios.tex ...), each to \\input where "
                   "your report discusses it")
    p.add_argument("--plan", metavar="FILE", help="the estimated FLOPs per step and per epoch for the costs table: a "
                   "file written by python -m cipherlab plan --preset PRESET --json FILE for the records' preset")
    p.add_argument("--force", action="store_true", help="write into an --out (--figures, --latex) folder that is "
                   "not empty")
    p.set_defaults(func=_cmd_report)
