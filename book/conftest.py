"""pytest settings for the chapter notebooks, which nbval collects (see pytest.ini).

nbval waits a hard-coded 5 seconds for each output message after a cell has finished; on a busy
machine the kernel can take longer to report that it is idle after a long cell (the training in
the attention chapter), and the cell then fails although it ran. Give it a minute.

Each chapter's kernel runs on one thread with no progress bars, as ``python -m cipherbook.viva outputs`` ran it when it
stored the outputs nbval compares with (``cipherbook.viva.outputs.KERNEL_ENV``).

Under ``CIPHERLAB_NUMERICS=<variant>`` (``make numerics``) every chapter runs under a second set of numerical
conditions instead (:data:`NUMERICS`): another CPU's float kernels, two threads, deterministic algorithms,
and the global random generators seeded afresh before every cell. A stored output that changes there
depends on the machine's arithmetic or on random state the cell does not set itself (CONTRIBUTING.md,
"Which outputs are stored and compared").

Every executed cell's Markdown outputs are also checked the way Colab would show them: a MyST
role or directive in them (``show_source``, the drill's answer list, a table) fails the cell,
because outside the built site it would show raw.
"""

import os

import pytest
from nbval.plugin import IPyNbCell

from cipherbook.numerics import PRELUDE, variant
from cipherbook.viva import myst_markup
from cipherbook.viva.outputs import KERNEL_ENV

OUTPUT_TIMEOUT_S = 60


def numerics_variant() -> dict | None:
    """The variant ``CIPHERLAB_NUMERICS`` names, or None; an unknown name stops the run with the choices."""
    try:
        return variant()
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None


def pytest_collection_modifyitems(items):
    for item in items:
        if isinstance(item, IPyNbCell):
            item.output_timeout = OUTPUT_TIMEOUT_S


def markdown_outputs(outputs) -> list[str]:
    """The text/markdown data of a cell's display and result outputs."""
    texts = []
    for out in outputs or []:
        data = out.get("data", {}) if isinstance(out, dict) else getattr(out, "data", {})
        text = data.get("text/markdown")
        if text:
            texts.append("".join(text) if isinstance(text, list) else text)
    return texts


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """Start a chapter's kernel (nbval does it in the first cell's setup) with KERNEL_ENV set,
    without changing the environment of the tests that run in this process."""
    if not isinstance(item, IPyNbCell):
        return (yield)
    variant = numerics_variant()
    env = {**KERNEL_ENV, **(variant["env"] if variant else {})}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return (yield)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _reseed(item, variant: dict) -> None:
    """Seed the kernel's global generators afresh (and set its threads) before ``item``'s cell runs."""
    kernel = item.parent.kernel
    msg_id = kernel.execute_cell_input(PRELUDE.format(**variant), allow_stdin=False)
    kernel.await_reply(msg_id, timeout=OUTPUT_TIMEOUT_S)
    kernel.await_idle(msg_id, timeout=OUTPUT_TIMEOUT_S)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    variant = numerics_variant()
    if variant and isinstance(item, IPyNbCell) and item.cell.cell_type == "code" and not item.options.get("skip"):
        _reseed(item, variant)
    result = yield
    if isinstance(item, IPyNbCell):
        found = [f for text in markdown_outputs(item.test_outputs) for f in myst_markup(text)]
        if found:
            raise AssertionError(f"{item.name}: a Markdown output holds MyST-only markup, shown raw in "
                                 f"Colab and Jupyter: {found[:5]}")
    return result
