"""The search over stored turns: a turn's best passage, its line, and the merge with the
memories (pure functions of memstream.store.turns)."""

from datetime import UTC, datetime

from memstream.memory import USER_PROFILE, MemoryItem
from memstream.store.turns import (
    PASSAGE_CHARS,
    merge,
    passage,
    turn_line,
)
from memstream.text.terms import tokenize

AT = datetime(2023, 5, 30, tzinfo=UTC)


def item(id_: str, score: float, *events: str, origin: str = "memory") -> MemoryItem:
    return MemoryItem(
        id_, "t", "u", None, USER_PROFILE, "text_mem", id_, 3, events, AT, score, origin=origin
    )


def test_a_short_turn_is_its_own_passage() -> None:
    assert passage("  Hello\n there.  ", frozenset(tokenize("hello"))) == "Hello there."


def test_the_passage_is_the_run_of_sentences_with_the_most_query_words() -> None:
    filler = "The weather was mild and the market was busy that morning. " * 8
    text = filler + "The Seco de Cordero goes best with a Pilsner or a Lager beer. " + filler
    found = passage(text, frozenset(tokenize("which beer with the Seco de Cordero?")))
    assert "Pilsner or a Lager" in found
    assert found.startswith("…") and len(found) <= PASSAGE_CHARS + 1


def test_a_turn_line_says_who_said_it_and_when() -> None:
    assert turn_line("assistant", AT, "Try Roscioli.") == (
        "The assistant told the user (30 May 2023): Try Roscioli."
    )
    assert (
        turn_line("user", AT, "I live in Lima.") == "The user said (30 May 2023): I live in Lima."
    )


def test_passages_fill_what_the_memories_leave_and_the_list_stays_sorted() -> None:
    memories = [item("m1", 0.9, "e1"), item("m2", 0.5, "e2")]
    turns = [
        item("turn:e1", 0.95, "e1", origin="history"),  # m1 cites it: left out
        item("turn:e3", 0.7, "e3", origin="history"),
        item("turn:e4", 0.3, "e4", origin="history"),
        item("turn:e6", 0.2, "e6", origin="history"),
    ]
    merged = merge(memories, turns, 4)
    assert [i.id for i in merged] == ["m1", "m2", "turn:e3", "turn:e4"]
    assert [i.score for i in merged] == [0.9, 0.5, 0.5, 0.3]
    # Memories that fill the top k leave no room; none at all, and the turns answer.
    assert [i.id for i in merge(memories, turns, 2)] == ["m1", "m2"]
    assert [i.id for i in merge([], turns, 2)] == ["turn:e1", "turn:e3"]
    # Never fewer items than the memories alone (up to top_k per cube).
    assert len(merge(memories, [], 1)) == 2


def test_a_query_counts_its_relative_dates_from_when_it_is_asked() -> None:
    from memstream.text.dates import dated_query

    asked = datetime(2023, 5, 30, 23, 40)  # naive: UTC
    assert dated_query("the hotel you recommended yesterday?", asked) == (
        "the hotel you recommended on 29 May 2023?"
    )
    assert dated_query("what I bought two weeks ago", asked) == (
        "what I bought in the week of 15 May 2023"
    )
    assert dated_query("my favourite hotel", None) == "my favourite hotel"
