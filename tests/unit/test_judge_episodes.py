"""The judge's output on both paths: dated facts and the session's episodes."""

from datetime import datetime

from memstream.longterm.dedupe import dedupe
from memstream.longterm.judge import Judge, build_prompt
from memstream.longterm.judge.orchestrator import dated
from memstream.longterm.models import Candidate, SessionMessage

AT = datetime(2024, 3, 1, 9, 30)


def said(event_id: str, content: str, role: str = "user") -> SessionMessage:
    return SessionMessage(event_id, role, content, True, AT, speaker=None)


async def test_the_rules_give_dated_facts_and_episodes() -> None:
    result = await Judge(None).judge(
        [said("m1", "I moved to Berlin last month."), said("m2", "Thanks!")], agent_id=None
    )
    assert result.method == "rules"
    assert all(c.kind == "fact" and c.occurred_at == AT for c in result.candidates)
    assert any("February 2024" in c.content for c in result.candidates), result.candidates
    assert not any("last month" in c.content for c in result.candidates)
    assert [e.content for e in result.episodes] == [
        "The user (1 March 2024): I moved to Berlin in February 2024."
    ]
    assert result.memories == result.candidates + result.episodes


def test_dated_grounds_relative_dates_against_the_source_message() -> None:
    fact = Candidate(
        "The user went hiking yesterday.", "text_mem", "user", 6, "personal_fact", ("m1",)
    )
    (out,) = dated([fact], [said("m1", "I went hiking yesterday.")])
    assert out.content == "The user went hiking on 29 February 2024."
    assert out.occurred_at == AT
    unknown = Candidate("The user likes tea.", "pref_mem", "user", 5, "preference", ("gone",))
    assert dated([unknown], []) == [unknown]


def test_dedupe_never_merges_an_episode_into_a_fact() -> None:
    fact = Candidate("The user lives in Berlin.", "text_mem", "user", 8, "personal_fact", ("m1",))
    episode = Candidate(
        "The user (1 March 2024): I live in Berlin.",
        "text_mem",
        "user",
        3,
        "episode",
        ("m1",),
        kind="episode",
        occurred_at=AT,
    )
    twice = [fact, episode, episode]
    assert dedupe(twice) == [fact, episode]


def test_the_prompt_shows_each_day_and_asks_for_absolute_dates() -> None:
    first = SessionMessage("e1", "user", "I start a new job next month.", False, AT)
    later = SessionMessage("e2", "user", "I went hiking yesterday.", True, datetime(2024, 3, 4, 8))
    system, user = build_prompt([first, later])
    assert "Absolute dates only" in system["content"]
    body = user["content"]
    assert body.index("--- 1 March 2024 ---") < body.index("(e1) user: I start a new job")
    assert body.index("--- 4 March 2024 ---") < body.index("(e2) user: I went hiking")
    assert body.count("--- ") == 2
