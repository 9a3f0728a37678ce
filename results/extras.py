"""The reference run's extras: model exports, greedy vs beam, and the generalisation check.

Run from the repository root after `python -m cipherlab ablate --preset cpu` has trained C2 and C5:

    python results/extras.py                # exports, beam.json, generalisation.json
    python results/extras.py --runs-dir runs --configs c2,c5 --beam 4

It writes
- results/notes/checkpoints/<config>.safetensors: the trained model (weights, configuration and
  tokenizers or entropy model; no optimiser state, no pickle), read by `load_trained`. The C2 and C5
  it wrote are no longer in the tree: results/notes/checkpoints/README.md names the commit that holds them;
- results/notes/checkpoints/<config>.sample.json: the first test lines and their length-aware greedy
  decryption by the exported model (tests/test_checkpoints.py checks they are the split's test lines);
- results/notes/cpu/beam.json: greedy and beam-search metrics of the same exported model on the
  first 50 test lines (beam search decodes one chunk at a time);
- results/notes/cpu/generalisation.json: greedy metrics on every line of data/stdlib, English the
  models never saw (Python standard-library docstrings, letters and spaces only).
Each file records the command that made it, the commit and the versions.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import torch

from cipherlab.data.corpus import load_corpus
from cipherlab.pipeline.decode import decrypt_lines
from cipherlab.runner.trained import export_checkpoint, load_trained
from cipherlab.pipeline.codec import select_lines
from cipherlab.runner.evaluate import evaluate_checkpoint
from cipherlab.runner.record import git_commit, versions

SAMPLE_LINES = 8  # test lines whose decryption is stored beside each model and checked by the tests

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs-dir", default="runs", help="where ablate put the checkpoints (default: runs)")
    parser.add_argument("--preset", default="cpu", help="results go to results/<preset>/ (default: cpu)")
    parser.add_argument("--run", help="checkpoints are <runs-dir>/<run>/<config>/best.pt (default: the preset)")
    parser.add_argument("--configs", default="c2,c5", help="which trained configurations to export (default: c2,c5)")
    parser.add_argument("--beam", type=int, default=4, help="beam size to compare with greedy (default: 4)")
    parser.add_argument("--beam-lines", type=int, default=50,
                        help="compare greedy and beam on the first N test lines (beam search is unbatched; default: 50)")
    parser.add_argument("--generalisation-data", default=str(ROOT / "data" / "stdlib"))
    parser.add_argument("--merge", action="store_true",
                        help="add to existing beam.json/generalisation.json instead of replacing them")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    names = [n.strip() for n in args.configs.split(",")]
    out_dir = ROOT / "results" / args.preset
    about = {
        "command": shlex.join(["python", "results/extras.py", *(sys.argv[1:] if argv is None else argv)]),
        "git_commit": git_commit(),
        "versions": versions(),
    }
    beam, general = {"about": about}, {"about": {**about, "data": "data/stdlib (all lines)"}}
    for name in names:
        best = Path(args.runs_dir) / (args.run or args.preset) / name / "best.pt"
        exported = export_checkpoint(best, ROOT / "results" / "notes" / "checkpoints" / f"{name}.safetensors")
        print(f"{name}: exported {best} -> {exported} ({exported.stat().st_size / 2**20:.1f} MiB)", flush=True)
        model, codec, config = load_trained(exported, "cpu")
        plain, cipher = select_lines(load_corpus(), config).lines("test")
        predicted = decrypt_lines(model, codec, cipher[:SAMPLE_LINES], chunk_chars=config.chunk_chars,
                                  device=torch.device("cpu"), length_aware=True)
        sample = [{"cipher": c, "reference": p, "prediction": q}
                  for c, p, q in zip(cipher[:SAMPLE_LINES], plain[:SAMPLE_LINES], predicted, strict=True)]
        (exported.parent / f"{name}.sample.json").write_text(
            json.dumps({"about": {**about, "decoding": "greedy, length-aware", "lines": "the first test lines"},
                        "lines": sample}, indent=1) + "\n", encoding="utf-8")
        print(f"{name}: {sum(x['prediction'] == x['reference'] for x in sample)} of {SAMPLE_LINES} sample lines exact",
              flush=True)
        started = time.perf_counter()
        lines = dict(device="cpu", max_lines=args.beam_lines)
        beam[name] = {
            "greedy": evaluate_checkpoint(exported, length_aware=False, **lines),
            f"beam{args.beam}": evaluate_checkpoint(exported, beam_size=args.beam, **lines),
        }
        print(f"{name}: greedy vs beam {args.beam} on the test lines in {time.perf_counter() - started:.0f} s: "
              + ", ".join(f"{k} bit acc {v['bit_accuracy']:.4f} exact {v['sequence_accuracy']:.3f}"
                          for k, v in beam[name].items()), flush=True)
        general[name] = evaluate_checkpoint(exported, device="cpu", data_dir=args.generalisation_data, split="all",
                                            length_aware=False)
        print(f"{name}: generalisation bit acc {general[name]['bit_accuracy']:.4f}, "
              f"exact lines {general[name]['sequence_accuracy']:.3f}", flush=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    for file, new in (("beam.json", beam), ("generalisation.json", general)):
        path = out_dir / file
        if args.merge and path.is_file():  # keep the other configurations' entries
            old = json.loads(path.read_text(encoding="utf-8"))
            commands = old["about"].get("commands", [old["about"].get("command")])
            new = {**old, **new, "about": {**new["about"], "commands": [*commands, new["about"]["command"]]}}
        path.write_text(json.dumps(new, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
