"""The package's three layers hold: the core, the analysis, the book's tooling.

``LAYERS`` places every module. Within a layer the stages run bottom to top, and a module may
import only from its own stage or the stages below it, across layers too: the core never
imports the analysis or the book's tooling, and the analysis never imports the book's tooling.
``cipherlab.models`` sits at the very bottom: it imports nothing of cipherlab but itself. And
no two modules import each other, directly or through others (imports inside functions count).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "cipherlab"
README = PACKAGE.parent / "README.md"

LAYERS = {
    "core": [
        {"cipherlab.models"},  # torch only
        {"cipherlab", "cipherlab.cipher", "cipherlab.config", "cipherlab.device", "cipherlab.errors",
         "cipherlab.tables", "cipherlab.brown", "cipherlab.letters", "cipherlab.docstrings"},
        {"cipherlab.data", "cipherlab.tokenizers"},
        {"cipherlab.codec", "cipherlab.parts"},
        {"cipherlab.checkpoint"},
        {"cipherlab.train"},
        {"cipherlab.decode"},
        {"cipherlab.metrics", "cipherlab.evaluate", "cipherlab.probes"},
    ],
    "analysis": [
        {"cipherlab.results", "cipherlab.score", "cipherlab.check"},
        {"cipherlab.plan", "cipherlab.attention_maps"},
        {"cipherlab.doctor", "cipherlab.report"},
    ],
    "book": [
        {"cipherlab.explorers", "cipherlab.broken"},
        {"cipherlab.experiments"},
        {"cipherlab.viva"},
    ],
    "entry points": [
        {"cipherlab.cli", "cipherlab.__main__"},
    ],
}
STAGES = [stage for stages in LAYERS.values() for stage in stages]
STAGE = {name: i for i, names in enumerate(STAGES) for name in names}
LAYER = {name: layer for layer, stages in LAYERS.items() for names in stages for name in names}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(p for p in parts if p != "__init__")


def place(module: str) -> str:
    """The LAYERS entry a module belongs to: ``cipherlab.models.blt`` -> ``cipherlab.models``."""
    return ".".join(module.split(".")[:2])


def imports(path: Path) -> set[str]:
    """Every cipherlab module ``path`` imports, at the top or inside a function, absolute or relative.

    ``from cipherlab import train`` counts as importing ``cipherlab.train`` when that is a module.
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


def test_every_module_has_a_place():
    unplaced = sorted({place(m) for m in graph()} - set(STAGE))
    assert not unplaced, f"modules with no place in tests/test_layers.py LAYERS: {unplaced}"


def test_models_import_only_torch_and_themselves():
    outside = [f"{m} imports {i}" for m, targets in graph().items() if place(m) == "cipherlab.models"
               for i in targets if place(i) != "cipherlab.models"]
    assert not outside, "cipherlab.models must import nothing of cipherlab but itself:\n" + "\n".join(outside)


def test_imports_point_down_the_layers():
    backwards = [f"{m} ({LAYER[place(m)]}) imports {i} ({LAYER[place(i)]})"
                 for m, targets in graph().items() for i in targets
                 if place(i) in STAGE and place(m) in STAGE and STAGE[place(i)] > STAGE[place(m)]]
    assert not backwards, "imports against the layers:\n" + "\n".join(backwards)


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


@pytest.mark.parametrize("name", ["decode", "evaluate", "metrics"])
def test_nothing_after_training_imports_the_training_module(name):
    imported = imports(PACKAGE / f"{name}.py")
    assert not {m for m in imported if m == "cipherlab.train" or m.startswith("cipherlab.train.")}


def _top_level() -> set[str]:
    names = {p.stem for p in PACKAGE.glob("*.py") if p.stem not in {"__init__", "__main__"}}
    names |= {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    return names


def test_the_package_docstring_maps_every_module():
    import cipherlab

    mapped = set(re.findall(r"``cipherlab\.(\w+)``", cipherlab.__doc__))
    assert _top_level() - mapped == set(), "add them to cipherlab/__init__.py's map of the layers"
    assert mapped - _top_level() == set(), "the map names modules that do not exist"


def test_the_readme_module_table_follows_the_package():
    text = README.read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `cipherlab[./](\w+)", text, flags=re.M))
    assert _top_level() - listed == set(), "add them to README.md's module table"
    assert listed - _top_level() == set(), "README.md's module table names modules that do not exist"
