"""Where the errors are, from a run's ``errors.json`` (:func:`cipherlab.analysis.ablation.records.load_errors`).

:func:`profile_rows` finds where in a chunk and at which key phase a model's errors fall, against
counting noise (:func:`excess`, :data:`SPIKE_Z`, :data:`SPIKE_RATIO`) and from a chunk's first half to
its second (:func:`late_vs_early`); :func:`edits`, :func:`edit_summary` and :func:`prior_favours` say
what the errors are; :func:`exact_by_length` how exact lines fall with length against independent
errors. Each has its Markdown table beside it. :func:`random_string_errors` decodes a committed model's
random strings again and counts where each wrong character sits.
"""

from __future__ import annotations

import collections
import difflib
import html
import math
from collections.abc import Sequence

from cipherlab.data.cipher import PERIOD
from cipherlab.analysis.ablation.records import entry_label, metric
from cipherlab.base.markdown import markdown_table, num, pct, pct2

__all__ = [
    "SPIKE_RATIO",
    "SPIKE_Z",
    "char_kind",
    "context_counts",
    "edit_summary",
    "edit_table",
    "edits",
    "exact_by_length",
    "excess",
    "late_vs_early",
    "length_table",
    "position_counts",
    "prior_favours",
    "profile_rows",
    "profile_table",
    "random_string_errors",
]


# A position stands out when its errors exceed the pooled rate by SPIKE_Z Poisson standard deviations AND
# its rate is SPIKE_RATIO times the model's mean: errors cluster within lines, so z alone overstates.
SPIKE_Z = 3.0
SPIKE_RATIO = 2.0


# --------------------------------------------------------------------------- where in a line


def position_counts(lengths: Sequence[int], period: int) -> list[int]:
    """How many characters of lines of these lengths sit at each position modulo ``period``."""
    counts = [0] * period
    for n in lengths:
        for i in range(period):
            counts[i] += (n - i + period - 1) // period if n > i else 0
    return counts


def excess(rates: Sequence[float | None], seen: Sequence[float]) -> list[float | None]:
    """Per position: (observed - expected errors) / sqrt(expected), expected at the pooled error rate.

    ``rates`` are error rates per position, ``seen`` how many characters each rate was measured on.
    Counting noise alone makes this about a standard normal; :data:`SPIKE_Z` or more stands out.
    """
    pairs = [(r * s, s) for r, s in zip(rates, seen) if r is not None and s]
    pooled = sum(e for e, _ in pairs) / sum(s for _, s in pairs) if pairs else 0.0
    if pooled == 0:
        return [None if r is None else 0.0 for r in rates]
    return [None if r is None or not s else (r * s - pooled * s) / math.sqrt(pooled * s) for r, s in zip(rates, seen)]


def late_vs_early(rates: Sequence[float | None], seen: Sequence[float]) -> tuple[float | None, float]:
    """(error rate of a chunk's second half / its first half, z of the difference): exposure bias makes
    later positions of a chunk err more, since each step conditions on the model's own earlier outputs."""
    half = len(rates) // 2

    def pooled(part):
        pairs = [(r * s, s) for r, s in part if r is not None and s]
        return sum(e for e, _ in pairs), sum(s for _, s in pairs)

    (e1, n1), (e2, n2) = pooled(zip(rates[:half], seen[:half])), pooled(zip(rates[half:], seen[half:]))
    if not (n1 and n2) or e1 + e2 == 0:
        return None, 0.0
    p1, p2, p = e1 / n1, e2 / n2, (e1 + e2) / (n1 + n2)
    return (p2 / p1 if p1 else None), (p2 - p1) / math.sqrt(p * (1 - p) * (1 / n1 + 1 / n2))


