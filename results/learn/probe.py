"""Did the model learn the cipher or the corpus? Train one configuration, then probe it.

    python results/learn/probe.py --config c3 --minutes 12 --set phase_shuffle=1.0 --set bit_embeddings=true

Trains ``make_config(config, preset)`` (``--preset``, default ``cpu``) with the overrides for a wall-clock budget into
``runs/learn/<name>/`` and writes ``results/learn/<name>.json``, a run record
(:mod:`cipherlab.runner.record`, the layout ``train`` writes too) whose ``sets`` hold its decryption of
- ``random_letters``: 30 strings of 40-120 characters over a-z, A-Z and (six times as likely) space,
  encrypted with the key -- a model that learned the cipher decodes them, a language model does not;
- ``stdlib``, English from outside Brown: the 500 letters-and-spaces lines of Python's docstrings (data/stdlib);
- ``test``, the preset's Brown test lines (the cpu preset's first 200; all 500 with ``--all-test``),
each with length-aware greedy decoding (EOS where the cipher fixes it), and Brown also freely (``test_free``).
Every number is read off the run; nothing is typed. One seed per run: a single measurement.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from cipherlab.data.cipher import encrypt  # noqa: E402
from cipherlab.base.config import TOKENIZATIONS, make_config, parse_field  # noqa: E402
from cipherlab.data.corpus import load_corpus  # noqa: E402
from cipherlab.pipeline.decode import decrypt_lines  # noqa: E402
from cipherlab.runner.trained import export_checkpoint, load_trained  # noqa: E402
from cipherlab.pipeline.codec import select_lines  # noqa: E402
from cipherlab.pipeline.metrics import compute_metrics  # noqa: E402
from cipherlab.runner.record import make_record, set_metrics, versions  # noqa: E402
from cipherlab.runner.training import train_config  # noqa: E402

from cipherlab.analysis.probes import probe_sets  # noqa: E402
from cipherlab.data.tokenizers.cipher_task import aligned_target_ids  # noqa: E402


def probe(model, codec, config, plain: list[str], cipher: list[str], length_aware: bool) -> dict:
    """One set of the record: the model's decryption of ``cipher`` scored against ``plain``."""
    device = next(model.parameters()).device
    started = time.perf_counter()
    pred = decrypt_lines(model, codec, cipher, chunk_chars=config.chunk_chars, device=device,
                         token_budget=config.token_budget, max_batch_size=config.max_batch_size,
                         length_aware=length_aware)
    seconds = time.perf_counter() - started
    metrics = compute_metrics(pred, plain, cipher, tokenised=codec.kind == "bpe")
    return set_metrics(pred, plain, metrics, decoding="length-aware greedy" if length_aware else "free greedy",
                       seconds=seconds)


