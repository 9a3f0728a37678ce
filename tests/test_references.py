"""Every cross-reference in the book's text leads somewhere: "chapter N" to a chapter of ``_toc.yml``,
"§N.M" (or "section N.M") to a ``## N.M ...`` heading of chapter N, and a link to a chapter's file to
that file, the number in its text matching the file's.

The headings are read from the notebooks when the test runs, so a chapter whose sections are
renumbered breaks the references into it here, not in a reader's hands. Read: the markdown cells of
every chapter (the viva cells that ``sync`` generates are left to their bank), ``book/*.md`` and the
viva bank's ``.yml`` text. A "§" that points into the course notes ("Course notes §7.3, Q8",
"the course notes' §4.1", "§7.5 Q6") is not the book's and is skipped.
"""

import re
from pathlib import Path

import nbformat
import pytest
import yaml

from cipherbook import viva
from cipherbook.viva import GENERATED_KEY

ROOT = viva.REPO_ROOT
BOOK = ROOT / "book"
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))

# A broken reference in a bank file, owned by whoever edits the bank, that this test tolerates for
# now: (file name, reference as written). The test fails when a reference listed here resolves
# again (then it leaves the set), so the set only shrinks.
KNOWN_BROKEN_IN_BANK: set[tuple[str, str]] = set()

SECTION_REF = re.compile(r"§\s?(\d+)(?:\.(\d+))?(?:\s?[–-]\s?§?\s?(\d+)\.(\d+))?|\bsections?\s+(\d+)\.(\d+)\b",
                         re.IGNORECASE)
CHAPTER_REF = re.compile(r"\bchapters?\s+(\d+)((?:\s*(?:,|–|-|\band\b|\bor\b|\bto\b)\s*\d+\b)*)", re.IGNORECASE)
CHAPTER_LINK = re.compile(r"\[([^\]]*)\]\((\d\d_[\w-]+\.(?:ipynb|md))(?:#[^)]*)?\)")
NOTES_BEFORE = re.compile(r"notes'?,?\s*\(?$", re.IGNORECASE)  # "course notes §5.5", "The course notes, §5.1"
NOTES_AFTER = re.compile(r"^,?\s?Q\d")  # "§7.1, Q1", "§7.5 Q6": a question of the notes' bank


def _toc_files() -> list[str]:
    files = []
    for part in TOC.get("parts", [{"chapters": TOC.get("chapters", [])}]):
        files += [entry["file"] for entry in part["chapters"]]
    return files


def chapter_files() -> dict[int, Path]:
    """{chapter number: file} for every chapter the table of contents lists."""
    found = {}
    for entry in _toc_files():
        path = next(p for p in (ROOT / f"{entry}.ipynb", ROOT / f"{entry}.md") if p.exists())
        found[int(path.name.split("_")[0])] = path
    return found


HEADING = re.compile(r"^#{2,3} (\d+)\.(\d+)\b", re.MULTILINE)


def headings(path: Path) -> set[tuple[int, int]]:
    """The numbered sections (N, M) of a chapter, read from its ``## N.M`` headings now."""
    if path.suffix == ".ipynb":
        text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
    else:
        text = path.read_text(encoding="utf-8")
    return {(int(a), int(b)) for a, b in HEADING.findall(text)}


def texts() -> list[tuple[str, str]]:
    """(where, text) for every text a reader meets: chapters' markdown cells, book/*.md, bank files."""
    found = []
    for path in sorted(BOOK.glob("*.ipynb")):
        for n, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type == "markdown" and GENERATED_KEY not in cell.metadata:
                found.append((f"{path.name}, cell {n}", cell.source))
    found += [(p.name, p.read_text(encoding="utf-8")) for p in sorted(BOOK.glob("*.md"))]
    found += [(p.name, p.read_text(encoding="utf-8")) for p in sorted(viva.BANK_DIR.glob("*.yml"))]
    return found


def _notes(text: str, match: re.Match) -> bool:
    return bool(NOTES_BEFORE.search(text[max(0, match.start() - 20):match.start()])
                or NOTES_AFTER.match(text[match.end():match.end() + 6]))


