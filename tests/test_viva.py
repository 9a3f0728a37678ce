"""The viva bank: it parses, it covers every seed question exactly once, its facts compute,
and the cells `python -m cipherbook.viva sync` writes are stable."""

import re

import nbformat
import pytest

from cipherbook import viva
from cipherbook.viva import answers
from cipherbook.viva import (GENERATED_KEY, Question, cited_facts, compute_facts, expected_notebook, fill_facts,
                            load_bank, myst_markup, prose_facts, refill_prose, render_question,
                            setup_cell_source, viva_cells)
from cipherbook.viva.facts import load_facts


def _ids(prefix, numbers):
    return [f"{prefix}-{n}" for n in numbers]


# Every question of seed 000 §7 and of seed 001's blank-page sections and quiz, by chapter.
PART1 = {
    "task": ["000-7.7-8", "000-7.8-2"],
    "attention": _ids("000-7.1", [1, 2, 3, 4, 7, 8]) + _ids("001-S107", [1, 2, 3]) + _ids("001-S108", [1, 2, 3])
    + _ids("001-quiz", [2, 3]),
    "mha": _ids("000-7.1", [5, 6]) + _ids("000-7.2", range(1, 8)) + _ids("001-S109", [1, 2, 3])
    + _ids("001-quiz", [4, 5]),
    "positional": _ids("000-7.3", range(1, 11)) + _ids("001-S110", [1, 2, 3]),
    "norm": _ids("000-7.4", range(1, 9)),
    "bpe": _ids("000-7.5", range(1, 8)) + _ids("001-S106", [1, 2, 3]) + ["001-quiz-1"],
}
# Part 2: 000 §7.6-7.9 (7.7 Q8 and 7.8 Q2 live in "task" above).
PART2 = {
    "blt": _ids("000-7.6", range(1, 11)),
    "training": _ids("000-7.7", [1, 2, 3, 4, 5, 6, 7, 9, 10]),
    "results": _ids("000-7.8", [1, 3, 4, 5, 6, 7]) + _ids("000-7.9", range(1, 7)),
}
MASTER = {**PART1, **PART2}
# cipherlab's own questions, in the course notes' "what would break if ..." style: not from a seed,
# so outside the master list, each answered from its chapter's measurements.
OWN = {"broken": _ids("cipherlab-11", range(1, 8)), "bpe": _ids("cipherlab-6", [1, 2]), "training": ["cipherlab-8-1"]}
OWN_ID = re.compile(r"^cipherlab-(\d+)-(\d+)$")
# Each chapter's questions in bank order: its seed questions, then cipherlab's own.
ASSIGNED = {chapter: MASTER.get(chapter, []) + OWN.get(chapter, []) for chapter in {**MASTER, **OWN}}

# How many questions each seed section has, to check the master list itself.
PART1_SECTIONS = {"000-7.1": 8, "000-7.2": 7, "000-7.3": 10, "000-7.4": 8, "000-7.5": 7,
                  "001-S106": 3, "001-S107": 3, "001-S108": 3, "001-S109": 3, "001-S110": 3, "001-quiz": 5}
SECTION_SIZES = {**PART1_SECTIONS, "000-7.6": 10, "000-7.7": 10, "000-7.8": 7, "000-7.9": 6}


def _section(qid):
    return qid.rsplit("-", 1)[0]


def _by_section(ids):
    by_section = {}
    for qid in ids:
        by_section.setdefault(_section(qid), []).append(int(qid.rsplit("-", 1)[1]))
    return by_section


def test_master_list_holds_each_part1_seed_question_exactly_once():
    ids = [q for chapter in PART1.values() for q in chapter]
    assert len(ids) == len(set(ids))
    by_section = _by_section(ids)
    for section, size in PART1_SECTIONS.items():
        assert sorted(by_section.get(section, [])) == list(range(1, size + 1)), section


def test_master_list_holds_every_seed_question_exactly_once():
    """The whole book: every question of 000 §7 (7.1-7.9) and of 001 sits in exactly one chapter bank."""
    ids = [q for chapter in MASTER.values() for q in chapter]
    assert len(ids) == len(set(ids))
    by_section = _by_section(ids)
    assert set(by_section) == set(SECTION_SIZES)
    for section, size in SECTION_SIZES.items():
        assert sorted(by_section[section]) == list(range(1, size + 1)), section
    assert len(ids) == sum(SECTION_SIZES.values())


