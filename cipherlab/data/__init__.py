"""The data: the cipher (``cipher``), the corpus, its splits and chunks (``corpus``), the recipes behind the
plaintext files (``sources``) and the tokenizers (``tokenizers``)."""