def profile_rows(errors: dict, lengths: Sequence[int], *, names: dict[str, str] | None = None) -> list[dict]:
    """Per ``errors.json`` entry: the error rate on the lines of the right length, the chunk position and
    key phase with the largest excess (:func:`excess`), and the second-half/first-half ratio of a chunk.

    ``lengths``: the test lines' lengths. The file gives rates, not counts, so the characters behind each
    rate are reconstructed from the lengths, scaled by the share of lines that came out the right length.
    Each row's label names its run as ``names`` says (:func:`~cipherlab.analysis.ablation.records.entry_label`).
    """
    rows = []
    for key, e in errors.items():
        if e["lines"] != len(lengths):
            raise ValueError(f"errors.json entry {key} covers {e['lines']} lines, but {len(lengths)} lengths "
                             "were given; pass the lengths of the test lines it was scored on")
        share = 1 - e["lines_with_wrong_length"] / e["lines"]
        chunk, phase = e["char_error_by_chunk_position"], e["char_error_by_key_phase"]
        seen_chunk = [share * c for c in position_counts(lengths, len(chunk))]
        seen_phase = [share * c for c in position_counts(lengths, len(phase))]
        z_chunk, z_phase = excess(chunk, seen_chunk), excess(phase, seen_phase)
        ratio, z_trend = late_vs_early(chunk, seen_chunk)
        pairs = [(r * s, s) for r, s in zip(phase, seen_phase) if r is not None]
        worst_chunk = max(range(len(chunk)), key=lambda i: z_chunk[i] if z_chunk[i] is not None else -math.inf)
        worst_phase = max(range(len(phase)), key=lambda i: z_phase[i] if z_phase[i] is not None else -math.inf)
        rate = sum(x for x, _ in pairs) / sum(s for _, s in pairs) if pairs else None
        rows.append({"key": key, "label": entry_label(key, names=names), "rate": rate,
                     "errors": round(sum(x for x, _ in pairs)),
                     "chunk_position": worst_chunk, "chunk_z": z_chunk[worst_chunk] or 0.0,
                     "chunk_ratio": (chunk[worst_chunk] or 0.0) / rate if rate else None,
                     "phase": worst_phase, "phase_z": z_phase[worst_phase] or 0.0,
                     "phase_ratio": (phase[worst_phase] or 0.0) / rate if rate else None,
                     "late_ratio": ratio, "late_z": z_trend})
    return rows


def profile_table(rows: list[dict]) -> str:
    """:func:`profile_rows` as a Markdown table."""
    table = [[r["label"], f"{r['errors']:,}", pct2(r["rate"]),
              f"{r['chunk_position']}: {num(r['chunk_ratio'], '.1f')}× (z = {r['chunk_z']:.1f})",
              f"{r['phase']}: {num(r['phase_ratio'], '.1f')}× (z = {r['phase_z']:.1f})",
              f"{num(r['late_ratio'], '.2f')} (z = {r['late_z']:+.1f})"] for r in rows]
    return markdown_table(["model", "wrong characters (about)", "error rate %", "worst chunk position: × mean",
                           "worst key phase: × mean", "second half / first half of a chunk"], table)


# --------------------------------------------------------------------------- what the errors are


def edits(errors: dict, width: int = 12, *, names: dict[str, str] | None = None) -> list[dict]:
    """Every edit that turns a reference line of the ``errors.json`` examples into its prediction.

    The edits are difflib's opcodes between the two strings: ``"substitute"`` (some characters for
    others), ``"drop"`` (characters the prediction lacks) and ``"add"`` (characters it has in excess).
    Each edit is listed once per (line, position, predicted text), with every model that made it, its
    position in the line, the two texts, and the reference around it (``width`` characters each side).
    The models are named as ``names`` says (:func:`~cipherlab.analysis.ablation.records.entry_label`).
    """
    found: dict[tuple, dict] = {}
    ops = {"replace": "substitute", "delete": "drop", "insert": "add"}
    for key, e in errors.items():
        for example in e.get("errors", []):
            ref, pred = example["reference"], example["prediction"]
            matcher = difflib.SequenceMatcher(None, ref, pred, autojunk=False)
            for op, i1, i2, j1, j2 in matcher.get_opcodes():
                if op == "equal":
                    continue
                item = found.setdefault((example["line"], i1, pred[j1:j2]), {
                    "models": [], "line": example["line"], "index": i1, "end": i2, "op": ops[op],
                    "reference": ref[i1:i2], "prediction": pred[j1:j2],
                    "before": ref[max(0, i1 - width):i1], "after": ref[i2:i2 + width]})
                item["models"].append(entry_label(key, names=names))
    return sorted(found.values(), key=lambda item: (item["line"], item["index"]))


