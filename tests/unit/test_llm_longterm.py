"""The LLM conflict resolver and LLM summary against a fake OpenAI-compatible server
(``tests.fakes.llm`` served in process, answering scripted replies), including every fallback."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from memstream.llm import LLMClient
from memstream.longterm.conflict import MAX_LLM_LIVE, LLMConflictResolver
from memstream.longterm.models import Candidate
from memstream.memory import MemoryItem
from memstream.shortterm.fold import extractive_summary
from memstream.shortterm.llm_summary import llm_summary
from memstream.text.tokens import count_tokens
from tests.fakes.llm import Reply, Script, llm_app
from tests.support.llm_output import flaw_counts, grown

NOW = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.fixture
async def llm() -> AsyncIterator[tuple[LLMClient, Script]]:
    script = Script()
    transport = httpx.ASGITransport(app=llm_app(script))
    client = LLMClient(
        "http://llm.test/v1", "scripted", api_key="k", timeout=5, transport=transport
    )
    yield client, script
    await client.aclose()


def item(id_: str, content: str) -> MemoryItem:
    return MemoryItem(id_, "t1", "u1", None, "user_profile", "text_mem", content, 6, ("e0",), NOW)


def cand(content: str) -> Candidate:
    return Candidate(content, "text_mem", "user", 7, "personal_fact", ("e9",))


LIVE = [
    item("m1", "The user lives in Paris."),
    item("m2", "The user likes jazz."),
    *[item(f"n{i}", f"The user visited museum number {i} on a trip") for i in range(30)],
]


# --- conflict ------------------------------------------------------------------------------


async def test_llm_decision_is_used(llm: tuple[LLMClient, Script]) -> None:
    client, script = llm
    script.replies.append(
        json.dumps({"action": "store", "expire_ids": ["m1"], "reason": "the user moved"})
    )
    decision = await LLMConflictResolver(client).resolve(cand("The user relocated to Berlin"), LIVE)
    assert (decision.action, decision.expire_ids) == ("store", ("m1",))
    assert decision.reason == "llm: the user moved"
    [request] = script.requests
    assert request["response_format"] == {"type": "json_object"}
    assert request["temperature"] == 0
    body = json.loads(request["messages"][1]["content"])
    assert body["new"]["content"] == "The user relocated to Berlin"
    shown = [m["id"] for m in body["existing"]]
    assert len(shown) == MAX_LLM_LIVE
    assert shown[0] == "m1"  # the same slot (residence) first


async def test_llm_decision_never_expires_a_memory_said_later(
    llm: tuple[LLMClient, Script],
) -> None:
    client, script = llm
    script.replies.append(
        json.dumps({"action": "store", "expire_ids": ["m1"], "reason": "the user moved"})
    )
    said = [replace(LIVE[0], occurred_at=NOW + timedelta(days=2)), *LIVE[1:]]
    older = replace(cand("The user relocated to Berlin"), occurred_at=NOW + timedelta(days=1))
    decision = await LLMConflictResolver(client).resolve(older, said)
    assert (decision.action, decision.expire_ids) == ("skip", ())
    assert decision.reason == "outdated: m1 said later; llm: the user moved"


async def test_llm_skip(llm: tuple[LLMClient, Script]) -> None:
    client, script = llm
    script.replies.append('{"action": "skip", "expire_ids": [], "reason": "same fact"}')
    decision = await LLMConflictResolver(client).resolve(cand("User resides in Paris"), LIVE)
    assert (decision.action, decision.expire_ids, decision.reason) == ("skip", (), "llm: same fact")


async def test_exact_duplicate_needs_no_model(llm: tuple[LLMClient, Script]) -> None:
    client, script = llm
    decision = await LLMConflictResolver(client).resolve(cand("the user likes JAZZ"), LIVE)
    assert (decision.action, decision.reason) == ("skip", "already known: m2 (exact)")
    assert script.requests == []


@pytest.mark.parametrize(
    "reply",
    [
        '{"action": "store", "expire_ids": ["m404"], "reason": "made up id"}',
        '{"action": "store", "expire_ids": ["n25"], "reason": "not shown to the model"}',
        "I think you should store it.",
        '{"action": "maybe"}',
        500,
        429,
    ],
)
async def test_bad_or_failed_answers_fall_back_to_the_rules(
    llm: tuple[LLMClient, Script], reply: str | int
) -> None:
    client, script = llm
    script.replies.append(reply)
    resolver = LLMConflictResolver(client, max_live=10)
    decision = await resolver.resolve(cand("The user moved from Paris to Berlin."), LIVE)
    assert (decision.action, decision.expire_ids) == ("store", ("m1",))
    assert decision.reason.startswith("rules: supersedes m1")
    assert len(script.requests) == 1


async def test_a_decision_cut_off_in_its_reason_is_used(llm: tuple[LLMClient, Script]) -> None:
    client, script = llm
    script.replies.append(
        Reply(
            '{"action": "store", "expire_ids": ["m1"], "confidence": 0.9, "reason": "the us',
            finish_reason="length",
        )
    )
    before = flaw_counts("conflict")
    decision = await LLMConflictResolver(client).resolve(cand("The user relocated to Berlin"), LIVE)
    assert (decision.action, decision.expire_ids) == ("store", ("m1",))
    assert grown(before, flaw_counts("conflict")) == {
        "truncated": 1,
        "invented_field": 1,
        "repaired": 1,
    }
    # A few dozen tokens and about twenty per id it may expire, ten ids at most.
    assert script.requests[0]["max_tokens"] == 64 + 20 * 10


@pytest.mark.parametrize(
    ("reply", "flaws"),
    [
        (Reply('{"action": "sto', finish_reason="length"), {"truncated", "unparseable"}),
        (Reply('{"decision": "store", "ids": []}'), {"invented_field", "wrong_type"}),
        (Reply('{"action": "update", "expire_ids": ["m1"]}'), {"bad_value"}),
        (Reply('{"action": "store", "expire_ids": "m1"}'), {"wrong_type"}),
        (Reply('["store"]'), {"wrong_shape"}),
        (Reply("Store it."), {"unparseable"}),
    ],
    ids=["cut-in-action", "invented", "unknown-action", "ids-string", "list", "prose"],
)
async def test_unusable_decisions_are_counted_and_ruled(
    llm: tuple[LLMClient, Script], reply: Reply, flaws: set[str]
) -> None:
    client, script = llm
    script.replies.append(reply)
    before = flaw_counts("conflict")
    decision = await LLMConflictResolver(client).resolve(
        cand("The user moved from Paris to Berlin."), LIVE
    )
    assert decision.reason.startswith("rules: supersedes m1")
    assert grown(before, flaw_counts("conflict")) == dict.fromkeys([*flaws, "rejected"], 1)


# --- summary -------------------------------------------------------------------------------

MESSAGES = [
    ("user", "Hi!"),
    ("user", "I'm moving to Berlin in May and need a flat under 1200 euros."),
    ("assistant", "I recommend looking in Neukölln or Wedding."),
]


async def test_llm_summary_is_used(llm: tuple[LLMClient, Script]) -> None:
    client, script = llm
    script.replies.append("  The user moves to Berlin in May; flat budget 1200 euros.  ")
    summary = await llm_summary(client, "The user is a nurse.", MESSAGES, budget_tokens=300)
    assert summary == "The user moves to Berlin in May; flat budget 1200 euros."
    [request] = script.requests
    assert "response_format" not in request  # plain text
    assert request["max_tokens"] == 300
    prompt = request["messages"][1]["content"]
    assert "Previous summary:\nThe user is a nurse." in prompt
    assert "User: I'm moving to Berlin in May" in prompt
    assert "Assistant: I recommend looking in Neukölln or Wedding." in prompt


async def test_llm_summary_is_cut_to_the_budget(llm: tuple[LLMClient, Script]) -> None:
    client, script = llm
    script.replies.append("\n".join(f"Fact number {i} about the user." for i in range(500)))
    summary = await llm_summary(client, None, MESSAGES, budget_tokens=100)
    assert 90 <= count_tokens(summary) <= 100
    assert summary.startswith("Fact number 0 about the user.\nFact number 1")


async def test_a_summary_cut_off_loses_its_unfinished_sentence(
    llm: tuple[LLMClient, Script],
) -> None:
    client, script = llm
    whole = "The user moves to Berlin in May. Their flat budget is 1200 euros."
    script.replies.append(Reply(f"{whole} They as", finish_reason="length"))
    before = flaw_counts("summary")
    summary = await llm_summary(client, None, MESSAGES, budget_tokens=300)
    assert summary == whole
    assert grown(before, flaw_counts("summary")) == {"truncated": 1, "repaired": 1}


@pytest.mark.parametrize("reply", [500, "   "])
async def test_llm_summary_falls_back_to_extractive(
    llm: tuple[LLMClient, Script], reply: str | int
) -> None:
    client, script = llm
    script.replies.append(reply)
    summary = await llm_summary(client, "The user is a nurse.", MESSAGES, budget_tokens=300)
    assert summary == extractive_summary("The user is a nurse.", MESSAGES, budget_tokens=300)
    assert summary.startswith("The user is a nurse.\nUser: I'm moving to Berlin")
