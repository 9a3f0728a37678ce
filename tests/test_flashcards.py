"""The flashcard deck of the viva drill: same questions as the bank, seeded order, known/score,
and cards that never show a raw MyST role. Only the cheap "task" chapter computes facts, except
for the page's own flashcards (``flashcards_html``), which are built once over the whole bank."""

import html
import json
import re
import shutil
import subprocess

import pytest

from cipherbook.viva import MYST_ROLE, Question, load_bank, myst_markup, questions
from cipherbook.viva.flashcards import (ALL_CHAPTERS, STORAGE_KEY, Deck, Flashcards, bank_questions, card_html,
                                       card_markdown, card_parts, deck_data, deck_text, flashcards_html)
from cipherbook.viva.priority import TIERS, tier


def _ids(cards):
    return [q.id for q in cards]


def test_deck_covers_exactly_the_bank_questions():
    bank_ids = [q.id for bank in load_bank().values() for q in bank.questions]
    deck = Deck(bank_questions(), seed=0)
    assert sorted(_ids(deck.order)) == sorted(bank_ids) and len(deck.order) == len(bank_ids)


def test_shuffle_is_deterministic_per_seed():
    cards = bank_questions(["attention", "mha"])
    a, b, c = Deck(cards, seed=3), Deck(cards, seed=3), Deck(cards, seed=4)
    assert _ids(a.order) == _ids(b.order) != _ids(c.order)
    a.shuffle(), b.shuffle()
    assert _ids(a.order) == _ids(b.order) and a.position == 0


def test_chapter_filter_shows_only_that_chapters_cards():
    deck = Deck(bank_questions(), seed=0)
    deck.set_chapter("mha")
    assert sorted(_ids(deck.order)) == sorted(q.id for q in questions("mha"))
    with pytest.raises(KeyError, match="nope"):
        deck.set_chapter("nope")


def test_mark_known_counts_once_and_survives_filter_and_shuffle():
    deck = Deck(bank_questions(["task", "mha"]), seed=1)
    total = len(deck.order)
    assert deck.score_line() == f"known 0 of {total}"
    deck.mark_known()
    deck.mark_known()
    first = deck.current
    deck.next()
    deck.mark_known()
    assert deck.score() == (2, total)
    deck.set_chapter(first.chapter)
    assert first.id in deck.known and deck.score()[0] == len(deck.known & set(_ids(deck.order)))
    deck.set_chapter(None)
    assert deck.score_line() == f"known 2 of {total}"


def test_next_wraps_round_to_the_first_card():
    deck = Deck(bank_questions(["task"]), seed=0)
    first = deck.current
    for _ in range(len(deck.order)):
        deck.next()
    assert deck.current == first


def test_filled_cards_never_show_a_fact_placeholder():
    text = deck_text("task")
    assert "{fact}" not in text and "256" in text
    assert all("{fact}" not in card_markdown(q.answer, "task") for q in questions("task"))


def test_other_myst_roles_are_reduced_to_their_text():
    assert card_markdown("see {doc}`the task <01_task>` and {math}`x^2`", "task") == \
        "see the task <01_task> and x^2"


def test_unknown_chapter_is_an_error_naming_the_known_ones():
    with pytest.raises(KeyError, match="known chapters"):
        bank_questions(["nope"])


def test_widget_buttons_drive_the_deck():
    cards = Flashcards(chapters=["task"], seed=0)
    shown = cards.deck.current
    cards._act(cards.deck.mark_known, keep_answer=True)
    assert "known 1 of 2" in cards._status.value and shown.source in cards._status.value
    cards._on_chapter("task")
    assert cards.deck.chapter == "task"
    cards._on_chapter(ALL_CHAPTERS)
    assert cards.deck.chapter is None


def test_reveal_shows_the_lead_first_and_the_rest_on_a_second_reveal():
    q = Question("x-1", "src", "Why {fact}`task_key_len`?", "Because of {fact}`task_chunk_chars`.", "task",
                 lead="Short: {fact}`task_key_len` bytes.")
    deck = Deck([q, q], seed=0)
    first = deck.reveal()
    assert first == "**Short: 8 bytes.**"
    second = deck.reveal()
    assert second.startswith(first) and "Because of 256." in second and "examiner presses" in second
    assert deck.reveal() == second  # nothing more to show
    deck.next()
    assert deck.revealed == 0 and deck.reveal() == first


