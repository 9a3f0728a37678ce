"""Flashcards over the viva bank (chapter 10, the viva drill).

The cards are the questions of ``cipherlab/viva/bank/*.yml``, the same source the chapters'
viva sections are generated from. ``Deck`` is the logic (order, position, the known set, the
score) and runs without a kernel; ``Flashcards`` is a thin ipywidgets view over it.

Answers are CommonMark whose numbers are ``{fact}`key``` placeholders; a card shows them
with the numbers filled in by ``fill_facts`` (and any MyST-style role reduced to its text), so
it never shows raw markup. Facts are computed only for the chapters whose cards cite them,
when such a card is first shown (some chapters train a tiny model to get their numbers).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence

from cipherlab.viva import Question, cited_facts, fill_facts, load_bank

# {role}`text` -> text, for any MyST-style role left after the facts are filled in.
_MYST_ROLE = re.compile(r"\{[\w:.-]+\}`([^`]*)`")
ALL_CHAPTERS = "all chapters"  # the chapter menu's entry for no filter


def card_markdown(text: str, chapter: str) -> str:
    """A question or answer as plain markdown (with $maths$): numbers filled in, no MyST roles."""
    if cited_facts(text):
        text = fill_facts(text, chapter)
    return _MYST_ROLE.sub(r"\1", text)


# LaTeX a terminal cannot typeset, written as the Unicode a reader would expect.
_TEX_SYMBOLS = {
    "top": "ᵀ", "sqrt": "√", "times": "×", "cdot": "·", "leftarrow": "←", "to": "→", "sigma": "σ",
    "lfloor": "⌊", "rfloor": "⌋", "le": "≤", "ge": "≥", "ne": "≠", "bmod": "mod", "theta": "θ",
    "omega": "ω", "mu": "μ", "beta": "β", "gamma": "γ", "epsilon": "ε", "pi": "π", "sum": "Σ",
    "oplus": "⊕", "infty": "∞", "dots": "…", "ldots": "…", "min": "min", "max": "max", "cos": "cos",
    "sin": "sin", "ln": "ln", "log": "log", "propto": "∝", "odot": "⊙", "iff": "⇔", "approx": "≈",
    "mid": "|", "lor": "∨", "lVert": "‖", "rVert": "‖", "quad": "  ", "qquad": "    ", "in": "∈",
    "alpha": "α", "lambda": "λ", "Delta": "Δ", "partial": "∂", "exp": "exp", "neq": "≠", "leq": "≤",
    "geq": "≥", "rightarrow": "→", "Rightarrow": "⇒", "prod": "Π", "ell": "ℓ", "varepsilon": "ε",
}
_TEX_DROP = ("left", "right", "big", "Big", "bigg", "textstyle", "displaystyle", "!", ",", ";", ":")


def terminal_text(markdown: str) -> str:
    """Markdown with $maths$ made readable in a terminal: ``$4D^2$`` -> ``4D^2``,
    ``$\\sqrt{d_k}$`` -> ``√(d_k)``, ``\\frac{a}{b}`` -> ``(a)/(b)``; no backslash commands left."""
    def maths(tex: str) -> str:
        for _ in range(3):  # nested groups
            tex = re.sub(r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}", r"(\1)/(\2)", tex)
            tex = re.sub(r"\\(?:mathrm|text|mathbf|mathcal|mathbb|operatorname|hat|overline|tilde)\{([^{}]*)\}",
                         r"\1", tex)
            tex = re.sub(r"\\sqrt\{([^{}]*)\}", r"√(\1)", tex)
        tex = re.sub(r"\\(" + "|".join(map(re.escape, _TEX_DROP)) + r")(?![A-Za-z])", "", tex)
        tex = re.sub(r"\^\{?\\top\}?", "ᵀ", tex)  # Q^\top -> Qᵀ
        tex = re.sub(r"\\([A-Za-z]+)", lambda m: _TEX_SYMBOLS.get(m.group(1), m.group(1)), tex)
        tex = tex.replace("\\{", "{").replace("\\}", "}").replace("\\", "")
        return re.sub(r"\{([^{}]*)\}", r"\1", tex)

    text = re.sub(r"\$\$(.+?)\$\$", lambda m: "\n    " + maths(m.group(1)).strip() + "\n", markdown, flags=re.S)
    return re.sub(r"\$((?:[^$\n]|\n(?!\n))+)\$", lambda m: maths(m.group(1)), text)


def card_parts(q: Question) -> tuple[str, str]:
    """(the lead, the rest): what the first reveal shows, and what a second reveal adds."""
    rest = card_markdown(q.answer, q.chapter)
    if not q.lead:
        return rest, ""
    return f"**{card_markdown(q.lead, q.chapter)}**", f"*If the examiner presses:*\n\n{rest}"


def bank_questions(chapters: Iterable[str] | None = None) -> list[Question]:
    """The bank's questions of the given chapters (all when None), in notebook and bank order."""
    banks = load_bank()
    chosen = list(banks) if chapters is None else list(chapters)
    unknown = [c for c in chosen if c not in banks]
    if unknown:
        raise KeyError(f"no viva bank for chapter(s) {unknown}; known chapters: {list(banks)}")
    return [q for c in chosen for q in banks[c].questions]


