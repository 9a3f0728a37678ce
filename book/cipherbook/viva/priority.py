"""Which viva questions to drill first: the bank ranked by how likely and how costly (chapter 10).

Each question of ``bank/<chapter>.yml`` may carry ``priority: [...]``, tags from ``PRIORITY_TAGS``
(``cipherbook.viva.answers``) that say why it matters: it is *likely* to be asked ("twice": the course
notes ask it and the drill sheet or the notes ask it again; "ablation": the notes' ablation and its
metrics) and *costly* to get wrong ("yours": about your own code or numbers; "overclaim": the notes'
answer claims more than it shows, so the memorised answer is the wrong one). The tier follows:

- must-know: likely and costly;
- next: likely or costly;
- read once: neither.

Inside a tier, a question with more reasons comes first, then book order. ``revision_day`` spreads
the first two tiers over the days of chapter 10's week; ``priority_table`` and ``tier_list`` render
them as CommonMark + HTML for the chapter, each question whose premise the bank disputes (``premise: disputed``)
marked so.
"""

from __future__ import annotations

from pathlib import Path

from cipherbook.viva.answers import ChapterBank, Question, fill_facts, load_bank, shown_question

TIERS = ("must-know", "next", "read once")
LIKELY = {"twice": "asked twice", "ablation": "the ablation"}
COSTLY = {"yours": "your code or numbers", "overclaim": "notes overclaim"}
# Days before the viva on which each tier is drilled (chapter 10's schedule): its questions are
# split over them in rank order. "read once" is read on one day, not drilled.
DAYS = {"must-know": (7, 6), "next": (5, 4), "read once": (2,)}


def tier(q: Question) -> str:
    """must-know (likely and costly), next (one of the two) or read once (neither)."""
    likely, costly = bool(set(q.priority) & set(LIKELY)), bool(set(q.priority) & set(COSTLY))
    return TIERS[2 - likely - costly]


def ranked(banks: dict[str, ChapterBank] | None = None) -> list[Question]:
    """Every question of the bank, must-know first; inside a tier, more reasons first, then book order."""
    banks = load_bank() if banks is None else banks
    everything = [q for bank in banks.values() for q in bank.questions]
    order = {q.id: n for n, q in enumerate(everything)}
    return sorted(everything, key=lambda q: (TIERS.index(tier(q)), -len(q.priority), order[q.id]))


def revision_day(questions: list[Question]) -> dict[str, int]:
    """{question id: days before the viva}: each tier's questions, in rank order, cut into as many
    consecutive blocks of near-equal size as the tier has days in ``DAYS``."""
    days = {}
    for name in TIERS:
        members = [q for q in questions if tier(q) == name]
        for n, q in enumerate(members):
            days[q.id] = DAYS[name][n * len(DAYS[name]) // len(members)]
    return days


def chapter_numbers() -> dict[str, int]:
    """{chapter: its number in the book}, from the notebook each bank names ("book/04_positional.ipynb": 4)."""
    return {bank.chapter: int(Path(bank.notebook).name[:2]) for bank in load_bank().values()}


def _one_line(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def priority_table(questions: list[Question], tiers=TIERS[:2]) -> str:
    """The ranked questions of ``tiers`` as one markdown table: rank, days before the viva, tier, chapter, question, why.
    The rank counts every question of ``questions`` (ranked), so a table of one tier goes on from the one before."""
    days, numbers = revision_day(questions), chapter_numbers()
    rows = ["| # | days before | tier | chapter | question | likely: | costly: |", "|---:|---:|---|---|---|---|---|"]
    for n, q in ((n, q) for n, q in enumerate(questions, 1) if tier(q) in tiers):
        likely = ", ".join(LIKELY[t] for t in q.priority if t in LIKELY)
        costly = ", ".join(COSTLY[t] for t in q.priority if t in COSTLY)
        rows.append(f"| {n} | {days[q.id]} | {tier(q)} | {numbers[q.chapter]} {q.chapter} | {_one_line(fill_facts(shown_question(q), q.chapter))} "
                    f"| {likely} | {costly} |")
    return "\n".join(rows)


def tier_list(questions: list[Question], render) -> str:
    """Every question under its tier's heading, must-know first, numbered through, each shown by
    ``render(number, question)`` (``cipherbook.viva.render_question``, which marks a disputed premise) with
    its chapter."""
    parts, n, numbers = [], 0, chapter_numbers()
    for name in TIERS:
        members = [q for q in questions if tier(q) == name]
        parts.append(f"### {name[0].upper()}{name[1:]} ({len(members)} questions)")
        for q in members:
            n += 1
            parts.append(render(n, q).replace("<small>", f"<small>chapter {numbers[q.chapter]} ({q.chapter}) · ", 1))
    return "\n\n".join(parts)