def references(text: str) -> list[tuple[str, list[tuple[int, int | None]]]]:
    """(reference as written, [(chapter, section or None), ...]) for each reference into the book."""
    found = []
    for m in SECTION_REF.finditer(text):
        if m.group(5):
            found.append((m.start(), m.group(0), [(int(m.group(5)), int(m.group(6)))]))
            continue
        if _notes(text, m):
            continue
        chapter, first = int(m.group(1)), m.group(2)
        if first is None:
            found.append((m.start(), m.group(0), [(chapter, None)]))
        elif m.group(3) and int(m.group(3)) == chapter:  # a range, §2.9–2.11: every section of it
            found.append((m.start(), m.group(0), [(chapter, k) for k in range(int(first), int(m.group(4)) + 1)]))
        else:
            found.append((m.start(), m.group(0), [(chapter, int(first))]))
    for m in CHAPTER_REF.finditer(text):
        numbers = [int(m.group(1))] + [int(n) for n in re.findall(r"\d+", m.group(2))]
        if re.search(r"[–-]|\bto\b", m.group(2)) and len(numbers) == 2:
            numbers = list(range(numbers[0], numbers[1] + 1))
        found.append((m.start(), m.group(0), [(n, None) for n in numbers]))
    return [(written, targets) for _, written, targets in sorted(found)]


def unresolved(text: str, chapters: dict[int, Path], sections: dict[int, set]) -> list[tuple[str, str]]:
    """(reference as written, why it leads nowhere) for each reference of ``text`` that does."""
    bad = []
    for written, targets in references(text):
        for chapter, section in targets:
            if chapter not in chapters:
                bad.append((written, f"the table of contents has no chapter {chapter}"))
            elif section is not None and (chapter, section) not in sections[chapter]:
                bad.append((written, f"chapter {chapter} ({chapters[chapter].name}) has no section {chapter}.{section}; "
                            f"it has {', '.join(f'{a}.{b}' for a, b in sorted(sections[chapter]))}"))
    for m in CHAPTER_LINK.finditer(text):
        label, target = m.group(1), m.group(2)
        if not (BOOK / target).exists():
            bad.append((m.group(0), f"book/{target} does not exist"))
        said = re.fullmatch(r"chapter (\d+)", label.strip(), re.IGNORECASE)
        if said and int(said.group(1)) != int(target[:2]):
            bad.append((m.group(0), f"the text says chapter {said.group(1)}, the file is chapter {int(target[:2])}"))
    return bad


@pytest.fixture(scope="module")
def book():
    chapters = chapter_files()
    return chapters, {n: headings(p) for n, p in chapters.items()}


def test_every_reference_in_the_book_leads_to_a_chapter_and_section_that_exist(book):
    chapters, sections = book
    broken = {}
    for where, text in texts():
        for problem in unresolved(text, chapters, sections):
            broken.setdefault(where, []).append(problem)
    in_bank = {(where, written) for where, problems in broken.items() if where.endswith(".yml")
               for written, _ in problems}
    assert in_bank - KNOWN_BROKEN_IN_BANK == set(), broken
    assert KNOWN_BROKEN_IN_BANK - in_bank == set(), "these resolve now: take them out of KNOWN_BROKEN_IN_BANK"
    assert {w: p for w, p in broken.items() if not w.endswith(".yml")} == {}


def test_the_table_of_contents_numbers_every_chapter_once():
    chapters = chapter_files()
    assert sorted(chapters) == list(range(1, len(chapters) + 1))


def test_headings_are_read_from_the_chapter_itself():
    chapters = chapter_files()
    found = headings(chapters[8])
    assert (8, 11) in found and all(n == 8 for n, _ in found)


@pytest.mark.parametrize("text, expected", [
    ("as chapter 4, §4.6, shows", [("chapter 4", [(4, None)]), ("§4.6", [(4, 6)])]),
    ("in §2.9–2.11", [("§2.9–2.11", [(2, 9), (2, 10), (2, 11)])]),
    ("Chapters 2–7 built the parts", [("Chapters 2–7", [(n, None) for n in range(2, 8)])]),
    ("chapters 1 and 6", [("chapters 1 and 6", [(1, None), (6, None)])]),
    ("against section 9.1", [("section 9.1", [(9, 1)])]),
    ("Course notes §7.3, Q8", []),
    ("(The course notes, §5.1, say", []),
    ("the course notes' §4.1 calls this", []),
    ("(course notes §5.5)", []),
    ("(§7.5 Q6)", []),
])
def test_the_reference_patterns_find_what_they_must_and_skip_the_course_notes(text, expected):
    assert references(text) == expected


def test_a_reference_to_a_missing_section_or_chapter_or_file_is_reported():
    chapters = {1: BOOK / "01_task.ipynb", 2: BOOK / "02_attention.ipynb"}
    sections = {1: {(1, 1)}, 2: {(2, 1), (2, 2)}}
    assert unresolved("see §1.1, §2.2 and chapter 2", chapters, sections) == []
    assert len(unresolved("see §2.3", chapters, sections)) == 1
    assert len(unresolved("see chapter 3", chapters, sections)) == 1
    assert len(unresolved("[chapter 2](01_task.ipynb)", chapters, sections)) == 1
    assert len(unresolved("[the task](01_gone.ipynb)", chapters, sections)) == 1

