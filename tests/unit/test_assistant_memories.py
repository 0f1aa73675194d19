"""What the assistant told the user becomes memory: episodes of its informative turns and
rule facts for its recommendations and promises, attributed, dated; its small talk does not."""

from datetime import datetime

from memstream.longterm.episodes import assistant_episode, select_episodes
from memstream.longterm.judge.rules import rule_based_judge
from memstream.longterm.models import SessionMessage

AT = datetime(2023, 5, 30, 23, 40)

LIST_TURN = """To make the widest variety of gin-based cocktails, I would recommend the following
five bottles:

1. **Sweet Vermouth**: essential for a Negroni and a Martinez.
2. **Dry Vermouth**: for a classic dry Martini.
3. **Campari**: the bitter heart of the Negroni.
4. **Elderflower Liqueur** - floral, for spritzes.
5. **Absinthe**: a rinse for a Corpse Reviver #2.

Enjoy your new bar!"""


def said(event_id: str, role: str, content: str, *, new: bool = True) -> SessionMessage:
    return SessionMessage(event_id, role, content, new, AT)


def test_a_list_answer_keeps_its_opening_and_every_item_head() -> None:
    episode = assistant_episode(said("a1", "assistant", LIST_TURN))
    assert episode is not None
    assert episode.content == (
        "The assistant told the user (30 May 2023): To make the widest variety of gin-based "
        "cocktails, I would recommend the following five bottles: Sweet Vermouth; Dry Vermouth; "
        "Campari; Elderflower Liqueur; Absinthe"
    )
    assert episode.source_event_ids == ("a1",)
    assert episode.kind == "episode" and episode.occurred_at == AT
    assert episode.scope == "user" and episode.category == "episode"


def test_a_prose_answer_keeps_its_sentences_with_names_and_numbers() -> None:
    text = (
        "Sure! Binaural beats have been studied a fair bit. Another study published in the "
        "journal Music and Medicine involved 38 subjects who listened for 30 minutes a day. "
        "It is worth trying for yourself."
    )
    episode = assistant_episode(said("a2", "assistant", text))
    assert episode is not None
    assert episode.content == (
        "The assistant told the user (30 May 2023): Another study published in the journal "
        "Music and Medicine involved 38 subjects who listened for 30 minutes a day."
    )


def test_relative_dates_in_what_the_assistant_said_are_made_absolute() -> None:
    episode = assistant_episode(
        said("a3", "assistant", "I'll remind you about Tom's party tomorrow.")
    )
    assert episode is not None
    assert "on 31 May 2023" in episode.content and "tomorrow" not in episode.content


def test_small_talk_questions_and_plain_explanations_are_not_episodes() -> None:
    for text in (
        "You're welcome!",
        "That sounds meaningful. How was it?",
        "Would you like me to suggest some Italian places?",
        "it depends on how long the dough rests and how warm the kitchen is.",
    ):
        assert assistant_episode(said("a", "assistant", text)) is None, text


def test_select_episodes_takes_new_assistant_turns_beside_the_user_turns() -> None:
    episodes = select_episodes(
        [
            said("u1", "user", "Where should I eat in Rome tonight with my wife?"),
            said("a1", "assistant", "For a romantic dinner, I would recommend Roscioli."),
            said("a0", "assistant", "Earlier, I suggested Da Enzo.", new=False),
        ]
    )
    assert [e.source_event_ids for e in episodes] == [("u1",), ("a1",)]
    assert episodes[1].content.startswith("The assistant told the user (30 May 2023): ")


def test_the_rules_attribute_recommendations_and_promises_to_the_assistant() -> None:
    facts = rule_based_judge(
        [
            said(
                "a1",
                "assistant",
                "For a romantic dinner, I would recommend Roscioli. "
                "I'll remind you to book your table on Friday. What do you think?",
            ),
            said("a2", "assistant", "Do you want me to suggest a wine?"),
        ]
    )
    assert [(f.content, f.source_event_ids) for f in facts] == [
        ("The assistant recommended Roscioli to the user, for a romantic dinner.", ("a1",)),
        (
            "The assistant told the user it will remind the user to book the user's table on "
            "Friday.",
            ("a1",),
        ),
    ]
    assert all(f.kind == "fact" for f in facts)


def test_the_rules_never_turn_the_assistant_words_into_facts_about_the_user() -> None:
    facts = rule_based_judge([said("a1", "assistant", "I live in Paris and I love jazz.")])
    assert facts == []
