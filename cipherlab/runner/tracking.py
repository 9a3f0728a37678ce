"""Weights & Biases logging of a training run (``python -m cipherlab train ... --wandb [PROJECT]``).

:func:`start_wandb` opens a W&B run for one configuration and returns a :class:`WandbLogger`, which
:class:`cipherlab.pipeline.train.Trainer` tells of every optimiser step, validation and epoch (it is a
``TrainingLogger`` by its methods, without importing the training module). What the run holds:

- config: the configuration and its recipe (``Config.to_dict()``: ``name``, ``preset``, ``recipe``,
  ``seed`` and every size and setting), plus the command and the student's parts where given;
- history, by optimiser step: ``train/loss``, ``train/lr``, ``train/grad_norm`` (before clipping) and
  ``train/epoch`` every step; ``val/loss``, ``val/accuracy`` (teacher-forced tokens) and
  ``val/exact_chunks`` at each validation (mid-epoch with ``Config.eval_every``, and every epoch's end);
  ``epoch/train_loss``, ``epoch/tokens_per_s``, ``epoch/seconds``, ``epoch/number`` at each epoch's end;
  ``test/<metric>`` (bit_accuracy, sequence_accuracy, levenshtein, bleu, chrf, rouge1, ...) at the end;
- summary: the last value of each of those, ``decoding`` (how the test lines were decoded, e.g.
  ``length-aware greedy``), ``params``, and the peak memory under a name that says which it is:
  ``peak_gpu_memory_bytes`` (CUDA ``max_memory_allocated``) or ``peak_cpu_rss_bytes`` (the process's
  peak resident set size, :func:`cipherlab.runner.hooks.peak_memory_bytes`).

The run is named ``<config>-seed<seed>-<runs folder>``, e.g. ``c1-seed0-assignment``; ``ablate`` and
``benchmarks/gpu_run.py`` put the runs of one ablation in one W&B group. A resumed run (``--resume``) is a
new W&B run whose history starts at the step it resumes from (the steps before are in that run and ``log.jsonl``).

Where the files go: ``$WANDB_DIR`` if set, else the run's ``--out`` folder (``runs/<preset>/<config>/wandb/``),
never the repository's committed ``results/`` (a ``WANDB_DIR`` inside it is refused). Online or offline:
``WANDB_MODE``, when set, decides (wandb reads it). Unset, the run is online if an API key is configured
(``WANDB_API_KEY``, ``WANDB_IDENTITY_TOKEN_FILE`` or a ``wandb login`` entry in ``~/.netrc``; looked up
on this machine, no network call), else offline; an online start that fails (no network) falls back
to offline. An offline run prints one line naming its folder and ``wandb sync <folder>``, which uploads it.

wandb is imported inside these functions only: the library imports without it, and ``--wandb`` without
it fails before any training with one line (:func:`require_wandb`).
"""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path

from cipherlab.base.config import Config
from cipherlab.runner.errors import first_line, outside_results

__all__ = ["DEFAULT_PROJECT", "MISSING_WANDB", "WandbLogger", "check_wandb_dir", "has_api_key", "require_wandb",
           "run_name", "start_wandb"]

DEFAULT_PROJECT = "cipherlab"
"""The W&B project of ``--wandb`` given without a name."""

MISSING_WANDB = "--wandb needs the wandb package: pip install 'cipherlab[wandb]'"

INIT_TIMEOUT_S = 30.0
"""Seconds an online start may take before falling back to offline (wandb's own default is 90);
``WANDB_INIT_TIMEOUT`` overrides it."""


def require_wandb():
    """The ``wandb`` module; ValueError with one line saying how to install it when it is not there."""
    try:
        import wandb
    except ImportError:
        raise ValueError(MISSING_WANDB) from None
    return wandb


def check_wandb_dir() -> None:
    """Refuse, before any work, a ``WANDB_DIR`` inside the repository's committed ``results/``."""
    if os.environ.get("WANDB_DIR"):
        outside_results(os.environ["WANDB_DIR"], "WANDB_DIR")


