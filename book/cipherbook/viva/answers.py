"""The viva bank and the facts in its answers: read, validate, compute, fill in.

``load_bank()`` / ``questions(chapter)`` read and validate ``book/cipherbook/viva/bank/<chapter>.yml``.
``compute_facts(chapter)`` computes a chapter's facts from the registry ``cipherbook.viva.facts``
(imported on first use: it imports every chapter's experiments, torch included), and
``fill_facts`` / ``refill_prose`` put them into a bank text or a chapter's prose. Everything that
shows the bank (``cipherbook.viva``'s generated cells, the drill, the flashcards) imports it from
here, so none of them imports another.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

BANK_DIR = Path(__file__).parent / "bank"
REQUIRED_KEYS = {"id", "source", "question", "answer"}
# Why a question is worth drilling early (chapter 10 ranks the bank by them, cipherbook.viva.priority):
# likely to be asked: "twice" (the course notes ask it, and the drill sheet or the notes again),
# "ablation" (the notes' ablation and its metrics); costly to get wrong: "yours" (about your own code
# or numbers), "overclaim" (the notes' answer claims more than it shows, so the memorised one is wrong).
PRIORITY_TAGS = ("twice", "ablation", "yours", "overclaim")
# ``premise: disputed``: the question (the course notes' own words) takes as given a claim that cipherlab's runs do
# not bear out; its lead says which part. The drill shows the question with this note, not as if the claim held.
PREMISE_NOTES = {"disputed": "premise disputed"}
REGISTRY = "book/cipherbook/viva/facts.py"  # where FACTS[chapter] is written, for the error messages

# A placeholder in the bank: {fact}`key` or {fact}`key:.3f` -> (key, format spec)
FACT_ROLE = re.compile(r"\{fact\}`([^`:]+)(?::([^`]*))?`")
# A fact written into a chapter's prose: <span data-fact="key:.3f">0.123</span>
FACT_SPAN = re.compile(r'<span data-fact="([^":]+)(?::([^"]*))?">([^<]*)</span>')


@dataclass(frozen=True)
class Question:
    """One viva question and its answer (CommonMark with $maths$ and {fact} placeholders).

    ``lead`` is what a student says first, in about 20 seconds (at most ``LEAD_WORDS`` words);
    ``answer`` is what follows if the examiner presses: the derivation, cipherlab's numbers, the
    code, and at the end, briefly, where the course notes claim more than they show.
    """

    id: str
    source: str
    question: str
    answer: str
    chapter: str
    lead: str = ""
    priority: tuple[str, ...] = ()  # a subset of PRIORITY_TAGS, in that order
    premise: str = ""  # a key of PREMISE_NOTES ("disputed"), or "" when the question's premise holds


@dataclass(frozen=True)
class ChapterBank:
    """The questions of one chapter and the notebook whose viva section shows them."""

    chapter: str
    notebook: str  # path relative to the repository root, e.g. "book/02_attention.ipynb"
    questions: tuple[Question, ...]
    appendix: str | None = None  # a notebook of evidence that quotes the chapter's facts and has no viva


def _require_str(entry: dict, field: str, where: str) -> str:
    value = entry.get(field)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: field {field!r} must be a non-empty string, got {value!r}")
    return value.strip()


def load_chapter(path: Path) -> ChapterBank:
    """Parse and validate one bank file; errors name the file, the question and the fix."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not {"chapter", "notebook", "questions"} <= set(data) <= {
            "chapter", "notebook", "questions", "appendix"}:
        raise ValueError(f"{path}: expected the keys chapter, notebook, questions (and optionally appendix) at top level")
    if data["chapter"] != path.stem:
        raise ValueError(f"{path}: chapter is {data['chapter']!r}; it must equal the file stem {path.stem!r}")
    items = []
    for n, entry in enumerate(data["questions"] or [], start=1):
        where = f"{path}, question {n}"
        optional = {"lead", "priority", "premise"}
        if not isinstance(entry, dict) or not REQUIRED_KEYS <= set(entry) <= REQUIRED_KEYS | optional:
            raise ValueError(f"{where}: expected the keys id, source, question, lead, answer "
                             "(and optionally priority, premise)")
        premise = entry.get("premise", "")
        if premise and (not isinstance(premise, str) or premise not in PREMISE_NOTES):
            raise ValueError(f"{where}: premise must be one of {tuple(PREMISE_NOTES)}, got {premise!r}")
        priority = entry.get("priority", [])
        if not isinstance(priority, list) or not set(priority) <= set(PRIORITY_TAGS) or len(set(priority)) < len(priority):
            raise ValueError(f"{where}: priority must be a list of distinct tags from {PRIORITY_TAGS}, got {priority!r}")
        question = _require_str(entry, "question", where)
        if "\n\n" in question:
            raise ValueError(f"{where}: the question must be one paragraph (it is shown in bold)")
        items.append(Question(id=_require_str(entry, "id", where), source=_require_str(entry, "source", where),
                              question=question, answer=_require_str(entry, "answer", where),
                              chapter=data["chapter"],
                              lead=_require_str(entry, "lead", where) if "lead" in entry else "",
                              priority=tuple(t for t in PRIORITY_TAGS if t in priority), premise=premise))
    return ChapterBank(chapter=data["chapter"], notebook=data["notebook"], questions=tuple(items),
                       appendix=data.get("appendix"))


