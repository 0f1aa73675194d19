"""The LLM judge against a fake OpenAI-compatible server (``tests.fakes.llm``, its ASGI app
served in process, answering scripted replies), including every fallback to the rule-based
judge."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest
from prometheus_client import REGISTRY

from memstream.llm import LLMClient
from memstream.longterm.judge import NEW_MARK, Judge
from memstream.longterm.models import SessionMessage
from tests.fakes.llm import Reply, Script, llm_app
from tests.support.llm_output import flaw_counts, grown
from tests.support.settings import free_port

NOW = datetime(2025, 1, 1, tzinfo=UTC)
MODEL = "judge-model"
API_KEY = "sk-test-judge"
TIMEOUT = 0.5


@pytest.fixture
async def judge() -> AsyncIterator[tuple[Judge, Script]]:
    script = Script()
    transport = httpx.ASGITransport(app=llm_app(script))
    client = LLMClient(
        "http://llm.test/v1", MODEL, api_key=API_KEY, timeout=TIMEOUT, transport=transport
    )
    yield Judge(client), script
    await client.aclose()


SESSION = [
    SessionMessage("e1", "assistant", "Hi! How can I help you today?", False, NOW),
    SessionMessage("e2", "user", "I live in Paris and I love spicy food.", False, NOW),
    SessionMessage("e3", "user", "I moved from Paris to Berlin.", True, NOW),
    SessionMessage("e4", "assistant", "Nice, Berlin is a great city!", True, NOW),
    SessionMessage("e5", "user", "Please always answer in short bullet points.", True, NOW),
]
RULE_CONTENTS = [
    "The user moved from Paris to Berlin.",
    "The user wants the agent to always answer in short bullet points.",
]

GOOD = {
    "memories": [
        {
            "content": "The user moved from Paris to Berlin.",
            "category": "personal_fact",
            "memory_type": "text_mem",
            "scope": "user",
            "importance": 8,
            "source_event_ids": ["e3"],
        },
        {
            "content": "The user wants answers as short bullet points.",
            "category": "instruction",
            "memory_type": "pref_mem",
            "scope": "agent",
            "importance": 9,
            "source_event_ids": ["e5", "e2"],
        },
    ]
}


def fallbacks(reason: str) -> float:
    value = REGISTRY.get_sample_value("memstream_judge_fallbacks_total", {"reason": reason})
    return value or 0.0


async def test_good_reply_is_used(judge: tuple[Judge, Script]) -> None:
    j, script = judge
    script.replies.append(Reply(json.dumps(GOOD)))
    result = await j.judge(SESSION, agent_id="travel-agent")
    assert (result.method, result.fallback_reason) == ("llm", None)
    assert [(c.content, c.category, c.scope, c.source_event_ids) for c in result.candidates] == [
        ("The user moved from Paris to Berlin.", "personal_fact", "user", ("e3",)),
        ("The user wants answers as short bullet points.", "instruction", "agent", ("e5",)),
    ]
    [request] = script.requests
    assert request["model"] == MODEL
    assert request["response_format"] == {"type": "json_object"}
    assert request["temperature"] == 0
    system, user = request["messages"]
    assert system["role"] == "system" and "instruction" in system["content"]
    assert user["role"] == "user"
    assert f"{NEW_MARK} (e3) user: I moved from Paris to Berlin." in user["content"]
    assert "(e2) user: I live in Paris" in user["content"]
    assert f"{NEW_MARK} (e2)" not in user["content"]
    assert "travel-agent" in user["content"]
    [headers] = script.headers
    assert headers["authorization"] == f"Bearer {API_KEY}"


async def test_fenced_reply_is_repaired(judge: tuple[Judge, Script]) -> None:
    j, script = judge
    script.replies.append(Reply("```json\n" + json.dumps(GOOD["memories"]) + "\n```"))
    result = await j.judge(SESSION, agent_id=None)
    assert result.method == "llm"
    assert len(result.candidates) == 2


async def test_empty_memories_list_is_a_valid_llm_result(judge: tuple[Judge, Script]) -> None:
    j, script = judge
    script.replies.append(Reply('{"memories": []}'))
    result = await j.judge(SESSION, agent_id=None)
    assert (result.method, result.candidates, result.fallback_reason) == ("llm", (), None)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply(status=500), "error"),
        (Reply(status=429), "error"),
        (Reply('{"memories": [', delay=TIMEOUT * 3), "timeout"),
        (Reply("this is not JSON, sorry"), "malformed"),
        (Reply('{"answer": "nothing"}'), "malformed"),
        (Reply(raw="<html>gateway</html>"), "error"),
        (Reply(None), "empty"),
        (Reply("   "), "empty"),
    ],
    ids=[
        "http-500",
        "http-429",
        "slow",
        "malformed",
        "wrong-shape",
        "non-json-body",
        "null",
        "blank",
    ],
)
async def test_failures_fall_back_to_rules(
    judge: tuple[Judge, Script], reply: Reply, reason: str
) -> None:
    j, script = judge
    script.replies.append(reply)
    before = fallbacks(reason)
    result = await j.judge(SESSION, agent_id="travel-agent")
    assert (result.method, result.fallback_reason) == ("rules", reason)
    assert [c.content for c in result.candidates] == RULE_CONTENTS
    assert [c.source_event_ids for c in result.candidates] == [("e3",), ("e5",)]
    assert fallbacks(reason) == before + 1
    assert len(script.requests) == 1


PRIVATE = "my bank PIN is 4921"


@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=500),
        Reply(raw=f"<html>{PRIVATE}</html>"),
        Reply(f"Sure! {PRIVATE}, so no JSON"),
    ],
    ids=["http-error", "non-json-body", "prose"],
)
async def test_warnings_never_quote_the_reply(
    judge: tuple[Judge, Script], reply: Reply, caplog: pytest.LogCaptureFixture
) -> None:
    j, script = judge
    script.replies.append(reply)
    caplog.set_level(logging.DEBUG, logger="memstream")
    result = await j.judge(SESSION, agent_id=None)
    assert result.method == "rules"
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warned
    assert not any(PRIVATE in line or "scripted failure" in line for line in warned)
    # Kept for whoever debugs the model, at DEBUG only.
    debug = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)
    assert PRIVATE in debug or "scripted failure" in debug


async def test_unreachable_server_falls_back() -> None:
    client = LLMClient(f"http://127.0.0.1:{free_port()}/v1", MODEL, timeout=TIMEOUT)
    try:
        result = await Judge(client).judge(SESSION, agent_id=None)
    finally:
        await client.aclose()
    assert (result.method, result.fallback_reason) == ("rules", "error")
    assert [c.content for c in result.candidates] == RULE_CONTENTS


async def test_no_new_message_asks_nothing(judge: tuple[Judge, Script]) -> None:
    j, script = judge
    result = await j.judge([m for m in SESSION if not m.new], agent_id=None)
    assert (result.method, result.candidates) == ("rules", ())
    assert script.requests == []


# --- what a small local model answers (shapes seen from SmolLM2-135M in JSON mode) ----------


CUT_AFTER_ONE = (
    '{"memories": [{"content": "The user moved from Paris to Berlin.", "category": '
    '"personal_fact", "memory_type": "text_mem", "scope": "user", "importance": 8, '
    '"source_event_ids": ["e3"], "location": "Berlin", "date": "2025-01-01"}, {"content": '
    '"The user wants the agent to always answer in short bullet'
)


async def test_an_answer_cut_off_at_max_tokens_keeps_its_complete_memories(
    judge: tuple[Judge, Script],
) -> None:
    j, script = judge
    script.replies.append(Reply(CUT_AFTER_ONE, finish_reason="length"))
    before = flaw_counts()
    result = await j.judge(SESSION, agent_id=None)
    assert (result.method, result.fallback_reason) == ("llm", None)
    assert [c.content for c in result.candidates] == ["The user moved from Paris to Berlin."]
    assert grown(before, flaw_counts()) == {"truncated": 1, "invented_field": 1, "repaired": 1}
    # Sized to the session: three new messages, two of them the user's.
    assert script.requests[0]["max_tokens"] == 64 + 2 * 120


async def test_an_answer_cut_off_before_its_first_memory_is_judged_by_the_rules(
    judge: tuple[Judge, Script],
) -> None:
    j, script = judge
    script.replies.append(
        Reply('{"memories": [{"content": "The user moved from Par', finish_reason="length")
    )
    before, fallen = flaw_counts(), fallbacks("malformed")
    result = await j.judge(SESSION, agent_id=None)
    assert (result.method, result.fallback_reason) == ("rules", "malformed")
    assert [c.content for c in result.candidates] == RULE_CONTENTS
    assert grown(before, flaw_counts()) == {"truncated": 1, "rejected": 1}
    assert fallbacks("malformed") == fallen + 1


async def test_wrong_types_and_ranges_are_repaired_and_counted(
    judge: tuple[Judge, Script],
) -> None:
    j, script = judge
    item = {
        "content": "The user moved from Paris to Berlin.",
        "category": 3,
        "scope": "everyone",
        "importance": 85,
        "source_event_ids": ["e99"],
    }
    script.replies.append(Reply(json.dumps({"memories": [item, "Berlin", {"content": 7}]})))
    before = flaw_counts()
    result = await j.judge(SESSION, agent_id=None)
    [fact] = result.candidates
    assert (fact.category, fact.scope, fact.importance) == ("personal_fact", "user", 10)
    assert fact.source_event_ids == ("e3", "e4", "e5")
    assert grown(before, flaw_counts()) == {
        "wrong_type": 1,
        "bad_value": 1,
        "out_of_range": 1,
        "unknown_id": 1,
        "repaired": 1,
    }


async def test_an_answer_with_no_usable_item_is_judged_by_the_rules(
    judge: tuple[Judge, Script],
) -> None:
    j, script = judge
    script.replies.append(Reply(json.dumps({"memories": [{"user": "e3"}, {"content": None}]})))
    before = flaw_counts()
    result = await j.judge(SESSION, agent_id=None)
    assert (result.method, result.fallback_reason) == ("rules", "malformed")
    assert grown(before, flaw_counts()) == {
        "invented_field": 1,
        "wrong_type": 1,
        "rejected": 1,
    }


async def test_a_clean_answer_is_counted_clean(judge: tuple[Judge, Script]) -> None:
    j, script = judge
    script.replies.append(Reply(json.dumps({"memories": GOOD["memories"][:1]})))
    before = flaw_counts()
    await j.judge(SESSION, agent_id=None)
    assert grown(before, flaw_counts()) == {"clean": 1}
    # e2 is context, not a new message: the model's citing it is counted.
    script.replies.append(Reply(json.dumps(GOOD)))
    before = flaw_counts()
    await j.judge(SESSION, agent_id=None)
    assert grown(before, flaw_counts()) == {"unknown_id": 1, "repaired": 1}


# What SmolLM2-135M-Instruct answered the judge's prompt for a four-message session (all new:
# e1 and e3 the user's, e2 and e4 "Noted."), served by llama.cpp in JSON mode.
SMOLLM2_ANSWER = (
    '{"memories": [{"content": "The user lives in Lisbon.", "category": "personal_fact", '
    '"memory_type": "text_mem"}, {"content": "I am allergic to peanuts. I\'m not allowed to eat '
    'them.", "category": "instruction", "source_event_ids": ["e2"], "scope": "user"}]}\n'
)


async def test_the_small_models_answer_is_used_with_its_gaps_filled(
    judge: tuple[Judge, Script],
) -> None:
    j, script = judge
    script.replies.append(Reply(SMOLLM2_ANSWER))
    session = [
        SessionMessage("e1", "user", "I live in Lisbon with my partner.", True, NOW),
        SessionMessage("e2", "assistant", "Noted.", True, NOW),
        SessionMessage("e3", "user", "I am allergic to peanuts.", True, NOW),
        SessionMessage("e4", "assistant", "Noted.", True, NOW),
    ]
    before = flaw_counts()
    result = await j.judge(session, agent_id="a1")
    assert result.method == "llm"
    assert [(c.content, c.category, c.scope, c.importance) for c in result.candidates] == [
        ("The user lives in Lisbon.", "personal_fact", "user", 8),
        ("I am allergic to peanuts. I'm not allowed to eat them.", "instruction", "user", 9),
    ]
    assert result.candidates[0].source_event_ids == ("e1", "e2", "e3", "e4")
    # Missing fields take their defaults: a gap, not a flaw.
    assert grown(before, flaw_counts()) == {"clean": 1}
