from datetime import datetime

import pytest

from memstream.longterm.episodes import is_small_talk, select_episodes
from memstream.longterm.models import SessionMessage

AT = datetime(2023, 5, 8, 13, 56)


def msg(
    event_id: str, role: str, content: str, *, new: bool = True, speaker: str | None = None
) -> SessionMessage:
    return SessionMessage(event_id, role, content, new, AT, speaker=speaker)


def test_one_dated_attributed_line_per_user_turn() -> None:
    episodes = select_episodes(
        [
            msg("m1", "user", "I went to a LGBTQ support group yesterday.", speaker="Caroline"),
            msg("m2", "assistant", "That sounds meaningful. How was it?"),
            msg("m3", "user", "It was powerful, the stories inspired me to study counseling."),
        ]
    )
    assert [e.content for e in episodes] == [
        "Caroline (8 May 2023): I went to a LGBTQ support group on 7 May 2023.",
        "The user (8 May 2023): It was powerful, the stories inspired me to study counseling.",
    ]
    assert [e.source_event_ids for e in episodes] == [("m1",), ("m3",)]
    assert all(e.kind == "episode" and e.occurred_at == AT for e in episodes)
    assert all(e.scope == "user" and e.memory_type == "text_mem" for e in episodes)


def test_a_short_answer_keeps_the_question_it_answers() -> None:
    episodes = select_episodes(
        [
            msg("a1", "assistant", "Do you go swimming?"),
            msg("u1", "user", "Yes, twice a week."),
        ]
    )
    assert [e.content for e in episodes] == [
        'The user (8 May 2023), asked "Do you go swimming?", answered: Yes, twice a week.'
    ]
    assert episodes[0].source_event_ids == ("a1", "u1")


def test_chinese_episodes() -> None:
    episodes = select_episodes(
        [
            msg("z1", "user", "我昨天去了上海的一家素食餐厅。"),
            msg("z2", "assistant", "你经常吃素吗？"),
            msg("z3", "user", "是的，每周三次"),
        ]
    )
    assert [e.content for e in episodes] == [
        "用户（2023年5月8日）：我2023年5月7日去了上海的一家素食餐厅。",
        "用户（2023年5月8日）被问到“你经常吃素吗？”时回答：是的，每周三次",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Thanks!",
        "ok",
        "Sounds good.",
        "Great, tell me more.",
        "Could you explain that again?",
        "Haha, see you later!",
        "好的",
        "谢谢！",
        "嗯嗯，好的。",
        "   ",
    ],
)
def test_small_talk_is_no_episode(text: str) -> None:
    assert is_small_talk(text)
    assert select_episodes([msg("s", "user", text)]) == []


def test_an_acknowledgement_of_a_question_is_no_episode() -> None:
    assert (
        select_episodes([msg("a", "assistant", "Shall I book it?"), msg("u", "user", "ok")]) == []
    )


@pytest.mark.parametrize(
    "text", ["I live in Berlin.", "I'm vegetarian", "我住在柏林", "My sister Ana moved to Oslo."]
)
def test_short_statements_are_episodes(text: str) -> None:
    assert not is_small_talk(text)
    assert len(select_episodes([msg("s", "user", text)])) == 1


def test_only_new_user_turns_become_episodes() -> None:
    episodes = select_episodes(
        [
            msg("old", "user", "I moved to Lisbon last year.", new=False),
            msg("bot", "assistant", "Lisbon is lovely in spring and autumn for long walks."),
            msg("new", "user", "I started learning Portuguese last week."),
        ]
    )
    assert [e.source_event_ids for e in episodes] == [("new",)]
    assert "in the week of 1 May 2023" in episodes[0].content


def test_long_turns_are_cut_at_a_sentence_end() -> None:
    text = "I hiked the whole ridge trail with my brother. " * 40
    (episode,) = select_episodes([msg("long", "user", text)])
    assert len(episode.content) < 650
    assert episode.content.endswith("brother.")


def test_the_same_session_twice_gives_the_same_episodes() -> None:
    session = [msg("m1", "user", "I adopted a cat named Miso last month.", speaker="Ana")]
    assert select_episodes(session) == select_episodes(session)