def load_bank() -> dict[str, ChapterBank]:
    """Every chapter's bank, keyed by chapter, in notebook order; question ids are unique across them."""
    banks = sorted((load_chapter(p) for p in BANK_DIR.glob("*.yml")), key=lambda b: b.notebook)
    seen: dict[str, str] = {}
    for bank in banks:
        for q in bank.questions:
            if q.id in seen:
                raise ValueError(f"question id {q.id!r} appears in both {seen[q.id]}.yml and {bank.chapter}.yml")
            seen[q.id] = bank.chapter
    return {bank.chapter: bank for bank in banks}


def questions(chapter: str) -> tuple[Question, ...]:
    """The questions of one chapter, in bank order."""
    return _bank_for(chapter).questions


def _bank_for(chapter: str) -> ChapterBank:
    path = BANK_DIR / f"{chapter}.yml"
    if not path.exists():
        known = sorted(p.stem for p in BANK_DIR.glob("*.yml"))
        raise KeyError(f"no viva bank for chapter {chapter!r} (expected {path}); known chapters: {known}")
    return load_chapter(path)


def shown_question(q: Question) -> str:
    """The question as the drill shows it (its placeholders still in): ending in "(premise disputed)" where
    ``q.premise`` says the course notes' question assumes what cipherlab's runs do not show."""
    return f"{q.question} ({PREMISE_NOTES[q.premise]})" if q.premise else q.question


def cited_facts(text: str) -> list[str]:
    """The fact keys that a bank text cites with ``{fact}`key```, in order of first use."""
    return list(dict.fromkeys(m.group(1) for m in FACT_ROLE.finditer(text)))


def prose_facts(text: str) -> list[str]:
    """The fact keys that a chapter's prose quotes with ``<span data-fact="key">``."""
    return list(dict.fromkeys(m.group(1) for m in FACT_SPAN.finditer(text)))


def load_facts(chapter: str) -> dict:
    """``cipherbook.viva.facts.load_facts``, imported on first use (the registry imports every
    chapter's experiments, torch included; reading the bank needs none of them)."""
    from cipherbook.viva.facts import load_facts as registry

    return registry(chapter)


def _plain(value, key: str, chapter: str):
    """Facts are plain Python numbers or strings (numpy scalars would print as np.float64(...))."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"fact {key!r} of FACTS[{chapter!r}] in {REGISTRY} returned {value!r}; "
                        "return an int, float or short str")
    return value


def compute_facts(chapter: str) -> dict:
    """Compute every fact of a chapter; raises if an answer cites a key that FACTS lacks."""
    return dict(_compute_facts(chapter))


@functools.lru_cache(maxsize=None)
def _compute_facts(chapter: str) -> tuple:
    facts = load_facts(chapter)
    missing = [k for q in questions(chapter) for k in cited_facts(q.question + q.lead + q.answer) if k not in facts]
    if missing:
        raise KeyError(f"bank/{chapter}.yml cites {missing}, which FACTS[{chapter!r}] in {REGISTRY} "
                       f"does not define; add them there (computed by book/cipherbook/experiments/{chapter}.py)")
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same float rounding wherever sync or the tests compute them
    try:
        return tuple((key, _plain(fn(), key, chapter)) for key, fn in facts.items())
    finally:
        torch.set_num_threads(threads)


BOUND_FLOOR = -5  # the exponent of the float32 tolerance the checks use: 1e-05


def format_fact(value, spec: str | None) -> str:
    """A fact as the text shows it: ``format(value, spec)``, or ``str(value)`` without a spec.

    The spec ``bound`` writes a power of ten that ``|value|`` stays below on any CPU, for sizes of float
    rounding error: the smallest at or above 3 x ``|value|``, and never below 1e-05, the float32 tolerance
    of the book's checks ("1e-05"). Their digits change with the CPU's kernels by a few units in the last
    place, so the power of ten just above them can change from one CPU to the next.
    """
    if spec == "bound":
        exponent = math.ceil(math.log10(3 * abs(value))) if value else BOUND_FLOOR
        return f"1e{max(exponent, BOUND_FLOOR):+03d}"
    return format(value, spec) if spec else str(value)


def _lookup(values: dict, key: str, chapter: str, where: str):
    if key not in values:
        raise KeyError(f"{where} quotes the fact {key!r}, which FACTS[{chapter!r}] in {REGISTRY} "
                       "does not define; add it there or remove the quote")
    return values[key]


def fill_facts(text: str, chapter: str) -> str:
    """Replace the ``{fact}`key:spec``` placeholders of a bank text by the computed facts."""
    if not cited_facts(text):
        return text
    values = compute_facts(chapter)

    def paste(match: re.Match) -> str:
        value = _lookup(values, match.group(1), chapter, f"bank/{chapter}.yml")
        return format_fact(value, match.group(2))

    return FACT_ROLE.sub(paste, text)


def refill_prose(text: str, chapter: str, where: str = "a markdown cell") -> str:
    """Rewrite the number inside every ``<span data-fact="key:spec">`` of ``text`` from the facts."""
    if not prose_facts(text):
        return text
    values = compute_facts(chapter)

    def paste(match: re.Match) -> str:
        key, spec = match.group(1), match.group(2)
        value = format_fact(_lookup(values, key, chapter, where), spec)
        attribute = f"{key}:{spec}" if spec else key
        return f'<span data-fact="{attribute}">{value}</span>'

    return FACT_SPAN.sub(paste, text)