class Deck:
    """An ordered deck of viva questions with a cursor, a chapter filter and a known set.

    The order is a seeded shuffle: the same ``seed`` gives the same sequence of orders, so a
    drill can be repeated. Known cards are remembered by question id across shuffles and
    chapter filters; the score counts the known cards among those the filter shows.
    """

    def __init__(self, cards: Sequence[Question], seed: int = 0):
        if not cards:
            raise ValueError("Deck needs at least one question; bank_questions() returned none")
        self.cards = list(cards)
        self.chapters = list(dict.fromkeys(q.chapter for q in self.cards))
        self.known: set[str] = set()
        self.chapter: str | None = None
        self._rng = random.Random(seed)
        self.order: list[Question] = []
        self.position = 0
        self.revealed = 0  # 0: question only, 1: the lead, 2: the whole answer
        self.shuffle()

    def _visible(self) -> list[Question]:
        return [q for q in self.cards if self.chapter is None or q.chapter == self.chapter]

    def shuffle(self) -> None:
        """A new seeded order of the cards the filter shows; back to the first card."""
        self.order = self._visible()
        self._rng.shuffle(self.order)
        self.position = 0
        self.revealed = 0

    def set_chapter(self, chapter: str | None) -> None:
        """Show only one chapter's cards (None: every chapter), reshuffled."""
        if chapter is not None and chapter not in self.chapters:
            raise KeyError(f"chapter {chapter!r} has no cards in this deck; choose one of {self.chapters} or None")
        self.chapter = chapter
        self.shuffle()

    @property
    def current(self) -> Question:
        return self.order[self.position]

    def next(self) -> Question:
        """Move to the next card, wrapping round to the first."""
        self.position = (self.position + 1) % len(self.order)
        self.revealed = 0
        return self.current

    def reveal(self) -> str:
        """Show a little more of the current card's answer: the lead first, then the rest.
        Returns the markdown now shown."""
        lead, rest = card_parts(self.current)
        self.revealed = min(self.revealed + 1, 2 if rest else 1)
        return lead if self.revealed == 1 else f"{lead}\n\n{rest}"

    def mark_known(self) -> None:
        self.known.add(self.current.id)

    def score(self) -> tuple[int, int]:
        """(known, total) among the cards the filter shows."""
        return sum(q.id in self.known for q in self.order), len(self.order)

    def score_line(self) -> str:
        known, total = self.score()
        return f"known {known} of {total}"


def deck_text(chapter: str | None = None) -> str:
    """A printable plain listing of the bank (one chapter, or all), numbers filled in."""
    lines = []
    for q in bank_questions(None if chapter is None else [chapter]):
        lead, rest = card_parts(q)
        lines += [f"[{q.chapter}] {q.id} ({q.source})", f"Q: {card_markdown(q.question, q.chapter)}",
                  f"A: {lead}", *([rest] if rest else []), ""]
    return "\n".join(lines)


class Flashcards:
    """An ipywidgets flashcard drill: shuffle, reveal (the lead, then the rest), mark known, next,
    a chapter filter.

    ``Flashcards(chapters=None, seed=0)`` builds the deck from the bank; display it as the
    last expression of a cell (or with ``display(cards.widget)``). Without a kernel, e.g.
    in the rendered book, the buttons do nothing: the chapter lists every answer as well.
    """

    def __init__(self, chapters: Iterable[str] | None = None, seed: int = 0):
        import ipywidgets as w

        self.deck = Deck(bank_questions(chapters), seed=seed)
        self._chapter = w.Dropdown(options=[ALL_CHAPTERS, *self.deck.chapters], value=ALL_CHAPTERS,
                                   description="chapter")
        buttons = {name: w.Button(description=name) for name in ("shuffle", "reveal", "mark known", "next")}
        self._status = w.HTML()
        self._question = w.Output()
        self._answer = w.Output()
        self._chapter.observe(lambda change: self._on_chapter(change["new"]), names="value")
        buttons["shuffle"].on_click(lambda _: self._act(self.deck.shuffle))
        buttons["reveal"].on_click(lambda _: self._reveal())
        buttons["mark known"].on_click(lambda _: self._act(self.deck.mark_known, keep_answer=True))
        buttons["next"].on_click(lambda _: self._act(self.deck.next))
        self.widget = w.VBox([w.HBox([self._chapter, *buttons.values()]), self._status,
                              self._question, self._answer])
        self._show()

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)

    def _on_chapter(self, chapter):
        self._act(lambda: self.deck.set_chapter(None if chapter == ALL_CHAPTERS else chapter))

    def _act(self, step, keep_answer: bool = False):
        step()
        self._show(keep_answer)

    def _show(self, keep_answer: bool = False):
        from IPython.display import Markdown, display

        q = self.deck.current
        self._status.value = (f"card {self.deck.position + 1} of {len(self.deck.order)} · {q.chapter} · "
                              f"{q.source} · <b>{self.deck.score_line()}</b>")
        self._question.clear_output()
        with self._question:
            display(Markdown(f"**{card_markdown(q.question, q.chapter)}**"))
        if not keep_answer:
            self._answer.clear_output()

    def _reveal(self):
        from IPython.display import Markdown, display

        shown = self.deck.reveal()
        self._answer.clear_output()
        with self._answer:
            display(Markdown(shown))
