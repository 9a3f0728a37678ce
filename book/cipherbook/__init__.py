"""cipherbook: the book's own tools, kept out of the cipherlab library that students install.

The chapters import it beside cipherlab: ``viva`` (the viva bank, the facts sync, the drill,
flashcards, the stored outputs), ``experiments`` (each chapter's experiments), ``explorers``
(Vega-Lite explorers), ``broken`` (deliberately broken variants and the checks that catch
them) and ``runs`` (the book's runs under ``results/`` and the figures others reported). It lives in the repository's ``book/`` folder: a notebook there imports it directly, the
chapters' setup cell puts it on the path in Colab, and ``pip install -e book`` installs it for
the tests and the ``python -m cipherbook.viva`` commands.
"""