def char_kind(c: str) -> str:
    """``"capital"``, ``"lowercase"``, ``"digit"``, ``"space"`` or ``"punctuation"``."""
    if c.isupper():
        return "capital"
    if c.islower():
        return "lowercase"
    if c.isdigit():
        return "digit"
    return "space" if c.isspace() else "punctuation"


def context_counts(lines: Sequence[str], order: int = 2) -> collections.Counter:
    """How often each string of ``order + 1`` characters occurs in ``lines`` (a character n-gram model)."""
    counts = collections.Counter()
    for line in lines:
        counts.update(line[i:i + order + 1] for i in range(len(line) - order))
    return counts


def prior_favours(item: dict, counts: collections.Counter, order: int = 2) -> str:
    """For a one-character substitution: which character the training text makes likelier after the
    ``order`` characters before it -- ``"prediction"``, ``"reference"`` or ``"neither"`` (equal counts)."""
    context = item["before"][-order:]
    pred, ref = counts[context + item["prediction"]], counts[context + item["reference"]]
    return "prediction" if pred > ref else "reference" if ref > pred else "neither"


def _single(item: dict) -> bool:
    return item["op"] == "substitute" and len(item["reference"]) == len(item["prediction"]) == 1


def _shown(text: str) -> str:
    """An edit's text for a table: ∅ where it is empty (a drop's prediction, an addition's reference)."""
    return text or "∅"


def edit_table(items: list[dict], train_lines: Sequence[str], order: int = 2, limit: int = 16) -> str:
    """The edits of :func:`edits`: where, which characters, how rare the right one is in the training
    text, and (one-character substitutions) which of the two the training text's n-grams favour."""
    counts, chars = context_counts(train_lines, order), collections.Counter("".join(train_lines))
    total = sum(chars.values())
    rows = []
    for item in items[:limit]:
        first = item["reference"][:1] or item["prediction"][:1]
        shown = (f"<code>…{html.escape(item['before'])}[{html.escape(_shown(item['reference']))}→"
                 f"{html.escape(_shown(item['prediction']))}]{html.escape(item['after'])}…</code>")
        rows.append([", ".join(item["models"]), item["line"], item["op"], shown.replace("|", "&#124;"),
                     f"{item['index'] % 32} / {item['index'] % PERIOD}", char_kind(first),
                     f"{10_000 * chars[first] / total:.1f}",
                     prior_favours(item, counts, order) if _single(item) else "–"])
    return markdown_table(["models", "test line", "edit", "reference [right→predicted]", "chunk pos. / key phase",
                           "first right character", "its training frequency per 10,000",
                           f"{order}-character context favours"], rows)


