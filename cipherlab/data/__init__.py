"""The data: the cipher (``cipher``), the corpus and its splits and chunks (``corpus``), the
recipes behind the plaintext files (``sources``) and the tokenizers (``tokenizers``: BPE from
scratch for C1-C4, bytes for C5).

Imports only ``cipherlab.base``."""
