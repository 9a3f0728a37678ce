"""The ablation's results, read back and compared (the results chapter).

Training writes one record per configuration into ``results/<run>/`` (``cipherlab train`` and
``cipherlab ablate``; see :func:`cipherlab.pipeline.evaluate.write_results`). This package reads them back and
turns them into tables, statistics and plots, for the book and for ``results/README.md`` alike. It
says nothing in words: the results chapter prints what these functions return and states each finding itself,
with an ``assert`` beside it, so a changed result fails the chapter instead of rewriting its text.

Its modules, one job each (every public name is re-exported here, so ``ablation.load_run`` works):

- :mod:`~cipherlab.analysis.ablation.records`: where the results live and reading them back, and single facts of a record;
- :mod:`~cipherlab.analysis.ablation.reported`: what others reported, the figures the runs are compared with;
- :mod:`~cipherlab.analysis.ablation.stats`: differences, their standard errors and paired tests, as numbers and rows;
- :mod:`~cipherlab.analysis.ablation.probe_tables`: the tables of the learn and reference ablations and their goals;
- :mod:`~cipherlab.analysis.ablation.tables`: the tables of the notes runs, the targets and the models trained on;
- :mod:`~cipherlab.analysis.ablation.error_analysis`: where the errors are and what they are (``errors.json``);
- :mod:`~cipherlab.analysis.ablation.plots`: the plots, each on one :func:`~cipherlab.analysis.ablation.plots.figure`.

What they offer:

- :func:`load_run`, :func:`load_curve`, :func:`load_beam`, :func:`load_generalisation`,
  :func:`load_errors`, :func:`load_calibration`, :func:`load_learn_runs` and :func:`load_reference_runs`
  read the committed files; a missing file is a FileNotFoundError naming it, a broken one a ValueError
  naming the file and what is wrong;
- :data:`REFERENCES` holds the figures others reported -- the course notes (seed 000) and the best
  public results -- each with where it comes from, ``None`` where nothing was stated;
- :func:`comparison_table` is the Markdown table of a run beside those figures;
  :func:`plot_accuracy`, :func:`plot_costs` and :func:`plot_curves` draw them;
- :func:`difference`, :func:`exact_lines_stderr`, :func:`exact_difference_stderr`,
  :func:`rate_difference_stderr` and :func:`single_change_rows` judge each change against C1 by
  exact lines and their binomial standard error; :func:`ablation_table`, :func:`budget_table` and
  :func:`equal_epochs_table` lay them out, at equal minutes and at equal epochs (:data:`EQUAL_EPOCHS_RUN`);
- the learn and reference ablations (:data:`LEARN_RUN`, :data:`REFERENCE_RUN`), several seeds on several
  probe sets: :func:`learn_tables`, :func:`learn_row`, :func:`learn_goal_row` and :func:`learn_goal_values`
  against :data:`LEARN_GOALS`; :func:`reference_tables` and :func:`goals_table` against
  :data:`REFERENCE_GOALS`; :func:`mcnemar`, :func:`paired_rows`, :func:`paired_table` and
  :func:`recipe_comparison` compare the same lines decoded by two models;
- :data:`TARGETS`, :func:`target_rows` and :func:`targets_table`: the goals of the reference run, met or
  not, for every model, decoded freely and length-aware;
- ``errors.json`` (``results/analysis.py``): :func:`decoding_table` compares free with length-aware
  decoding; :func:`profile_rows` finds where in a chunk and at which key phase the errors fall,
  :func:`edits`, :func:`edit_summary` and :func:`prior_favours` what they are, :func:`exact_by_length`
  how exact lines fall with length against independent errors;
- :func:`merge_curves`, :func:`plot_extended`, :func:`extended_table`, :func:`continued_from`,
  :func:`trained_on` and :func:`extension_table`: C2 and C5 trained on, and how, from their records and logs.

Every table is laid out by :func:`markdown_table`, the package's one table writer, which lives in
:mod:`cipherlab.base.markdown` (so that :mod:`cipherlab.pipeline.evaluate`, earlier in the flow, uses it too) and is
re-exported here, as is :data:`cipherlab.data.cipher.PERIOD` (the key's period). The attention maps of the
committed models live in :mod:`cipherlab.analysis.attention_maps`.

Runs are named by their folder under ``results/`` (``"notes/cpu"``, ``"notes/cpu-bits"``, ``"notes/equal-epochs/cpu"``,
``"notes/extended/cpu"``); a path works too.
``$CIPHERLAB_RESULTS_DIR`` points the names at another results folder.
"""

from __future__ import annotations

from cipherlab.data.cipher import PERIOD  # noqa: F401 -- re-exported: ablation.PERIOD
from cipherlab.analysis.ablation import error_analysis, plots, probe_tables, records, reported, stats, tables
from cipherlab.analysis.ablation.error_analysis import *  # noqa: F401,F403 -- re-exported: ablation.NAME
from cipherlab.analysis.ablation.plots import *  # noqa: F401,F403
from cipherlab.analysis.ablation.probe_tables import *  # noqa: F401,F403
from cipherlab.analysis.ablation.records import *  # noqa: F401,F403
from cipherlab.analysis.ablation.reported import *  # noqa: F401,F403
from cipherlab.analysis.ablation.stats import *  # noqa: F401,F403
from cipherlab.analysis.ablation.tables import *  # noqa: F401,F403
from cipherlab.base.markdown import markdown_table  # noqa: F401 -- re-exported: ablation.markdown_table

__all__ = sorted([*records.__all__, *reported.__all__, *stats.__all__, *probe_tables.__all__, *tables.__all__,
                  *error_analysis.__all__, *plots.__all__, "PERIOD", "markdown_table"])
