"""The command line, ``python -m cipherlab COMMAND``: one module per command group, each with its
``register_cli(subparsers)``; ``cipherlab/__main__.py`` gathers every command, in this order.

- ``data``: ``data build-brown``, ``build-docstrings``, ``build-letters``, ``cipher``, ``verify``,
  ``export-split``, ``stats`` (the work: :mod:`cipherlab.data.corpus`)
- ``pipeline``: ``train``, ``evaluate``, ``decrypt``, ``export``, ``ablate``
- ``score``: ``score`` (:mod:`cipherlab.analysis.score`)
- ``doctor``: ``doctor`` (:mod:`cipherlab.analysis.doctor`)
- ``plan``: ``plan`` (:mod:`cipherlab.analysis.plan`)
- ``check``: ``check``, ``check handin`` (:mod:`cipherlab.student.check`, :mod:`cipherlab.student.handin`)
- ``report``: ``report`` (:mod:`cipherlab.analysis.report`)
- ``common``: what they share: :class:`~cipherlab.cli.common.OneLineParser` (a usage error is one line) and
  :func:`~cipherlab.cli.common.device_option` (``--device``, checked as it is read)

Only these modules and ``cipherlab/__main__.py`` use argparse (tests/test_layers.py checks it); the
library functions that do each command's work stay in their own layers and are imported from here.
"""
