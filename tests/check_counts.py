"""Counts of ``python -m cipherlab check`` on the project's own sets (tests/student_mistakes.py): how many
one-bug classes it catches, how many it misdiagnoses, how many raise a bare exception inside a check, and how
many valid classes it fails (false alarms).

    PYTHONPATH=.:book python tests/check_counts.py        # prints the counts and each miss

A one-bug class of ``ONE_BUG`` is misdiagnosed when its named check does not fail with its words; one of
``STUDY_BUGS`` when a failing line names one of the causes listed as wrong for it. A "bare exception" is a
failing line that is only the text of an exception a check did not expect (``raised ...``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import student_mistakes as mistakes  # noqa: E402
from cipherlab.student import check  # noqa: E402


@dataclass
class Counts:
    bugs: int = 0
    caught: int = 0
    misdiagnosed: list[str] = field(default_factory=list)
    bare: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    valid: int = 0
    false_alarms: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (f"one-bug classes: {self.bugs}, caught {self.caught}, missed {len(self.missed)}, misdiagnosed "
                f"{len(self.misdiagnosed)}, bare exceptions {len(self.bare)}; valid classes: {self.valid}, false "
                f"alarms {len(self.false_alarms)}")


def _run(part: str, obj):
    """The report of ``obj`` as ``part``, or the one line of the InterfaceError it raised."""
    try:
        return check.PARTS[part](obj)
    except check.InterfaceError as e:
        return str(e)


def _failing(report) -> list[str]:
    return [report] if isinstance(report, str) else [f.message for f in report.findings if not f.passed]


def _count(c: Counts, part: str, obj, right) -> None:
    """Run one one-bug class into ``c``: missed, caught and (``right(report)`` false) misdiagnosed, bare."""
    label, report = f"{part}:{obj.__name__}", _run(part, obj)
    c.bugs += 1
    failing = _failing(report)
    if not failing:
        c.missed.append(label)
        return
    c.caught += 1
    if not right(report):
        c.misdiagnosed.append(label)
    if any(m.startswith("raised ") for m in failing):
        c.bare.append(label)


def counts(bugs=None, study=None, valid=None) -> Counts:
    """Run every set (the defaults: ONE_BUG, STUDY_BUGS, VALID + STUDY_VALID + FLOAT64_WARNED) and count."""
    bugs = mistakes.ONE_BUG if bugs is None else bugs
    study = mistakes.STUDY_BUGS if study is None else study
    valid = mistakes.VALID + mistakes.STUDY_VALID + mistakes.FLOAT64_WARNED if valid is None else valid
    c = Counts()
    for part, obj, name, words in bugs:  # misdiagnosed: its named check does not fail with its words
        _count(c, part, obj, lambda report, name=name, words=words: words in report if isinstance(report, str)
               else any(f.name == name and not f.passed and words in f.message for f in report.findings))
    for part, obj, wrong in study:  # misdiagnosed: a failing line names a cause listed as wrong for it
        _count(c, part, obj, lambda report, wrong=wrong: not any(c in m for m in _failing(report) for c in wrong))
    for part, obj in valid:
        c.valid += 1
        if _failing(_run(part, obj)):
            c.false_alarms.append(f"{part}:{obj.__name__}")
    return c


if __name__ == "__main__":
    result = counts()
    print(result)
    for what in ("missed", "misdiagnosed", "bare", "false_alarms"):
        if getattr(result, what):
            print(f"  {what}: {', '.join(getattr(result, what))}")
