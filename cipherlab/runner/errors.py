"""Every error a user can meet, as one line on stderr: what both command lines share.

``python -m cipherlab`` and ``python -m cipherbook.viva`` run each command through
:func:`run_command`: an exception becomes one line, ``PROG: error: MESSAGE``, and a non-zero exit,
never a traceback (``CIPHERLAB_DEBUG=1`` shows the traceback). The message names the file or
value and the fix:

- cipherlab's own errors (ValueError, KeyError, OSError raised with a message) already do;
- an operating-system error (``[Errno 30] Read-only file system: 'out/c2.safetensors'``) becomes
  ``out/c2.safetensors: read-only file system; choose a location on a writable disk``;
- anything else is named as unexpected, first line only;
- an exception raised inside a student's own code (a ``--part`` class, or what ``check`` loads) is the
  student's, never "a bug in cipherlab": ``error in your attention (my_attention.py:12, class MyAttention):
  RuntimeError: ...`` and how to check the part (:func:`blame`, from the files :func:`register_student_code`
  was told of);
- a reader that closes the output pipe early (``decrypt ... | head -1``) is no error: the command
  ends quietly with the shell's exit code for it, 141 (128 + SIGPIPE); an output closed before the
  command starts (``>&-``) or during it is one line saying so.

At the end of the process (``leave_threads=True``) a thread that a student's code started and left running
would keep the interpreter from exiting: one note names it, and the process ends without waiting for it.

:func:`require_file`, :func:`writable_folder` and :func:`writable_file` check inputs and output
locations *before* a command starts its work, so a long run never fails at its end on a path.
:func:`outside_results` keeps every command's output out of the repository's committed ``results/``
(symlinks followed) unless the command says how to write there on purpose.

The command line's own pieces, its one-line usage errors (``OneLineParser``) and the check of ``--device``
as it is read (``device_option``), are argparse's: they are in :mod:`cipherlab.cli.common`. What is here,
both command lines and the library share; it imports no argparse.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "DEBUG_ENV",
    "PartError",
    "SIGPIPE_EXIT",
    "describe",
    "first_line",
    "outside_results",
    "REPO_RESULTS_DIR",
    "blame",
    "register_student_code",
    "require_file",
    "run_command",
    "student_line",
    "student_line_in",
    "student_place",
    "why",
    "writable_file",
    "writable_folder",
]

DEBUG_ENV = "CIPHERLAB_DEBUG"
REPO_RESULTS_DIR = Path(__file__).resolve().parents[2] / "results"
"""The committed reference results (as ``cipherlab.analysis.ablation.REPO_RESULTS_DIR``): no command writes there by accident."""

# What to do about an operating-system error, by its errno.
_FIXES = {
    errno.ENOENT: "check the path",
    errno.EACCES: "choose a location you may use, or change its permissions",
    errno.EPERM: "choose a location you may use, or change its permissions",
    errno.EROFS: "choose a location on a writable disk",
    errno.EISDIR: "that is a folder; pass a file",
    errno.ENOTDIR: "a part of that path is a file, not a folder; check the path",
    errno.EEXIST: "a file of that name is in the way; choose another name",
    errno.ENOSPC: "free some disk space or choose another disk",
    errno.ENAMETOOLONG: "choose a shorter path",
}
_DEFAULT_FIX = "check the path"


class PartError(ValueError):
    """A class given in place of one of cipherlab's that cannot stand in for it, or a model file given other
    classes than it was trained with (:mod:`cipherlab.student.parts` raises it; the pipeline passes it on)."""


def first_line(message: object) -> str:
    """The first non-blank line of a message (torch's and safetensors' run to many lines)."""
    return next((line.strip() for line in str(message).splitlines() if line.strip()), "")


def why(e: BaseException) -> str:
    """``TypeName: first sentence`` of a foreign exception, for the parentheses of a message of ours
    (torch's unpickling errors go on to advise what cipherlab must not do: weights_only=False)."""
    sentence = first_line(e).split(". ")[0]
    return f"{type(e).__name__}: {sentence}" if sentence else type(e).__name__


def _os_message(e: OSError) -> str | None:
    """``PATH: reason; fix`` for an error the operating system raised (it has errno and filename)."""
    if e.errno is None or not e.strerror:
        return None  # raised by cipherlab with its own message
    where = f"{e.filename}: " if e.filename is not None else ""
    return f"{where}{e.strerror[0].lower()}{e.strerror[1:]}; {_FIXES.get(e.errno, _DEFAULT_FIX)}"


def describe(e: BaseException) -> str:
    """One line that says what went wrong (see the module docstring)."""
    if (theirs := blame(e)) is not None:
        return theirs
    if isinstance(e, KeyError) and e.args:
        return first_line(str(e.args[0]))
    if isinstance(e, OSError) and (message := _os_message(e)):
        return message
    if isinstance(e, (ValueError, OSError, KeyError)):
        return first_line(str(e))
    return (f"unexpected {type(e).__name__}: {first_line(str(e))} (a bug in cipherlab; "
            f"{DEBUG_ENV}=1 shows where it happened)")


def run_command(prog: str, command: Callable[..., int], args: object, *, leave_threads: bool = False) -> int:
    """``command(args)``, with any exception turned into one line on stderr and exit code 1 (130 on Ctrl-C).

    ``leave_threads``: this is the whole process (the command line's entry point, never a caller in a test or
    a notebook): when a thread a student's code started is still running, say so in one line and end the
    process now (``os._exit``, after flushing), rather than wait for it forever."""
    code = _run(prog, command, args)
    if leave_threads:
        _end_past_student_threads(prog, code)
    return code


def _run(prog: str, command: Callable[..., int], args: object) -> int:
    if sys.stdout is None or sys.stdout.closed:
        print(f"{prog}: error: standard output is closed (`>&-`?); send it to a file, a pipe or /dev/null "
              "(`> /dev/null`) instead", file=sys.stderr)
        return 1
    try:
        code = command(args)
        sys.stdout.flush()  # a reader that closed the pipe is found here, not at the interpreter's exit
        return code
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except SystemExit as e:
        if (theirs := student_place(e)) is None:
            raise
        code = "" if e.code is None else repr(e.code)
        print(f"{prog}: error: {_your(theirs)} called sys.exit({code}), which would end cipherlab without a word; "
              "raise an exception instead" + _hint(theirs), file=sys.stderr)
        return 1
    except Exception as e:
        if os.environ.get(DEBUG_ENV):
            raise
        if sys.stdout is None or sys.stdout.closed:  # print() to a closed stdout is a ValueError
            print(f"{prog}: error: standard output was closed during the command"
                  + (f", by {_your(theirs)}" if (theirs := student_place(e)) else "")
                  + f" ({first_line(e)}); what it had left to print is lost", file=sys.stderr)
            return 1
        print(f"{prog}: error: {describe(e)}", file=sys.stderr)
        return 1


SIGPIPE_EXIT = 141
"""The exit code of a command whose reader closed its output (``... | head -1``): 128 + SIGPIPE, as the shell's
own tools end; not an error, so nothing is printed."""


def _reader_gone() -> int:
    """End quietly after the reader of stdout went away: what is left unprinted goes to the null device
    (else the interpreter's last flush fails again, with a traceback), and the exit code is SIGPIPE's."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return SIGPIPE_EXIT


# --------------------------------------------------------------------------- a student's own code

_STUDENT_CODE: dict[str, list[tuple[str, str, str, str | None]]] = {}
"""The resolved path of each file a student's code was loaded from -> [(part, file as given, class, hint)]."""


def _resolved(file: str) -> str:
    try:
        return os.path.realpath(file)
    except (OSError, ValueError):
        return file


def register_student_code(file: str | os.PathLike | None, part: str, name: str, hint: str | None = None) -> None:
    """Say that class or function ``name`` of ``file`` is a student's ``part``: an exception raised in that file
    is then the student's (:func:`blame`). ``hint`` is the command that checks the part."""
    if not file:
        return
    entries = _STUDENT_CODE.setdefault(_resolved(str(file)), [])
    entries[:] = [entry for entry in entries if entry[2] != name] + [(part, str(file), name, hint)]


def _entry(path: str, qualnames: list[str]) -> tuple[str, str, str, str | None] | None:
    """The registered (part, file, class, hint) of ``path`` that one of ``qualnames`` (innermost first) is in."""
    entries = _STUDENT_CODE.get(_resolved(path))
    if not entries:
        return None
    for qualname in qualnames:
        found = next((entry for entry in entries if qualname.split(".")[0] == entry[2]), None)
        if found:
            return found
    return entries[-1]


def student_place(e: BaseException) -> tuple[str, str, int, str, str | None] | None:
    """(part, file, line, class, hint) of the innermost frame of ``e``'s traceback in a student's file (see
    :func:`register_student_code`); None when no frame is."""
    frames = []
    tb = e.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame.f_code, tb.tb_lineno))
        tb = tb.tb_next
    theirs = [(code, line) for code, line in frames if _resolved(code.co_filename) in _STUDENT_CODE]
    if not theirs:
        return None
    code, line = theirs[-1]
    qualnames = [getattr(c, "co_qualname", c.co_name) for c, _ in reversed(theirs)]
    part, file, name, hint = _entry(code.co_filename, qualnames)
    return part, file, line, name, hint


