"""A student's ``FILE.py:NAME``: :func:`load_target` imports FILE and returns the object NAME.

Every way it can fail is one line naming the file: a missing or unreadable file, a syntax error (with
its line), an exception at import, no NAME in the file. The import runs under ``--part``'s own limit
(:func:`cipherlab.student.parts._load_in_time`): a file that calls ``sys.exit`` at import, or takes longer
than ``parts.IMPORT_TIME_LIMIT_S`` seconds (a loop at its top level), is stopped and named too.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import inspect
import sys

from cipherlab.runner.errors import require_file, why
from cipherlab.student.parts import _load_in_time


def load_target(target: str):
    """The object NAME defined in FILE of ``FILE.py:NAME``; each way it can fail is a one-line ValueError/OSError,
    a file that calls ``sys.exit`` or loops at import too (the time limit of ``--part``: ``parts._load_in_time``)."""
    return _load_in_time(_import_target, target)


def _import_target(target: str):
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name.isidentifier():
        raise ValueError(f"{target}: expected FILE.py:NAME, the file and the class or function in it, "
                         "e.g. my_attention.py:MyAttention")
    path = require_file(path, "Python file", "check the path to your file")
    module_name = f"_cipherlab_check_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_loader(module_name, importlib.machinery.SourceFileLoader(module_name, str(path)))
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look their module up there
    sys.path.insert(0, str(path.parent.resolve()))  # the student's file may import its neighbours
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise ValueError(f"{path}:{e.lineno}: syntax error ({e.msg}); fix that line and run again") from None
    except Exception as e:
        raise ValueError(f"{path}: importing it raised {why(e)}{_line_in(e, path)}; run `python {path}` to see "
                         "where") from None
    finally:
        sys.path.remove(str(path.parent.resolve()))
    if not hasattr(module, name):
        defined = sorted(n for n, v in vars(module).items()
                         if (inspect.isclass(v) or inspect.isfunction(v)) and v.__module__ == module_name)
        raise ValueError(f"{path}: defines no {name!r}; it defines "
                         + (", ".join(defined) if defined else "no class or function"))
    return getattr(module, name)


def _line_in(e: BaseException, path) -> str:
    """`` at FILE:LINE``, the last line of ``path`` the traceback of ``e`` passes through; "" when none is."""
    lines = [tb.tb_lineno for tb in _frames(e.__traceback__) if tb.tb_frame.f_code.co_filename == str(path)]
    return f" at {path}:{lines[-1]}" if lines else ""


def _frames(tb):
    while tb is not None:
        yield tb
        tb = tb.tb_next