def edit_summary(items: list[dict], train_lines: Sequence[str], text_lines: Sequence[str], order: int = 2) -> dict:
    """Counts behind the reading of :func:`edits`: the kinds of the substituted characters, how rare they
    are in the training text against an ordinary character of ``text_lines``, what the n-gram prior
    favoured, and where the drops and additions sit (at a full stop, running to a chunk's end)."""
    counts, chars = context_counts(train_lines, order), collections.Counter("".join(train_lines))
    total = sum(chars.values())
    subs = [i for i in items if i["op"] == "substitute"]
    singles = [i for i in subs if _single(i)]
    lengths = [i for i in items if i["op"] != "substitute"]
    text = "".join(text_lines)

    def median(values):
        values = sorted(values)
        return values[len(values) // 2] if values else None

    return {
        "substitutions": len(subs),
        "kinds": collections.Counter(char_kind(i["reference"][0]) for i in subs),
        "right_frequency": median(10_000 * chars[i["reference"][0]] / total for i in subs),
        "text_frequency": median(10_000 * chars[c] / total for c in text),
        "single": len(singles),
        "prior": collections.Counter(prior_favours(i, counts, order) for i in singles),
        "length_edits": len(lengths),
        "at_full_stop": sum(i["before"][-1:] == "." if i["op"] == "drop" else i["prediction"][:1] == "."
                            for i in lengths),
        "drops": sum(i["op"] == "drop" for i in lengths),
        "to_chunk_end": sum(i["op"] == "drop" and i["end"] % 32 == 0 for i in lengths),
    }


# --------------------------------------------------------------------------- exact lines by length


def exact_by_length(entry: dict, lengths: Sequence[int]) -> list[dict]:
    """The entry's exact-line rate per length bin beside ``(1 - CER)^n`` averaged over the bin's lines:
    what independent character errors at the model's own (free) CER would leave exact."""
    p = 1 - metric(entry["test_free"], "char_error_rate")
    rows = []
    for b in entry["exact_lines_by_length"]:
        lo, hi = b["chars"]
        inside = [n for n in lengths if lo <= n < hi]
        if len(inside) != b["lines"]:
            raise ValueError(f"the bin {lo}-{hi} characters holds {b['lines']} lines in errors.json but "
                             f"{len(inside)} of the given lengths; pass the test lines it was scored on")
        rows.append({"chars": (lo, hi), "lines": b["lines"], "exact": b["exact"],
                     "independent": sum(p ** n for n in inside) / len(inside) if inside else None})
    return rows


def length_table(errors: dict, keys: Sequence[str], lengths: Sequence[int], *,
                 names: dict[str, str] | None = None) -> str:
    """Exact lines by line length for some models, measured and as independent errors would leave them."""
    columns = {key: exact_by_length(errors[key], lengths) for key in keys}
    first = next(iter(columns.values()))
    rows = []
    for i, b in enumerate(first):
        lo, hi = b["chars"]
        span = f"{lo}+" if hi >= 10**5 else f"{lo}–{hi - 1}"
        rows.append([span, b["lines"]] + [f"{pct(col[i]['exact'])} ({pct(col[i]['independent'])})"
                                          for col in columns.values()])
    return markdown_table(["line length, characters", "lines"]
                          + [f"{entry_label(k, names=names)}: exact % (independent %)" for k in keys], rows)


def random_string_errors(model_path, n_random: int = 200) -> dict:
    """Where a committed model goes wrong on the ``n_random`` random strings of its probe set
    (letters and space, decoded greedily and length-aware): each wrong character's key phase, its
    place in its chunk, and the length in characters of the source token that covers it.

    Returns ``{"lines", "wrong_lines", "wrong_chars", "phase", "place", "token_chars",
    "chunk_chars"}``, the last three as ``Counter``s."""
    import torch

    from cipherlab.runner.trained import load_trained
    from cipherlab.data.cipher import encrypt
    from cipherlab.pipeline.decode import decrypt_lines
    from cipherlab.analysis.probes import probe_sets

    model, codec, config = load_trained(model_path, "cpu")
    plain = probe_sets(config, n_random=n_random)["random_letters"]
    with torch.inference_mode():
        pred = decrypt_lines(model, codec, [encrypt(t) for t in plain], chunk_chars=config.chunk_chars,
                             device=torch.device("cpu"), length_aware=True)
    phase, place, token = collections.Counter(), collections.Counter(), collections.Counter()
    for guess, truth in zip(pred, plain):
        for start in range(0, len(truth), config.chunk_chars):
            ids = codec.encode_source(encrypt(truth[start:start + config.chunk_chars]))
            at = start
            for n in codec.source_chars(torch.tensor([ids]))[0].tolist():
                for k in range(n):
                    if guess[at + k: at + k + 1] != truth[at + k]:
                        phase[(at + k) % PERIOD] += 1
                        place[(at + k) % config.chunk_chars] += 1
                        token[n] += 1
                at += n
    return {"lines": len(plain), "wrong_lines": sum(p != t for p, t in zip(pred, plain)),
            "wrong_chars": sum(phase.values()), "phase": phase, "place": place, "token_chars": token,
            "chunk_chars": config.chunk_chars}