def _your(place: tuple) -> str:
    part, file, line, name, _ = place
    return f"your {part} ({file}:{line}, class {name})"


def _hint(place: tuple) -> str:
    return f"; `{place[4]}` tries it on small inputs and says what is wrong" if place[4] else ""


def blame(e: BaseException) -> str | None:
    """``error in your PART (FILE:LINE, class NAME): Type: first line; `python -m cipherlab check ...` ...`` when
    ``e`` was raised inside a student's code (:func:`student_place`); None otherwise."""
    place = student_place(e)
    if place is None:
        return None
    said = first_line(e)
    return f"error in {_your(place)}: {type(e).__name__}{': ' + said if said else ''}{_hint(place)}"


def student_line(e: BaseException) -> str:
    """`` at FILE:LINE`` where ``e`` was raised in a student's code; "" when it was not."""
    place = student_place(e)
    return f" at {place[1]}:{place[2]}" if place else ""


_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)')


def student_line_in(text: str) -> str:
    """`` at FILE:LINE`` of the last frame of a traceback written out in ``text`` (PyTorch's anomaly mode gives
    the forward call of an operation so) that is in a student's file; "" when none is."""
    found = [(file, line) for file, line in _FILE_LINE.findall(text) if _resolved(file) in _STUDENT_CODE]
    if not found:
        return ""
    file, line = found[-1]
    return f" at {_STUDENT_CODE[_resolved(file)][-1][1]}:{line}"


