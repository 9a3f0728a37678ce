"""What every layer stands on: the configurations and presets (``config``), the device
(``device``), the one atomic writer (``files``) and the Markdown-table writer (``markdown``).

Imports nothing of cipherlab."""
