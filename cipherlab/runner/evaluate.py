"""Score a checkpoint on whole test lines and write the ablation's results.

:func:`evaluate_checkpoint` rebuilds a trained model from its checkpoint alone (configuration,
tokenizers or entropy model, weights: :mod:`cipherlab.pipeline.checkpoint`), decrypts every line of a
split chunk by chunk, and computes :func:`cipherlab.pipeline.metrics.compute_metrics` on the re-assembled lines,
keeping each line's outcome (``exact_by_line``) for ``report``'s paired comparison.
:func:`results_record` makes the run's record (:mod:`cipherlab.runner.record`): the test lines, the
training log, the cost of the configuration (parameters, peak memory, seconds per
epoch, training tokens/s, decoded lines/s) and where it ran; :func:`write_table` gathers the
records of one preset into ``table.md`` and ``table.csv``; table.md names the student's parts (``--part``)
of each run and says when the runs mix them with cipherlab's own.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from cipherlab.runner.trained import check_data, model_from_payload, read_payload
from cipherlab.pipeline.codec import OWN_MODEL, ModelBuilder, select_lines
from cipherlab.base.config import Config, change_from_c1
from cipherlab.data.corpus import load_corpus, load_pairs, resolve_data_dir
from cipherlab.pipeline.decode import decrypt_lines, foreign_note, length_aware_by_default, trained_alphabet
from cipherlab.base.device import pick_device
from cipherlab.base.files import write_atomic
from cipherlab.pipeline.metrics import compute_metrics
from cipherlab.runner.record import make_record, read_record, set_metrics
from cipherlab.base.markdown import markdown_table

__all__ = [
    "TABLE_COLUMNS",
    "decoding_name",
    "evaluate_checkpoint",
    "metrics_line",
    "results_record",
    "write_results",
    "write_table",
]


def evaluate_checkpoint(
    path: str | os.PathLike,
    *,
    data_dir: str | os.PathLike | None = None,
    device: torch.device | str | None = None,
    split: str = "test",
    beam_size: int = 1,
    max_lines: int | None = None,
    length_aware: bool | None = None,
    builder: ModelBuilder = OWN_MODEL,
) -> dict:
    """Metrics of the checkpoint on the whole lines of ``split``, plus decoding speed.

    ``length_aware``: as :func:`cipherlab.pipeline.decode.decrypt_lines` (by default greedy decoding is
    length-aware, beam search free); the metrics' ``decoding`` names which it was.

    The split is the one the checkpoint was trained with (its preset's line limits); a
    checkpoint trained on other data is refused. ``split="all"`` is the exception: it scores
    every line of the data folder's file and accepts any data, for checking that a model
    learned the cipher rather than its training text (e.g. ``data_dir="data/stdlib"``). ``builder``:
    what rebuilds the model (:func:`cipherlab.runner.trained.load_trained`).
    """
    device = pick_device(device)
    payload = read_payload(path)
    model, codec, config = model_from_payload(payload, device, path, builder=builder)
    if split == "all":  # any data, however few lines: no split is needed
        plain, cipher = load_pairs(data_dir)
    else:
        corpus = select_lines(load_corpus(data_dir), config)
        check_data(payload, corpus, path, "pass the --data-dir it was trained with, or split 'all' "
                   "to score every line of other data")
        plain, cipher = corpus.lines(split)
    if max_lines is not None:  # the first lines only (e.g. for slow beam search)
        plain, cipher = plain[:max_lines], cipher[:max_lines]
    note = foreign_note(plain, trained_alphabet(codec), f"{resolve_data_dir(data_dir)} ({split} lines)",
                        "of its plaintext lines")
    if note:  # the numbers would measure text the model cannot write, not how well it learned the cipher
        print(note, file=sys.stderr)
    started = time.perf_counter()
    predictions = decrypt_lines(
        model,
        codec,
        cipher,
        chunk_chars=config.chunk_chars,
        device=device,
        token_budget=config.token_budget,
        max_batch_size=config.max_batch_size,
        beam_size=beam_size,
        length_aware=length_aware,
    )
    seconds = time.perf_counter() - started
    metrics = compute_metrics(predictions, plain, cipher, tokenised=codec.kind == "bpe")
    return {**set_metrics(predictions, plain, metrics, decoding=decoding_name(beam_size, length_aware),
                          seconds=seconds), "split": split}


def decoding_name(beam_size: int = 1, length_aware: bool | None = None) -> str:
    """How lines were decoded, as results and every printed figure name it (``length_aware`` as
    :func:`cipherlab.pipeline.decode.length_aware_by_default` reads it)."""
    if beam_size > 1:
        return f"beam {beam_size}"
    return "length-aware greedy" if length_aware_by_default(beam_size, length_aware) else "free greedy"


def metrics_line(metrics: dict) -> str:
    """The headline metrics of :func:`evaluate_checkpoint` in one line, labelled with the split and the
    decoding that produced them (free and length-aware greedy give different figures for one model)."""
    return (f"{metrics['split']} lines, {metrics['decoding']} decoding: bit accuracy {metrics['bit_accuracy']:.4f}, "
            f"sequence accuracy {metrics['sequence_accuracy']:.4f}, Levenshtein {metrics['levenshtein']:.2f}, "
            f"chrF {metrics['chrf']:.1f}")


def results_record(config: Config, run, test_metrics: dict) -> dict:
    """One configuration's record (:mod:`cipherlab.runner.record`): its test lines as set ``test``,
    its training log, and what it cost.

    ``run`` is what :func:`cipherlab.runner.training.train_config` returned (a ``RunResult``; not imported
    here, so that evaluation never depends on the training module).
    """
    fit = {"epochs": run.fit.epochs, "best_epoch": run.fit.best_epoch, "best_val_loss": run.fit.best_val_loss,
           "best_val_accuracy": run.fit.best_val_accuracy if run.fit.best_val_accuracy >= 0 else None,
           "stopped": run.fit.stopped, "params": run.params}
    return make_record(config, fit=fit, log=run.fit.history, sets={"test": test_metrics}, device=run.device,
                       peak_memory_bytes=run.peak_memory_bytes)


def write_results(config: Config, record: dict, results_dir: str | os.PathLike = "results", *,
                  notes: Callable[[list[dict]], list[str]] | None = None) -> Path:
    """Write ``results_dir/<run name>/<config>.json`` and refresh that folder's table; return the json path.

    The run name is the preset (``cpu``), or e.g. ``cpu-bits`` for a source mode other than the
    preset's own. The training log travels inside the record (its ``log``). ``notes``: as :func:`write_table`'s.
    """
    folder = Path(results_dir) / config.run_name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{record['config']}.json"
    write_atomic(path, json.dumps(record, indent=2) + "\n")
    write_table(folder, notes=notes)
    return path


NOT_COMPARABLE = "n/c"


def _test(metric: str):
    """Read a test metric from a record; "n/c" where the record marks it not comparable."""
    return lambda r: (NOT_COMPARABLE if metric in r["sets"]["test"].get("not_comparable", {})
                      else r["sets"]["test"].get(metric))


# (header, how to read it from a record, format for the Markdown table)
TABLE_COLUMNS = [
    ("config", lambda r: r["config"], "{}"),
    ("change from C1", lambda r: change_from_c1(r["components"]), "{}"),
    ("bit acc", _test("bit_accuracy"), "{:.4f}"),
    ("seq acc", _test("sequence_accuracy"), "{:.4f}"),
    ("Levenshtein", _test("levenshtein"), "{:.1f}"),
    ("CER", _test("char_error_rate"), "{:.4f}"),
    ("chrF", _test("chrf"), "{:.1f}"),
    ("BLEU", _test("bleu"), "{:.1f}"),
    ("ROUGE-1", _test("rouge1"), "{:.3f}"),
    ("ROUGE-2", _test("rouge2"), "{:.3f}"),
    ("ROUGE-L", _test("rougeL"), "{:.3f}"),
    ("params", lambda r: r["params"], "{:,}"),
    ("peak MiB", lambda r: r["peak_memory_bytes"] and r["peak_memory_bytes"] / 2**20, "{:.0f}"),
    ("s/epoch", lambda r: r["seconds_per_epoch"], "{:.1f}"),
    ("train tok/s", lambda r: r["train_tokens_per_s"], "{:.0f}"),
    ("decode lines/s", lambda r: r["sets"]["test"]["decode_lines_per_s"], "{:.1f}"),
    ("epochs", lambda r: r["epochs"], "{}"),
]


def _cell(record: dict, read, fmt: str | None) -> str:
    """One table cell: formatted with ``fmt`` (Markdown), or the plain value when ``fmt`` is None (CSV)."""
    value = read(record)
    if value is None:  # not measured (e.g. peak memory on Windows)
        return "" if fmt is None else "-"
    if value == NOT_COMPARABLE or fmt is None:
        return str(value)
    return fmt.format(value)


def _decodings(records: list[dict]) -> str:
    """How the records' test lines were decoded."""
    kinds = sorted({r["sets"]["test"]["decoding"] for r in records})
    return " / ".join(kinds) + " decoding"


def write_table(folder: str | os.PathLike, *, notes: Callable[[list[dict]], list[str]] | None = None
                ) -> tuple[Path, Path]:
    """Gather every ``c*.json`` of one preset's folder into ``table.md`` and ``table.csv``.

    The Markdown table is rounded for reading; the CSV keeps every value unrounded. ``notes``: lines to add
    under the table, given the records (the command line's: which runs used a student's parts).
    """
    folder = Path(folder)
    records = [read_record(p) for p in sorted(folder.glob("c[0-9]*.json"))]
    if not records:
        raise FileNotFoundError(f"{folder}: no results (c1.json ... c5.json) to tabulate; train first")
    rows = [[_cell(r, read, fmt) for _, read, fmt in TABLE_COLUMNS] for r in records]
    headers = [h for h, _, _ in TABLE_COLUMNS]
    first = records[0]
    md = [
        f"# Ablation results: preset `{first['preset']}`, C1-C4 source mode `{first['source_mode']}`",
        "",
        f"Test split, whole lines, {_decodings(records)}. Accuracies and CER are fractions; chrF and BLEU "
        "0-100 (sacrebleu); ROUGE F1 0-1. n/c = not comparable: the assignment reports BLEU and ROUGE "
        "for the tokenised configurations only. Training tokens are each configuration's own target "
        "units (BPE pieces for C1-C4, bytes for C5). Peak memory: CUDA max_memory_allocated on a GPU, "
        "peak resident set size of the process on a CPU.",
        "",
        markdown_table(headers, rows),
        "",
        f"Device: {first.get('device_name') or first['device']}; torch {first['versions']['torch']}; "
        f"commit {first['git_commit'] or 'unknown'}; seed {first['seed']}.",
        "",
        *(notes(records) if notes else []),
    ]
    md_path, csv_path = folder / "table.md", folder / "table.csv"
    write_atomic(md_path, "\n".join(md))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(headers)
    writer.writerows([_cell(r, read, None) for _, read, _ in TABLE_COLUMNS] for r in records)
    write_atomic(csv_path, buffer.getvalue())
    return md_path, csv_path