def _student_threads() -> list[tuple[threading.Thread, str | None]]:
    """The threads still running, not daemons, once a student's code has run: (thread, the student's file its code
    is in, None when that is not known: ``target=time.sleep``). [] when no student's code was loaded."""
    if not _STUDENT_CODE:
        return []
    found = []
    for thread in threading.enumerate():
        if thread is threading.main_thread() or thread.daemon or not thread.is_alive():
            continue
        target = getattr(thread, "_target", None)
        code = getattr(target, "__code__", None) or getattr(getattr(type(thread), "run", None), "__code__", None)
        entries = _STUDENT_CODE.get(_resolved(code.co_filename)) if code is not None else None
        found.append((thread, entries[-1][1] if entries else None))
    return found


def _end_past_student_threads(prog: str, code: int) -> None:
    """End the process at once (exit ``code``) when a student's thread is still running; else return."""
    threads = _student_threads()
    if not threads:
        return
    named = ", ".join(thread.name + (f" of {file}" if file else "") for thread, file in threads[:2]) + \
        (f" and {len(threads) - 2} more" if len(threads) > 2 else "")
    with contextlib.suppress(Exception):
        print(f"{prog}: note: your code left {len(threads)} thread{'s' if len(threads) > 1 else ''} running "
              f"({named}); cipherlab ends without waiting for {'them' if len(threads) > 1 else 'it'}: start a thread "
              "with daemon=True, or better none in a part", file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


# --------------------------------------------------------------------------- checks before the work


def require_file(path: str | os.PathLike, what: str, fix: str) -> Path:
    """``path`` as a Path if it is a file; else FileNotFoundError / IsADirectoryError naming it and ``fix``."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path}: a folder, not the {what} expected; {fix}")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such {what}; {fix}")
    return path


def writable_folder(path: str | os.PathLike, option: str) -> Path:
    """Create folder ``path`` if needed and check a file can be written in it, before any work.

    Raises OSError naming ``option`` (e.g. ``--results-dir``), the folder, the reason and the fix.
    """
    path = Path(path)
    _check_writable(path, f"{option} {path}")
    return path


def writable_file(path: str | os.PathLike, option: str) -> Path:
    """Check that file ``path`` can be written (its folder is created if needed), before any work."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{option} {path}: a folder; name a file inside it to write")
    _check_writable(path.parent, f"{option} {path}")
    return path