def run_name(config: Config) -> str:
    """The W&B run's name: configuration, seed and the runs folder, e.g. ``c1-seed0-assignment``
    (``cpu-notes`` for the cpu preset under the notes recipe, as ``runs/`` names it)."""
    return f"{config.name}-seed{config.seed}-{config.run_name}"


def has_api_key() -> bool:
    """Whether W&B credentials are configured on this machine: ``WANDB_API_KEY``, ``WANDB_IDENTITY_TOKEN_FILE``,
    or a netrc entry (``wandb login``; ``$NETRC`` or ``~/.netrc``) for ``WANDB_BASE_URL``'s host
    (api.wandb.ai by default). Read locally, never checked with the server; a damaged entry counts as none."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    host = os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai"
    try:
        from wandb.sdk.lib import wbauth  # wandb 0.2x-0.31's own netrc reader (an internal module)

        return bool(wbauth.read_netrc_auth(host=host))
    except (ImportError, AttributeError):  # another wandb: read the netrc file as it does
        return _netrc_has(host)
    except Exception:  # an entry wandb refuses (a key of the wrong form): no usable key
        return False


def _netrc_has(host: str) -> bool:
    import netrc
    from urllib.parse import urlsplit

    path = os.environ.get("NETRC") or Path.home() / ".netrc"
    try:
        entry = netrc.netrc(path).authenticators(urlsplit(host).netloc)
    except (OSError, netrc.NetrcParseError):
        return False
    return bool(entry and entry[2])


def start_wandb(config: Config, out: str | os.PathLike, *, project: str | None = None, group: str | None = None,
                command: str | None = None, parts: list[dict] | None = None) -> WandbLogger:
    """Open the W&B run of one training run of ``config`` (its files under ``$WANDB_DIR``, else ``out``)
    and return its :class:`WandbLogger`. ``project`` defaults to :data:`DEFAULT_PROJECT`; ``group`` gathers
    the runs of one ablation; ``command`` and ``parts`` (the student's classes) go into the run's config.

    Online or offline as the module docstring says; an offline run prints one line with ``wandb sync``.
    ValueError (one line) if wandb is missing, ``WANDB_DIR`` lies in ``results/`` or no run can start.
    """
    wandb = require_wandb()
    check_wandb_dir()
    folder = None if os.environ.get("WANDB_DIR") else Path(out)  # wandb reads WANDB_DIR itself
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    settings = {} if os.environ.get("WANDB_INIT_TIMEOUT") else {"init_timeout": INIT_TIMEOUT_S}
    run_config = {**config.to_dict(), **({"command": command} if command else {}), **({"parts": parts} if parts else {})}
    init = dict(project=project or DEFAULT_PROJECT, name=run_name(config), group=group, job_type="train",
                config=run_config, tags=[config.name, config.preset, config.recipe], dir=folder,
                settings=wandb.Settings(**settings))
    why = None
    if os.environ.get("WANDB_MODE"):  # the user's choice, read by wandb
        mode = None
    elif has_api_key():
        mode = "online"
    else:
        mode, why = "offline", "no W&B API key: set WANDB_API_KEY or run `wandb login` to log online"
    try:
        run = wandb.init(mode=mode, **init)
    except Exception as e:  # online, and the server cannot be reached (or refuses the key)
        if mode == "offline" or os.environ.get("WANDB_MODE", "").lower() in ("offline", "disabled", "dryrun"):
            raise ValueError(f"--wandb: could not start a W&B run: {first_line(e)}") from None
        _finish_quietly(wandb)
        why = f"could not start an online W&B run ({first_line(e)})"
        try:
            run = wandb.init(mode="offline", **init)
        except Exception as e2:
            raise ValueError(f"--wandb: could not start a W&B run: {first_line(e2)}") from None
    if getattr(run, "offline", False):
        folder = run.sync_dir
        why = why or f"WANDB_MODE={os.environ.get('WANDB_MODE')}"
        print(f"W&B run {run_name(config)} logged offline ({why}): its files are in {folder}; "
              f"upload them later with `wandb sync {folder}`", flush=True)
    return WandbLogger(run)


def _finish_quietly(wandb) -> None:
    """End a run that failed to start, so that the next ``wandb.init`` starts afresh."""
    with contextlib.suppress(Exception):  # nothing to save from a run that never started
        if wandb.run is not None:
            wandb.run.finish(exit_code=1)


def _numbers(record: dict, keys: dict[str, str]) -> dict:
    """``{new name: record[key]}`` for each ``keys`` entry ``record`` has as a finite number."""
    return {new: record[key] for key, new in keys.items()
            if isinstance(record.get(key), (int, float)) and math.isfinite(record[key])}


class WandbLogger:
    """A training run's W&B run, told what :class:`cipherlab.pipeline.train.Trainer` does (its
    ``TrainingLogger`` methods ``step``, ``validation``, ``epoch``), then :meth:`test` and :meth:`cost`
    once the run is scored, then :meth:`finish`. Every row of the history is keyed by optimiser step."""

    def __init__(self, run):
        self.run = run
        self.last_step = 0

    def _log(self, values: dict, step: int) -> None:
        self.last_step = max(self.last_step, step)
        self.run.log(values, step=self.last_step)  # W&B drops rows whose step goes back

    def step(self, record: dict) -> None:
        self._log(_numbers(record, {"loss": "train/loss", "lr": "train/lr", "grad_norm": "train/grad_norm",
                                    "epoch": "train/epoch"}), record["step"])

    def validation(self, record: dict) -> None:
        self._log(_numbers(record, {"val_loss": "val/loss", "val_accuracy": "val/accuracy",
                                    "val_exact_chunks": "val/exact_chunks", "validate_seconds": "val/seconds"}),
                  record["step"])

    def epoch(self, record: dict) -> None:
        self._log(_numbers(record, {"epoch": "epoch/number", "train_loss": "epoch/train_loss", "val_loss": "val/loss",
                                    "val_accuracy": "val/accuracy", "tokens_per_s": "epoch/tokens_per_s",
                                    "seconds": "epoch/seconds", "lr": "epoch/next_lr"}), record["step"])
        if record.get("best"):
            self.run.summary.update({"best/epoch": record["epoch"], "best/val_loss": record["val_loss"],
                                     "best/val_accuracy": record["val_accuracy"]})

    def test(self, metrics: dict) -> None:
        """The test lines' metrics (:func:`cipherlab.runner.evaluate.evaluate_checkpoint`): each number as
        ``test/<name>`` in the history's last row and the summary; ``decoding`` (and ``test/split``) in the summary."""
        values = {f"test/{key}": value for key, value in metrics.items()
                  if isinstance(value, (int, float)) and not isinstance(value, bool)}
        self._log(values, self.last_step)
        self.run.summary.update({"decoding": metrics.get("decoding"), "test/decoding": metrics.get("decoding"),
                                 "test/split": metrics.get("split")})

    def cost(self, run) -> None:
        """What the run cost and how it ended, from ``train_config``'s ``RunResult``: ``params``, the peak memory
        (``peak_gpu_memory_bytes`` on CUDA, else ``peak_cpu_rss_bytes``), ``device``, ``stopped``, ``epochs``."""
        peak = "peak_gpu_memory_bytes" if str(run.device).startswith("cuda") else "peak_cpu_rss_bytes"
        summary = {"params": run.params, "device": str(run.device), "stopped": run.fit.stopped, "epochs": run.fit.epochs}
        if run.peak_memory_bytes is not None:
            summary[peak] = run.peak_memory_bytes
        self.run.summary.update(summary)

    def finish(self, exit_code: int = 0) -> None:
        """Close the run (W&B marks a non-zero ``exit_code`` as failed) and write its files."""
        self.run.finish(exit_code=exit_code)
