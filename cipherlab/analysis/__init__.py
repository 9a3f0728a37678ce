"""Reading runs back and judging them: records, statistics, tables and plots of the runs (``ablation``), text
no model was trained on (``probes``), any predictions scored (``score``), a GPU run estimated
(``plan``), attention maps (``attention_maps``), a checkpoint diagnosed (``doctor``) and the
report's tables and figures (``report``).

Imports every layer below it, never ``cipherlab.cli``."""