def outside_results(path: str | os.PathLike, option: str, on_purpose: str | None = None) -> Path:
    """``path`` as a Path unless it lies inside the repository's committed ``results/``; else ValueError
    naming ``option``, the path and how to write there on purpose. Checks only; creates nothing.

    Symlinks are followed: a link into ``results/`` is inside it. ``on_purpose`` is the option's own
    way in (``"--results-dir results"``): a path that names the ``results`` folder itself, not through
    a link to it or into it, is then allowed. Without it, the way in is to write elsewhere and copy.
    """
    path = Path(path)
    committed = next((folder for folder in _committed_results(path.resolve())
                      if _inside(path.resolve(), folder)), None)
    if committed is None:
        return path
    entry = next((p for p in (*reversed(path.absolute().parents), path.absolute())
                  if _inside(p.resolve(), committed)), None)  # where the path, as written, enters results/
    named = entry is not None and entry.name == committed.name and not entry.is_symlink()
    if on_purpose is not None and named:
        return path
    via = "" if named else f" through the link {entry}" if entry is not None else " through a link"
    fix = (f"name the folder itself, as {on_purpose}" if on_purpose is not None
           else "write it elsewhere (e.g. under runs/) and copy it in by hand")
    raise ValueError(f"{option} {path}: inside the repository's committed results folder ({committed}){via}, "
                     f"which no command overwrites unless asked; to change the committed results on purpose, {fix}")


def _committed_results(target: Path) -> list[Path]:
    """The committed ``results/`` folders a resolved ``target`` could lie in: this package's checkout's, and the
    ``results/`` of any cipherlab checkout above ``target`` (one that holds ``results/``, ``cipherlab/`` and a
    ``pyproject.toml`` naming the project cipherlab). The second matters where cipherlab is installed (a wheel,
    ``pip install .``): then the package's own path is under site-packages, and only the target can tell."""
    found = [REPO_RESULTS_DIR.resolve()]
    for folder in (target, *target.parents):
        if folder.name == "results" and folder not in found and _is_checkout(folder.parent):
            found.append(folder)
    return found


def _is_checkout(folder: Path) -> bool:
    """Whether ``folder`` is a cipherlab checkout: ``results/``, ``cipherlab/`` and a pyproject.toml naming it."""
    import tomllib

    try:
        if not ((folder / "results").is_dir() and (folder / "cipherlab").is_dir()):
            return False
        with open(folder / "pyproject.toml", "rb") as f:
            return tomllib.load(f).get("project", {}).get("name") == "cipherlab"
    except (OSError, ValueError, AttributeError):
        return False


def _inside(target: Path, folder: Path) -> bool:
    return target == folder or folder in target.parents


def _check_writable(folder: Path, label: str) -> None:
    in_the_way = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), None)
    if in_the_way is not None:
        raise NotADirectoryError(f"{label}: {in_the_way} is a file, not a folder; choose another location")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        reason = f"{e.strerror[0].lower()}{e.strerror[1:]}" if e.strerror else str(e)
        raise OSError(f"{label}: cannot write in {folder} ({reason}); "
                      f"{_FIXES.get(e.errno, 'choose a folder you can write to')}") from None
