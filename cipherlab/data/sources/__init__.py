"""Where the plaintext comes from: the Brown corpus (``brown``), the embedded official-format
letters (``letters``) and a second source of English, the standard library's docstrings
(``docstrings``)."""
