"""Flashcards over the viva bank (the viva drill).

The cards are the questions of ``book/cipherbook/viva/bank/*.yml``, the same source the chapters'
viva sections are generated from. ``Deck`` is the logic (order, position, the known set, the
score) and runs without a kernel; ``Flashcards`` is a thin ipywidgets view over it, for a live
kernel. ``flashcards_html`` is the same drill as one self-contained HTML fragment with its own
small script: it works on the built book, where no kernel runs (the viva drill chapter shows it).

Answers are CommonMark whose numbers are ``{fact}`key``` placeholders; a card shows them
with the numbers filled in by ``fill_facts`` (and any MyST-style role reduced to its text), so
it never shows raw markup. Facts are computed only for the chapters whose cards cite them,
when such a card is first shown (some chapters train a tiny model to get their numbers).
"""

from __future__ import annotations

import html
import hashlib
import itertools
import json
import random
import re
from collections.abc import Iterable, Sequence

from cipherbook.viva.answers import Question, cited_facts, fill_facts, load_bank, shown_question
from cipherbook.viva.priority import TIERS, tier

# {role}`text` -> text, for any MyST-style role left after the facts are filled in.
_MYST_ROLE = re.compile(r"\{[\w:.-]+\}`([^`]*)`")
ALL_CHAPTERS = "all chapters"  # the chapter menu's entry for no filter
# Where the page's flashcards keep the ids of the known cards (the browser's localStorage, per site):
# marks survive a reload and are shared by every deck of the site.
STORAGE_KEY = "cipherlab-viva-known"


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
    """An ordered deck of viva questions with a cursor, a chapter filter, an "unknown only"
    filter and a known set.

    The order is a seeded shuffle: the same ``seed`` gives the same sequence of orders, so a
    drill can be repeated. Known cards are remembered by question id across shuffles and
    filters; the score counts the known cards among those of the chosen chapter (all chapters
    when none is chosen), whether or not "unknown only" hides them. With "unknown only" on, the
    order holds the chapter's cards not yet known, and a card marked known leaves it on ``next``;
    once every card is known the order is empty and ``current`` is None.
    """

    def __init__(self, cards: Sequence[Question], seed: int = 0):
        if not cards:
            raise ValueError("Deck needs at least one question; bank_questions() returned none")
        self.cards = list(cards)
        self.chapters = list(dict.fromkeys(q.chapter for q in self.cards))
        self.known: set[str] = set()
        self.chapter: str | None = None
        self.unknown_only = False
        self._rng = random.Random(seed)
        self.order: list[Question] = []
        self.position = 0
        self.revealed = 0  # 0: question only, 1: the lead, 2: the whole answer
        self.shuffle()

    def _in_chapter(self) -> list[Question]:
        return [q for q in self.cards if self.chapter is None or q.chapter == self.chapter]

    def _visible(self) -> list[Question]:
        return [q for q in self._in_chapter() if not (self.unknown_only and q.id in self.known)]

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

    def set_unknown_only(self, on: bool) -> None:
        """Deal only the cards not yet known (True) or every card of the chapter (False), reshuffled."""
        self.unknown_only = bool(on)
        self.shuffle()

    @property
    def current(self) -> Question | None:
        """The card shown; None when "unknown only" has left no card to show."""
        return self.order[self.position] if self.order else None

    def next(self) -> Question | None:
        """Move to the next card, wrapping round to the first. With "unknown only", cards marked
        known since the deal leave the order first."""
        if self.unknown_only and self.order:
            shown = self.order[self.position]
            kept = [q for q in self.order if q is shown or q.id not in self.known]
            at = kept.index(shown)
            if shown.id in self.known:
                kept.pop(at)
                at -= 1
            self.order = kept
            self.position = (at + 1) % len(kept) if kept else 0
        elif self.order:
            self.position = (self.position + 1) % len(self.order)
        self.revealed = 0
        return self.current

    def reveal(self) -> str:
        """Show a little more of the current card's answer: the lead first, then the rest.
        Returns the markdown now shown."""
        if self.current is None:
            return ""
        lead, rest = card_parts(self.current)
        self.revealed = min(self.revealed + 1, 2 if rest else 1)
        return lead if self.revealed == 1 else f"{lead}\n\n{rest}"

    def mark_known(self) -> None:
        if self.current is not None:
            self.known.add(self.current.id)

    def score(self) -> tuple[int, int]:
        """(known, total) among the cards of the chosen chapter ("unknown only" hides none of them here)."""
        cards = self._in_chapter()
        return sum(q.id in self.known for q in cards), len(cards)

    def score_line(self) -> str:
        known, total = self.score()
        return f"known {known} of {total}"


