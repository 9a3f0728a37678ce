"""Files that are whole or absent: the package's one atomic writer, and the byte-order mark a reader skips.

:func:`write_atomic` is how every file cipherlab writes whole is written (data files, checkpoints, model
exports, results records, tables, tokenizers): a temporary file beside the target, flushed to disk, then
``os.replace``, so that a reader sees the old file or the new one, never half. The package's one lock is
:mod:`cipherlab.runner.lock`. Imports nothing of cipherlab.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["UTF8_BOM", "strip_bom", "write_atomic"]


# --------------------------------------------------------------------------- writing a file whole


def write_atomic(path: str | os.PathLike, content: str | bytes | Callable[[Path], object], *,
                 newline: str | None = None) -> Path:
    """Write ``content`` to ``path`` so that a reader sees the old file or the new one, never half, and a full
    disk or a crash leaves the old file (or none), not a torn or empty one: a temporary file beside it, flushed
    to disk, then ``os.replace``. ``content``: text (UTF-8, ``newline`` as for ``open``), bytes, or a function
    that writes the file at the path it is given (``torch.save``, safetensors' ``save_file``). The file's mode
    is any new file's (``0o666`` less the umask), whatever the writer gave it. The temporary file is removed
    whatever happens; an error of the disk (a full one: ENOSPC while writing, which names no file) is an OSError
    naming ``path``. Returns ``path``."""
    path = Path(path)
    tmp = None
    try:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # one per writer
        tmp = Path(name)
        if callable(content):
            os.close(fd)
            content(tmp)
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        else:
            binary = isinstance(content, bytes)
            with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8", "newline": newline})) as f:
                f.write(content)
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 (safetensors too): as readable as any new file
        os.replace(tmp, path)
    except OSError as e:
        if e.errno is None or not e.strerror or not (e.filename is None or _temporary(path, e.filename)):
            raise
        raise OSError(e.errno, e.strerror, str(path)) from None
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
    return path


def _temporary(path: Path, name) -> bool:
    """Whether ``name`` is one of :func:`write_atomic`'s temporary files for ``path``."""
    other = Path(os.fsdecode(name))
    return other.parent == path.parent and other.name.startswith(f".{path.name}.") and other.name.endswith(".tmp")


def _umask() -> int:
    """The process's file-mode mask (os.umask can only be read by setting it: set it back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# --------------------------------------------------------------------------- input quirks accepted with a note

UTF8_BOM = b"\xef\xbb\xbf"
"""The byte-order mark Windows Notepad writes at the start of UTF-8 files; not part of the text."""


def strip_bom(raw: bytes, path: str | os.PathLike) -> bytes:
    """``raw`` without a leading UTF-8 byte-order mark, saying so in one line on stderr."""
    if not raw.startswith(UTF8_BOM):
        return raw
    print(f"cipherlab: note: {path} starts with a UTF-8 byte-order mark (Windows Notepad writes one); "
          "it is not text, so it was skipped", file=sys.stderr)
    return raw[len(UTF8_BOM):]
