"""The stages' agents that read and write the database, each under Faust's test context with no
broker (what they send is kept in memory): the judge proposes, persist stores, the summary
stage folds a conversation once it is due. The database is the real one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.agents.judge import judge
from memstream.agents.persist import persist
from memstream.agents.summary import TRIGGER, summary
from memstream.events.checks import summary_checks
from memstream.longterm.models import SessionMessage
from memstream.longterm.payloads import Session, candidates_of, dumps, loads
from memstream.memory import USER_PROFILE, NewMemory
from memstream.providers.builtin import BuiltinProvider
from memstream.store.messages import MessageStore, StoredMessage
from memstream.store.summaries import SummaryStore
from memstream.streams.topics import dead_letter, lt_dedupe
from memstream.testing import RunningStage, running_stage
from memstream.text.tokens import count_tokens

pytestmark = pytest.mark.integration


def session(tenant: str, conversation: str = "c1") -> Session:
    return Session(tenant, "user-1", "agent-1", conversation, f"end-{conversation}")


@pytest.fixture
async def judging(services: object) -> AsyncIterator[RunningStage]:
    async with running_stage(judge) as started:
        yield started


@pytest.fixture
async def persisting(services: object) -> AsyncIterator[RunningStage]:
    async with running_stage(persist) as started:
        yield started


@pytest.fixture
async def summarising(services: object) -> AsyncIterator[RunningStage]:
    async with running_stage(summary) as started:
        yield started


async def test_the_judge_hands_the_candidates_of_a_session_on(
    judging: RunningStage, tenant: str
) -> None:
    said = [
        SessionMessage("c1-0", "user", "I am allergic to peanuts.", True, datetime(2026, 1, 1)),
        SessionMessage("c1-1", "assistant", "Noted.", True, datetime(2026, 1, 1)),
    ]
    event = await judging.put(dumps(session=session(tenant), messages=said), key=b"c1")
    await judging.settled(event, within=60)  # the rules run in a process of their own
    [handed] = judging.producer.to(lt_dedupe)
    assert handed.key == b"c1"  # still by conversation
    record = loads(handed.value or b"")
    assert record["method"] == "rules"
    proposed = candidates_of(record)
    assert any(c.kind == "fact" and "peanuts" in c.content for c in proposed), proposed
    assert all(c.source_event_ids == ("c1-0",) for c in proposed), proposed
    assert judging.producer.to(dead_letter) == []


async def test_persist_stores_the_plan_and_sends_nothing(
    persisting: RunningStage, tenant: str, engine: AsyncEngine
) -> None:
    memory = NewMemory(
        tenant, "user-1", "agent-1", USER_PROFILE, "text_mem", "The user speaks Welsh", 7, ("p-0",)
    )
    event = await persisting.put(dumps(session=session(tenant), store=[memory], expire=[]))
    await persisting.settled(event)
    stored = await BuiltinProvider(engine).list_live(tenant, "user-1", "agent-1")
    assert [(m.content, m.source_event_ids) for m in stored] == [
        ("The user speaks Welsh", ("p-0",))
    ]
    assert persisting.producer.sent == []


async def test_persist_dead_letters_a_plan_it_cannot_read(
    persisting: RunningStage, tenant: str
) -> None:
    plan = dumps(session=session(tenant), store=[], expire="all of them")
    event = await persisting.put(plan)
    await persisting.settled(event)
    [letter] = [sent.json() for sent in persisting.producer.to(dead_letter)]
    assert (letter["stage"], letter["reason"]) == ("persist", "invalid_payload")
    assert "expire is not a list" in letter["detail"]


async def test_the_summary_stage_folds_a_conversation_once_it_is_due(
    summarising: RunningStage, tenant: str, store: MessageStore, engine: AsyncEngine
) -> None:
    lines = [f"Day {n} of planning the Lisbon trip: hotels, trams and budget." for n in range(20)]
    said = [
        StoredMessage(
            tenant_id=tenant,
            conversation_id="long",
            event_id=f"long-{n}",
            user_id="user-1",
            agent_id="agent-1",
            role="user",
            message_type="chat",
            content=line,
            token_count=count_tokens(line),
            created_at=datetime(2026, 1, 1, 0, 0, n),
            source_conversation_id="long",
        )
        for n, line in enumerate(lines[:TRIGGER])
    ]
    await store.insert_many(said[:-1])
    [(_, check)] = summary_checks([(tenant, "long")], partitions=1)
    early = await summarising.put(check)
    await summarising.settled(early, within=30)
    summaries = SummaryStore(engine)
    assert await summaries.get(tenant, "long") is None  # one message short of due

    await store.insert_many(said[-1:])
    due = await summarising.put(check)
    await summarising.settled(due, within=60)
    summary_now = await summaries.get(tenant, "long")
    assert summary_now is not None and "Lisbon" in summary_now.text
    assert summarising.producer.sent == []  # no dead letter, no retry
