"""Chapter 10's revision plan: the bank's priority tags, the tiers and days they give, and the drill's
table and list built from them (``cipherbook.viva.priority``). Reads the bank and the stored
notebook only: no facts are computed."""

import re
from pathlib import Path

import nbformat
import pytest
import yaml

from cipherbook.viva import REPO_ROOT, Question, load_bank
from cipherbook.viva.answers import BANK_DIR, PRIORITY_TAGS, load_chapter
from cipherbook.viva.priority import DAYS, TIERS, ranked, revision_day, tier, tier_list

DRILL = REPO_ROOT / "book" / "10_viva_drill.ipynb"


def _q(qid, *tags):
    return Question(qid, "src", f"Question {qid}?", "Answer.", "task", priority=tags)


def test_tier_is_must_know_when_likely_and_costly_next_when_one_read_once_when_neither():
    assert tier(_q("a", "twice", "overclaim")) == tier(_q("b", "ablation", "yours")) == "must-know"
    assert tier(_q("c", "twice", "ablation")) == tier(_q("d", "yours", "overclaim")) == "next"
    assert tier(_q("e")) == "read once"


def test_ranking_puts_tiers_in_order_and_more_reasons_first_then_book_order():
    order = ranked()
    positions = [TIERS.index(tier(q)) for q in order]
    assert positions == sorted(positions)
    book = [q.id for bank in load_bank().values() for q in bank.questions]
    for name in TIERS:
        members = [q for q in order if tier(q) == name]
        keys = [(-len(q.priority), book.index(q.id)) for q in members]
        assert keys == sorted(keys), name


def test_every_tier_is_used_and_must_know_is_a_minority():
    counts = {name: sum(tier(q) == name for q in ranked()) for name in TIERS}
    assert all(counts.values()) and counts["must-know"] < counts["next"]
    assert counts["must-know"] <= sum(counts.values()) // 4


def test_the_ablations_questions_that_correct_the_notes_are_must_know():
    """C2's margin, C3's drop and the C1 -> C4 swap: the notes' one-run trends a student must not repeat."""
    by_id = {q.id: q for q in ranked()}
    for qid in ("000-7.3-8", "000-7.2-7", "000-7.4-7", "000-7.9-2"):
        assert tier(by_id[qid]) == "must-know", qid


def test_days_split_each_tier_in_rank_order_over_its_days():
    order = ranked()
    days = revision_day(order)
    assert set(days) == {q.id for q in order}
    for name in TIERS:
        members = [days[q.id] for q in order if tier(q) == name]
        assert members == sorted(members, reverse=True) and set(members) == set(DAYS[name])
        sizes = [members.count(d) for d in DAYS[name]]
        assert max(sizes) - min(sizes) <= 1


def test_the_tier_list_shows_every_question_once_under_its_tier_with_its_chapter():
    order = ranked()
    text = tier_list(order, lambda n, q: f"**Q{n}.**\n\n<small>{q.source} · id `{q.id}`</small>")
    ids = re.findall(r"id `([^`]+)`", text)
    assert ids == [q.id for q in order]
    headings = [text.index(f"### {name[0].upper()}{name[1:]}") for name in TIERS]
    assert headings == sorted(headings)
    assert "<small>chapter 4 (positional) · " in text


def test_priority_is_one_line_of_known_tags_in_the_bank():
    """The tags sit on one line right after the id (easy to merge with edits of the answers)."""
    for path in sorted(BANK_DIR.glob("*.yml")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines):
            if line.strip().startswith("priority:"):
                assert lines[n - 1].strip().startswith("- id:"), f"{path.name}:{n + 1}"
                assert set(yaml.safe_load(line.strip())["priority"]) <= set(PRIORITY_TAGS)


@pytest.mark.parametrize("bad", ["[twice, often]", "twice", "[yours, yours]"])
def test_a_bad_priority_is_an_error_naming_the_question(tmp_path, bad):
    path = tmp_path / "task.yml"
    path.write_text(f"""chapter: task
notebook: book/01_task.ipynb
questions:
  - id: "x-1"
    priority: {bad}
    source: "s"
    question: "Q?"
    answer: "A."
""", encoding="utf-8")
    with pytest.raises(ValueError, match="question 1: priority must be a list"):
        load_chapter(path)


def test_the_drill_stores_the_ranked_table_and_the_schedule_names_its_days():
    cells = nbformat.read(DRILL, as_version=4).cells
    table = next(c for c in cells if c.get("id") == "priority-table")
    shown = table.outputs[-1]["data"]["text/markdown"]
    must = [q for q in ranked() if tier(q) == "must-know"]
    assert all(" ".join(q.question.split()).split("$")[0][:40] in shown for q in must)
    schedule = next(c for c in cells if c.get("id") == "schedule").source
    for days in DAYS.values():
        assert all(re.search(rf"^\| (\d, )?{d}\b", schedule, re.M) for d in days)
    assert "Mock viva" in schedule and "morning" in schedule


def test_the_kernel_widget_deck_is_left_to_the_tests():
    """The ipywidgets deck is tested in tests/test_flashcards.py, not shown as a cell of the drill."""
    cells = nbformat.read(DRILL, as_version=4).cells
    assert not any(c.cell_type == "code" and re.search(r"^Flashcards\(", c.source, re.M) for c in cells)
    assert Path(REPO_ROOT / "tests" / "test_flashcards.py").read_text().count("Flashcards(") >= 2
