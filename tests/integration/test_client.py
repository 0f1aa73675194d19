"""``memstream.client`` against the real services: events published through it are keyed,
checked and stored by a worker; the API calls answer typed results with the API key, and a 503
while the database is away is tried again."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy.engine import make_url

from memstream.broker.topics import ensure_topics
from memstream.settings import Settings
from memstream_client import (
    ApiError,
    AsyncClient,
    Client,
    InvalidEvent,
    Publisher,
    ServiceUnavailable,
    SyncPublisher,
)
from memstream_client.contract.api import AgentConfigOut, ContextResponse, MemoriesResponse
from tests.support.faults import TcpProxy
from tests.support.kafka import read_topic
from tests.support.processes import api_process
from tests.support.settings import free_port, isolated_settings, unique
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def served(services: Settings) -> Iterator[tuple[Settings, str, str, str]]:
    """``memstream api`` in its own process with a key for a fresh tenant; yields its settings,
    URL, tenant and key."""
    tenant = unique("client")
    settings = isolated_settings(
        api_port=free_port(), log_level="WARNING", api_keys=f"key-{tenant}:{tenant},other:else"
    )
    with api_process(settings) as url:
        yield settings, url, tenant, f"key-{tenant}"


async def test_published_events_are_keyed_by_conversation_and_carry_an_event_id(settings, tenant):
    async with Publisher.from_settings(settings) as publisher:
        first = await publisher.message(
            tenant_id=tenant, user_id="u1", agent_id="a1", conversation_id="c1",
            role="user", content="I am vegetarian.",
        )  # fmt: skip
        again = await publisher.message(
            tenant_id=tenant, user_id="u1", conversation_id="c1", role="assistant",
            content="Noted.", event_id="my-own-id", metadata={"turn": 2},
        )  # fmt: skip
        end = await publisher.session_ended(
            tenant_id=tenant, user_id="u1", agent_id="a1", conversation_id="c1"
        )
    assert len(first.event_id) == 32 and again.event_id == "my-own-id"
    assert first.topic == settings.topic("message-written") and first.offset >= 0
    messages = await read_topic(settings, "message-written")
    assert {key for key, _ in messages} == {b"c1"}
    assert [v["event_id"] for _, v in messages] == [first.event_id, "my-own-id"]
    assert messages[1][1]["metadata"] == {"turn": 2} and "agent_id" not in messages[1][1]
    ended = await read_topic(settings, "session-ended")
    assert ended == [
        (
            b"c1",
            {
                "event_id": end.event_id,
                "tenant_id": tenant,
                "user_id": "u1",
                "agent_id": "a1",
                "conversation_id": "c1",
            },
        )
    ]


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"role": "robot"}, "schema_violation"),
        ({"conversation_id": ""}, "schema_violation"),
        ({"content": "x" * 40}, "content_too_large"),
        ({"created_at": "yesterday"}, "invalid_timestamp"),
        ({"metadata": {"when": object()}}, "schema_violation"),
    ],
)
async def test_an_event_the_worker_would_refuse_is_never_sent(settings, tenant, fields, reason):
    valid = {
        "tenant_id": tenant, "user_id": "u1", "conversation_id": "c1", "role": "user",
        "content": "hello",
    }  # fmt: skip
    async with Publisher.from_settings(settings, max_content_chars=32) as publisher:
        with pytest.raises(InvalidEvent) as refused:
            await publisher.message(**{**valid, **fields})
        assert refused.value.reason == reason
        await publisher.message(**valid)
    assert [v["content"] for _, v in await read_topic(settings, "message-written")] == ["hello"]


def test_the_sync_publisher_waits_for_the_broker(settings: Settings, tenant: str) -> None:
    with SyncPublisher.from_settings(settings) as publisher:
        stored = publisher.message(
            tenant_id=tenant, user_id="u1", conversation_id="s1", role="user", content="hi"
        )
        publisher.session_ended(tenant_id=tenant, user_id="u1", conversation_id="s1")
    assert stored.topic == settings.topic("message-written")
    records = asyncio.run(read_topic(settings, "session-ended"))
    assert [key for key, _ in records] == [b"s1"]


async def test_a_session_published_through_the_client_is_remembered_and_loaded(
    served, engine, start_worker
):
    settings, url, tenant, key = served
    # Topics are the workers' to create, with their partition count.
    await ensure_topics(settings)
    start_worker(settings)
    async with Publisher.from_settings(settings) as publisher:
        for n, (role, content) in enumerate(
            [("user", "I am vegetarian and I live in Berlin."), ("assistant", "Noted!")]
        ):
            await publisher.message(
                tenant_id=tenant, user_id="u1", agent_id="travel", conversation_id="c1",
                role=role, content=content, event_id=f"m{n}",
            )  # fmt: skip
        await publisher.session_ended(
            tenant_id=tenant, user_id="u1", agent_id="travel", conversation_id="c1"
        )
    async with AsyncClient(url, api_key=key, timeout=5) as api:
        config = await api.put_agent_config(
            tenant_id=tenant, agent_id="travel", open_long_memory=True, model_target_id="m1"
        )
        assert isinstance(config, AgentConfigOut) and config.model_target_id == "m1"
        assert await api.agent_config(tenant_id=tenant, agent_id="travel") == config
        assert await api.agent_config(tenant_id=tenant, agent_id="nobody") is None

        async def remembered() -> bool:
            found = await api.memories(tenant_id=tenant, user_id="u1", agent_id="travel")
            return any("vegetarian" in m.content.lower() for m in found.items)

        await eventually(remembered, within=90, what="memories through the client")
        context = await api.context(
            tenant_id=tenant, user_id="u1", agent_id="travel", conversation_id="c2",
            query="Any vegetarian places to eat in Berlin?",
        )  # fmt: skip
        assert isinstance(context, ContextResponse)
        assert "vegetarian" in context.long_term.user_profile.lower()
        history = await api.messages(tenant_id=tenant, conversation_id="c1")
        assert [m.event_id for m in history.messages] == ["m0", "m1"]
        found = await api.search_memories(tenant_id=tenant, user_id="u1", query="vegetarian food")
        assert isinstance(found, MemoriesResponse) and found.items
        added = await api.add_memory(
            tenant_id=tenant, user_id="u1", agent_id="travel", cube_id="user_profile",
            memory_type="pref_mem", content="The user likes window seats.", importance=6,
        )  # fmt: skip
        deleted = await api.delete_memory(tenant_id=tenant, memory_id=added.id)
        assert deleted.deleted == [added.id]

        with pytest.raises(ApiError) as other:
            await api.context(tenant_id="else", user_id="u1", conversation_id="c1")
        assert (other.value.status, other.value.code) == (403, "forbidden")
    async with AsyncClient(url, api_key="wrong") as api:
        with pytest.raises(ApiError) as unknown:
            await api.messages(tenant_id=tenant, conversation_id="c1")
        assert unknown.value.status == 401


def test_the_sync_client_answers_the_same_typed_results(served) -> None:  # type: ignore[no-untyped-def]
    _, url, tenant, key = served
    with Client(url, api_key=key) as api:
        context = api.context(tenant_id=tenant, user_id="u9", conversation_id="none-yet")
        assert isinstance(context, ContextResponse) and context.messages == []
        forgotten = api.forget_user(tenant_id=tenant, user_id="u9")
        assert forgotten.deleted == []
        with pytest.raises(ApiError) as refused:
            api.memories(tenant_id="else", user_id="u1")
        assert refused.value.status == 403


class Statuses(httpx.AsyncHTTPTransport):
    """The real transport, keeping the status of every answer."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[int] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        self.statuses.append(response.status_code)
        return response