def test_a_card_without_a_lead_shows_its_answer_at_once():
    q = Question("x-2", "src", "Q?", "All of it.", "task")
    deck = Deck([q], seed=0)
    assert deck.reveal() == "All of it." and deck.revealed == 1


# --------------------------------------------------------------------------- the page's flashcards

def _embedded(fragment: str) -> dict:
    found = re.findall(r'<script type="application/json" class="fc-data">(.*?)</script>', fragment, re.S)
    assert len(found) == 1, "the fragment should embed the deck as one JSON script"
    return json.loads(found[0])


@pytest.fixture(scope="module")
def whole_deck():
    """The fragment over the whole bank (computes every chapter's facts, about a minute)."""
    fragment = flashcards_html(seed=0)
    return fragment, _embedded(fragment)


def test_fragment_holds_every_bank_question_exactly_once(whole_deck):
    _, data = whole_deck
    bank_ids = [q.id for bank in load_bank().values() for q in bank.questions]
    ids = [card["id"] for card in data["cards"]]
    assert sorted(ids) == sorted(bank_ids) and len(ids) == len(set(ids))
    assert sorted(data["order"]) == list(range(len(ids)))
    assert data["chapters"] == list(load_bank())
    by_id = {q.id: q for q in bank_questions()}
    for card in data["cards"]:
        q = by_id[card["id"]]
        assert (card["chapter"], card["source"]) == (q.chapter, q.source)
        assert card["question"] and card["lead"]


def test_fragment_starts_in_the_order_deck_deals():
    data = _embedded(flashcards_html(chapters=["task", "mha"], seed=3))
    deck = Deck(bank_questions(["task", "mha"]), seed=3)
    assert [data["cards"][i]["id"] for i in data["order"]] == [q.id for q in deck.order]
    assert {card["chapter"] for card in data["cards"]} == {"task", "mha"}


def test_fragment_shows_no_fact_placeholder_or_myst_role(whole_deck):
    fragment, data = whole_deck
    for q in bank_questions():
        lead, rest = card_parts(q)
        for markdown in (card_markdown(q.question, q.chapter), lead, rest):
            assert "{fact}" not in markdown and myst_markup(markdown) == [], (q.id, markdown)
    for card in data["cards"]:
        for part in ("question", "lead", "rest"):
            assert "{fact}" not in card[part] and not MYST_ROLE.search(card[part]), (card["id"], part)
    assert "{fact}" not in fragment


def test_fragment_keeps_maths_as_dollar_text(whole_deck):
    _, data = whole_deck
    by_id = {card["id"]: card for card in data["cards"]}
    checked = 0
    for q in bank_questions():
        lead, rest = card_parts(q)
        shown = by_id[q.id]["lead"] + by_id[q.id]["rest"]
        for tex in re.findall(r"\$\$.+?\$\$|\$[^$\n]+\$", lead + "\n\n" + rest, re.S):
            assert f'<span class="fc-math">{html.escape(tex, quote=False)}</span>' in shown, (q.id, tex)
            checked += 1
    assert checked > 100  # the bank has a lot of maths; all of it reached the page intact


def test_card_html_sets_maths_aside_from_the_markdown_renderer():
    rendered = card_html("Take $a_1 * b_2$ and $x_1$, not `$HOME`.\n\n$$\\frac{a}{b} < c\\,d$$")
    assert '<span class="fc-math">$a_1 * b_2$</span>' in rendered  # no <em> from the underscores or *
    assert '<span class="fc-math">$$\\frac{a}{b} &lt; c\\,d$$</span>' in rendered
    assert "<code>$HOME</code>" in rendered and "<em>" not in rendered
    assert "<table>" in card_html("| a | b |\n|---|---|\n| 1 | 2 |")


