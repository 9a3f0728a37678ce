"""Score a checkpoint on whole test lines and write the ablation's results (the results chapter).

:func:`evaluate_checkpoint` rebuilds a trained model from its checkpoint alone (configuration,
tokenizers or entropy model, weights: :mod:`cipherlab.pipeline.checkpoint`), decrypts every line of a
split chunk by chunk, and computes :func:`cipherlab.pipeline.metrics.compute_metrics` on the re-assembled lines,
keeping each line's outcome (``exact_by_line``) for ``report``'s paired comparison.
:func:`results_record` adds the cost of the configuration (parameters, peak memory, seconds per
epoch, training tokens/s, decoded lines/s) and where it ran; :func:`write_table` gathers the
records of one preset into ``table.md`` and ``table.csv``; table.md names the student's parts (``--part``)
of each run and says when the runs mix them with cipherlab's own.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import torch

from cipherlab.pipeline.checkpoint import check_data, model_from_payload, read_payload
from cipherlab.pipeline.codec import select_lines
from cipherlab.base.config import Config, change_from_c1, recipe_caveats
from cipherlab.data.corpus import load_corpus, load_pairs
from cipherlab.pipeline.decode import decrypt_lines, length_aware_by_default
from cipherlab.base.device import pick_device
from cipherlab.base.errors import write_text_atomic
from cipherlab.pipeline.metrics import compute_metrics
from cipherlab.base.markdown import markdown_table

__all__ = [
    "TABLE_COLUMNS",
    "decoding_name",
    "evaluate_checkpoint",
    "exact_by_line",
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
    parts: dict[str, type] | None = None,
) -> dict:
    """Metrics of the checkpoint on the whole lines of ``split``, plus decoding speed.

    ``length_aware``: as :func:`cipherlab.pipeline.decode.decrypt_lines` (by default greedy decoding is
    length-aware, beam search free); the metrics' ``decoding`` names which it was.

    The split is the one the checkpoint was trained with (its preset's line limits); a
    checkpoint trained on other data is refused. ``split="all"`` is the exception: it scores
    every line of the data folder's file and accepts any data, for checking that a model
    learned the cipher rather than its training text (e.g. ``data_dir="data/stdlib"``). ``parts``:
    the student's classes it was trained with (:func:`cipherlab.pipeline.checkpoint.load_trained`).
    """
    device = pick_device(device)
    payload = read_payload(path)
    model, codec, config = model_from_payload(payload, device, path, parts=parts)
    if split == "all":  # any data, however few lines: no split is needed
        plain, cipher = load_pairs(data_dir)
    else:
        corpus = select_lines(load_corpus(data_dir), config)
        check_data(payload, corpus, path, "pass the --data-dir it was trained with, or split 'all' "
                   "to score every line of other data")
        plain, cipher = corpus.lines(split)
    if max_lines is not None:  # the first lines only (e.g. for slow beam search)
        plain, cipher = plain[:max_lines], cipher[:max_lines]
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
    metrics.update(split=split, decoding=decoding_name(beam_size, length_aware), decode_seconds=seconds,
                   decode_lines_per_s=len(plain) / max(seconds, 1e-9), exact_by_line=exact_by_line(predictions, plain))
    return metrics


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


def git_commit() -> str | None:
    """The commit of the code that produced a result, "+dirty" when tracked files had changes.

    None outside a git checkout.
    """
    here = Path(__file__).resolve().parent

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=here, capture_output=True, text=True, timeout=10)

    try:
        head, status = git("rev-parse", "HEAD"), git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode != 0 or not head.stdout.strip():
        return None
    return head.stdout.strip() + ("+dirty" if status.stdout.strip() else "")


def device_name(device: str) -> str:
    """What ran it: the GPU's name (``torch.cuda.get_device_name``) on CUDA, else the device type."""
    device = torch.device(device)
    if device.type == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(device)
    return device.type


def versions() -> dict:
    """Python, torch, NumPy and cipherlab versions, recorded with every result."""
    import platform
    from importlib import metadata

    try:
        cipherlab_version = metadata.version("cipherlab")
    except metadata.PackageNotFoundError:
        cipherlab_version = None
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "cipherlab": cipherlab_version,
        "threads": torch.get_num_threads(),
    }