async def test_a_503_is_tried_again_until_the_database_is_back(services, tenant):
    url = make_url(services.database_url)
    proxy = await TcpProxy(url.port or 3306).start()
    through = url.set(host="127.0.0.1", port=proxy.port).render_as_string(False)
    settings = isolated_settings(api_port=free_port(), log_level="WARNING", database_url=through)
    with api_process(settings) as base:
        await proxy.stop()
        async with AsyncClient(base, retries=0) as impatient:
            with pytest.raises(ApiError) as down:
                await impatient.messages(tenant_id=tenant, conversation_id="c1")
            assert down.value.status == 503

        seen = Statuses()

        async def back_once_refused() -> None:
            async def refused() -> bool:
                return 503 in seen.statuses

            await eventually(refused, within=30, what="a 503 to the patient client")
            await proxy.start()

        restore = asyncio.create_task(back_once_refused())
        async with AsyncClient(base, retries=6, transport=seen) as patient:
            answer = await patient.messages(tenant_id=tenant, conversation_id="c1")
        await restore
        assert answer.messages == []
        assert seen.statuses[0] == 503 and seen.statuses[-1] == 200  # tried again, then served
        await proxy.stop()
    # No API at all: the connection is tried again, then reported as unavailable.
    with Client(base, retries=1, timeout=1) as gone, pytest.raises(ServiceUnavailable):
        gone.messages(tenant_id=tenant, conversation_id="c1")
