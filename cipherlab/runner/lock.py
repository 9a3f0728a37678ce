"""Folders one run at a time: the package's one lock (``fcntl.flock``).

:class:`own_folder` locks a run's ``--out`` folder, :class:`own_record` one results record, so that two runs never
write into one place at once.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["FolderInUse", "own_folder", "own_record"]


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
