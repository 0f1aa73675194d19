"""``memory-changed`` end to end: every change to long-term memory reaches the topic through the
outbox, once per change id, in order per user, and ``/v1/memories/{id}/history`` follows the
links the record keeps between a memory and the one it replaced."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.broker.groups import caught_up
from memstream.broker.replay import replay
from memstream.broker.topics import ensure_topics, publish
from memstream.changes.relay import ChangeRelay
from memstream.cli.changes import Filter, show
from memstream.providers.router import ProviderRouter
from memstream.settings import Settings
from memstream.store.schema import memory_change, memory_link
from memstream_client.contract.schemas import validator
from tests.support.api import client_for
from tests.support.kafka import chain_idle, message, read_topic
from tests.support.settings import isolated_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


def said(tenant: str, conversation: str, lines: list[str]) -> list[dict[str, Any]]:
    events = []
    for i, line in enumerate(lines):
        events.append(message(tenant, conversation, 2 * i, role="user", content=line))
        events.append(message(tenant, conversation, 2 * i + 1, role="assistant", content="Noted."))
    return events


def ended(tenant: str, conversation: str, event_id: str = "") -> dict[str, Any]:
    return {
        "event_id": event_id or f"end-{conversation}",
        "tenant_id": tenant,
        "user_id": "user-1",
        "agent_id": "agent-1",
        "conversation_id": conversation,
    }


async def changes_of(settings: Settings, tenant: str) -> list[dict[str, Any]]:
    """The tenant's records on memory-changed, each checked against the public schema and
    its key; in topic order per partition (one user's changes share one)."""
    out = []
    for key, value in await read_topic(settings, "memory-changed"):
        if value["tenant_id"] != tenant:
            continue
        validator("memory-changed.v1").validate(value)
        assert key is not None and orjson.loads(key) == [value["tenant_id"], value["user_id"]]
        out.append(value)
    return out


async def settled_changes(
    settings: Settings, tenant: str, done: Any, what: str, within: float = 90
) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    async def ready() -> bool:
        found[:] = await changes_of(settings, tenant)
        return bool(done(found))

    try:
        await eventually(ready, within=within, what=what)
    except TimeoutError as exc:
        seen = [(c["change"], c["memory_id"]) for c in found]
        raise TimeoutError(f"{exc}; published so far: {seen}") from None
    return found


async def unpublished(engine: AsyncEngine, settings: Settings, tenant: str) -> int:
    c = memory_change.c
    query = select(func.count()).where(
        c.topic == settings.topic("memory-changed"), c.tenant_id == tenant, c.published_at.is_(None)
    )
    async with engine.connect() as conn:
        return int((await conn.execute(query)).scalar_one())


def facts(changes: list[dict[str, Any]], change: str) -> list[dict[str, Any]]:
    return [c for c in changes if c["change"] == change and c["kind"] == "fact"]


async def test_sessions_publish_added_and_superseded_changes_linked_both_ways(
    settings: Settings, tenant: str, engine: AsyncEngine, start_worker: Any
) -> None:
    start_worker(settings)
    await publish(
        settings,
        "message-written",
        said(tenant, "s1", ["I live in Paris.", "I am vegetarian.", "I work as a nurse."]),
    )
    await publish(settings, "session-ended", [ended(tenant, "s1")])
    first = await settled_changes(
        settings, tenant, lambda cs: len(facts(cs, "added")) >= 3, "the first session's changes"
    )
    async with client_for(settings) as api:
        listed = (await api.get(f"/v1/memories?tenant_id={tenant}&user_id=user-1")).json()
    live = {item["id"]: item for item in listed["items"]}
    # One added change per new memory, with its text and the messages it came from.
    assert sorted(c["memory_id"] for c in first if c["change"] == "added") == sorted(live)
    for change in first:
        assert change["cause"] == "session" and change["conversation_id"] == "s1"
        assert change["content"] == live[change["memory_id"]]["content"]
        assert change["source_event_ids"]
        assert set(change["source_event_ids"]) <= {f"s1-{n}" for n in range(6)}
    paris = next(c for c in facts(first, "added") if "Paris" in c["content"])

    await publish(
        settings, "message-written", said(tenant, "s2", ["I moved from Paris to Berlin."])
    )
    await publish(settings, "session-ended", [ended(tenant, "s2")])
    both = await settled_changes(
        settings,
        tenant,
        lambda cs: facts(cs, "superseded") and len(facts(cs, "added")) >= 4,
        "Paris superseded by Berlin",
    )
    (superseded,) = facts(both, "superseded")
    berlin = next(c for c in facts(both, "added") if "Berlin" in c["content"])
    assert superseded["memory_id"] == paris["memory_id"]
    assert superseded["cause"] == "conflict" and superseded["conversation_id"] == "s2"
    assert superseded["superseded_by"] == [berlin["memory_id"]]
    assert berlin["supersedes"] == [paris["memory_id"]]
    assert "content" not in superseded
    # In order for the user: the new fact is announced before the old one is expired.
    ids = [c["change_id"] for c in both]
    assert ids.index(berlin["change_id"]) < ids.index(superseded["change_id"])
    assert len(set(ids)) == len(ids)

    async with client_for(settings) as api:
        url = f"/v1/memories/{berlin['memory_id']}/history?tenant_id={tenant}"
        chain = (await api.get(url)).json()["items"]
        from_old = (await api.get(url.replace(berlin["memory_id"], paris["memory_id"]))).json()
        other = await api.get(url.replace(tenant, "another-tenant"))
    assert [i["id"] for i in chain] == [paris["memory_id"], berlin["memory_id"]]
    old, new = chain
    assert old["state"] == "superseded" and old["superseded_by"] == [berlin["memory_id"]]
    assert old["content"] == paris["content"] and old["deleted_at"]
    assert old["added"]["cause"] == "session" and old["added"]["conversation_id"] == "s1"
    assert old["ended"]["cause"] == "conflict" and old["ended"]["conversation_id"] == "s2"
    assert new["state"] == "live" and new["supersedes"] == [paris["memory_id"]]
    assert [m["content"] for m in new["source_messages"]] == ["I moved from Paris to Berlin."]
    assert [m["content"] for m in old["source_messages"]] == ["I live in Paris."]
    assert from_old["items"] == chain
    assert other.status_code == 404


async def test_doubled_and_replayed_session_ends_publish_no_new_change_ids(
    settings: Settings, tenant: str, engine: AsyncEngine, start_worker: Any
) -> None:
    worker = start_worker(settings)
    await publish(settings, "message-written", said(tenant, "d1", ["I work as a nurse in Oslo."]))
    end = ended(tenant, "d1")
    await publish(settings, "session-ended", [end, end, {**end, "event_id": "another-end"}])
    first = await settled_changes(settings, tenant, lambda cs: cs, "the session's changes")
    await eventually(lambda: caught_up(settings, "session-ended"), within=60, what="caught up")
    await eventually(
        lambda: _none_pending(engine, settings, tenant), within=30, what="the outbox relayed"
    )

    # The whole of session-ended again, as a backfill would.
    worker.stop()
    await replay(settings, "session-ended", None)
    start_worker(settings)
    # Every stage has handled what the replay sent it, and the outbox holds nothing unsent.
    await eventually(lambda: chain_idle(settings), within=90, what="the replay through the chain")
    await eventually(
        lambda: _none_pending(engine, settings, tenant), within=30, what="the outbox relayed"
    )
    again = await changes_of(settings, tenant)
    assert {c["change_id"] for c in again} == {c["change_id"] for c in first}


async def _none_pending(engine: AsyncEngine, settings: Settings, tenant: str) -> bool:
    return await unpublished(engine, settings, tenant) == 0


async def test_a_worker_killed_before_publishing_publishes_after_restart(
    services: Settings, tenant: str, engine: AsyncEngine, start_worker: Any
) -> None:
    # The first worker applies the session but never relays: killed with its changes only in
    # the outbox, as a crash between the write and the publish leaves them.
    settings = isolated_settings(changes_relay=False)
    worker = start_worker(settings)
    await publish(settings, "message-written", said(tenant, "k1", ["I live in Lisbon."]))
    await publish(settings, "session-ended", [ended(tenant, "k1")])

    async def applied() -> bool:
        return await unpublished(engine, settings, tenant) > 0

    await eventually(applied, within=90, what="the session applied")
    worker.kill()
    await ensure_topics(settings, ("memory-changed",))
    assert await changes_of(settings, tenant) == []
    pending = await unpublished(engine, settings, tenant)

    start_worker(settings.model_copy(update={"changes_relay": True}))
    after = await settled_changes(
        settings, tenant, lambda cs: len(cs) >= pending, "the changes published after restart"
    )
    assert any("Lisbon" in c.get("content", "") for c in after)
    await eventually(
        lambda: _none_pending(engine, settings, tenant), within=30, what="the rows marked"
    )


@asynccontextmanager
async def relaying(settings: Settings, engine: AsyncEngine) -> AsyncIterator[ChangeRelay]:
    """A relay of this test's own, as a worker runs it, for the changes the API makes."""
    router = ProviderRouter(engine, settings)
    await ensure_topics(settings, ("memory-changed",))
    relay = ChangeRelay(engine, settings, router.changes, interval=0.1)
    task = asyncio.create_task(relay.run())
    try:
        yield relay
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await router.close()


@pytest.fixture
async def relay(settings: Settings, engine: AsyncEngine) -> AsyncIterator[ChangeRelay]:
    async with relaying(settings, engine) as running:
        yield running


async def test_api_changes_and_forgetting_a_user_are_published(
    settings: Settings, tenant: str, engine: AsyncEngine, relay: ChangeRelay
) -> None:
    def body(content: str) -> dict[str, Any]:
        return {
            "tenant_id": tenant,
            "user_id": "user-1",
            "agent_id": None,
            "cube_id": "user_profile",
            "memory_type": "text_mem",
            "content": content,
            "importance": 6,
        }

    async with client_for(settings) as api:
        kept = (await api.post("/v1/memories", json=body("The user plays chess."))).json()
        again = (await api.post("/v1/memories", json=body("The user plays chess."))).json()
        dropped = (await api.post("/v1/memories", json=body("The user owns a boat."))).json()
        assert again["id"] == kept["id"]
        assert (await api.delete(f"/v1/memories/{dropped['id']}?tenant_id={tenant}")).is_success
        changes = await settled_changes(
            settings, tenant, lambda cs: len(cs) >= 3, "the API's changes"
        )
        assert [(c["change"], c["memory_id"], c["cause"]) for c in changes] == [
            ("added", kept["id"], "api"),
            ("added", dropped["id"], "api"),
            ("deleted", dropped["id"], "api"),
        ]
        history = await api.get(f"/v1/memories/{kept['id']}/history?tenant_id={tenant}")
        assert history.json()["items"][0]["added"]["cause"] == "api"

        forgot = await api.delete(f"/v1/users/user-1/memories?tenant_id={tenant}")
        assert forgot.json()["deleted"] == [kept["id"]]
        changes = await settled_changes(
            settings, tenant, lambda cs: len(cs) >= 4, "the forgotten change"
        )
        (forgotten,) = [c for c in changes if c["change"] == "forgotten"]
        assert forgotten["memory_id"] == kept["id"] and forgotten["cause"] == "forget"
        assert "content" not in forgotten and forgotten["source_event_ids"] == []
        gone = await api.get(f"/v1/memories/{kept['id']}/history?tenant_id={tenant}")
        assert gone.status_code == 404
    # The user's history is gone with the user: no change row or link is left once published.
    await eventually(
        lambda: _none_pending(engine, settings, tenant), within=30, what="the outbox relayed"
    )
    async with engine.connect() as conn:
        for table in (memory_change, memory_link):
            count = select(func.count()).where(table.c.tenant_id == tenant)
            assert (await conn.execute(count)).scalar_one() == 0


async def test_changes_pending_when_a_user_is_forgotten_go_out_first_without_text(
    settings: Settings, tenant: str, engine: AsyncEngine
) -> None:
    """The user is forgotten before the relay has looked: what was applied is still published,
    in order and before the ``forgotten`` change, with the text already erased, and the
    outbox keeps nothing of the user once it is out."""
    body = {
        "tenant_id": tenant,
        "user_id": "user-1",
        "agent_id": None,
        "cube_id": "user_profile",
        "memory_type": "text_mem",
        "importance": 6,
    }
    async with client_for(settings) as api:
        kept = (await api.post("/v1/memories", json={**body, "content": "The user sails."})).json()
        gone = (await api.post("/v1/memories", json={**body, "content": "The user rows."})).json()
        assert (await api.delete(f"/v1/memories/{gone['id']}?tenant_id={tenant}")).is_success
        assert (await api.delete(f"/v1/users/user-1/memories?tenant_id={tenant}")).is_success
    c = memory_change.c
    async with engine.connect() as conn:
        texts = (await conn.execute(select(c.content).where(c.tenant_id == tenant))).scalars()
        assert list(texts) == [None] * 4
    async with relaying(settings, engine):
        changes = await settled_changes(
            settings, tenant, lambda cs: len(cs) >= 4, "the changes pending at the forget"
        )
        await eventually(
            lambda: _none_pending(engine, settings, tenant), within=30, what="the outbox relayed"
        )
    assert [(c["change"], c["memory_id"], c["cause"]) for c in changes] == [
        ("added", kept["id"], "api"),
        ("added", gone["id"], "api"),
        ("deleted", gone["id"], "api"),
        ("forgotten", kept["id"], "forget"),
    ]
    assert [c.get("content") for c in changes] == ["", "", None, None]
    async with engine.connect() as conn:
        for table in (memory_change, memory_link):
            count = select(func.count()).where(table.c.tenant_id == tenant)
            assert (await conn.execute(count)).scalar_one() == 0


async def test_the_operator_command_prints_the_stream_and_follows_it(
    settings: Settings, tenant: str, engine: AsyncEngine, relay: ChangeRelay
) -> None:
    def body(user: str, content: str) -> dict[str, Any]:
        return {
            "tenant_id": tenant,
            "user_id": user,
            "agent_id": None,
            "cube_id": "user_profile",
            "memory_type": "text_mem",
            "content": content,
            "importance": 5,
        }

    async with client_for(settings) as api:
        await api.post("/v1/memories", json=body("u1", "The user sails."))
        await api.post("/v1/memories", json=body("u2", "The user rows."))
        await settled_changes(settings, tenant, lambda cs: len(cs) >= 2, "two additions")
        printed: list[str] = []
        assert await show(settings, Filter(tenant, "u1"), out=printed.append) == 1
        assert "added" in printed[0] and f"{tenant}/u1" in printed[0] and "sails" in printed[0]

        # Followed from a time after the two additions went out: the follower cannot miss the
        # next change, however long it takes to start.
        after = datetime.now(UTC)
        followed: list[str] = []
        following = asyncio.create_task(
            show(
                settings,
                Filter(tenant),
                follow=True,
                since=after,
                as_json=True,
                out=followed.append,
            )
        )
        await api.post("/v1/memories", json=body("u2", "The user swims."))

        async def seen() -> bool:
            return bool(followed)

        await eventually(seen, within=30, what="the followed change")
        following.cancel()
        with pytest.raises(asyncio.CancelledError):
            await following
    (value,) = [orjson.loads(line) for line in followed]
    assert value["content"] == "The user swims." and value["user_id"] == "u2"


async def test_mem0_changes_are_published_with_mem0s_ids(
    servers: Any, tenant: str, engine: AsyncEngine
) -> None:
    settings, _, mem0 = servers
    add = {
        "tenant_id": tenant,
        "user_id": "u1",
        "agent_id": "a1",
        "cube_id": "user_profile",
        "memory_type": "text_mem",
        "importance": 5,
    }
    async with relaying(settings, engine), client_for(settings) as api:
        config = {"long_memory_provider": "MEM0", "model_target_id": "m"}
        await api.put(f"/v1/agents/a1/config?tenant_id={tenant}", json=config)
        tea = (
            await api.post("/v1/memories", json={**add, "content": "The user drinks tea."})
        ).json()
        gin = (
            await api.post("/v1/memories", json={**add, "content": "The user drinks gin."})
        ).json()
        assert tea["id"] in mem0.memories
        assert (await api.delete(f"/v1/memories/{gin['id']}?tenant_id={tenant}")).is_success
        # Out before the user is forgotten, so that the added ones still carry their text.
        await settled_changes(settings, tenant, lambda cs: len(cs) >= 3, "Mem0's changes")
        assert (await api.delete(f"/v1/users/u1/memories?tenant_id={tenant}")).is_success
        changes = await settled_changes(
            settings, tenant, lambda cs: len(cs) >= 4, "Mem0's forgotten change"
        )
    assert [(c["change"], c["memory_id"], c["provider"]) for c in changes] == [
        ("added", tea["id"], "MEM0"),
        ("added", gin["id"], "MEM0"),
        ("deleted", gin["id"], "MEM0"),
        ("forgotten", tea["id"], "MEM0"),
    ]
    assert changes[0]["agent_id"] == "a1" and changes[0]["content"] == "The user drinks tea."
