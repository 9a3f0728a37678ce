"""The flashcard deck of the viva drill: same questions as the bank, seeded order, known/score,
and cards that never show a raw MyST role. Only the cheap "task" chapter computes facts."""

import pytest

from cipherlab.viva import Question, load_bank, questions
from cipherlab.viva.flashcards import ALL_CHAPTERS, Deck, Flashcards, bank_questions, card_markdown, deck_text


def _ids(cards):
    return [q.id for q in cards]


def test_deck_covers_exactly_the_bank_questions():
    bank_ids = [q.id for bank in load_bank().values() for q in bank.questions]
    deck = Deck(bank_questions(), seed=0)
    assert sorted(_ids(deck.order)) == sorted(bank_ids) and len(deck.order) == len(bank_ids)


def test_shuffle_is_deterministic_per_seed():
    cards = bank_questions(["attention", "mha"])
    a, b, c = Deck(cards, seed=3), Deck(cards, seed=3), Deck(cards, seed=4)
    assert _ids(a.order) == _ids(b.order) != _ids(c.order)
    a.shuffle(), b.shuffle()
    assert _ids(a.order) == _ids(b.order) and a.position == 0


def test_chapter_filter_shows_only_that_chapters_cards():
    deck = Deck(bank_questions(), seed=0)
    deck.set_chapter("mha")
    assert sorted(_ids(deck.order)) == sorted(q.id for q in questions("mha"))
    with pytest.raises(KeyError, match="nope"):
        deck.set_chapter("nope")


def test_mark_known_counts_once_and_survives_filter_and_shuffle():
    deck = Deck(bank_questions(["task", "mha"]), seed=1)
    total = len(deck.order)
    assert deck.score_line() == f"known 0 of {total}"
    deck.mark_known()
    deck.mark_known()
    first = deck.current
    deck.next()
    deck.mark_known()
    assert deck.score() == (2, total)
    deck.set_chapter(first.chapter)
    assert first.id in deck.known and deck.score()[0] == len(deck.known & set(_ids(deck.order)))
    deck.set_chapter(None)
    assert deck.score_line() == f"known 2 of {total}"


def test_next_wraps_round_to_the_first_card():
    deck = Deck(bank_questions(["task"]), seed=0)
    first = deck.current
    for _ in range(len(deck.order)):
        deck.next()
    assert deck.current == first


def test_filled_cards_never_show_a_fact_placeholder():
    text = deck_text("task")
    assert "{fact}" not in text and "256" in text
    assert all("{fact}" not in card_markdown(q.answer, "task") for q in questions("task"))


def test_other_myst_roles_are_reduced_to_their_text():
    assert card_markdown("see {doc}`the task <01_task>` and {math}`x^2`", "task") == \
        "see the task <01_task> and x^2"


def test_unknown_chapter_is_an_error_naming_the_known_ones():
    with pytest.raises(KeyError, match="known chapters"):
        bank_questions(["nope"])


def test_widget_buttons_drive_the_deck():
    cards = Flashcards(chapters=["task"], seed=0)
    shown = cards.deck.current
    cards._act(cards.deck.mark_known, keep_answer=True)
    assert "known 1 of 2" in cards._status.value and shown.source in cards._status.value
    cards._on_chapter("task")
    assert cards.deck.chapter == "task"
    cards._on_chapter(ALL_CHAPTERS)
    assert cards.deck.chapter is None


def test_reveal_shows_the_lead_first_and_the_rest_on_a_second_reveal():
    q = Question("x-1", "src", "Why {fact}`task_key_len`?", "Because of {fact}`task_chunk_chars`.", "task",
                 lead="Short: {fact}`task_key_len` bytes.")
    deck = Deck([q, q], seed=0)
    first = deck.reveal()
    assert first == "**Short: 8 bytes.**"
    second = deck.reveal()
    assert second.startswith(first) and "Because of 256." in second and "examiner presses" in second
    assert deck.reveal() == second  # nothing more to show
    deck.next()
    assert deck.revealed == 0 and deck.reveal() == first


def test_a_card_without_a_lead_shows_its_answer_at_once():
    q = Question("x-2", "src", "Q?", "All of it.", "task")
    deck = Deck([q], seed=0)
    assert deck.reveal() == "All of it." and deck.revealed == 1