def test_every_seed_question_is_in_a_bank_and_so_in_the_drill():
    """The drill (chapter 10) shows load_bank(); so the bank must hold exactly the master list
    and cipherlab's own questions."""
    banked = sorted(q.id for bank in load_bank().values() for q in bank.questions)
    assert banked == sorted(q for chapter in ASSIGNED.values() for q in chapter)


def test_master_list_names_only_real_seed_questions_once():
    ids = [q for chapter in MASTER.values() for q in chapter]
    assert len(ids) == len(set(ids))
    for section, numbers in _by_section(ids).items():
        assert section in SECTION_SIZES and set(numbers) <= set(range(1, SECTION_SIZES[section] + 1)), section


def test_every_bank_file_parses_with_unique_ids():
    banks = load_bank()
    ids = [q.id for bank in banks.values() for q in bank.questions]
    assert ids and len(ids) == len(set(ids))


@pytest.mark.parametrize("chapter", sorted(ASSIGNED))
def test_bank_holds_exactly_the_questions_assigned_to_its_chapter(chapter):
    assert [q.id for q in viva.questions(chapter)] == ASSIGNED[chapter]


def test_no_bank_exists_outside_the_master_list():
    assert set(load_bank()) <= set(MASTER) | set(OWN)


def test_question_ids_follow_the_naming_scheme():
    """Seed questions: 000-7.x-n, 001-S1xx-n, 001-quiz-n. cipherlab's own: cipherlab-<chapter number>-n."""
    pattern = re.compile(r"^(000-7\.\d-\d+|001-S1\d\d-[1-3]|001-quiz-[1-5]|cipherlab-\d+-\d+)$")
    assert all(pattern.match(q.id) for bank in load_bank().values() for q in bank.questions)


@pytest.mark.parametrize("chapter", sorted(OWN))
def test_own_questions_are_numbered_by_their_chapter_and_sourced_to_cipherlab(chapter):
    bank = load_bank()[chapter]
    number = int(bank.notebook.split("/")[-1].split("_")[0])
    own = [q for q in bank.questions if OWN_ID.match(q.id)]
    assert [q.id for q in own] == _ids(f"cipherlab-{number}", range(1, len(own) + 1))
    assert all(q.source == f"cipherlab, chapter {number}" for q in own)


def test_own_questions_live_only_in_their_own_banks():
    """A bank holds cipherlab's own questions only where OWN lists them."""
    for bank in load_bank().values():
        own = [q.id for q in bank.questions if OWN_ID.match(q.id)]
        assert own == OWN.get(bank.chapter, []), bank.chapter


def _own_questions(chapter):
    return [q for q in viva.questions(chapter) if OWN_ID.match(q.id)]


@pytest.mark.parametrize("chapter", sorted(OWN))
def test_own_questions_ask_what_would_break_and_cite_computed_facts(chapter):
    """Answered from the chapter's measurements: every answer quotes at least one computed fact, and
    no measurement is typed into a lead or an answer by hand: no decimal, percentage or number of two
    digits or more outside facts, code and maths. A bank of cipherlab's own questions only (chapter 11)
    asks in the course notes' "what would break if" style."""
    questions = _own_questions(chapter)
    if chapter not in MASTER:
        assert 6 <= len(questions) <= 8
        assert sum("what would break if" in q.question.lower() for q in questions) >= len(questions) - 1
    for q in questions:
        text = q.lead + "\n\n" + q.answer
        assert cited_facts(text), q.id
        plain = re.sub(r"\{fact\}`[^`]*`|`[^`]*`|\$[^$]*\$|chapter \d+", "", text)
        assert not re.findall(r"\d+\.\d+|\d+\s*%|\d{2,}", plain), q.id


@pytest.mark.parametrize("chapter", sorted(OWN))
def test_own_answers_open_with_a_first_paragraph_of_at_most_fifty_words(chapter):
    for q in _own_questions(chapter):
        first = q.answer.split("\n\n")[0]
        assert viva.spoken_words(first) <= viva.LEAD_WORDS, q.id


@pytest.mark.parametrize("chapter", sorted(load_bank()))
def test_every_cited_fact_is_defined_and_computes(chapter):
    values = compute_facts(chapter)
    for q in viva.questions(chapter):
        for key in cited_facts(q.question + q.lead + q.answer):
            assert isinstance(values[key], (int, float, str)), (chapter, q.id, key)