def test_two_fragments_have_distinct_element_ids():
    a, b = flashcards_html(chapters=["task"]), flashcards_html(chapters=["task"])
    static_a, static_b = (re.sub(r"<script.*?</script>", "", f, flags=re.S) for f in (a, b))
    ids_a, ids_b = (set(re.findall(r'\bid="([^"]+)"', f)) for f in (static_a, static_b))
    assert ids_a and not ids_a & ids_b
    # the ids the script creates are all the root's id plus a suffix
    script = a.split("<script>", 1)[1]
    assert re.findall(r'id="([^"]*)"', script) and all(i == "' + prefix + '-" for i in
                                                        re.findall(r'id="([^"]*?)[a-z]*"', script))
    roots = [re.search(r'class="cipherlab-flashcards" id="([^"]+)"', f).group(1) for f in (a, b)]
    assert roots[0] != roots[1] and all(f'"{r}"' in f.split("<script>", 1)[1] for r, f in zip(roots, (a, b)))


def test_fragment_is_self_contained_and_says_something_without_javascript():
    fragment = flashcards_html(chapters=["task"])
    assert not re.search(r"<script[^>]*\ssrc=", fragment) and "<link" not in fragment
    assert not re.search(r"https?://", fragment.replace("http://www.w3.org", ""))
    assert fragment.count("<style>") == 1 and fragment.count("<script>") == 1
    script = fragment.split("<script>", 1)[1].split("</script>", 1)[0]
    for needed in ("MathJax.typesetPromise", "reveal", "mark known", "shuffle", "known ", "mulberry32"):
        assert needed in script
    # Before the script runs (or where it never does) only this note shows: no dead buttons.
    static = re.sub(r"<script.*?</script>|<style>.*?</style>", "", fragment, flags=re.S)
    assert "<button" not in static and "Every question, must-know first" in static and "folded" in static


# --------------------------------------------------------------------------- "unknown only" and progress kept

def test_unknown_only_deals_the_cards_not_yet_known_and_the_score_still_counts_them_all():
    deck = Deck(bank_questions(["task", "broken"]), seed=0)
    total = len(deck.order)
    deck.mark_known()
    first = deck.current
    deck.set_unknown_only(True)
    assert first not in deck.order and len(deck.order) == total - 1
    assert deck.score_line() == f"known 1 of {total}"  # the hidden known card still counts
    while deck.current is not None:  # mark every card: each leaves the deal on next
        deck.mark_known()
        deck.next()
    assert deck.order == [] and deck.reveal() == "" and deck.score_line() == f"known {total} of {total}"
    deck.set_unknown_only(False)
    assert len(deck.order) == total and deck.current is not None


def test_unknown_only_keeps_a_card_unmarked_before_next():
    deck = Deck(bank_questions(["task"]), seed=0)
    deck.set_unknown_only(True)
    shown = deck.current
    deck.mark_known()
    deck.known.discard(shown.id)  # unmarked again before moving on
    deck.next()
    assert shown in deck.order


def test_widget_unknown_only_checkbox_drives_the_deck():
    cards = Flashcards(chapters=["task"], seed=0)
    cards._act(cards.deck.mark_known, keep_answer=True)
    cards._unknown.value = True
    assert cards.deck.unknown_only and len(cards.deck.order) == 1
    cards._act(cards.deck.mark_known, keep_answer=True)
    cards._act(cards.deck.next)
    assert cards.deck.current is None and "every card here is known" in cards._status.value


def test_fragment_has_the_unknown_filter_the_storage_key_and_chapter_11(whole_deck):
    fragment, data = whole_deck
    script = fragment.split("<script>", 1)[1].split("</script>", 1)[0]
    assert "unknown only" in script and "-unknown\"" in script and "forget known" in script
    assert json.dumps(STORAGE_KEY) in script and "localStorage" in script
    ids = {card["id"] for card in data["cards"]}
    assert {q.id for q in questions("broken")} <= ids and "broken" in data["chapters"]


