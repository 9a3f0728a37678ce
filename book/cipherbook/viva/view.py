"""A chapter notebook as GitHub's notebook viewer and a freshly opened Colab show it: no kernel.

Where no kernel runs, a notebook shows its CommonMark (with HTML), its code, and the outputs stored
with it, one representation per output, picked by a fixed priority; no script runs and no widget
manager draws a widget. :func:`notebook_html` renders a notebook that way as one HTML page, so a
chapter's stored outputs can be looked at (and screenshotted) as a student who opens the file sees them:

- markdown through ``card_html`` (CommonMark with tables, the maths set aside for MathJax);
- code cells as plain blocks, each followed by its stored outputs: streams (stderr tinted), errors
  as ``ename: evalue``, and rich outputs by :data:`MIME_ORDER`, HTML with its scripts removed (so an
  explorer shows its still picture), an ipywidgets view as its ``text/plain`` fallback;
- the book's cell tags honoured: ``remove-cell`` leaves a cell out, ``remove-input`` shows only its
  outputs, ``remove-output`` only its input (``hide-input`` and ``hide-cell``, an exercise's
  solution, show both, as nothing folds here).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from cipherbook.viva.flashcards import card_html

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# The representation a frontend without a kernel shows: the first of these an output holds.
MIME_ORDER = ("text/html", "image/png", "image/jpeg", "image/svg+xml", "text/markdown", "text/latex",
              "text/plain")
# A whole script element, or an unclosed one to the end (a browser reads the rest as its script).
_SCRIPT = re.compile(r"<script\b[^>]*>.*?(?:</script\s*>|\Z)", re.IGNORECASE | re.DOTALL)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")

_STYLE = ("body{max-width:50em;margin:2em auto;font-family:sans-serif} pre.code{background:#f3f3f3;padding:.5em}"
          " pre{white-space:pre-wrap;overflow-wrap:anywhere}"
          " div.output{margin:.3em 0 1em 1em;overflow-x:auto} div.output img{max-width:100%}"
          " pre.stream{margin:.2em 0;padding:.3em .5em} pre.stderr{background:#fdecec}"
          " pre.error{background:#fdd;color:#900;padding:.3em .5em} pre.widget{color:#555;font-style:italic}"
          " table{border-collapse:collapse} th,td{border:1px solid #ccc;padding:.2em .5em}")


def _text(value) -> str:
    """A notebook string field as one string: nbformat may store it as a list of lines."""
    return "".join(value) if isinstance(value, list) else str(value or "")


def without_scripts(markup: str) -> str:
    """HTML with every ``<script>`` element removed, as GitHub's sanitiser does: nothing in it runs."""
    return _SCRIPT.sub("", markup)


def _plain(text: str) -> str:
    """Terminal text as a page shows it: colour codes dropped, each carriage return overwriting its line."""
    text = _ANSI.sub("", text)
    return "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))


def _tags(cell) -> set[str]:
    """A cell's tags (``metadata.tags``), as a set."""
    return set(cell.get("metadata", {}).get("tags", []) or [])


def _image(mime: str, data, meta: dict) -> str:
    """An image output as ``<img>`` with a data URI (base64 with its line breaks removed) and its stored size."""
    if mime == "image/svg+xml":  # stored as text; as an <img> it shows but runs nothing
        import base64

        payload = base64.b64encode(_text(data).encode("utf-8")).decode("ascii")
    else:
        payload = re.sub(r"\s+", "", _text(data))
    size = "".join(f" {key}='{int(meta[key])}'" for key in ("width", "height")
                   if isinstance(meta.get(key), (int, float)))
    return f"<img src='data:{mime};base64,{payload}'{size} alt='output'>"


def rich_output_html(output) -> str:
    """One ``display_data`` or ``execute_result`` as a kernel-less frontend shows it: one representation."""
    data = output.get("data", {})
    metadata = output.get("metadata", {})
    if WIDGET_VIEW in data and "text/plain" in data:  # no widget manager runs: the fallback text
        return f"<pre class='widget'>{html.escape(_text(data['text/plain']))}</pre>"
    mime = next((m for m in MIME_ORDER if m in data), None)
    if mime is None:
        return ""
    value = data[mime]
    if mime == "text/html":
        return f"<div class='html'>{without_scripts(_text(value))}</div>"
    if mime.startswith("image/"):
        return _image(mime, value, metadata.get(mime, {}) or {})
    if mime == "text/markdown":
        return f"<div class='markdown'>{without_scripts(card_html(_text(value)))}</div>"
    if mime == "text/latex":  # the TeX as it is, for MathJax when the page loads it
        return f"<div class='latex'>{html.escape(_text(value), quote=False)}</div>"
    return f"<pre class='text'>{html.escape(_plain(_text(value)))}</pre>"


def output_html(output) -> str:
    """One stored output of a code cell as HTML (streams, errors and rich outputs; anything else shows nothing)."""
    kind = output.get("output_type")
    if kind == "stream":
        name = output.get("name", "stdout")
        css = "stream stderr" if name == "stderr" else "stream"
        return f"<pre class='{css}'>{html.escape(_plain(_text(output.get('text'))))}</pre>"
    if kind == "error":
        line = _plain(f"{output.get('ename', '')}: {output.get('evalue', '')}")
        return f"<pre class='error'>{html.escape(line)}</pre>"
    if kind in ("display_data", "execute_result"):
        return rich_output_html(output)
    return ""


def cell_html(cell) -> str:
    """One cell as GitHub or Colab shows it without a kernel, its book tags honoured ('' for a left-out cell)."""
    tags = _tags(cell)
    if "remove-cell" in tags:
        return ""
    if cell.cell_type == "markdown":
        return without_scripts(card_html(_text(cell.source)))
    if cell.cell_type != "code":
        return ""
    parts = []
    if "remove-input" not in tags:
        parts.append(f"<pre class='code'>{html.escape(_text(cell.source))}</pre>")
    if "remove-output" not in tags:
        shown = [piece for piece in map(output_html, cell.get("outputs", [])) if piece]
        if shown:
            parts.append(f"<div class='output'>{''.join(shown)}</div>")
    return "".join(parts)


def notebook_html(notebook: Path, mathjax: str | None = None) -> str:
    """A notebook with its stored outputs as one HTML page, the way GitHub's viewer and a fresh Colab show it.

    ``mathjax`` is a URL of MathJax 3 to typeset the ``$...$`` maths with; without it the TeX shows as written.
    """
    import nbformat

    cells = nbformat.read(str(notebook), as_version=4).cells
    body = "".join(cell_html(cell) for cell in cells)
    script = ("<script>window.MathJax = {tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']]}};</script>"
              f"<script src='{mathjax}'></script>") if mathjax else ""
    return f"<!doctype html><meta charset='utf-8'><style>{_STYLE}</style>{script}<body>{body}</body>"
