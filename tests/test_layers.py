"""The package's folders are its layers, and imports follow them.

``FOLDERS`` lists the folders of ``cipherlab/`` from the bottom up, each with the folders it may
import from: a module imports only from its own folder and those. ``cipherlab.models`` imports
nothing of cipherlab but itself; the command line may import anything. No two modules import each
other, directly or through others (imports inside functions count), and nothing in the library
imports or reads the book's own tools (``book/cipherbook``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "cipherlab"
README = PACKAGE.parent / "README.md"

FOLDERS = {
    "models": set(),
    "base": set(),
    "data": {"base", "models"},
    "pipeline": {"data", "base", "models"},
    "runner": {"pipeline", "data", "base", "models"},
    "student": {"runner", "pipeline", "data", "base", "models"},
    "analysis": {"runner", "pipeline", "student", "data", "base", "models"},
    "cli": {"analysis", "runner", "pipeline", "student", "data", "base", "models"},
}
ROOT_MODULES = {"cipherlab": set(), "cipherlab.__main__": set(FOLDERS)}  # the package itself; the entry point


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(p for p in parts if p != "__init__")


def place(module: str) -> str:
    """The folder a module sits in: ``cipherlab.models.blt`` -> ``models``; the root modules are their own."""
    if module in ROOT_MODULES:
        return module
    return module.split(".")[1]


def imports(path: Path) -> set[str]:
    """Every cipherlab module ``path`` imports, at the top or inside a function, absolute or relative.

    ``from cipherlab import train`` counts as importing ``cipherlab.pipeline.train`` when that is a module.
    """
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = parts if path.name == "__init__.py" else parts[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            for alias in node.names:
                name = f"{module}.{alias.name}"
                if _exists(name):
                    found.add(name)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if (m == "cipherlab" or m.startswith("cipherlab.")) and _exists(m)}


def _exists(module: str) -> bool:
    rel = Path(*module.split("."))
    return (PACKAGE.parent / rel.with_suffix(".py")).exists() or (PACKAGE.parent / rel / "__init__.py").exists()


def graph() -> dict[str, set[str]]:
    """module -> the cipherlab modules it imports (its own package's ``__init__`` left out)."""
    edges = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        edges[name] = {m for m in imports(path) if m != name}
    return edges


def test_every_module_sits_in_a_layer_folder():
    unplaced = sorted(m for m in graph() if m not in ROOT_MODULES and place(m) not in FOLDERS)
    assert not unplaced, f"modules outside the layer folders of tests/test_layers.py FOLDERS: {unplaced}"


def test_models_import_only_torch_and_themselves():
    outside = [f"{m} imports {i}" for m, targets in graph().items() if place(m) == "models"
               for i in targets if place(i) != "models"]
    assert not outside, "cipherlab.models must import nothing of cipherlab but itself:\n" + "\n".join(outside)


def allowed(module: str) -> set[str]:
    folder = place(module)
    return ROOT_MODULES[module] if module in ROOT_MODULES else FOLDERS[folder] | {folder}


def test_each_folder_imports_only_from_the_folders_below_it():
    backwards = [f"{m} ({place(m)}) imports {i} ({place(i)})" for m, targets in graph().items() for i in targets
                 if i != "cipherlab" and place(i) not in allowed(m)]
    assert not backwards, "imports against the layers:\n" + "\n".join(backwards)


def test_the_folder_rule_sees_a_wrong_import():
    assert "pipeline" not in allowed("cipherlab.data.corpus")
    assert "models" in allowed("cipherlab.pipeline.train") and "analysis" not in allowed("cipherlab.pipeline.train")


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _package_edges(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """Leave out a package's ``__init__`` importing its own submodules (that is how it re-exports)."""
    return {m: {i for i in targets if not i.startswith(m + ".")} for m, targets in edges.items()}


def test_no_import_cycles():
    cycles = _cycles(_package_edges(graph()))
    assert not cycles, "modules that import each other:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("name", ["pipeline/decode", "pipeline/metrics", "runner/evaluate"])
def test_nothing_after_training_imports_the_training_module(name):
    imported = imports(PACKAGE / f"{name}.py")
    assert not {m for m in imported if m == "cipherlab.pipeline.train" or m.startswith("cipherlab.pipeline.train.")}


def _folders() -> set[str]:
    return {p.parent.name for p in PACKAGE.glob("*/__init__.py")}


def test_the_folders_are_the_layers():
    assert _folders() == set(FOLDERS), "a folder of cipherlab/ that is not a layer, or a layer with no folder"
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in {"__init__.py", "__main__.py"})
    assert not loose, f"modules outside the layer folders: {loose}"


def test_the_package_docstring_maps_every_folder():
    import cipherlab

    mapped = set(re.findall(r"``cipherlab\.(\w+)``", cipherlab.__doc__))
    assert mapped == set(FOLDERS), "cipherlab/__init__.py's map of the layers does not match the folders"


def test_the_readme_folder_table_follows_the_package():
    text = README.read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `cipherlab/(\w+)/`", text, flags=re.M))
    assert listed == set(FOLDERS), "README.md's folder table does not match the folders"


BOOK_FILES = re.compile(r"cipherbook|_config\.yml|_toc\.yml|[\"'/]book[\"'/]|\.ipynb|benchmarks/")


def test_the_library_reads_none_of_the_books_files():
    """The book's tools import the library; the library neither imports them nor opens the book's files."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                found += [f"{path.relative_to(PACKAGE.parent)}:{node.lineno} imports {n}" for n in names
                          if n.split(".")[0] == "cipherbook"]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                if BOOK_FILES.search(node.value):
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} names {node.value[:60]!r}")
    assert not found, "the library reaches into the book:\n" + "\n".join(found)


CORE = ("models", "data", "pipeline", "base")  # the code a student reads beside the chapters
BOOK_WORDS = re.compile(r"results/|\bchapters?\b|course notes|\bthe book\b|§", flags=re.I)


def book_mentions(text: str, name: str) -> list[str]:
    """``NAME:LINE`` of each line of ``text`` (code, docstring or comment) that names the repository's runs, the book,
    its chapters or the course notes."""
    return [f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if BOOK_WORDS.search(line)]


def test_the_core_forgets_the_book():
    """The core says what it does, not where the book or a committed run uses it: those notes live in book/cipherbook
    and the results/ READMEs."""
    found = [hit for folder in CORE for path in sorted((PACKAGE / folder).rglob("*.py"))
             for hit in book_mentions(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE.parent)))]
    assert not found, "the core names the book or its runs:\n" + "\n".join(found)


def test_the_book_rule_sees_a_mention():
    text = '"""The fast learner."""\n# timed in results/bpe\nx = 1  # see Chapter 6\ny = "the course notes\' recipe"\n'
    assert book_mentions(text, "f.py") == ["f.py:2", "f.py:3", "f.py:4"]


def test_the_core_stays_small_and_writes_one_way():
    """The size goals of the core, and one atomic writer (base/files.py) and one lock (runner/lock.py) in the package."""
    lines = {folder: sum(len(p.read_text(encoding="utf-8").splitlines()) for p in (PACKAGE / folder).rglob("*.py"))
             for folder in CORE}
    assert sum(lines.values()) <= 6500, f"the core has grown to {sum(lines.values())} lines (goal 6,500): {lines}"
    train = len((PACKAGE / "pipeline" / "train.py").read_text(encoding="utf-8").splitlines())
    assert train <= 350, f"pipeline/train.py has {train} lines (goal 350): move what is not training out"
    uses = {word: sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                         if re.search(rf"\b{word}\(", p.read_text(encoding="utf-8")))
            for word in ("os.replace", "fcntl.flock")}
    assert uses == {"os.replace": ["base/files.py"], "fcntl.flock": ["runner/lock.py"]}, uses


COMMAND_LINE = ("cli", "__main__.py")  # where argparse may be used: cipherlab/cli/ and cipherlab/__main__.py


def argparse_imports(source: str) -> list[int]:
    """The lines of ``source`` that import argparse (``import argparse``, ``import argparse as ap``,
    ``from argparse import ...``), at the top or inside a function."""
    return sorted(node.lineno for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "argparse" for a in node.names)
                  or isinstance(node, ast.ImportFrom) and not node.level
                  and (node.module or "").split(".")[0] == "argparse")


def argparse_users(package: Path) -> list[str]:
    """``FILE:LINE`` of every import of argparse in ``package`` outside its command line (:data:`COMMAND_LINE`)."""
    return [f"{path.relative_to(package.parent).as_posix()}:{line}" for path in sorted(package.rglob("*.py"))
            if path.relative_to(package).parts[0] not in COMMAND_LINE
            for line in argparse_imports(path.read_text(encoding="utf-8"))]


def test_only_the_command_line_uses_argparse():
    """The flags, their parsing and the handlers that take ``args`` live in ``cipherlab/cli/``, one module per
    command group; the library below it is called with plain values."""
    found = argparse_users(PACKAGE)
    assert not found, "argparse outside cipherlab/cli/ (move that command line there):\n" + "\n".join(found)


def test_the_argparse_rule_sees_an_import(tmp_path):
    source = ("import json\n"
              "import argparse\n"
              "from argparse import ArgumentParser\n"
              "import os, argparse as ap\n"
              "def f():\n"
              "    from argparse import Namespace\n"
              "from .argparse import x\n"  # a module of the package's own, not argparse
              "import argparsex\n")
    assert argparse_imports(source) == [2, 3, 4, 6]
    package = tmp_path / "cipherlab"
    for name, text in {"__init__.py": "", "__main__.py": "import argparse\n", "cli/data.py": "import argparse\n",
                       "data/corpus.py": "import json\n\ndef main():\n    import argparse\n",
                       "base/errors.py": "from argparse import ArgumentParser\n"}.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text, encoding="utf-8")
    assert argparse_users(package) == ["cipherlab/base/errors.py:1", "cipherlab/data/corpus.py:4"]
