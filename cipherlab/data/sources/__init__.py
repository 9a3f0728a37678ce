"""Where the plaintext comes from: the Brown corpus (``brown``), its official-format letters (``letters``)
and the standard library's docstrings (``docstrings``)."""