def deck_text(chapter: str | None = None) -> str:
    """A printable plain listing of the bank (one chapter, or all), numbers filled in."""
    lines = []
    for q in bank_questions(None if chapter is None else [chapter]):
        lead, rest = card_parts(q)
        lines += [f"[{q.chapter}] {q.id} ({q.source})", f"Q: {card_markdown(shown_question(q), q.chapter)}",
                  f"A: {lead}", *([rest] if rest else []), ""]
    return "\n".join(lines)


class Flashcards:
    """An ipywidgets flashcard drill: shuffle, reveal (the lead, then the rest), mark known, next,
    a chapter filter.

    ``Flashcards(chapters=None, seed=0)`` builds the deck from the bank; display it as the
    last expression of a cell (or with ``display(cards.widget)``). Without a kernel, e.g.
    in the rendered book, these buttons do nothing: use ``flashcards_html`` there.
    """

    def __init__(self, chapters: Iterable[str] | None = None, seed: int = 0):
        import ipywidgets as w

        self.deck = Deck(bank_questions(chapters), seed=seed)
        self._chapter = w.Dropdown(options=[ALL_CHAPTERS, *self.deck.chapters], value=ALL_CHAPTERS,
                                   description="chapter")
        buttons = {name: w.Button(description=name) for name in ("shuffle", "reveal", "mark known", "next")}
        self._unknown = w.Checkbox(value=False, description="unknown only", indent=False)
        self._unknown.observe(lambda change: self._act(lambda: self.deck.set_unknown_only(change["new"])),
                              names="value")
        self._status = w.HTML()
        self._question = w.Output()
        self._answer = w.Output()
        self._chapter.observe(lambda change: self._on_chapter(change["new"]), names="value")
        buttons["shuffle"].on_click(lambda _: self._act(self.deck.shuffle))
        buttons["reveal"].on_click(lambda _: self._reveal())
        buttons["mark known"].on_click(lambda _: self._act(self.deck.mark_known, keep_answer=True))
        buttons["next"].on_click(lambda _: self._act(self.deck.next))
        self.widget = w.VBox([w.HBox([self._chapter, self._unknown, *buttons.values()]), self._status,
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
        self._question.clear_output()
        if q is None:
            self._status.value = f"every card here is known · <b>{self.deck.score_line()}</b>"
            self._answer.clear_output()
            return
        self._status.value = (f"card {self.deck.position + 1} of {len(self.deck.order)} · {q.chapter} · "
                              f"{q.source} · <b>{self.deck.score_line()}</b>")
        with self._question:
            display(Markdown(f"**{card_markdown(shown_question(q), q.chapter)}**"))
        if not keep_answer:
            self._answer.clear_output()

    def _reveal(self):
        from IPython.display import Markdown, display

        shown = self.deck.reveal()
        self._answer.clear_output()
        if not shown:
            return
        with self._answer:
            display(Markdown(shown))


# --------------------------------------------------------------------------- the page's own cards

# Code spans and fences are left as they are; $$display$$ and $inline$ maths are set aside so the
# markdown renderer cannot touch them (`a_1 * b_2` would become emphasis, `\,` would lose its slash).
_MATHS_OR_CODE = re.compile(r"(`+).*?\1|\$\$.+?\$\$|\$[^$\n]+\$", re.S)
_fragment_ids = itertools.count()


def card_html(markdown: str) -> str:
    """CommonMark (with tables) rendered to HTML the way Jupyter does it: the maths is set aside
    first and put back as ``<span class="fc-math">$...$</span>``, the TeX intact, for MathJax."""
    from markdown_it import MarkdownIt

    maths: list[str] = []

    def hide(match: re.Match) -> str:
        if match.group(1):  # a code span or fence: its dollars are not maths
            return match.group(0)
        maths.append(match.group(0))
        return f"FCMATHPLACEHOLDER{len(maths) - 1}X"

    rendered = MarkdownIt("commonmark").enable("table").render(_MATHS_OR_CODE.sub(hide, markdown))
    return re.sub(r"FCMATHPLACEHOLDER(\d+)X",
                  lambda m: f'<span class="fc-math">{html.escape(maths[int(m.group(1))], quote=False)}</span>',
                  rendered).strip()


def deck_data(chapters: Iterable[str] | None = None, seed: int = 0) -> dict:
    """The deck as the page's script reads it: every card (question, lead and rest as HTML, with
    its id, chapter, priority tier and source), the chapters, the tiers, and ``Deck(seed)``'s first order."""
    cards = bank_questions(chapters)
    index = {q.id: n for n, q in enumerate(cards)}
    rows = []
    for q in cards:
        lead, rest = card_parts(q)
        rows.append({"id": q.id, "chapter": q.chapter, "tier": tier(q), "source": q.source,
                     "question": card_html(f"**{card_markdown(shown_question(q), q.chapter)}**"),
                     "lead": card_html(lead), "rest": card_html(rest) if rest else ""})
    deck = Deck(cards, seed=seed)
    return {"seed": seed, "chapters": deck.chapters, "tiers": list(TIERS), "cards": rows, "order": [index[q.id] for q in deck.order]}


_STYLE = """
.cipherlab-flashcards{border:1px solid #c8c8d0;border-radius:6px;padding:.6em .9em;margin:1em 0;
  background:#fbfbfd}
.cipherlab-flashcards [hidden]{display:none !important}
.cipherlab-flashcards .fc-controls{display:flex;flex-wrap:wrap;gap:.4em;align-items:center}
.cipherlab-flashcards button,.cipherlab-flashcards select{font:inherit;padding:.2em .7em;
  border:1px solid #99a;border-radius:4px;background:#fff;cursor:pointer}
.cipherlab-flashcards button:disabled{opacity:.5;cursor:default}
.cipherlab-flashcards button.fc-known-on{background:#e3f4e3;border-color:#4a4}
.cipherlab-flashcards .fc-status{margin:.5em 0;color:#555;font-size:.9em}
.cipherlab-flashcards .fc-score{font-weight:bold;color:#222}
.cipherlab-flashcards .fc-card{border-top:1px solid #ddd;padding-top:.4em}
.cipherlab-flashcards .fc-lead,.cipherlab-flashcards .fc-rest{border-left:3px solid #88a;
  padding-left:.7em;margin:.5em 0}
.cipherlab-flashcards table{border-collapse:collapse}
.cipherlab-flashcards td,.cipherlab-flashcards th{border:1px solid #ccc;padding:.1em .4em}
"""

# The page's script. It reads the JSON beside it, builds the buttons (so a viewer that strips
# scripts shows only the note), and typesets maths with the page's MathJax 3 when there is one.
# The sites' MathJax may be set up for \( \) only (myst-parser does so on the built book), or for
# $ $ (a page that says so): each maths span is written with the delimiters the page declares.
_SCRIPT = r"""
(function () {
  var root = document.getElementById(ROOT_ID);
  if (!root || root.getAttribute("data-ready")) return;
  root.setAttribute("data-ready", "1");
  var data = JSON.parse(root.querySelector("script.fc-data").textContent);
  var cards = data.cards, prefix = ROOT_ID;

  function mulberry32(a) {  // a small seeded PRNG: the same seed, the same sequence of shuffles
    return function () {
      a |= 0; a = a + 0x6D2B79F5 | 0;
      var t = Math.imul(a ^ a >>> 15, 1 | a);
      t = t + Math.imul(t ^ t >>> 7, 61 | t) ^ t;
      return ((t ^ t >>> 14) >>> 0) / 4294967296;
    };
  }
  var random = mulberry32(data.seed + 1);
  var state = {chapter: "", tier: "", unknownOnly: false, order: data.order.slice(), pos: 0, revealed: 0, known: {}};

  // Progress lives in the browser's localStorage, so a reload keeps it. Where storage is refused
  // (a sandboxed frame, some file:// pages) the drill still works and forgets on reload.
  function loadKnown() {
    try {
      var ids = JSON.parse(window.localStorage.getItem(STORAGE_KEY) || "[]");
      if (Array.isArray(ids)) ids.forEach(function (id) { if (typeof id === "string") state.known[id] = true; });
    } catch (err) { /* no storage: start empty */ }
  }
  function saveKnown() {
    try { window.localStorage.setItem(STORAGE_KEY, JSON.stringify(Object.keys(state.known))); }
    catch (err) { /* no storage: the marks last until the page is reloaded */ }
  }
  loadKnown();

  function esc(s) { var d = document.createElement("div"); d.textContent = s; return d.innerHTML; }
  var options = '<option value="">all chapters</option>' + data.chapters.map(function (c) {
    return '<option value="' + esc(c) + '">' + esc(c) + "</option>"; }).join("");
  var tierOptions = '<option value="">every tier</option>' + data.tiers.map(function (t) {
    return '<option value="' + esc(t) + '">' + esc(t) + "</option>"; }).join("");
  var ui = document.createElement("div");
  ui.innerHTML =
    '<div class="fc-controls">' +
    '<label for="' + prefix + '-chapter">chapter</label> <select id="' + prefix + '-chapter">' + options + "</select>" +
    '<label for="' + prefix + '-tier">priority</label> <select id="' + prefix + '-tier">' + tierOptions + "</select>" +
    '<button type="button" id="' + prefix + '-reveal">reveal</button>' +
    '<button type="button" id="' + prefix + '-known">mark known</button>' +
    '<button type="button" id="' + prefix + '-next">next</button>' +
    '<button type="button" id="' + prefix + '-shuffle">shuffle</button>' +
    '<input type="checkbox" id="' + prefix + '-unknown"> <label for="' + prefix + '-unknown">unknown only</label>' +
    '<button type="button" id="' + prefix + '-forget">forget known</button></div>' +
    '<div class="fc-status" id="' + prefix + '-status" aria-live="polite"></div>' +
    '<div class="fc-card" id="' + prefix + '-card"><div class="fc-question" id="' + prefix + '-question"></div>' +
    '<div class="fc-lead" id="' + prefix + '-lead" hidden></div>' +
    '<div class="fc-rest" id="' + prefix + '-rest" hidden></div></div>';
  root.appendChild(ui);
  root.querySelector(".fc-fallback").hidden = true;
  function el(name) { return document.getElementById(prefix + "-" + name); }

  var queue = Promise.resolve();
  function delimiters() {
    var tex = (window.MathJax && window.MathJax.config && window.MathJax.config.tex) || {};
    return {inline: (tex.inlineMath && tex.inlineMath[0]) || ["\\(", "\\)"],
            display: (tex.displayMath && tex.displayMath[0]) || ["\\[", "\\]"]};
  }
  function typeset(element) {
    var M = window.MathJax;
    if (M && M.Hub && M.Hub.Queue) { M.Hub.Queue(["Typeset", M.Hub, element]); return; }  // MathJax 2
    if (M && M.startup && M.startup.promise) {
      M.startup.promise.then(function () {
        var d = delimiters(), fresh = 0;
        Array.prototype.forEach.call(element.querySelectorAll(".fc-math"), function (span) {
          // a span MathJax already typeset (the page's own first pass) is left alone: a second
          // typeset of the same element would nest the formulas
          if (span.getAttribute("data-tex") || span.children.length) return;
          var tex = span.textContent, display = tex.slice(0, 2) === "$$";
          var body = display ? tex.slice(2, -2) : tex.slice(1, -1), pair = display ? d.display : d.inline;
          span.setAttribute("data-tex", tex);
          span.textContent = pair[0] + body + pair[1];
          fresh++;
        });
        if (!fresh) return;
        queue = queue.then(function () {
          return window.MathJax && MathJax.typesetPromise && MathJax.typesetPromise([element]);
        }).catch(function (err) { console.warn("flashcards: MathJax", err); });
      });
    } else if (document.readyState !== "complete") {  // MathJax may still be loading (defer)
      window.addEventListener("load", function () {
        var M = window.MathJax;
        if (M && (M.Hub || (M.startup && M.startup.promise))) typeset(element);
      }, {once: true});
    }
  }
  function fill(element, html) {
    if (window.MathJax && MathJax.typesetClear) MathJax.typesetClear([element]);
    element.innerHTML = html;
  }

  function inChapter(i) {  // the chosen chapter and priority tier ("" for every one)
    return (!state.chapter || cards[i].chapter === state.chapter) && (!state.tier || cards[i].tier === state.tier);
  }
  function visible() {
    var out = [];
    for (var i = 0; i < cards.length; i++) {
      if (inChapter(i) && !(state.unknownOnly && state.known[cards[i].id])) out.push(i);
    }
    return out;
  }
  function shuffle() {
    var order = visible();
    for (var i = order.length - 1; i > 0; i--) {
      var j = Math.floor(random() * (i + 1)), t = order[i]; order[i] = order[j]; order[j] = t;
    }
    state.order = order; state.pos = 0; state.revealed = 0;
  }
  function current() { return state.order.length ? cards[state.order[state.pos]] : null; }
  function advance() {  // the next card; with "unknown only", cards marked known meanwhile leave the deal
    var shown = state.order[state.pos];
    if (state.unknownOnly) {
      var kept = state.order.filter(function (i) { return i === shown || !state.known[cards[i].id]; });
      var at = kept.indexOf(shown);
      if (state.known[cards[shown].id]) { kept.splice(at, 1); at -= 1; }
      state.order = kept;
      state.pos = kept.length ? (at + 1) % kept.length : 0;
    } else {
      state.pos = (state.pos + 1) % state.order.length;
    }
    state.revealed = 0;
  }

  function showStatus() {
    var card = current(), known = 0, total = 0;
    for (var i = 0; i < cards.length; i++) if (inChapter(i)) { total++; if (state.known[cards[i].id]) known++; }
    var score = '<span class="fc-score">known ' + known + " of " + total + "</span>";
    ["reveal", "known", "next"].forEach(function (name) { el(name).disabled = !card; });
    if (!card) {
      el("status").innerHTML = "every card here is known · " + score;
      return;
    }
    el("status").innerHTML = "card " + (state.pos + 1) + " of " + state.order.length + " · " + esc(card.chapter) +
      " · " + esc(card.tier) + " · " + esc(card.source) + " · " + score;
    var k = el("known");
    k.textContent = state.known[card.id] ? "known ✓ (unmark)" : "mark known";
    k.className = state.known[card.id] ? "fc-known-on" : "";
    var r = el("reveal"), most = card.rest ? 2 : 1;
    r.textContent = state.revealed === 0 ? "reveal" : (state.revealed < most ? "reveal more" : "all shown");
    r.disabled = state.revealed >= most;
  }
  function showCard() {
    var card = current();
    if (!card) {
      fill(el("question"), "<p>Every card of this choice is marked known. Untick <b>unknown only</b> to go " +
        "through them again, or press <b>forget known</b> to start over.</p>");
      el("lead").hidden = true; el("rest").hidden = true;
      showStatus();
      return;
    }
    fill(el("question"), card.question); typeset(el("question"));
    fill(el("lead"), card.lead); el("lead").hidden = true;
    fill(el("rest"), card.rest); el("rest").hidden = true;
    showStatus();
  }
  function reveal() {
    var card = current();
    if (!card) return;
    state.revealed = Math.min(state.revealed + 1, card.rest ? 2 : 1);
    var part = el(state.revealed === 1 ? "lead" : "rest");
    part.hidden = false;
    typeset(part);
    showStatus();
  }

  el("reveal").addEventListener("click", reveal);
  el("known").addEventListener("click", function () {
    var card = current();
    if (!card) return;
    if (state.known[card.id]) delete state.known[card.id]; else state.known[card.id] = true;
    saveKnown();
    showStatus();
  });
  el("next").addEventListener("click", function () { if (current()) { advance(); showCard(); } });
  el("shuffle").addEventListener("click", function () { shuffle(); showCard(); });
  el("chapter").addEventListener("change", function () { state.chapter = this.value; shuffle(); showCard(); });
  el("tier").addEventListener("change", function () { state.tier = this.value; shuffle(); showCard(); });
  el("unknown").addEventListener("change", function () { state.unknownOnly = this.checked; shuffle(); showCard(); });
  el("forget").addEventListener("click", function () {
    if (!window.confirm("Forget every card marked known, on every page of this book?")) return;
    state.known = {};
    saveKnown();
    shuffle(); showCard();
  });
  showCard();
})();
"""


def flashcards_html(chapters: Iterable[str] | None = None, seed: int = 0) -> str:
    """The flashcards as one self-contained HTML fragment, for a page with no kernel (the built
    book) as well as a notebook: the deck as JSON, an inline style and script (no file, no
    network), reveal (the lead, then the rest), mark known, next, shuffle (seeded), a chapter
    menu, a priority menu (``cipherbook.viva.priority``'s tiers), an "unknown only" filter, "forget known" and the score line "known n of m". The ids of
    the known cards are kept in the browser's ``localStorage`` under ``STORAGE_KEY``, so a reload
    keeps them. Display it with ``IPython.display.HTML``.

    Each call has its own element ids, so two decks can share a page. Where scripts do not run
    (GitHub's viewer, a PDF) only a note shows, pointing at the full list with folded answers.
    """
    data = deck_data(chapters, seed)
    # Inside <script>, "</" would end the element early: write <, > and & as JSON escapes.
    payload = json.dumps(data, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e") \
        .replace("&", "\\u0026")
    # The same deck gives the same id (a notebook's stored output stays the same from run to run);
    # the counter tells apart two decks on one page.
    digest = hashlib.sha256(payload.encode("utf-8")).hexdigest()[:8]
    root_id = f"cipherlab-flashcards-{next(_fragment_ids)}-{digest}"
    fallback = (f"<b>Flashcards ({len(data['cards'])} questions, {len(data['chapters'])} chapters).</b> "
                "The cards need JavaScript, which this viewer does not run. The same questions are "
                "listed below, under <i>Every question, must-know first</i>, each with its answer folded: "
                "say your answer out loud, then open it.")
    return (f'<div class="cipherlab-flashcards" id="{root_id}">'
            f"<style>{_STYLE}</style>"
            f'<p class="fc-fallback">{fallback}</p>'
            f'<script type="application/json" class="fc-data">{payload}</script>'
            f"<script>{_SCRIPT.replace('ROOT_ID', json.dumps(root_id)).replace('STORAGE_KEY', json.dumps(STORAGE_KEY))}</script>"
            "</div>")
