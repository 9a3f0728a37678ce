"""The kernel-less view of a notebook (``cipherbook.viva.view``): CommonMark, code and stored outputs,
one representation per output, no script, the book's cell tags honoured; and every chapter renders."""

import base64
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbformat import v4

from cipherbook.viva.view import notebook_html

BOOK = Path(__file__).resolve().parents[1] / "book"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nSTILLPICTURE").decode("ascii")
DISPLAY_PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nDISPLAYEDFIGURE" * 8).decode("ascii")
WIDGET = "application/vnd.jupyter.widget-view+json"


class _Page(HTMLParser):
    """The parts of a page the tests look at: element counts, the headings' text, the images' sources."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.tags: dict[str, int] = {}
        self.headings: list[str] = []
        self.images: list[str] = []
        self._heading: list[str] | None = None
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        """Count the element; start collecting a heading's text; note an image's source."""
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if re.fullmatch(r"h[1-6]", tag):
            self._heading = []
        if tag == "img":
            self.images.append(dict(attrs).get("src", ""))

    def handle_endtag(self, tag):
        """Close a heading: keep its text, whitespace collapsed."""
        if re.fullmatch(r"h[1-6]", tag) and self._heading is not None:
            self.headings.append(" ".join("".join(self._heading).split()))
            self._heading = None

    def handle_data(self, data):
        """Text inside a heading is the heading's."""
        if self._heading is not None:
            self._heading.append(data)


def _notebook(tmp_path) -> Path:
    """A small notebook with every kind of cell and output the view handles."""
    nb = v4.new_notebook()
    markdown = "# Positions\n\nThe square is $x^2$ and a_b_c stays.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    streams = v4.new_code_cell("print('hi')", outputs=[
        v4.new_output("stream", name="stdout", text=["hello ", "stdout <world>\n"]),
        v4.new_output("stream", name="stderr", text="\x1b[31mwarned on stderr\x1b[0m\n")])
    explorer = ('<div class="cipherlab-explorer"><div class="cx-still">'
                f'<img alt="still" src="data:image/png;base64,{PNG}"></div>'
                '<script type="application/json" class="cx-spec">{"mark": "rect"}</script>'
                '<SCRIPT>document.title = "SCRIPT RAN";</SCRIPT></div>')
    rich = v4.new_code_cell("explore()", execution_count=2, outputs=[
        v4.new_output("execute_result", execution_count=2,
                      data={"text/html": explorer, "image/png": PNG, "text/plain": "<explorer PLAINFALLBACK>"})])
    wrapped_png = "\n".join(DISPLAY_PNG[i:i + 40] for i in range(0, len(DISPLAY_PNG), 40)) + "\n"
    figure = v4.new_code_cell("plt.show()", outputs=[
        v4.new_output("display_data", data={"image/png": wrapped_png, "text/plain": "<Figure FIGUREPLAIN>"},
                      metadata={"image/png": {"width": 321}})])
    table = v4.new_code_cell("display(Markdown(t))", outputs=[
        v4.new_output("display_data", data={"text/markdown": "| loss | acc |\n|---|---|\n| 0.5 | **0.9** |\n",
                                            "text/plain": "<IPython.core.display.Markdown object>"})])
    widget = v4.new_code_cell("Flashcards()", outputs=[
        v4.new_output("display_data", data={
            WIDGET: {"version_major": 2, "version_minor": 0, "model_id": "WIDGETMODELID"},
            "text/plain": "Flashcards(children=(Button(WIDGETFALLBACK)))"})])
    error = v4.new_code_cell("1/0", outputs=[
        v4.new_output("error", ename="ZeroDivisionError", evalue="division by zero",
                      traceback=["\x1b[0;31mTRACEBACKLINE\x1b[0m"])])
    removed = v4.new_code_cell("SECRET_SETUP = 1", metadata={"tags": ["remove-cell"]},
                               outputs=[v4.new_output("stream", name="stdout", text="REMOVEDOUTPUT\n")])
    removed_md = v4.new_markdown_cell("## Hidden heading REMOVEDPROSE", metadata={"tags": ["remove-cell"]})
    only_output = v4.new_code_cell("HIDDEN_INPUT_CODE()", metadata={"tags": ["remove-input"]},
                                   outputs=[v4.new_output("stream", name="stdout", text="SHOWNWITHOUTINPUT\n")])
    only_input = v4.new_code_cell("SHOWN_INPUT_CODE()", metadata={"tags": ["remove-output"]},
                                  outputs=[v4.new_output("stream", name="stdout", text="DROPPEDOUTPUT\n")])
    folded = v4.new_code_cell("FOLDED_CODE()", metadata={"tags": ["hide-input"]},
                              outputs=[v4.new_output("stream", name="stdout", text="FOLDEDOUTPUT\n")])
    nb.cells = [v4.new_markdown_cell(markdown), streams, rich, figure, table, widget, error,
                removed, removed_md, only_output, only_input, folded]
    path = tmp_path / "small.ipynb"
    nbformat.write(nb, str(path))
    return path


