"""The built book in a real browser: Debian's Chromium, driven by Playwright, opens every page of
``_build/html`` from disk (file://, no network) and checks what a reader would notice.

- no JavaScript error in the console;
- no raw TeX left: MathJax typeset every formula;
- every viva answer (``<details>``) starts closed and opens on a click;
- every explorer (book/cipherbook/explorers.py) draws its chart, and each of its controls changes the
  picture; screenshots of each explorer at two settings go to ``_build/screenshots/``;
- the chapter-10 flashcards reveal, mark and shuffle on the page;
- each chapter has its launch (Colab) and download buttons.

Build the book first (``jupyter-book build . -W --keep-going``); the tests skip, saying why, when
the build, Chromium (``apt-get install -y chromium``) or Playwright is missing. Playwright never
downloads a browser here: it is pointed at the system's (``CIPHERLAB_CHROMIUM`` overrides the path;
``CIPHERLAB_SITE`` names another built site than ``_build/html``).
"""

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("CIPHERLAB_SITE", ROOT / "_build" / "html"))  # the built book
SHOTS = SITE.parent / "screenshots"
CHROMIUM = Path(os.environ.get("CIPHERLAB_CHROMIUM", "/usr/bin/chromium"))


def _is_redirect(path: Path) -> bool:  # index.html only sends the browser on to the first page
    return 'http-equiv="refresh"' in path.read_text(encoding="utf-8")[:2000].lower()


PAGES = sorted(p for p in SITE.rglob("*.html") if "_static" not in p.parts and "_sources" not in p.parts
               and not _is_redirect(p)) if SITE.is_dir() else []
# the chapter notebooks' pages (launch buttons, folded cells, explorers); a Markdown page such as chapter 13's is
# checked by the tests of every page only
CHAPTERS = [p for p in PAGES if p.parent.name == "book" and re.match(r"\d\d_", p.name)
            and (ROOT / "book" / f"{p.stem}.ipynb").exists()]


def _why_not() -> str | None:
    if not PAGES:
        return f"no built book at {SITE} (run `jupyter-book build . -W --keep-going` first)"
    if not CHROMIUM.is_file():
        return f"no browser at {CHROMIUM} (`apt-get install -y chromium` as root, or set CIPHERLAB_CHROMIUM)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (`pip install playwright`; it needs no browser download)"
    return None


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")


def _id(path: Path) -> str:
    return str(path.relative_to(SITE))


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield browser
        browser.close()


# Files a page asks for and does not get, known and not the book's own doing (each is a defect to
# fix upstream or in the chapter, listed here so that any new one fails):
KNOWN_MISSING: dict[str, str] = {}  # none: widget icon fonts are self-hosted (_vendor/README.md)

# MathJax typesets after the page has loaded: wait until it has, where the page loads it.
WAIT_FOR_MATHJAX = """async () => {
  for (let i = 0; i < 300; i++) {
    if (!window.MathJax) return;
    if (MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; return; }
    await new Promise(done => setTimeout(done, 100));
  }
  throw new Error("MathJax did not start within 30 s");
}"""

# Script errors known and not the book's own doing, by page: listed so that any other one fails.
KNOWN_ERRORS: dict[str, str] = {}  # none: the task chapter's widget is a Text and an HTML widget, no Output


class Page:
    """One page, opened offline, with its script errors and failed requests collected."""

    def __init__(self, browser, path: Path):
        self.context = browser.new_context(viewport={"width": 1280, "height": 900}, offline=True)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        # a failed load is reported by URL (requestfailed); the console's copy of it names none
        self.page.on("console", lambda m: m.type == "error" and not m.text.startswith("Failed to load resource")
                     and self.errors.append(f"console: {m.text}"))
        self.page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))
        self.known = KNOWN_ERRORS.get(path.name)
        self.page.on("requestfailed", lambda r: not any(re.search(k, r.url) for k in KNOWN_MISSING)
                     and self.errors.append(f"failed to load {r.url}: {r.failure}"))
        self.page.goto(path.as_uri(), wait_until="load")
        self.page.evaluate(WAIT_FOR_MATHJAX)

    def close(self):
        self.context.close()


@pytest.fixture
def open_page(browser):
    opened = []

    def open_(path: Path) -> Page:
        opened.append(Page(browser, path))
        return opened[-1]

    yield open_
    for page in opened:
        page.close()


