"""The catalogue of fault classes (``tests/fault_classes.py``) points at real tests, names each class once, and
counts at least 116: the count a closing note gives is ``len(FAULT_CLASSES)``."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from fault_classes import FAULT_CLASSES

ROOT = Path(__file__).resolve().parents[1]


@cache
def _module(file: str) -> tuple[frozenset[str], frozenset[str]]:
    """(the test functions, every string constant) of a test file."""
    tree = ast.parse((ROOT / file).read_text(encoding="utf-8"))
    tests = {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}
    strings = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    return frozenset(tests), frozenset(strings)


def _missing(reference: str) -> str | None:
    """What is wrong with a reference ``tests/FILE.py::TEST`` or ``tests/FILE.py::TEST[ID]``; None if it is a test."""
    file, sep, test = reference.partition("::")
    if not sep or not file.startswith("tests/test_") or not file.endswith(".py") or not (ROOT / file).is_file():
        return f"{reference}: not a test file of tests/"
    name, _, case = test.partition("[")
    tests, strings = _module(file)
    if name not in tests:
        return f"{reference}: no test {name} in {file}"
    if case and case.removesuffix("]") not in strings:
        return f"{reference}: no case {case.removesuffix(']')!r} in {file}"
    return None


def test_every_class_names_tests_that_exist():
    assert all(fault.tests for fault in FAULT_CLASSES)
    problems = [problem for fault in FAULT_CLASSES for ref in fault.tests if (problem := _missing(ref))]
    assert problems == []


def test_no_two_classes_share_a_name():
    names = [fault.name for fault in FAULT_CLASSES]
    assert sorted(name for name in set(names) if names.count(name) > 1) == []


def test_at_least_116_fault_classes_are_tried():
    assert len(FAULT_CLASSES) >= 116


def test_every_fault_test_is_in_the_catalogue():
    """Each test of tests/test_faults_*.py tries a class the catalogue names: a new one is counted, or the test fails."""
    named = {ref.partition("[")[0] for fault in FAULT_CLASSES for ref in fault.tests}
    files = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").glob("test_faults_*.py"))
    unnamed = [f"{file}::{test}" for file in files for test in sorted(_module(file)[0]) if f"{file}::{test}" not in named]
    assert unnamed == []


def test_a_reference_to_no_test_is_found():
    assert _missing("tests/test_faults_fuzz.py::test_a_damaged_export_is_refused_in_one_line[tensor dropped]") is None
    assert "no case" in _missing("tests/test_faults_fuzz.py::test_a_damaged_export_is_refused_in_one_line[no such]")
    assert "no test" in _missing("tests/test_faults_fuzz.py::test_no_such_test")
    assert "not a test file" in _missing("tests/no_such_file.py::test_x")