def results_record(config: Config, run, test_metrics: dict) -> dict:
    """One configuration's line of the ablation: its test metrics and what it cost.

    ``run`` is what :func:`cipherlab.pipeline.train.train_config` returned (a ``RunResult``; not imported
    here, so that evaluation never depends on the training module).
    """
    history = run.fit.history
    train_seconds = sum(r["seconds"] for r in history)
    return {
        "config": config.name,
        "preset": config.preset,
        "components": config.components(),
        "source_mode": config.source_mode,
        "recipe": config.recipe,
        "recipe_caveats": recipe_caveats(config),  # what of the recipe this tokenization cannot take
        "test": test_metrics,
        "params": run.params,
        "peak_memory_bytes": run.peak_memory_bytes,
        "seconds_per_epoch": train_seconds / len(history) if history else None,
        "train_tokens_per_s": sum(r["train_tokens"] for r in history) / train_seconds if train_seconds else None,
        "decode_lines_per_s": test_metrics["decode_lines_per_s"],
        "epochs": run.fit.epochs,
        "best_epoch": run.fit.best_epoch,
        "best_val_loss": run.fit.best_val_loss,
        "stopped": run.fit.stopped,
        "device": run.device,
        "device_name": device_name(run.device),
        "torch_version": torch.__version__,
        "versions": versions(),
        "git_commit": git_commit(),
        "seed": config.seed,
        "hyperparameters": config.to_dict(),
    }


def write_results(
    config: Config, record: dict, results_dir: str | os.PathLike = "results", curve: str | os.PathLike | None = None
) -> Path:
    """Write ``results_dir/<run name>/<config>.json`` and refresh that folder's table; return the json path.

    The run name is the preset (``cpu``), or e.g. ``cpu-bits`` for a source mode other than the
    preset's own. ``curve``, a training ``log.jsonl``, is copied beside it as ``<config>.log.jsonl``.
    """
    folder = Path(results_dir) / config.run_name
    folder.mkdir(parents=True, exist_ok=True)
    if curve is not None and Path(curve).is_file():  # each file written whole or not at all (a full disk)
        write_text_atomic(folder / f"{record['config']}.log.jsonl", Path(curve).read_text(encoding="utf-8"))
    path = folder / f"{record['config']}.json"
    write_text_atomic(path, json.dumps(record, indent=2) + "\n")
    write_table(folder)
    return path


NOT_COMPARABLE = "n/c"


def _test(metric: str):
    """Read a test metric from a record; "n/c" where the record marks it not comparable."""
    return lambda r: NOT_COMPARABLE if metric in r["test"].get("not_comparable", {}) else r["test"][metric]


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
    ("decode lines/s", lambda r: r["decode_lines_per_s"], "{:.1f}"),
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
    """How the records' test lines were decoded; records older than the field were free greedy."""
    kinds = sorted({r["test"].get("decoding", "free greedy") for r in records})
    return " / ".join(kinds) + " decoding"


def write_table(folder: str | os.PathLike) -> tuple[Path, Path]:
    """Gather every ``c*.json`` of one preset's folder into ``table.md`` and ``table.csv``.

    The Markdown table is rounded for reading; the CSV keeps every value unrounded.
    """
    folder = Path(folder)
    records = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("c[0-9]*.json"))]
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
        f"Device: {first.get('device_name') or first['device']}; torch {first['torch_version']}; "
        f"commit {first['git_commit'] or 'unknown'}; seed {first['seed']}.",
        "",
        *_parts_lines(records),
    ]
    md_path, csv_path = folder / "table.md", folder / "table.csv"
    write_text_atomic(md_path, "\n".join(md))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(headers)
    writer.writerows([_cell(r, read, None) for _, read, _ in TABLE_COLUMNS] for r in records)
    write_text_atomic(csv_path, buffer.getvalue())
    return md_path, csv_path


def exact_by_line(predictions, references) -> str:
    """The per-line outcomes the records keep (``test.exact_by_line``): "1" for a line predicted exactly,
    else "0", one per line; ``report`` pairs two runs' outcomes in McNemar's test."""
    return "".join("1" if p == r else "0" for p, r in zip(predictions, references, strict=True))


def _parts_lines(records: list[dict]) -> list[str]:
    """table.md's lines on the student's parts (``parts`` of the records, :func:`cipherlab.student.parts.part_records`):
    each run's class, file and source hash, and whether the table mixes them with cipherlab's own; [] when
    every run used cipherlab's own."""
    own = {r["config"]: [p for p in r.get("parts") or [] if isinstance(p, dict)] for r in records}
    if not any(own.values()):
        return []
    lines = ["Parts (--part): " + "; ".join(
        f"{config.upper()}: " + (", ".join(f"{p.get('part')} = {p.get('class')} of {p.get('file') or '?'} "
                                           f"(class sha256 {(p.get('class_sha256') or p.get('sha256') or '?')[:12]})"
                                           for p in parts) if parts else "cipherlab's own")
        for config, parts in own.items()) + "."]
    if not all(own.values()):
        lines.append("Mixed: " + ", ".join(c.upper() for c, parts in own.items() if parts) + " use your parts, "
                     + ", ".join(c.upper() for c, parts in own.items() if not parts) + " cipherlab's own; their "
                     "differences include the parts'.")
    return [*lines, ""]
