"""What every layer stands on: the configurations and presets (``config``), the device
(``device``), one-line errors (``errors``) and the Markdown-table writer (``markdown``).

Imports only ``cipherlab.models`` (the names of its attention, norm and position types)."""