# Text outside code that still looks like TeX: $...$, $$, \( \) \[ \], \begin{...}, \frac and friends.
RAW_TEX = r"\$[^$\s][^$]*\$|\$\$|\\\(|\\\)|\\\[|\\\]|\\begin\{|\\(frac|sqrt|text|mathrm|sum|top)\b"
TEXT_NODES = """(pattern) => {
  const re = new RegExp(pattern);
  // the flashcards typeset a card's hidden parts when they are revealed (checked in their own test)
  const skip = "pre, code, script, style, textarea, mjx-container, .highlight, svg, .cipherlab-explorer, " +
               ".cipherlab-flashcards [hidden]";
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const found = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || parent.closest(skip)) continue;
    const m = node.textContent.match(re);
    if (m) found.push(node.textContent.slice(Math.max(0, m.index - 30), m.index + 40));
  }
  return found;
}"""


@pytest.mark.parametrize("path", PAGES, ids=_id)
def test_page_has_no_script_errors_and_no_raw_tex(open_page, path):
    page = open_page(path)
    raw = page.page.evaluate(TEXT_NODES, RAW_TEX)
    assert raw == [], f"{_id(path)}: TeX that MathJax did not typeset: {raw[:5]}"
    errors = [e for e in page.errors if not (page.known and re.search(page.known, e))]
    assert errors == [], f"{_id(path)}: {errors[:5]}"


@pytest.mark.parametrize("path", PAGES, ids=_id)
def test_every_folded_answer_starts_closed_and_opens_on_click(open_page, path):
    page = open_page(path).page
    details = page.locator("article details")
    if details.count() == 0:
        return
    closed = details.evaluate_all("all => all.map(d => d.open)")
    assert not any(closed), f"{_id(path)}: <details> {[i for i, o in enumerate(closed) if o]} start open"
    details.first.locator("summary").first.click()  # a real click on the first, then each one's summary
    opened = details.evaluate_all("all => all.map((d, i) => { if (i) d.querySelector('summary').click(); return d.open; })")
    assert all(opened), f"{_id(path)}: <details> {[i for i, o in enumerate(opened) if not o]} did not open on a click"


def _svg(explorer) -> str:
    return explorer.locator("svg").first.inner_html()


def _move(control, page) -> None:
    """Move one Vega control to another value, the way a reader's input does."""
    tag = control.evaluate("e => e.tagName.toLowerCase()")
    if tag == "select":
        options = control.evaluate("e => Array.from(e.options).map(o => o.value)")
        current = control.input_value()
        control.select_option(next(o for o in options if o != current))
    else:
        control.evaluate("""e => {
          e.value = Number(e.value) === Number(e.max) ? e.min : e.max;
          e.dispatchEvent(new Event('input', {bubbles: true}));
        }""")
    page.wait_for_timeout(150)


EXPLORER_PAGES = [p for p in CHAPTERS if "cipherlab-explorer" in p.read_text(encoding="utf-8")]


def test_the_explorers_are_on_their_chapters():
    names = {p.name for p in EXPLORER_PAGES}
    expected = {"02_attention.html", "04_positional.html", "07_blt.html"}
    assert expected <= names, f"no explorer on {sorted(expected - names)} (was the book built with its outputs?)"


@pytest.mark.parametrize("path", EXPLORER_PAGES, ids=_id)
def test_every_explorer_draws_and_every_control_changes_the_picture(open_page, path):
    page = open_page(path).page
    explorers = page.locator(".cipherlab-explorer")
    assert explorers.count() > 0
    SHOTS.mkdir(parents=True, exist_ok=True)
    for i in range(explorers.count()):
        explorer = explorers.nth(i)
        explorer.scroll_into_view_if_needed()
        page.wait_for_function("e => e.getAttribute('data-ready') === 'true'", arg=explorer.element_handle(),
                               timeout=20_000)
        assert explorer.locator("img.cx-still").is_hidden(), "the still picture should give way to the chart"
        stem = f"{path.stem}-{i}"
        explorer.screenshot(path=str(SHOTS / f"{stem}-a.png"))
        controls = explorer.locator(".vega-bindings input[type=range], .vega-bindings select")
        assert controls.count() > 0, f"{stem}: no controls"
        for c in range(controls.count()):
            before = _svg(explorer)
            _move(controls.nth(c), page)
            label = controls.nth(c).evaluate("e => e.closest('label') ? e.closest('label').innerText : e.name")
            assert _svg(explorer) != before, f"{stem}: moving control {c} ({label.strip()!r}) left the picture as it was"
        explorer.screenshot(path=str(SHOTS / f"{stem}-b.png"))  # every control moved