def token_counts(codec, plain: list[str], cipher: list[str]) -> dict | None:
    """C1-C4's vocabularies, their merges, and characters per source and target token on ``plain``."""
    if codec.kind != "bpe":
        return None
    chars = sum(len(p) for p in plain)
    src = [codec.src.encode(c) for c in cipher]
    tgt = ([aligned_target_ids(codec.src, codec.tgt, s, p) for s, p in zip(src, plain)] if codec.aligned
           else [codec.tgt.encode(p) for p in plain])
    return {"source_vocab": codec.src.vocab_size, "source_merges": len(codec.src.merges),
            "target_vocab": codec.tgt.vocab_size, "target_merges": len(codec.tgt.merges),
            "chars_per_source_token": chars / max(sum(map(len, src)), 1),
            "chars_per_target_token": chars / max(sum(map(len, tgt)), 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--preset", default="cpu", help="the preset that sizes the model (default cpu)")
    parser.add_argument("--minutes", type=float, required=True)
    parser.add_argument("--name", help="default: <config>[-<overrides>]")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tokens", choices=list(TOKENIZATIONS),
                        help="C1-C4's tokenisation (cipherlab.base.config.TOKENIZATIONS; default: the cpu preset's)")
    parser.add_argument("--epochs", type=int, help="max_epochs (default: the preset's); the budget still applies")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--random", type=int, default=30, help="how many random strings to decode")
    parser.add_argument("--all-test", action="store_true", help="decode every test line, not the preset's first 200")
    parser.add_argument("--out", default="results/learn", help="folder for the record (relative to the repository)")
    parser.add_argument("--export", help="also export best.pt as this .safetensors file (relative to the repository)")
    parser.add_argument("--eval-only", action="store_true", help="probe runs/learn/<name>/best.pt again, no training")
    parser.add_argument("--resume", action="store_true", help="continue runs/learn/<name>/last.pt where it stopped")
    parser.add_argument("--last", action="store_true",
                        help="with --eval-only: probe last.pt (the final epoch) instead of best.pt, into <name>-last.json")
    parser.add_argument("--update", metavar="SET[,SET]",
                        help="with --eval-only: decode only these sets of cipherlab.analysis.probes again and rewrite "
                             "them in the existing record, which lists the command under 'updates'")
    parser.add_argument("--recipe", default="cipher", help="the training recipe (cipherlab.base.config.RECIPES)")
    parser.add_argument("--more-sets", action="store_true",
                        help="also decode random strings over the training alphabet, upper case and long lines")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    overrides = dict(TOKENIZATIONS[args.tokens]) if args.tokens else {}
    for item in args.set:
        field, _, value = item.partition("=")
        overrides[field] = parse_field(field, value)
    if args.epochs is not None:
        overrides["max_epochs"] = args.epochs
    config = make_config(args.config, args.preset, args.recipe, time_budget_s=60 * args.minutes, seed=args.seed, **overrides)
    name = args.name or args.config
    out = ROOT / "runs" / ("learn" if args.preset == "cpu" else f"learn-{args.preset}") / name
    started = time.monotonic()
    if args.eval_only:
        log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines() if line.strip()]
        if config.select_on == "val_accuracy":
            best = max(log, key=lambda r: r["val_accuracy"])
        else:
            best = min(log, key=lambda r: r["val_loss"])
        fit = {"epochs": log[-1]["epoch"], "best_epoch": best["epoch"], "stopped": "see log.jsonl",
               "best_val_loss": best["val_loss"], "best_val_accuracy": best.get("val_accuracy"), "params": None}
        train_seconds = None
    else:
        run = train_config(config, out, progress=False, resume=args.resume)
        train_seconds = time.monotonic() - started
        fit = {"epochs": run.fit.epochs, "best_epoch": run.fit.best_epoch, "stopped": run.fit.stopped,
               "best_val_loss": run.fit.best_val_loss, "best_val_accuracy": run.fit.best_val_accuracy,
               "params": run.params}
    if args.last:
        if not args.eval_only:
            parser.error("--last probes a finished run's last.pt: use it with --eval-only")
        last = log[-1]
        fit.update(best_epoch=last["epoch"], best_val_loss=last["val_loss"], best_val_accuracy=last.get("val_accuracy"),
                   stopped=f"last.pt, the final epoch ({fit['stopped']})")
        name = f"{name}-last"
    model, codec, config = load_trained(out / ("last.pt" if args.last else "best.pt"), "cpu")
    model.eval()

    if args.update:
        if not args.eval_only:
            parser.error("--update rewrites sets of an existing record: use it with --eval-only")
        path = ROOT / args.out / f"{name}.json"
        record = json.loads(path.read_text(encoding="utf-8"))
        sets = probe_sets(config, n_random=record["random_strings"]["lines"])
        corpus = load_corpus() if args.all_test else select_lines(load_corpus(), config)
        sets["test"] = sets["test_free"] = corpus.lines("test")[0]  # --all-test as the record was made
        names = [n.strip() for n in args.update.split(",") if n.strip()]
        unknown = [n for n in names if n not in sets]
        if unknown:
            parser.error(f"--update {args.update}: choose among {', '.join(sets)}")
        for set_name in names:
            if len(sets[set_name]) != record["sets"][set_name]["lines"]:
                parser.error(f"--update {set_name}: {len(sets[set_name])} lines now, {record['sets'][set_name]['lines']}"
                             " in the record; pass the --random/--all-test it was made with")
            record["sets"][set_name] = probe(model, codec, config, sets[set_name], [encrypt(t) for t in sets[set_name]],
                                             set_name != "test_free")
        record.setdefault("updates", []).append(
            {"sets": names, "command": shlex.join(["python", "results/learn/probe.py", *(argv or sys.argv[1:])]),
             **versions()})
        path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print(f"{name}: rewrote {', '.join(names)} in {path}")
        return 0

    corpus = load_corpus() if args.all_test else select_lines(load_corpus(), config)
    brown_plain, brown_cipher = corpus.lines("test")
    sets = probe_sets(config, n_random=args.random)
    cipher_of = {name: [encrypt(t) for t in lines] for name, lines in sets.items()}
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines() if line.strip()]
    scored = {name: probe(model, codec, config, sets[name], cipher_of[name], True)
              for name in ("random_letters", "stdlib",
                           *(("random_alphabet", "stdlib_upper", "stdlib_long") if args.more_sets else ()))}
    scored["test"] = probe(model, codec, config, brown_plain, brown_cipher, True)
    scored["test_free"] = probe(model, codec, config, brown_plain, brown_cipher, False)
    record = make_record(
        config, name=name, fit=fit, log=log, sets=scored,
        device=None if args.eval_only else run.device,
        command=shlex.join(["python", "results/learn/probe.py", *(argv if argv is not None else sys.argv[1:])]),
        overrides=overrides, wall_seconds=train_seconds,
        peak_memory_bytes=None if args.eval_only else run.peak_memory_bytes,
        # validation every eval_every steps (Config.eval_every), when the run asked for it
        curve=[json.loads(line) for line in (out / "curve.jsonl").read_text().splitlines() if line.strip()]
        if (out / "curve.jsonl").exists() else None,
        tokens=token_counts(codec, brown_plain, brown_cipher),
    )
    if args.export:
        record["export"] = args.export
        export_checkpoint(out / "best.pt", ROOT / args.export)
    path = ROOT / args.out / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    r, s, b = (record["sets"][key] for key in ("random_letters", "stdlib", "test"))
    print(f"{name}: {record['epochs']} epochs; random {100 * r['char_accuracy']:.2f} % "
          f"chars, {r['exact_lines']}/{r['lines']} exact; stdlib {100 * s['bit_accuracy']:.2f} % bits, "
          f"{s['exact_lines']}/{s['lines']}; Brown {100 * b['bit_accuracy']:.3f} % bits, {b['exact_lines']}/{b['lines']}"
          f" -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
