"""The plots of a run: accuracies (beside figures others reported), costs, training curves, error profiles.

Every plot is drawn on :func:`figure`, which returns a figure already closed in pyplot, so it is shown
once, by whoever displays it. matplotlib is imported only when a plot is drawn.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from cipherlab.analysis.ablation.records import _source_modes, entry_label, metric

__all__ = [
    "figure",
    "merge_curves",
    "plot_accuracy",
    "plot_costs",
    "plot_curves",
    "plot_error_profiles",
    "plot_extended",
    "run_label",
]


def figure(ncols: int, width: float = 4.2, height: float = 3.4, nrows: int = 1):
    """A figure and its axes (flattened), already closed in pyplot: it is shown once, by whoever
    displays it (``display(fig)`` in a notebook, ``fig.savefig`` elsewhere), never twice."""
    import matplotlib.pyplot as plt  # importing pyplot lets Jupyter draw the returned Figure

    fig, axes = plt.subplots(nrows, ncols, squeeze=False, figsize=(width * ncols, height * nrows),
                             layout="constrained")
    plt.close(fig)
    return fig, axes.flatten()


def plot_accuracy(records: dict[str, dict], bits_records: dict[str, dict] | None = None, marks: list | None = None):
    """Bars of bit accuracy and exact lines per configuration; ``marks``, ``[(label, marker, color, {config:
    {"bit_accuracy": x, "exact_lines": y}})]``, marks figures others reported beside them."""
    names = list(records)
    fig, axes = figure(2, width=5.2, height=3.6)
    panels = [("bit_accuracy", "bit_accuracy", "bit accuracy (%)"),
              ("sequence_accuracy", "exact_lines", "exact lines (%)")]
    width = 0.38 if bits_records else 0.6
    for ax, (key, field, title) in zip(axes, panels):
        x = range(len(names))
        shift = -width / 2 if bits_records else 0.0
        ax.bar([i + shift for i in x], [100 * (metric(records[n], key) or 0) for n in names], width,
               label=f"this run ({run_label(records)})", color="tab:blue")
        if bits_records:
            ax.bar([i + width / 2 for i in x],
                   [100 * (metric(bits_records[n], key) or 0) if n in bits_records else 0 for n in names],
                   width, label=f"bits mode ({run_label(bits_records)})", color="tab:cyan", hatch="//")
        for label, marker, color, figures in marks or ():
            points = [(i, figures.get(n, {}).get(field)) for i, n in enumerate(names)]
            points = [(i, 100 * v) for i, v in points if v is not None]
            if points:
                ax.scatter(*zip(*points), marker=marker, s=70, color=color, zorder=3, label=label)
        ax.set_xticks(list(x), [n.upper() for n in names])
        ax.set_ylim(0, 105)
        ax.set_title(title)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=8)
    return fig


def run_label(records: dict[str, dict]) -> str:
    """E.g. ``"cpu, bytes"``: the preset and the C1-C4 source mode of a run's records."""
    return f"{next(iter(records.values())).get('preset', '?')}, {_source_modes(records)}"


def plot_costs(records: dict[str, dict]):
    """Bars of parameters, peak memory and seconds per epoch per configuration."""
    names = list(records)
    fig, axes = figure(3, width=3.4, height=3.0)
    panels = [("parameters (thousands)", lambda r: r["params"] / 1e3),
              ("peak memory (MiB)", lambda r: (r.get("peak_memory_bytes") or 0) / 2**20),
              ("seconds per epoch", lambda r: r["seconds_per_epoch"])]
    for ax, (title, read) in zip(axes, panels):
        ax.bar(range(len(names)), [read(records[n]) for n in names], color="tab:gray")
        ax.set_xticks(range(len(names)), [n.upper() for n in names])
        ax.set_title(title, fontsize=10)
    return fig


def plot_curves(curves: dict[str, list[dict] | None]):
    """Validation loss per epoch, and against cumulative training time, for each configuration with a log."""
    fig, (by_epoch, by_time) = figure(2, width=4.8, height=3.4)
    for name, log in curves.items():
        if not log:
            continue
        epochs = [r["epoch"] for r in log]
        minutes = [m / 60 for m in itertools.accumulate(r["seconds"] for r in log)]
        by_epoch.plot(epochs, [r["val_loss"] for r in log], marker=".", label=name.upper())
        by_time.plot(minutes, [r["val_loss"] for r in log], marker=".", label=name.upper())
    by_epoch.set_xlabel("epoch")
    by_time.set_xlabel("training minutes (excluding validation)")
    for ax in (by_epoch, by_time):
        ax.set_ylabel("validation loss (nats per target unit)")
    by_epoch.legend(fontsize=8)
    return fig


def merge_curves(controlled: list[dict] | None, extended: list[dict] | None) -> list[dict]:
    """One curve from a controlled run's log and the log of the run that resumed it.

    A resumed run's log holds every epoch, the controlled ones too; where it holds only the new ones,
    the controlled epochs come first. The extended log wins where both have an epoch.
    """
    by_epoch = {r["epoch"]: r for r in (controlled or [])}
    by_epoch |= {r["epoch"]: r for r in (extended or [])}
    return [by_epoch[e] for e in sorted(by_epoch)]


def plot_extended(curves: dict[str, tuple[list[dict] | None, list[dict] | None]]):
    """Validation loss per epoch of each extended configuration, ``{name: (controlled log, extended log)}``:
    the controlled epochs solid, the epochs trained on dashed, a dotted line where the controlled run stopped."""
    fig, axes = figure(1, width=6.4, height=3.6)
    ax = axes[0]
    for i, (name, (controlled, extended)) in enumerate(curves.items()):
        merged = merge_curves(controlled, extended)
        if not merged:
            continue
        color = f"C{i}"
        stop = controlled[-1]["epoch"] if controlled else 0
        first = [r for r in merged if r["epoch"] <= stop]
        later = [r for r in merged if r["epoch"] >= stop]
        if first:
            ax.plot([r["epoch"] for r in first], [r["val_loss"] for r in first], marker="o", color=color,
                    label=f"{name.upper()}, controlled run")
        if len(later) > 1 or not first:
            ax.plot([r["epoch"] for r in later], [r["val_loss"] for r in later], marker=".", ls="--", color=color,
                    label=f"{name.upper()}, trained on")
        if stop:
            ax.axvline(stop, color=color, lw=0.8, ls=":")
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation loss (nats per target unit)")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    return fig


def plot_error_profiles(errors: dict, keys: Sequence[str] | None = None, *,
                        names: dict[str, str] | None = None):
    """Error rate by chunk position and by key phase, relative to each model's mean (1 = its mean); each
    model named as ``names`` says (:func:`~cipherlab.analysis.ablation.records.entry_label`)."""
    fig, axes = figure(2, width=5.0, height=3.2)
    for key in keys or list(errors):
        e = errors[key]
        for ax, values in zip(axes, (e["char_error_by_chunk_position"], e["char_error_by_key_phase"])):
            known = [v for v in values if v is not None]
            mean = sum(known) / len(known) if known else 0
            if mean:
                ax.plot(range(len(values)), [None if v is None else v / mean for v in values], marker=".",
                        label=entry_label(key, names=names))
    for ax, title in zip(axes, ("position in the 32-character chunk", "key phase (position mod 8)")):
        ax.axhline(1.0, color="grey", lw=0.6)
        ax.set_xlabel(title)
        ax.set_ylabel("error rate / the model's mean")
    axes[0].legend(fontsize=7, ncol=2)
    return fig