@pytest.fixture
def page(tmp_path):
    """The small notebook's page, without MathJax."""
    return notebook_html(_notebook(tmp_path))


def test_markdown_is_commonmark_with_maths_and_tables(page):
    parsed = _Page(page)
    assert page.startswith("<!doctype html>") and "Positions" in parsed.headings
    assert '<span class="fc-math">$x^2$</span>' in page  # the maths kept whole, for MathJax
    assert "a_b_c" in page and "<em>" not in page.split("Positions")[1].split("</p>")[0]
    assert parsed.tags.get("table", 0) == 2  # the markdown cell's and the text/markdown output's


def test_code_and_streams(page):
    assert "<pre class='code'>print(&#x27;hi&#x27;)</pre>" in page
    assert "<pre class='stream'>hello stdout &lt;world&gt;\n</pre>" in page  # list of lines joined, escaped
    assert "<pre class='stream stderr'>warned on stderr\n</pre>" in page  # no colour codes
    assert "\x1b" not in page


def test_html_output_loses_its_scripts_and_shows_the_still_picture(page):
    parsed = _Page(page)
    assert "<script" not in page.lower() and "SCRIPT RAN" not in page and "cx-spec" not in page
    assert '<div class="cx-still"><img alt="still"' in page
    assert f"data:image/png;base64,{PNG}" in parsed.images
    assert "PLAINFALLBACK" not in page  # one representation only: the HTML
    assert parsed.images.count(f"data:image/png;base64,{PNG}") == 1  # the bundle's PNG is not shown twice


def test_png_display_is_a_data_uri_without_line_breaks(page):
    assert f"<img src='data:image/png;base64,{DISPLAY_PNG}' width='321'" in page
    assert "FIGUREPLAIN" not in page


def test_markdown_output_widget_and_error(page):
    assert "<td><strong>0.9</strong></td>" in page and "IPython.core.display.Markdown" not in page
    assert "<pre class='widget'>Flashcards(children=(Button(WIDGETFALLBACK)))</pre>" in page
    assert "version_major" not in page and "WIDGETMODELID" not in page
    assert "<pre class='error'>ZeroDivisionError: division by zero</pre>" in page
    assert "TRACEBACKLINE" not in page


def test_cell_tags(page):
    assert "SECRET_SETUP" not in page and "REMOVEDOUTPUT" not in page and "REMOVEDPROSE" not in page
    assert "HIDDEN_INPUT_CODE" not in page and "SHOWNWITHOUTINPUT" in page
    assert "SHOWN_INPUT_CODE" in page and "DROPPEDOUTPUT" not in page
    assert "FOLDED_CODE" in page and "FOLDEDOUTPUT" in page


def test_mathjax_only_when_asked(tmp_path):
    path = _notebook(tmp_path)
    with_maths = notebook_html(path, mathjax="https://example.org/mathjax.js")
    assert "<script src='https://example.org/mathjax.js'></script>" in with_maths
    assert "SCRIPT RAN" not in with_maths  # the page's own script only; the output's stays removed


def _first_heading(markdown: str) -> str | None:
    """A markdown cell's first heading as plain text, rendered the way the page renders it."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    for opening, inline in zip(tokens, tokens[1:]):
        if opening.type == "heading_open":
            headings = _Page(notebook_html_fragment(f"{opening.markup} {inline.content}")).headings
            return headings[0] if headings else None
    return None


def notebook_html_fragment(markdown: str) -> str:
    """One line of markdown through the same renderer as the page's markdown cells."""
    from cipherbook.viva.flashcards import card_html

    return card_html(markdown)


@pytest.mark.parametrize("chapter", sorted(BOOK.glob("*.ipynb")), ids=lambda p: p.name)
def test_every_chapter_renders_with_its_headings(chapter):
    page = notebook_html(chapter)
    headings = _Page(page).headings
    assert page.startswith("<!doctype html>") and page.endswith("</body>")
    for cell in nbformat.read(str(chapter), as_version=4).cells:
        if cell.cell_type != "markdown" or "remove-cell" in cell.get("metadata", {}).get("tags", []):
            continue
        heading = _first_heading(cell.source)
        if heading:
            assert heading in headings, f"{chapter.name}: heading {heading!r} missing from the view"
    assert "<script" not in page.lower()  # no output or prose script survives


@pytest.mark.parametrize("chapter", sorted(BOOK.glob("*.ipynb")), ids=lambda p: p.name)
def test_no_chapter_shows_a_broken_image_or_a_dead_control_where_no_script_runs(chapter):
    """GitHub's viewer runs no script: an output that draws its picture or its controls with one (a
    matplotlib player's frames and slider) would show a broken image over an empty slider there."""
    page = notebook_html(chapter)
    assert [src[:40] for src in _Page(page).images if not src.startswith("data:image/")] == []
    assert re.findall(r"<(?:input|select|button)\b[^>]*>", page) == []
