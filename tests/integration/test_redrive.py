"""``memstream dead-letters`` and ``memstream redrive`` end to end: real Kafka, a real worker,
the ledger in the real database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import insert, select

from memstream.broker.topics import ensure_topics, publish
from memstream.longterm.models import Candidate
from memstream.longterm.payloads import Session, dumps
from memstream.providers.builtin import BuiltinProvider
from memstream.settings import Settings
from memstream.store.schema import redriven_letter
from memstream.topology import PUBLIC_TOPICS, internal_topics
from tests.support.api import client_for
from tests.support.kafka import read_topic
from tests.support.processes import run_cli
from tests.support.settings import isolated_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


def proposed(tenant: str, text: str) -> bytes:
    candidate = Candidate(text, "text_mem", "user", 7, "personal_fact", ("c-0",))
    session = Session(tenant, "user-1", "agent-1", "c", "end-c")
    return dumps(session=session, candidates=[candidate])


async def letters_at_least(settings: Settings, n: int) -> bool:
    return len(await read_topic(settings, "dead-letter")) >= n


async def test_dead_letters_are_listed_and_redriven_once(services, tenant, engine, start_worker):
    # One partition: a letter's offset is its place in the topic.
    settings = isolated_settings(
        topic_partitions=1,
        retry_base_seconds=0.2,
        retry_max_delay_seconds=0.4,
        retry_horizon_seconds=1.0,
        agent_config_cache_seconds=0,
    )
    await ensure_topics(settings, PUBLIC_TOPICS + internal_topics(settings))
    async with client_for(settings) as api:
        broken = {"long_memory_provider": "MEMOS", "model_target_id": "m"}  # MemOS not set up
        await api.put(f"/v1/agents/agent-1/config?tenant_id={tenant}", json=broken)
    start_worker(settings)
    await publish(settings, "lt-conflict", [proposed(tenant, "The user has two cats")])
    await publish(settings, "lt-judge", [b'{"garbage": 1}', b'{"garbage": 2}'])

    await eventually(lambda: letters_at_least(settings, 3), what="three dead letters")

    listed = run_cli(settings, "dead-letters")
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["FAILED", "AT", "REASON", "STAGE", "SOURCE", "PAYLOAD"]
    assert len(rows) == 3
    (exhausted,) = [row for row in rows if "retries_exhausted" in row]
    assert exhausted.split()[2] == "conflict" and f"{settings.topic('lt-conflict')}[" in exhausted
    assert tenant in exhausted and exhausted.startswith(f"{datetime.now(UTC):%Y-}")
    assert sum(row.split()[1:3] == ["invalid_payload", "judge"] for row in rows) == 2
    only = run_cli(settings, "dead-letters", "--reason", "invalid_payload", "--limit", "1")
    assert len(only.stdout.splitlines()) == 2 and '{"garbage": 2}' in only.stdout

    # One garbage letter's redrive was interrupted before the broker confirmed it.
    letters = await read_topic(settings, "dead-letter")
    first_garbage = next(
        offset for offset, (_, value) in enumerate(letters) if value["payload"] == '{"garbage": 1}'
    )
    async with engine.begin() as conn:
        await conn.execute(
            insert(redriven_letter).values(
                topic=settings.topic("dead-letter"),
                letter_partition=0,
                letter_offset=first_garbage,
                reason="invalid_payload",
                stage="judge",
                target_topic=settings.topic("lt-judge"),
                state="sending",
                claimed_at=datetime.now(UTC).replace(tzinfo=None),
            )
        )

    conflicts = len(await read_topic(settings, "lt-conflict"))  # the record and its retries
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    none = run_cli(settings, "redrive", "--since", later, "--dry-run")
    assert none.stdout.splitlines() == ["would send back 0 dead letters"]
    dry = run_cli(settings, "redrive", "--reason", "retries_exhausted", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[:2] == [
        "would send back 1 dead letter",
        "  retries_exhausted/conflict: 1",
    ]
    assert len(await read_topic(settings, "lt-conflict")) == conflicts

    # The cause is fixed: the agent's memory is the built-in store again.
    async with client_for(settings) as api:
        fixed = {"long_memory_provider": "MYSQL", "model_target_id": "m"}
        await api.put(f"/v1/agents/agent-1/config?tenant_id={tenant}", json=fixed)
    sent = run_cli(settings, "redrive")
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.splitlines() == [
        "sent back 2 dead letters",
        "  invalid_payload/judge: 1",
        "  retries_exhausted/conflict: 1",
        "interrupted in an earlier run, not sent again: 1",
    ]

    async def stored() -> bool:
        items = await BuiltinProvider(engine).list_live(tenant, "user-1", "agent-1")
        return any("two cats" in item.content for item in items)

    await eventually(stored, what="the redriven memory stored")
    # The garbage went back to its stage and failed again: a new letter, from the same stage.
    await eventually(lambda: letters_at_least(settings, 4), what="the garbage dead-lettered again")
    _, newest = (await read_topic(settings, "dead-letter"))[-1]
    assert (newest["stage"], newest["payload"]) == ("judge", '{"garbage": 2}')

    # Run again: everything selected was sent back already (or interrupted): nothing is sent.
    again = run_cli(settings, "redrive", "--reason", "retries_exhausted")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [
        "sent back 0 dead letters",
        "already sent back by an earlier run: 1",
    ]
    assert len(await read_topic(settings, "lt-conflict")) == conflicts + 1  # one redrive
    async with engine.connect() as conn:
        states = (
            await conn.execute(
                select(redriven_letter.c.state).where(
                    redriven_letter.c.topic == settings.topic("dead-letter")
                )
            )
        ).scalars()
        assert sorted(states) == ["sending", "sent", "sent"]