_NODE_DRIVER = r"""
const [data, script, rootId] = JSON.parse(require("fs").readFileSync(0, "utf8"));
const store = {};
function page() {  // just enough DOM for the drill's script
  const byId = {};
  function elem(id) {
    return {id, hidden: false, disabled: false, textContent: "", className: "", checked: false, value: "", on: {},
      attrs: {}, html: "", addEventListener(t, f) { this.on[t] = f; }, setAttribute(k, v) { this.attrs[k] = v; },
      getAttribute(k) { return this.attrs[k]; }, querySelectorAll() { return []; }, appendChild() {},
      get innerHTML() { return this.html || this.textContent.replace(/&/g, "&amp;").replace(/</g, "&lt;"); },
      set innerHTML(h) { this.html = h; for (const m of h.matchAll(/id="([^"]+)"/g)) byId[m[1]] = elem(m[1]); }};
  }
  byId[rootId] = elem(rootId);
  byId[rootId].querySelector = sel => sel === "script.fc-data" ? {textContent: data} : elem("");
  global.window = {localStorage: {getItem: k => store[k] ?? null, setItem: (k, v) => { store[k] = String(v); }},
                   confirm: () => true, addEventListener() {}};
  global.document = {getElementById: id => byId[id] || null, createElement: () => elem(""), readyState: "complete"};
  eval(script);
  const el = name => byId[rootId + "-" + name];
  return {el, status: () => el("status").innerHTML.replace(/<[^>]+>/g, "")};
}
const out = [];
let p = page();
p.el("known").on.click(); p.el("next").on.click(); p.el("known").on.click();
out.push(p.status());
p = page();  // a reload: the marks come back from localStorage
out.push(p.status());
p.el("unknown").checked = true; p.el("unknown").on.change.call(p.el("unknown"));
out.push(p.status());
while (!p.el("known").disabled) { p.el("known").on.click(); p.el("next").on.click(); }
out.push(p.status());
p.el("forget").on.click();
out.push(p.status());
console.log(JSON.stringify(out));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed; the script is checked in a browser")
def test_page_script_keeps_marks_across_a_reload_and_deals_unknown_only():
    """The page's own script, run by Node.js on a stub of the DOM: marks survive a reload (the
    browser's localStorage), "unknown only" deals the rest, and "forget known" clears them."""
    fragment = flashcards_html(chapters=["task", "broken"], seed=0)
    data = _embedded(fragment)
    script = fragment.split("<script>", 1)[1].split("</script>", 1)[0]
    root = re.search(r'class="cipherlab-flashcards" id="([^"]+)"', fragment).group(1)
    n = len(data["cards"])
    result = subprocess.run(["node", "-e", _NODE_DRIVER], input=json.dumps([json.dumps(data), script, root]),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    marked, reloaded, unknown_only, all_known, forgotten = json.loads(result.stdout)
    assert marked.endswith(f"known 2 of {n}") and reloaded.endswith(f"known 2 of {n}")
    assert unknown_only.startswith(f"card 1 of {n - 2}")
    assert all_known == f"every card here is known · known {n} of {n}"
    assert forgotten.endswith(f"known 0 of {n}")


_NODE_TIER_DRIVER = _NODE_DRIVER.split("const out = [];")[0] + r"""
const p = page(), tier = p.el("tier");
tier.value = "must-know"; tier.on.change.call(tier);
console.log(JSON.stringify([p.status(), p.el("question").innerHTML]));
"""


def test_cards_carry_their_priority_tier():
    data = deck_data(["task"], seed=0)
    assert data["tiers"] == list(TIERS)
    assert {card["id"]: card["tier"] for card in data["cards"]} == {
        q.id: tier(q) for q in questions("task")}


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed; the script is checked in a browser")
def test_page_script_priority_menu_deals_only_that_tier():
    fragment = flashcards_html(chapters=["task"], seed=0)
    data = _embedded(fragment)
    script = fragment.split("<script>", 1)[1].split("</script>", 1)[0]
    root = re.search(r'class="cipherlab-flashcards" id="([^"]+)"', fragment).group(1)
    must = [card for card in data["cards"] if card["tier"] == "must-know"]
    result = subprocess.run(["node", "-e", _NODE_TIER_DRIVER], input=json.dumps([json.dumps(data), script, root]),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    status, shown = json.loads(result.stdout)
    assert 0 < len(must) < len(data["cards"])
    assert status.startswith(f"card 1 of {len(must)} · ") and " · must-know · " in status
    assert status.endswith(f"known 0 of {len(must)}")
    assert shown in {card["question"] for card in must}