@pytest.mark.parametrize("chapter", sorted(load_bank()))
def test_every_fact_is_cited_by_the_bank_or_its_chapter(chapter):
    bank = load_bank()[chapter]
    text = "".join(q.question + q.lead + q.answer for q in bank.questions)
    paths = [viva.REPO_ROOT / bank.notebook] + ([viva.REPO_ROOT / bank.appendix] if bank.appendix else [])
    prose = "".join(c.source for path in paths for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
    unused = set(load_facts(chapter)) - set(cited_facts(text)) - set(prose_facts(prose))
    assert not unused, f"FACTS[{chapter!r}] in book/cipherbook/viva/facts.py defines facts nothing cites: {sorted(unused)}"


def test_a_cited_fact_missing_from_facts_is_an_error_naming_both_files(monkeypatch):
    monkeypatch.setattr(answers, "load_facts", lambda chapter: {})
    answers._compute_facts.cache_clear()
    try:
        with pytest.raises(KeyError, match=r"bank/task.yml cites .*FACTS\['task'\] in book/cipherbook/viva/facts.py"):
            compute_facts("task")
    finally:
        answers._compute_facts.cache_clear()


def test_a_chapter_missing_from_the_registry_is_an_error_naming_the_file():
    with pytest.raises(ModuleNotFoundError, match=r"no facts for chapter 'nosuch': add FACTS\['nosuch'\] = \{\} to .*viva/facts.py"):
        load_facts("nosuch")


def test_importing_the_viva_imports_neither_the_experiments_nor_torch():
    """The bank, the drill and the flashcards' markup need no model: the registry comes in with the facts."""
    import subprocess
    import sys

    code = ("import sys, cipherbook.viva, cipherbook.viva.flashcards, cipherbook.viva.view; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith(('cipherbook.experiments', 'cipherbook.viva.facts'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_cited_facts_reads_keys_with_and_without_format():
    text = "{fact}`a_b` and {fact}`c:,d` and {fact}`a_b:.3f`"
    assert cited_facts(text) == ["a_b", "c"]


def test_fill_facts_formats_with_the_spec_after_the_colon():
    assert fill_facts("{fact}`task_chunk_chars`", "task") == "256"
    assert fill_facts("{fact}`task_chunk_chars:.1f` bits", "task") == "256.0 bits"


def test_a_bound_is_the_same_for_rounding_errors_a_few_units_apart():
    """A float32 rounding error's digits change with the CPU's kernels (one, two or sixteen units in the last
    place); the bound the text prints must not, and it must stay above the value."""
    ulp = 2.0 ** -24
    assert {answers.format_fact(k * ulp, "bound") for k in (0, 1, 2, 3, 16, 40)} == {"1e-05"}
    assert answers.format_fact(5.0e-5, "bound") == "1e-03" and answers.format_fact(-2e-4, "bound") == "1e-03"
    for value in (1e-9, 3.1e-6, 4e-5, 0.02, 0.3):
        assert float(answers.format_fact(value, "bound")) >= 3 * value


def test_refill_prose_rewrites_a_stale_number_and_keeps_the_tags():
    stale = 'chunks of <span data-fact="task_chunk_chars:,d">250</span> characters'
    assert refill_prose(stale, "task") == 'chunks of <span data-fact="task_chunk_chars:,d">256</span> characters'
    assert prose_facts(stale) == ["task_chunk_chars"]


def test_prose_quoting_an_unknown_fact_is_an_error_naming_the_cell_and_the_facts_file():
    with pytest.raises(KeyError, match=r"markdown cell 7 .*'nope'.*FACTS\['task'\] in book/cipherbook/viva/facts.py"):
        refill_prose('<span data-fact="nope">1</span>', "task", "markdown cell 7 of the task chapter")


def test_myst_markup_finds_roles_and_directive_fences_but_not_code():
    assert myst_markup("RMS {glue:text}`pe_rms:.3f` here") == ["role {glue:text}`pe_rms:.3f`"]
    assert myst_markup("```{dropdown} Answer\nx\n```") == ["directive fence ```{dropdown} Answer"]
    assert myst_markup(":::{note}\nx\n:::") == ["directive :::{note}"]
    assert myst_markup("see [chapter 2](02_attention.ipynb)") == []
    assert myst_markup("written `{glue:text}` in MyST, and in a block:\n\n```\n{ref}`x`\n```") == []


def test_setup_cell_installs_from_the_repository_url_in_config():
    url, branch = viva.repository()
    source = setup_cell_source()
    assert f"--branch {branch} {url}" in source and "describe_device()" in source


def test_answer_is_folded_in_details_with_blank_lines_so_its_markdown_renders():
    q = Question("001-quiz-9", "src", "Why {fact}`task_key_len`?", "Look:\n\n```python\nx = 1\n```", "task")
    rendered = render_question(1, q)
    assert rendered.startswith("**Q1. Why 8?**")
    assert "<details>\n<summary>Answer</summary>\n\nLook:" in rendered
    assert rendered.endswith("```\n\n</details>") and myst_markup(rendered) == []


def test_sync_is_idempotent_and_restores_edited_generated_cells():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# T"), nbformat.v4.new_code_cell("import cipherlab", outputs=[
        nbformat.v4.new_output("stream", text="x")], execution_count=3)]
    once = expected_notebook(nb, "task")
    assert expected_notebook(once, "task") == once
    assert once.cells[0].metadata[GENERATED_KEY] == "setup"
    assert once.cells[2].outputs == nb.cells[1].outputs and once.cells[2].execution_count == 3  # outputs kept
    # hidden on the site, so pages open with the title; it prints the machine, so nbval does not compare it
    assert once.cells[0].metadata["tags"] == ["remove-cell", "nbval-ignore-output"]
    edited = nbformat.from_dict(once)
    edited.cells[-1].source = "hand-edited answer"
    assert expected_notebook(edited, "task") == once
    assert [c.source for c in once.cells[-len(viva_cells("task")):]] == [c.source for c in viva_cells("task")]


