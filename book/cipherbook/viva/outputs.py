"""The chapters' stored outputs: what a reader sees before running anything.

Every chapter is committed with the outputs of a clean execution of its committed code, so the
notebook on GitHub, a chapter opened in Colab or JupyterLab, and the built site (which builds from
the stored outputs, ``execute_notebooks: off``) all show the numbers, tables and figures the
sentences talk about. nbval then runs each chapter in the tests and compares every cell's fresh
output with the stored one (``tests/nbval_sanitize.cfg`` names what may vary).

``python -m cipherbook.viva outputs [NOTEBOOK ...]`` (``make outputs``) regenerates them:

- each notebook in a fresh kernel, started in ``book/`` like the build's and nbval's;
- on ONE thread and without progress bars (``KERNEL_ENV``), so a number does not depend on how
  many cores the machine has or how busy they are;
- then made stable across runs (:func:`stabilise`): the widgets' random model ids become ids
  derived from the notebook and the widget's order, and no cell keeps a timing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

# One thread; no progress bars (a bar is a widget whose stored state would say nothing useful).
KERNEL_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "PYTHONHASHSEED": "0", "TQDM_DISABLE": "1"}
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
CELL_TIMEOUT_S = 1800
# A random 32-hex id in an HTML output (a matplotlib animation or an ipywidgets view draws one per call)
RANDOM_HEX_ID = re.compile(r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])")


def kernel_env() -> dict[str, str]:
    """The environment a chapter's kernel runs in, here and under nbval: this one, on one thread."""
    return {**os.environ, **KERNEL_ENV}


def _widget_ids(nb) -> list[str]:
    """The widget model ids of a notebook, in the order they appear in its saved state."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    return list(state)


def _stable_id(name: str, kind: str, n: int) -> str:
    return hashlib.sha256(f"{name}:{kind}:{n}".encode()).hexdigest()[:32]


def _stable_html_ids(nb, name: str) -> None:
    """Replace the random 32-hex ids in HTML outputs by ids derived from the notebook and their order."""
    mapping: dict[str, str] = {}

    def stable(match: re.Match) -> str:
        return mapping.setdefault(match.group(0), _stable_id(name, "html", len(mapping)))

    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "text/html" in data:
                html = data["text/html"]
                html = "".join(html) if isinstance(html, list) else html
                data["text/html"] = RANDOM_HEX_ID.sub(stable, html)


def coalesce_streams(cell) -> None:
    """Join consecutive stdout (or stderr) outputs into one: how the kernel split a cell's printing
    into messages varies from run to run, the text does not."""
    merged = []
    for out in cell.get("outputs", []):
        if merged and out.get("output_type") == "stream" and merged[-1].get("output_type") == "stream" \
                and merged[-1].get("name") == out.get("name"):
            merged[-1]["text"] = _text(merged[-1]["text"]) + _text(out["text"])
        else:
            merged.append(out)
    if "outputs" in cell:
        cell["outputs"] = merged


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def stabilise(nb, name: str):
    """Make an executed notebook the same on every run: stable widget and HTML ids, one output per
    run of printing, no timings."""
    ids = _widget_ids(nb)
    mapping = {old: _stable_id(name, "widget", n) for n, old in enumerate(ids)}
    if mapping:
        text = json.dumps(nb.metadata["widgets"])
        for old, new in mapping.items():
            text = text.replace(old, new)
        nb.metadata["widgets"] = json.loads(text)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        coalesce_streams(cell)
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get(WIDGET_VIEW)
            if view and view.get("model_id") in mapping:
                view["model_id"] = mapping[view["model_id"]]
    _stable_html_ids(nb, name)
    return nb


def execute(path: Path):
    """Run a chapter in a fresh kernel on one thread; the executed, stabilised notebook."""
    import nbformat
    from nbclient import NotebookClient

    path = Path(path).resolve()
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata.pop("widgets", None)
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}},
                            record_timing=False, store_widget_state=True)
    client.execute(env=kernel_env())
    return stabilise(nb, path.name)


def write_outputs(path: Path) -> bool:
    """Execute a chapter and store its outputs; True when the file changed."""
    import nbformat

    path = Path(path)
    before = path.read_text(encoding="utf-8")
    after = nbformat.writes(execute(path)) + "\n"
    if after != before:
        path.write_text(after, encoding="utf-8")
    return after != before
