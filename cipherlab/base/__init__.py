"""What every layer stands on: the configurations and presets (``config``), the device
(``device``), one-line errors (``errors``), the one atomic writer and the one lock (``files``)
and the Markdown-table writer (``markdown``).

Imports only ``cipherlab.models`` (the names of its attention, norm and position types)."""