def test_show_source_displays_the_real_file_and_line_numbers(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", shown.append)
    viva.show_source(viva.load_chapter)
    text = shown[0].data
    assert text.startswith("`book/cipherbook/viva/answers.py`, lines ") and "def load_chapter" in text


def test_bank_errors_name_the_file_and_the_field(tmp_path):
    bad = tmp_path / "task.yml"
    bad.write_text("chapter: task\nnotebook: book/01_task.ipynb\nquestions:\n  - id: x\n    source: s\n"
                   "    question: q\n    answer: ''\n")
    with pytest.raises(ValueError, match=r"task.yml, question 1: field 'answer'"):
        viva.load_chapter(bad)


def test_drill_command_asks_then_shows_the_answer_with_facts_filled_in(monkeypatch, capsys):
    from cipherbook.viva.__main__ import main

    asked = []
    monkeypatch.setattr("builtins.input", lambda prompt: asked.append(prompt) or "")
    assert main(["drill", "task", "--count", "1", "--seed", "0"]) == 0
    shown = capsys.readouterr().out
    assert len(asked) in (1, 2) and "{fact}" not in shown and "000-7." in shown
    assert "$" not in shown and "\\" not in shown  # maths made readable for a terminal


def test_terminal_text_makes_every_answer_readable_without_a_tex_renderer():
    from cipherbook.viva.flashcards import terminal_text

    assert terminal_text(r"costs $4D^2$, $\frac{QK^\top}{\sqrt{d_k}}$") == "costs 4D^2, (QKᵀ)/(√(d_k))"
    for q in ALL_QUESTIONS:
        text = terminal_text(q.question + "\n\n" + q.answer)
        assert "$" not in text and not re.search(r"\\[A-Za-z]", text), q.id


def test_check_command_fails_on_a_notebook_that_differs_from_sync(tmp_path, monkeypatch):
    from cipherbook.viva.__main__ import main

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import cipherlab")]
    path = viva.REPO_ROOT / "book" / "01_task.ipynb"
    monkeypatch.setattr(viva, "chapter_of", lambda p: "task")
    stale = tmp_path / "stale.ipynb"
    nbformat.write(nb, stale)
    assert main(["check", str(stale)]) == 1
    assert main(["check", str(path)]) == 0


# ----------------------------------------------------------------- answers a student can say

ALL_QUESTIONS = [q for bank in load_bank().values() for q in bank.questions]


def test_spoken_words_count_a_formula_as_one_word_and_skip_code_blocks_and_tables():
    text = "Two words $x^2 + y$ and\n\n$$a = b$$\n\n```python\nx = 1\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    assert viva.spoken_words(text) == 5
    assert viva.spoken_words("call `torch.softmax(x, dim=-1)` here") == 3
    assert viva.spoken_words(text, tables=True) == 5 + 4  # and the table's four cells
    assert viva.spoken_words("chunks of {fact}`task_chunk_chars` characters") == 4


@pytest.mark.parametrize("q", ALL_QUESTIONS, ids=lambda q: q.id)
def test_every_answer_opens_with_a_lead_a_student_can_say_in_twenty_seconds(q):
    assert q.lead, f"{q.chapter}.yml {q.id}: add a lead (at most {viva.LEAD_WORDS} words)"
    assert viva.spoken_words(q.lead) <= viva.LEAD_WORDS, q.id
    assert viva.lead_words(q) <= viva.LEAD_WORDS, f"{q.id}: {viva.lead_words(q)} words counted strictly"
    assert "\n\n" not in q.lead and "$$" not in q.lead, f"{q.id}: a lead is one paragraph, no display maths"


# What an examiner accepts: a lead of at most LEAD_WORDS, and at most this many words in the whole
# <details> block the reader opens (lead, "If the examiner presses:" and the details together).
DETAILS_WORDS_MAX = 150
P_VALUES_SAID_MAX = 3  # p-values in an answer's sentences; more go into a table the answer points at


def _details_body(q) -> str:
    """The text inside the question's <details> block, as render_question writes it: numbers filled in."""
    rendered = render_question(1, q)
    return rendered.split("<summary>Answer</summary>", 1)[1].rsplit("</details>", 1)[0]


@pytest.mark.parametrize("q", ALL_QUESTIONS, ids=lambda q: q.id)
def test_no_answer_runs_over_the_word_limit(q):
    """Counted as the reader sees it, in the answer's rendered <details> block, every number filled in,
    the way teaching_words counts a chapter's body (spoken_words with tables=True): a formula, a code
    span or a number one word, code blocks not at all, every word of a table counted."""
    body = _details_body(q)
    assert viva.answer_markdown(q) in body
    words = viva.spoken_words(body, tables=True)
    assert words <= DETAILS_WORDS_MAX, f"{q.chapter}.yml {q.id}: {words} words in its <details> block, at most {DETAILS_WORDS_MAX}"


def test_the_details_word_count_counts_tables_and_the_lead():
    q = Question("001-quiz-9", "src", "Why?", "Two words.\n\n| a | b |\n|---|---|\n| 1 | 2 |", "task", lead="Lead here.")
    assert viva.spoken_words(_details_body(q), tables=True) == 2 + 4 + 2 + 4  # lead, label, words, cells


@pytest.mark.parametrize("q", ALL_QUESTIONS, ids=lambda q: q.id)
def test_statistics_answers_say_few_p_values_and_table_the_rest(q):
    """One sentence per ablation: an answer says at most P_VALUES_SAID_MAX p-values in its sentences
    (a fact named ``..._p``; a seed-by-seed one, "4e-05 and 0.0088", counts each seed); the rest go
    into a table in the answer (lines starting with "|"), which a student points at."""
    values = compute_facts(q.chapter)
    text = "\n".join(line for line in (q.lead + "\n" + q.answer).splitlines() if not line.lstrip().startswith("|"))
    said = [key for key in cited_facts(text) if key.endswith("_p")]
    count = sum(1 + str(values[key]).count(" and ") for key in said)
    assert count <= P_VALUES_SAID_MAX, f"{q.chapter}.yml {q.id}: {count} p-values in its sentences ({said}); table them"


def test_the_median_answer_can_be_said_in_about_a_minute():
    import statistics

    lengths = [viva.spoken_words(q.lead + "\n\n" + q.answer) for q in ALL_QUESTIONS]
    assert statistics.median(lengths) <= viva.ANSWER_WORDS_MEDIAN


@pytest.mark.parametrize("chapter", sorted(load_bank()))
def test_facts_do_not_depend_on_what_ran_before(chapter):
    """One fact, one value: the chapter (written by sync), the drill and the flashcards compute
    the same facts in different processes, after different code. Scramble the global random
    state and the thread count and compute again."""
    import random

    import torch

    first = compute_facts(chapter)
    answers._compute_facts.cache_clear()
    torch.manual_seed(12345)
    random.seed(12345)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        again = compute_facts(chapter)
    finally:
        torch.set_num_threads(threads)
        answers._compute_facts.cache_clear()
    assert {k: v for k, v in again.items() if v != first[k]} == {}


def test_chapter_drill_and_flashcards_render_one_answer_alike():
    from cipherbook.viva.flashcards import card_markdown

    q = viva.questions("task")[0]
    rendered = render_question(1, q)
    assert viva.answer_markdown(q) in rendered
    assert card_markdown(q.answer, "task") in viva.answer_markdown(q)
