"""The commands ``train``, ``evaluate``, ``decrypt``, ``export`` and ``ablate`` of ``python -m cipherlab``.

``cipherlab/__main__.py`` builds the parser and calls
:func:`register_cli`; every command returns an exit code. A user error (unknown configuration
or preset, a missing file, a cipher line that is not bits, an output folder that cannot be
written) raises ValueError or OSError, which ``__main__`` turns into one line on stderr and a
non-zero exit. Output locations are checked before any work starts.

Every figure printed says which decoding produced it, and the default is the same for
``train``, ``evaluate`` and ``decrypt``: greedy decoding that ends each line where its cipher's
length says (length-aware greedy); ``--free`` lets the model decide where a line ends (free greedy).

    python -m cipherlab train --config c2 --preset cpu          # runs/cpu/c2/ and runs/cpu/c2.json
    python -m cipherlab train --config c2 --preset cpu --resume # continue from runs/cpu/c2/last.pt
    python -m cipherlab evaluate --checkpoint runs/cpu/c2/best.pt
    python -m cipherlab decrypt --checkpoint runs/cpu/c2/best.pt 0000100100100111
    python -m cipherlab export --checkpoint runs/cpu/c2/best.pt --out c2.safetensors
    python -m cipherlab export --checkpoint runs/cpu/c2/best.pt --hub hub/c2 [--push USER/REPO]
    python -m cipherlab ablate --preset smoke                   # all five, then runs/smoke/table.md

``--part PART=FILE.py:NAME`` (train, evaluate, decrypt, ablate; repeatable) puts a class of the
student's in place of cipherlab's: ``attention``, ``norm``, ``positional`` or ``rope``
(:mod:`cipherlab.student.parts` gives each interface). It is checked before training starts, and the
checkpoint and results record name it; such a checkpoint decodes again only with the same ``--part``.

    python -m cipherlab train --config c1 --preset cpu --part attention=my_attention.py:MyAttention

``--wandb [PROJECT]`` (train, ablate) also logs the run to Weights & Biases (:mod:`cipherlab.runner.tracking`:
the configuration, the loss, learning rate and gradient norm of every step, each validation and epoch, the
test metrics, parameters and peak memory); without an API key it logs offline and prints the ``wandb sync``
line that uploads it later. ``ablate`` puts its runs in one W&B group.

    python -m cipherlab train --config c1 --preset cpu --wandb                # project "cipherlab"
    python -m cipherlab ablate --preset smoke --wandb my-project

User runs write under ``runs/`` (ignored by git): the committed reference results in ``results/``
change only when a command is given ``--results-dir results`` on purpose.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from cipherlab.data.cipher import KEY, check_bits, decrypt as decrypt_with_key
from cipherlab.base.config import (CONFIG_NAMES, DEFAULT_RECIPE, PRESETS, RECIPES, TOKENIZATIONS, make_config, parse_field,
                              recipe_caveats)
from cipherlab.pipeline.decode import decrypt_lines, foreign_note, length_aware_by_default, trained_alphabet
from cipherlab.student.check import load_target
from cipherlab.runner.trained import export_checkpoint, load_trained
from cipherlab.runner.hub import export_model_folder, push_model_folder, record_for
from cipherlab.runner.errors import first_line, outside_results, writable_file, writable_folder
from cipherlab.base.files import write_atomic
from cipherlab.cli.common import device_option
from cipherlab.runner.record import read_record
from cipherlab.runner.evaluate import (decoding_name, evaluate_checkpoint, metrics_line, results_record, write_results,
                                     write_table)
from cipherlab.student.parts import (PARTS, PartError, PartsBuilder, import_parts, load_parts, parse_part, parts_lines,
                                     unused_parts)
from cipherlab.analysis.score import read_text_lines, text_lines
from cipherlab.runner.tracking import DEFAULT_PROJECT, check_wandb_dir, require_wandb, start_wandb
from cipherlab.runner.lock import own_folder, own_record
from cipherlab.runner.hooks import NotLearning
from cipherlab.pipeline.train import TrainingDiverged
from cipherlab.runner.training import train_config

__all__ = ["register_cli"]

_DATA_HELP = "folder with brown_plain.txt (default: $CIPHERLAB_DATA_DIR or the repository's data/)"
_DEVICE_HELP = "cpu, cuda, cuda:1 or mps (default: cuda if present, then mps, then cpu)"
_THREADS_NOTE = "On a shared CPU, OMP_NUM_THREADS=1 avoids threads fighting over cores."
MAX_BEAM = 32  # --beam at most: beam search costs the beam size times greedy decoding's work


def _error(message: str) -> int:
    print(f"cipherlab: error: {message}", file=sys.stderr)
    return 1


# --------------------------------------------------------------------------- train


def _cmd_train(args) -> int:
    started = time.monotonic()
    _check_wandb(args)
    overrides = _mode(args)
    if args.time_budget is not None:
        overrides["time_budget_s"] = args.time_budget or None
    config = make_config(args.config, args.preset, args.recipe, **overrides)
    for caveat in recipe_caveats(config):
        print(f"note: {config.name} ({config.preset} preset) cannot take all of the recipe: {caveat}")
    builder = PartsBuilder(import_parts(args.part, load=load_target, config=config))
    builder.prepare(config)  # each part tried once, before anything else
    _note_parts(builder, config)
    out = Path(args.out) if args.out else Path("runs") / config.run_name / config.name
    results_folder = _results_folder(args.results_dir, config.run_name)
    created = _missing_folders(out, results_folder)  # removed again if the run ends leaving them empty
    try:
        writable_folder(outside_results(out, "--out"), "--out")  # both before training, not after it
        results = writable_folder(results_folder, "--results-dir")
        with own_folder(out, "--out"), own_record(results / f"{config.name}.json", "--results-dir"):
            # the run owns --out and its results record until the record is written: one writer at a time
            if (out / "last.pt").exists() and not (args.resume or args.overwrite):
                raise FileExistsError(
                    f"{out} already holds a training run; pass --resume to continue it, --overwrite to start "
                    "again, or --out to train somewhere else"
                )
            _check_records(results)
            # the first line at once: reading the data and fitting the tokenizers take seconds to minutes
            print(f"{config.name} ({config.preset} preset, {config.recipe} recipe) -> {out}: reading the data, "
                  "fitting or loading the tokenizers, building the model ...", flush=True)
            return _tracked(args, config, builder, out, started)
    finally:
        _remove_empty(created)


def _check_wandb(args) -> None:
    """With --wandb, before any work: wandb is installed and WANDB_DIR is not inside results/ (one line if not)."""
    if getattr(args, "wandb_group", None) and not args.wandb:
        raise ValueError(f"--wandb-group {args.wandb_group}: names the W&B group of a --wandb run; pass --wandb too")
    if getattr(args, "wandb", None):
        require_wandb()
        check_wandb_dir()


def _tracked(args, config, builder: PartsBuilder, out: Path, started: float) -> int:
    """:func:`_train_and_score`, logged to a W&B run with --wandb (closed however the run ends)."""
    if not args.wandb:
        return _train_and_score(args, config, builder, out, started)
    tracker = start_wandb(config, out, project=args.wandb, group=args.wandb_group, command=_command(args),
                          parts=builder.records)
    code = 1  # an exception on the way out marks the W&B run failed
    try:
        code = _train_and_score(args, config, builder, out, started, tracker)
        return code
    finally:
        tracker.finish(exit_code=code)


def _command(args) -> str:
    """The command that ran, as results record it."""
    return shlex.join(["python", "-m", "cipherlab", *getattr(args, "argv", [])])


def _missing_folders(*folders: Path) -> list[Path]:
    """The folders (and parents) among ``folders`` that do not exist yet, deepest first."""
    missing = {f for folder in folders for f in (folder, *folder.parents) if not f.exists()}
    return sorted(missing, key=lambda f: len(f.absolute().parts), reverse=True)


def _remove_empty(folders: list[Path]) -> None:
    """Remove each of ``folders`` (this run's own, deepest first) that holds nothing: an interrupted or
    failed run leaves no empty ``runs/cpu/c1/`` behind. A folder with anything in it stays."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()  # only an empty folder can be removed


def _train_and_score(args, config, builder: PartsBuilder, out: Path, started: float, tracker=None) -> int:
    """The rest of ``train``, in the --out folder it owns: train, evaluate best.pt, write the record.
    ``tracker`` (--wandb's :class:`cipherlab.runner.tracking.WandbLogger`) is told of every step and the results."""
    length_aware = _length_aware(args)
    try:
        run = train_config(config, out, data_dir=args.data_dir, device=args.device, resume=args.resume, verbose=True,
                           builder=builder, logger=tracker)
    except (TrainingDiverged, NotLearning) as e:
        return _error(str(e))
    except KeyboardInterrupt:
        if (out / "last.pt").exists():
            print(f"\ninterrupted; continue from the last saved state ({out / 'last.pt'}) with --resume",
                  file=sys.stderr)
        else:
            print(f"\ninterrupted before the first checkpoint: nothing to resume (an empty {out} is removed)",
                  file=sys.stderr)
        return 130
    fit = run.fit
    if tracker is not None:
        tracker.cost(run)
    if not run.best_checkpoint.exists():
        print(f"stopped by the {fit.stopped} during epoch 1; continue with --resume (state in {out / 'last.pt'})")
        return 0
    print(
        f"{config.name} ({config.recipe} recipe): {fit.stopped} after {fit.epochs} epochs; best.pt is epoch "
        f"{fit.best_epoch}, " + (f"validation token accuracy {fit.best_val_accuracy:.4f} (teacher-forced)"
                                 if config.select_on == "val_accuracy" else f"validation loss {fit.best_val_loss:.4f}")
        + f". Evaluating {run.best_checkpoint} on the test lines ({decoding_name(1, length_aware)} decoding)"
    )
    metrics = evaluate_checkpoint(run.best_checkpoint, data_dir=args.data_dir, device=run.device,
                                  length_aware=length_aware, builder=builder)
    record = results_record(config, run, metrics)
    if run.parts:
        record["parts"] = run.parts  # [{"part", "file", "class", "sha256", "class_sha256"}]: the student's classes
    record["command"] = _command(args)
    record["wall_seconds"] = time.monotonic() - started  # data, tokenizers, training and the test lines
    path = write_results(config, record, args.results_dir, notes=parts_lines)
    if tracker is not None:
        tracker.test(metrics)
    print(f"{metrics_line(metrics)} -> {path}")
    if fit.stopped == "time budget":
        print(f"(the time budget ended this run; --resume continues it from {out / 'last.pt'})")
    return 0


def _check_records(folder: Path) -> None:
    """Refuse, before training, a results folder whose records (``c*.json``) the table could not read
    (a torn or foreign file), rather than finding it when the run's own record is written."""
    for path in sorted(folder.glob("c[0-9]*.json")):
        try:
            read_record(path)
        except (OSError, ValueError) as e:
            why = first_line(e).removeprefix(f"{path}: ")
            raise ValueError(f"--results-dir: {path} is not a readable results record ({why}); the table is made "
                             "from every c*.json there: restore, repair or remove it") from None


def _results_folder(results_dir: str, run_name: str) -> Path:
    """``results_dir/run_name``, which may be inside the committed results/ only when named as such."""
    return outside_results(Path(results_dir) / run_name, "--results-dir", on_purpose="--results-dir results")


def _note_parts(builder: PartsBuilder, config) -> None:
    """One line per part of the student's: what it replaces, and that only its interface (and a backward pass
    through it) was checked."""
    for record in builder.records:
        part, name = record["part"], record["class"]
        check = f"python -m cipherlab check {PARTS[part].check(config)} {record['file'] or 'FILE.py'}:{name}"
        print(f"note: {part} is your {name}, in place of {PARTS[part].replaces}; its interface fits and gradients "
              f"flow through it (`{check}` checks its maths)")


# --------------------------------------------------------------------------- evaluate / decrypt


def _checkpoint_parts(values) -> PartsBuilder:
    """The builder of the ``--part`` values' classes, imported; loading the checkpoint tries them with its
    configuration and compares them with those it was trained with (without ``--part``, it says which to pass)."""
    return PartsBuilder(import_parts(values, load=load_target))


def _length_aware(args) -> bool:
    """Greedy decoding that ends each line where its cipher says (8 bits a character), unless --free
    or a beam search (which decodes freely) is asked for: the default of train, evaluate and decrypt,
    the library's own (:func:`cipherlab.pipeline.decode.length_aware_by_default`)."""
    beam = getattr(args, "beam", 1)  # train has no --beam
    if beam < 1:
        raise ValueError(f"--beam {beam}: the beam size is at least 1 (1 is greedy decoding)")
    if beam > MAX_BEAM:
        raise ValueError(f"--beam {beam}: at most {MAX_BEAM}; each prefix the beam keeps is decoded on every line, "
                         f"so a beam of {beam} takes about {beam} times as long as greedy decoding (1)")
    return length_aware_by_default(beam, False if args.free else None)


def _cmd_evaluate(args) -> int:
    if args.json:
        writable_file(outside_results(args.json, "--json"), "--json")  # before the work
    metrics = evaluate_checkpoint(
        args.checkpoint, data_dir=args.data_dir, device=args.device, split=args.split, beam_size=args.beam,
        length_aware=_length_aware(args), builder=_checkpoint_parts(args.part),
    )
    text = _json_text(metrics)
    if args.json:
        write_atomic(args.json, text + "\n")  # a reader never sees half of it
    print(text)
    print(metrics_line(metrics), file=sys.stderr)  # stdout stays JSON; the summary names its decoding
    return 0


def _json_text(metrics: dict) -> str:
    """``metrics`` as indented JSON, each per-line list (``right_chars_by_line``) on one line of its own."""
    lists = {key: value for key, value in metrics.items()
             if isinstance(value, list) and all(isinstance(x, (int, float)) for x in value)}
    text = json.dumps({key: f"<{key}>" if key in lists else value for key, value in metrics.items()}, indent=2)
    for key, value in lists.items():
        text = text.replace(json.dumps(f"<{key}>"), json.dumps(value))
    return text


def _cmd_export(args) -> int:
    if args.hub is not None:
        return _export_hub(args)
    if args.out is None:
        raise ValueError("export: pass --out FILE.safetensors for one model file, or --hub DIR for a Hugging Face "
                         "model folder")
    if args.record or args.push:
        raise ValueError(f"{'--record' if args.record else '--push'} goes with --hub DIR (a model folder with its "
                         "card); --out writes the model file alone")
    out = export_checkpoint(args.checkpoint, outside_results(args.out, "--out"), half=args.half)
    print(f"{args.checkpoint} -> {out} ({out.stat().st_size / 2**20:.1f} MiB, weights{' in float16' if args.half else ''}"
          " and codec, no optimiser state)")
    return 0


def _export_hub(args) -> int:
    if args.out is not None:
        raise ValueError("export: --out and --hub each name where the model goes; pass one of them")
    record = args.record or record_for(args.checkpoint)
    folder = export_model_folder(args.checkpoint, args.hub, record=record, half=args.half)
    print(f"{args.checkpoint} -> {folder}/ ({', '.join(sorted(p.name for p in folder.iterdir()))}; the card"
          + (f" with the test scores of {record})" if record else "; no results record, so no scores: --record RUN.json)"))
    if args.push:
        print(f"uploaded: {push_model_folder(folder, args.push, private=args.private)}")
    else:
        print(f"upload it with `python -m cipherlab export ... --hub {folder} --push USER/REPO`, or `hf upload USER/REPO "
              f"{folder} .`")
    return 0


def _read_cipher_lines(args) -> list[str]:
    """The cipher lines to decrypt, each checked: only '0'/'1', a multiple of 8 long."""
    if args.bits is not None:
        bits = args.bits.strip()
        if not bits:
            raise ValueError("BITS: an empty cipher line; pass a string of 0s and 1s, 8 per character")
        check_bits(bits, path="BITS")
        return [bits]
    if args.input == "-":  # a pipe: `... | python -m cipherlab decrypt --input -`
        path = "<stdin>"
        lines = text_lines(sys.stdin.buffer.read(), path, "input", "one cipher line per line")
    else:
        path = Path(args.input)
        lines = read_text_lines(path, "input file", "one cipher line per line")
    lines = [line.strip() for line in lines]
    for n, line in enumerate(lines, start=1):
        check_bits(line, path=str(path), line=n)
    return lines


def _source_name(args) -> str:
    return "BITS" if args.bits is not None else "<stdin>" if args.input == "-" else f"--input {args.input}"


_DECODING_NOTES = {
    True: "each line ends where its cipher's length says; --free lets the model decide",
    False: "the model decides where each line ends",
}


def _cmd_decrypt(args) -> int:
    length_aware = _length_aware(args)
    lines = _read_cipher_lines(args)
    model, codec, config = load_trained(args.checkpoint, args.device, builder=_checkpoint_parts(args.part))
    print(f"cipherlab: {decoding_name(args.beam, length_aware)} decoding ({_DECODING_NOTES[length_aware]})",
          file=sys.stderr)  # stdout holds the plaintext lines alone
    note = foreign_note([decrypt_with_key(bits) for bits in lines], trained_alphabet(codec), _source_name(args),
                        f"its cipher lines decrypt to with cipherlab's key ({KEY.decode()})")
    if note:  # the model answers anything in its alphabet: a cipher of another key gets fluent nonsense
        print(note, file=sys.stderr)
    device = next(model.parameters()).device
    for plain in decrypt_lines(
        model, codec, lines, chunk_chars=config.chunk_chars, device=device, beam_size=args.beam,
        length_aware=length_aware,
    ):
        print(printable(plain))
    return 0


def printable(text: str) -> str:
    """``text`` if stdout's encoding can write it; else ValueError saying how to get it whole (an escape in a
    decrypted line would be a wrong character in the file it is redirected to, without a word)."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except UnicodeEncodeError as e:
        raise ValueError(f"a decrypted line holds {text[e.start]!r}, which this output's encoding ({encoding}) cannot "
                         "write; set PYTHONIOENCODING=utf-8 (or PYTHONUTF8=1) and run decrypt again") from None
    except LookupError:
        pass
    return text


# --------------------------------------------------------------------------- ablate


def _cmd_ablate(args) -> int:
    _check_wandb(args)
    preset = args.preset.lower()
    names = [name.strip().lower() for name in args.configs.split(",")]
    configs = [make_config(name, preset, args.recipe, **_mode(args)) for name in names]  # fail early
    parts = _ablation_parts(args.part or [], configs)  # each configuration's --part values, tried first
    run_name = configs[0].run_name
    outside_results(Path(args.runs_dir) / run_name, "--runs-dir")
    _results_folder(args.results_dir, run_name)  # each train checks it again; the table goes there too
    started = time.monotonic()
    group = (args.wandb_group or f"ablate-{run_name}-{time.strftime('%Y%m%d-%H%M%S')}") if args.wandb else None
    failed = []
    for name in names:
        print(f"=== {name} ({preset}) ===", flush=True)
        # One process per configuration: peak memory (RSS) is a per-process high-water mark.
        command = [
            sys.executable, "-m", "cipherlab", "train", "--config", name, "--preset", preset,
            "--out", str(Path(args.runs_dir) / run_name / name), "--results-dir", args.results_dir,
            "--resume" if args.resume else "--overwrite", "--recipe", args.recipe,
        ]  # fmt: skip
        for item in args.set or []:
            command += ["--set", item]
        for value in parts[name]:
            command += ["--part", value]
        if args.wandb:  # one W&B run per configuration, the ablation's runs in one group
            command += ["--wandb", args.wandb, "--wandb-group", group]
        for flag, value in (("--source-mode", args.source_mode), ("--tokens", getattr(args, "tokens", None)),
                            ("--data-dir", args.data_dir), ("--device", args.device), ("--time-budget", args.time_budget)):
            if value is not None:
                command += [flag, str(value)]
        if _run_child(command) != 0:
            failed.append(name)
    minutes = (time.monotonic() - started) / 60
    if len(failed) == len(names):
        return _error(f"every configuration failed ({', '.join(failed)}); see the messages above")
    md, _ = write_table(Path(args.results_dir) / run_name, notes=parts_lines)
    print(md.read_text(encoding="utf-8"))
    print(f"ablation of {len(names)} configurations took {minutes:.1f} minutes; table in {md}")
    if failed:
        return _error(f"configuration(s) {', '.join(failed)} failed; the table has the others")
    return 0


_CHILD_GRACE_S = 10.0  # seconds a train child has to save and exit after ablate passes on a signal


def _run_child(command: list[str]) -> int:
    """Run one ``train`` child and return its exit code; it never outlives ``ablate``.

    A SIGTERM, SIGHUP or SIGINT to ablate is passed on to the child as SIGINT (it says how to resume and
    exits; killed after :data:`_CHILD_GRACE_S` seconds if it does not), and then ends ablate. On Linux
    the child also gets SIGTERM from the kernel if ablate dies of a signal it cannot catch (``kill -9``).
    """
    child = subprocess.Popen(command, preexec_fn=_die_with_parent())
    previous = {}

    def interrupted(signum, frame):
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None and threading.current_thread() is threading.main_thread():
            previous[sig] = signal.signal(sig, interrupted)
    try:
        return child.wait()
    except BaseException:
        _end_child(child)
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _end_child(child: subprocess.Popen) -> None:
    """Stop a child still running: SIGINT (it saves nothing new and exits), then a kill after the grace time."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout=1.0)  # a Ctrl-C at the terminal reached the child too: let it finish alone
    if child.poll() is None:
        child.send_signal(signal.SIGINT)
        try:
            child.wait(timeout=_CHILD_GRACE_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _die_with_parent():
    """A ``preexec_fn`` that has Linux send the child SIGTERM when its parent dies (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):  # pragma: no cover - no C library to ask
        return None
    parent, pr_set_pdeathsig = os.getpid(), 1

    def set_death_signal() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was set
            os._exit(1)

    return set_death_signal


def _ablation_parts(values: list[str], configs: list) -> dict[str, list[str]]:
    """The ``--part`` values each configuration takes, every one loaded and tried first.

    A configuration trains with the parts it has a place for (C2 has no sinusoidal encoding, C5 none of
    these parts) and cipherlab's own others, with a note; a part no configuration takes is an error.
    """
    named = [(parse_part(value)[0], value) for value in values]
    taken = {}
    for config in configs:
        unused = unused_parts([part for part, _ in named], config)
        taken[config.name] = [value for part, value in named if part not in unused]
        load_parts(taken[config.name], config, load=load_target)
        for part, reason in unused.items():
            print(f"note: {config.name} trains with cipherlab's own {part}: {reason}")
    for part, value in named:
        if not any(value in chosen for chosen in taken.values()):
            raise PartError(f"--part {value}: none of {', '.join(taken)} has a place for {part}; "
                            f"{unused_parts([part], configs[0])[part]}")
    return taken


# --------------------------------------------------------------------------- the parsers


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", help=_DATA_HELP)
    p.add_argument("--device", type=device_option, help=_DEVICE_HELP)


def _add_free(p: argparse.ArgumentParser) -> None:
    p.add_argument("--free", action="store_true",
                   help="decode freely: the model decides where a line ends (the course notes' decoding); "
                   "by default greedy decoding places EOS where the cipher's length fixes it (the same "
                   "default for train, evaluate and decrypt; every printed figure names its decoding)")


def _add_source_mode(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--source-mode",
        choices=["bits", "bytes", "phase"],
        help="how C1-C4 tokenize the cipher: BPE over bits (the course notes), over 8-bit groups, or over 8-bit "
        "groups tagged with their key phase; a mode other than the preset's own sends runs and results to "
        "<preset>-<mode> folders (default: the preset's: bytes for cpu, bits for smoke, phase for assignment)",
    )
    p.add_argument(
        "--tokens",
        choices=list(TOKENIZATIONS),
        help="C1-C4's whole tokenisation (cipherlab/base/config.py TOKENIZATIONS): 'aligned' (the assignment "
        "preset's: BPE over phase-tagged cipher bytes, target tokens the plaintext of the source's), 'notes' "
        "(the course notes' 1024/8000 BPE over bits, measured to decode no Brown test line "
        "exactly at the cpu sizes in a few epochs) or 'chars' (no merges: the cpu preset's); default: the preset's",
    )


def _add_recipe(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--recipe",
        default=DEFAULT_RECIPE,
        choices=list(RECIPES),
        help="how the five are trained (cipherlab/base/config.py RECIPES): 'cipher' learns the cipher rather than "
        "the corpus (shuffled, case-flipped chunks, an end-of-source token, bit-factored and key-phase "
        "embeddings, best.pt on validation accuracy); 'notes' is the course notes' own training; a recipe "
        "other than the default sends runs and results to <preset>-<recipe> folders (default: %(default)s)",
    )


def _mode(args) -> dict:
    """The Config overrides of --source-mode and --set FIELD=VALUE."""
    overrides = dict(TOKENIZATIONS[args.tokens]) if getattr(args, "tokens", None) else {}
    if args.source_mode is not None:
        overrides["source_mode"] = args.source_mode
    for item in getattr(args, "set", None) or []:
        field, sep, value = item.partition("=")
        if not sep or not field:
            raise ValueError(f"--set {item!r}: expected FIELD=VALUE, e.g. --set src_vocab=512")
        overrides[field.strip()] = parse_field(field.strip(), value)
    return overrides


_PART_HELP = {
    "train": "train with your own class NAME of FILE.py in place of cipherlab's; PART is one of {parts} "
             "(interfaces: cipherlab/student/parts.py); checked before training, named in the results; repeatable",
    "load": "the --part a checkpoint was trained with (one per part; the error says which are missing)",
    "ablate": "as train's --part, for each configuration that has a place for PART ({parts}); repeatable",
}


def _add_part(p: argparse.ArgumentParser, kind: str) -> None:
    p.add_argument("--part", action="append", metavar="PART=FILE.py:NAME",
                   help=_PART_HELP[kind].format(parts=", ".join(PARTS)))


def _add_set(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--set",
        action="append",
        metavar="FIELD=VALUE",
        help="override one Config field for every configuration, e.g. --set src_vocab=512 "
        "(repeatable; each value is read by the field's type: 512, 1e-3, true, null for none, "
        "0.9,0.98 for betas; the result records the command)",
    )


def _add_wandb(p: argparse.ArgumentParser, kind: str) -> None:
    runs = ("one W&B run per configuration, all in one group (--wandb-group; default ablate-<preset>-<date>-<time>)"
            if kind == "ablate" else "one W&B run, named <config>-seed<seed>-<preset>")
    p.add_argument(
        "--wandb", nargs="?", const=DEFAULT_PROJECT, metavar="PROJECT",
        help=f"also log to Weights & Biases project PROJECT (default {DEFAULT_PROJECT}): {runs}, holding the "
        "configuration, each step's loss, learning rate and gradient norm, each validation and epoch, the test "
        "metrics with their decoding, parameters and peak memory. Files go to $WANDB_DIR, else the run's --out "
        "folder; offline (WANDB_MODE=offline, or no API key) it prints the `wandb sync` line that uploads the run "
        "later. Needs pip install 'cipherlab[wandb]'",
    )
    p.add_argument("--wandb-group", metavar="GROUP",
                   help="the W&B group of the run(s) with --wandb" + (" (ablate sets it for its runs)"
                                                                      if kind == "train" else ""))


def register_cli(subparsers) -> None:
    """Add the train, evaluate, decrypt and ablate commands to ``python -m cipherlab``."""
    configs, presets = ", ".join(CONFIG_NAMES), ", ".join(PRESETS)

    p = subparsers.add_parser(
        "train",
        help="train one configuration, then score it on the test lines",
        description="Train one configuration (early stopping on the recipe's validation signal: loss or "
        "token accuracy), evaluate best.pt on "
        "the whole test lines and write <results-dir>/<preset>/<config>.json and the preset's table "
        "(by default under runs/, so the committed results/ stay as they are). "
        + _THREADS_NOTE,
    )
    p.add_argument("--config", required=True, help=f"which configuration: {configs}")
    p.add_argument("--preset", default="cpu", help=f"sizes and budgets: {presets} (default: %(default)s)")
    p.add_argument("--out", help="folder for last.pt, best.pt and log.jsonl (default: runs/<preset>/<config>)")
    p.add_argument("--resume", action="store_true", help="continue exactly from <out>/last.pt")
    p.add_argument("--overwrite", action="store_true", help="start again even if <out> holds a run")
    p.add_argument(
        "--time-budget",
        type=float,
        metavar="S",
        help="stop training after S seconds, saving last.pt (0: no budget; default: the preset's)",
    )
    p.add_argument("--results-dir", default="runs",
                   help="where <preset>/<config>.json and the table go (default: %(default)s; "
                   "--results-dir results refreshes the committed reference results on purpose)")
    _add_free(p)
    _add_source_mode(p)
    _add_recipe(p)
    _add_set(p)
    _add_part(p, "train")
    _add_wandb(p, "train")
    _add_common(p)
    p.set_defaults(func=_cmd_train)

    p = subparsers.add_parser(
        "evaluate",
        help="score a checkpoint on whole test lines",
        description="Decrypt every line of a split with a checkpoint and print bit/sequence accuracy, "
        "Levenshtein, chrF, BLEU and ROUGE as JSON. Greedy decoding ends each line where its cipher "
        "says (8 bits a character) unless --free; the JSON's 'decoding' field says which was used.",
    )
    p.add_argument("--checkpoint", required=True, help="a best.pt, last.pt, exported .safetensors or model folder (export --hub)")
    p.add_argument("--split", default="test", choices=["val", "test", "all"],
                   help="val or test of the training data, or all: every line of --data-dir, which "
                   "may be text the model never saw (default: %(default)s)")
    p.add_argument("--beam", type=int, default=1, metavar="N", help=f"beam size, 1 to {MAX_BEAM}; 1 is greedy (default)")
    p.add_argument("--json", metavar="FILE", help="also write the metrics to FILE")
    _add_free(p)
    _add_part(p, "load")
    _add_common(p)
    p.set_defaults(func=_cmd_evaluate)

    p = subparsers.add_parser(
        "export",
        help="write a checkpoint's model as one safetensors file, or as a Hugging Face model folder",
        description="Keep what decryption needs from a best.pt (weights, configuration, tokenizers or "
        "entropy model) in one .safetensors file, which evaluate, decrypt and load_trained read.",
    )
    p.add_argument("--checkpoint", required=True, help="a best.pt or last.pt (with --hub, also an exported .safetensors)")
    p.add_argument("--out", help="the .safetensors file to write")
    p.add_argument("--half", action="store_true",
                   help="store the weights as float16: half the file; loaded back as float32")
    p.add_argument("--hub", metavar="DIR", help="write a Hugging Face model folder instead: model.safetensors, "
                   "config.json, the tokenizers and a README.md model card with the run's test scores; evaluate, "
                   "decrypt and doctor take the folder as --checkpoint")
    p.add_argument("--record", metavar="RUN.json", help="with --hub: the results record whose scores the card shows "
                   "(default: the one train wrote beside the run folder, runs/<preset>/<config>.json)")
    p.add_argument("--push", metavar="USER/REPO", help="with --hub: upload the folder to the Hugging Face hub "
                   "(pip install 'cipherlab[hub]', and `hf auth login` or HF_TOKEN)")
    p.add_argument("--private", action="store_true", help="with --push: create the repository as private")
    p.set_defaults(func=_cmd_export)

    p = subparsers.add_parser(
        "decrypt",
        help="decrypt cipher lines with a checkpoint",
        description="Print the plaintext of each cipher line (a string of 0/1 whose length is a multiple "
        "of 8). Each line ends where its cipher says (8 bits a character) unless --free.",
    )
    p.add_argument("--checkpoint", required=True, help="a best.pt, last.pt, exported .safetensors or model folder (export --hub)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("bits", nargs="?", metavar="BITS", help="one cipher line")
    source.add_argument("--input", metavar="FILE", help="a file with one cipher line per line; - reads them from stdin")
    p.add_argument("--beam", type=int, default=1, metavar="N", help=f"beam size, 1 to {MAX_BEAM}; 1 is greedy (default)")
    _add_free(p)
    _add_part(p, "load")
    p.add_argument("--device", type=device_option, help=_DEVICE_HELP)
    p.set_defaults(func=_cmd_decrypt)

    p = subparsers.add_parser(
        "ablate",
        help="train and score all five configurations, then write the table",
        description="Run `train` for each configuration in turn (one process each, so peak memory is "
        "per configuration), then write <results-dir>/<preset>/table.md and table.csv (by default "
        "under runs/). " + _THREADS_NOTE,
    )
    p.add_argument("--preset", default="cpu", help=f"sizes and budgets: {presets} (default: %(default)s)")
    p.add_argument("--configs", default=",".join(CONFIG_NAMES), help="comma-separated subset (default: all five)")
    p.add_argument("--resume", action="store_true", help="continue each configuration from its last.pt")
    p.add_argument("--time-budget", type=float, metavar="S", help="per configuration (default: the preset's)")
    p.add_argument("--runs-dir", default="runs", help="checkpoints go to <runs-dir>/<preset>/<config>")
    p.add_argument("--results-dir", default="runs",
                   help="(default: %(default)s; --results-dir results refreshes the committed results)")
    _add_source_mode(p)
    _add_recipe(p)
    _add_set(p)
    _add_part(p, "ablate")
    _add_wandb(p, "ablate")
    _add_common(p)
    p.set_defaults(func=_cmd_ablate)
