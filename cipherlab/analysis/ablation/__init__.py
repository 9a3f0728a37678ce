"""The ablation's results, read back and compared.

Training writes one record per configuration into ``results/<run>/`` (``cipherlab train`` and
``cipherlab ablate``; see :func:`cipherlab.runner.evaluate.write_results`). This package reads them back and
turns them into tables, statistics and plots. It says nothing in words: whoever prints what these functions
return states each finding itself.

Its modules, one job each (every public name is re-exported here, so ``ablation.load_run`` works):

- :mod:`~cipherlab.analysis.ablation.records`: where the results live and reading them back, and single facts of a record;
- :mod:`~cipherlab.analysis.ablation.stats`: differences, their standard errors and paired tests, as numbers and rows;
- :mod:`~cipherlab.analysis.ablation.probe_tables`: the tables of the learn and reference ablations and their goals;
- :mod:`~cipherlab.analysis.ablation.tables`: the tables of a run, the targets and the models trained on;
- :mod:`~cipherlab.analysis.ablation.error_analysis`: where the errors are and what they are (``errors.json``);
- :mod:`~cipherlab.analysis.ablation.plots`: the plots, each on one :func:`~cipherlab.analysis.ablation.plots.figure`.

Every table is laid out by :func:`markdown_table` (:mod:`cipherlab.base.markdown`), re-exported here, as is
:data:`cipherlab.data.cipher.PERIOD`. Runs are named by their folder under ``results/``; a path works too.
``$CIPHERLAB_RESULTS_DIR`` points the names at another results folder.
"""

from __future__ import annotations

from cipherlab.data.cipher import PERIOD  # noqa: F401 -- re-exported: ablation.PERIOD
from cipherlab.analysis.ablation import error_analysis, plots, probe_tables, records, stats, tables
from cipherlab.analysis.ablation.error_analysis import *  # noqa: F401,F403 -- re-exported: ablation.NAME
from cipherlab.analysis.ablation.plots import *  # noqa: F401,F403
from cipherlab.analysis.ablation.probe_tables import *  # noqa: F401,F403
from cipherlab.analysis.ablation.records import *  # noqa: F401,F403
from cipherlab.analysis.ablation.stats import *  # noqa: F401,F403
from cipherlab.analysis.ablation.tables import *  # noqa: F401,F403
from cipherlab.base.markdown import markdown_table  # noqa: F401 -- re-exported: ablation.markdown_table

__all__ = sorted([*records.__all__, *stats.__all__, *probe_tables.__all__, *tables.__all__,
                  *error_analysis.__all__, *plots.__all__, "PERIOD", "markdown_table"])
