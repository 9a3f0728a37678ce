"""Files that are whole or absent, and folders one run at a time: the package's one atomic writer and its one lock.

:func:`write_atomic` is how every file cipherlab writes whole is written (data files, checkpoints, model
exports, results records, tables, tokenizers): a temporary file beside the target, flushed to disk, then
``os.replace``, so that a reader sees the old file or the new one, never half. :class:`own_folder` and
:class:`own_record` are its one lock (``fcntl.flock``): one run writing in a folder, or one results record, at
a time. Imports nothing of cipherlab.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["FolderInUse", "own_folder", "own_record", "write_atomic"]


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


# --------------------------------------------------------------------------- a run owns its folder


class FolderInUse(OSError):
    """Another process holds the folder's lock: a second writer would mix two runs in one folder."""


class own_folder:  # noqa: N801 - used as a context manager, like open()
    """``with own_folder(out):``: an exclusive lock (``fcntl.flock``) on folder ``out`` for the block, so
    that two runs never write into one folder (two ``train --out X`` at once once logged every epoch
    twice and left one run's weights in the other's best.pt). A second writer gets FolderInUse at once,
    one line naming ``option`` and the folder. The lock ends with the block or the process, even
    one killed by ``kill -9``; where ``fcntl`` does not exist (Windows) the block runs unlocked.
    """

    def __init__(self, folder: str | os.PathLike, option: str = "--out"):
        self.folder, self.option, self._fd = Path(folder), option, None
        self.lock, self.target = self.folder, self.folder  # what is locked; what the block owns

    def __enter__(self) -> Path:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            return self.target
        self.folder.mkdir(parents=True, exist_ok=True)
        while self._fd is None:
            fd = os.open(self.lock, os.O_RDONLY if self.lock == self.folder else os.O_RDONLY | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise FolderInUse(self._in_use()) from None
            if _still_named(self.lock, fd):
                self._fd = fd
            else:  # a lock file removed by the run that held it, just now: lock the one at that name
                os.close(fd)
        return self.target

    def _in_use(self) -> str:
        return (f"{self.option} {self.folder}: another cipherlab run is writing in this folder now; "
                f"wait for it to end, or pass another {self.option} folder")

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            if self.lock != self.folder:
                with contextlib.suppress(OSError):
                    os.unlink(self.lock)  # while still held: a run waiting for it locks a new one
            os.close(self._fd)  # closing the only descriptor releases the lock
            self._fd = None


class own_record(own_folder):  # noqa: N801
    """``with own_record(DIR/<run>/c1.json):``: :class:`own_folder`'s lock on one results record, so that
    two runs of one configuration into one results folder (with different ``--out``) never both write it
    (the second run's record once replaced the first's without a word). The lock is a hidden file beside
    the record (``.c1.json.lock``: the record itself is replaced whole when written, which a lock on it
    would not survive), removed when the block ends; other configurations' records stay free.
    """

    def __init__(self, record: str | os.PathLike, option: str = "--results-dir"):
        super().__init__(Path(record).parent, option)
        self.target = Path(record)
        self.lock = self.folder / f".{self.target.name}.lock"

    def _in_use(self) -> str:
        return (f"{self.option}: {self.target}: another cipherlab run of {self.target.stem} is writing this "
                f"results record now (into another --out folder); wait for it to end, or pass another "
                f"{self.option}")


def _still_named(path: Path, fd: int) -> bool:
    """Whether the open file ``fd`` is still the one at ``path``."""
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False