def _hide_cell_count(path: Path) -> int:
    """How many code cells of the page's notebook carry the tag hide-cell (the exercises' solutions)."""
    import nbformat

    cells = nbformat.read(ROOT / "book" / f"{path.stem}.ipynb", as_version=4).cells
    return sum("hide-cell" in c.metadata.get("tags", []) for c in cells if c.cell_type == "code")


@pytest.mark.parametrize("path", CHAPTERS, ids=_id)
def test_folded_solution_cells_hide_their_code_and_output_until_opened(open_page, path):
    """A code cell tagged hide-cell is one closed <details> (myst-nb's "hide above-input"), code and output
    inside: a solution's printed answer is not on the page until the reader opens it. A folded cell that is
    evidence rather than a solution says what it shows (its ``mystnb.code_prompt_show``, "Show ...")."""
    page = open_page(path).page
    folds = page.locator("article .cell.tag_hide-cell > details.hide")
    assert folds.count() == _hide_cell_count(path), f"{_id(path)}: {folds.count()} folded cells"
    for i in range(folds.count()):
        fold = folds.nth(i)
        assert fold.evaluate("d => !d.open") and fold.locator(".cell_input").first.is_hidden()
        summary = fold.locator("summary").first
        toggle = summary.inner_text().lower()
        assert "solution" in toggle or toggle.startswith("show "), summary.inner_text()
        outputs = fold.locator(".cell_output")
        assert outputs.count() == 0 or outputs.first.is_hidden()
        summary.click()
        assert fold.locator(".cell_input").first.is_visible()
        assert outputs.count() == 0 or outputs.first.is_visible()


@pytest.mark.parametrize("path", CHAPTERS, ids=_id)
def test_chapters_have_launch_and_download_buttons(path):
    html = path.read_text(encoding="utf-8")
    assert "colab.research.google.com" in html, f"{_id(path)}: no Colab launch button"
    from cipherbook.viva import repository  # the tag the setup cells clone: Colab opens the same release

    url, branch = repository()
    owner_repo = url.removeprefix("https://github.com/")
    assert f"colab.research.google.com/github/{owner_repo}/blob/{branch}/book/{path.stem}.ipynb" in html, \
        f"{_id(path)}: the Colab button does not open release {branch}"
    assert re.search(rf'href="[^"]*{re.escape(path.stem)}\.ipynb"', html), f"{_id(path)}: no download of the notebook"


@pytest.mark.skipif(not (SITE / "book" / "10_viva_drill.html").is_file(), reason="no built drill page")
def test_flashcards_reveal_mark_and_shuffle_on_the_page(open_page):
    page = open_page(SITE / "book" / "10_viva_drill.html").page
    assert page.locator(".cipherlab-flashcards").count() > 0, "no flashcard deck on the drill page"
    deck = page.locator(".cipherlab-flashcards").first
    assert deck.locator(".fc-fallback").is_hidden(), "the deck's script did not run"
    button = {name: deck.locator("button", has_text=name).first for name in ("reveal", "mark known", "next", "shuffle")}
    lead = deck.locator(".fc-lead").first
    status = deck.locator(".fc-status").first
    question = deck.locator(".fc-question").first
    assert lead.is_hidden()
    button["reveal"].click()
    assert lead.is_visible() and lead.inner_text().strip()
    button["reveal"].click()  # the rest of the answer
    rest = deck.locator(".fc-rest").first
    page.wait_for_timeout(500)
    shown = lead.inner_text() + rest.inner_text()
    assert not re.search(RAW_TEX, shown), f"a revealed card shows raw TeX: {shown[:200]!r}"
    score = status.inner_text()
    button["mark known"].click()
    assert status.inner_text() != score, "marking a card known did not change the score line"
    seen = {question.inner_text()}
    for _ in range(3):
        button["shuffle"].click()
        seen.add(question.inner_text())
    button["next"].click()
    seen.add(question.inner_text())
    assert len(seen) > 1, "shuffle and next left the same question"
    SHOTS.mkdir(parents=True, exist_ok=True)
    deck.screenshot(path=str(SHOTS / "10_viva_drill-flashcards.png"))
