"""The API's reads on a real MariaDB read replica (``make services`` starts one on :3307 that
replicates from the primary): which server answers, the API's own writes seen by its next
reads while the replica lags, and the lag that reads of other writes do see."""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.memory import NewMemory
from memstream.providers.builtin import BuiltinProvider
from memstream.settings import Settings
from memstream.store.database import create_engine
from memstream.store.messages import MessageStore
from tests.support.api import client_for
from tests.support.messages import alternating, chat
from tests.support.settings import isolated_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

REPLICA_URL = os.environ.get(
    "MEMSTREAM_TEST_DATABASE_READ_URL", "mysql+aiomysql://root@127.0.0.1:3307/memstream"
)


async def _replicating(replica: AsyncEngine) -> bool:
    async with replica.connect() as conn:
        status = (await conn.execute(text("SHOW SLAVE STATUS"))).mappings().first()
    return status is not None and status["Slave_SQL_Running"] == "Yes"


@pytest.fixture(scope="module", autouse=True)
def replica_to_ourselves() -> Iterator[None]:
    """These tests stop the shared replica's applier and expect it running otherwise: one
    test run on the machine at a time uses it (a lock other checkouts' runs take too)."""
    with (Path(tempfile.gettempdir()) / "memstream-read-replica.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="module")
async def replica(services: Settings) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(REPLICA_URL)
    try:
        if not await _replicating(engine):
            pytest.fail(f"the read replica {REPLICA_URL} does not replicate")
    except Exception as exc:
        await engine.dispose()
        pytest.fail(
            f"the read replica {REPLICA_URL} is not reachable: {exc}; start it with "
            "`make services` (or set MEMSTREAM_TEST_DATABASE_READ_URL)"
        )
    yield engine
    await engine.dispose()


@pytest.fixture
async def lagging(replica: AsyncEngine) -> AsyncIterator[AsyncEngine]:
    """The replica with its applier stopped: it lags until the test ends."""
    async with replica.connect() as conn:
        await conn.execute(text("STOP SLAVE SQL_THREAD"))
    try:
        yield replica
    finally:
        async with replica.connect() as conn:
            await conn.execute(text("START SLAVE SQL_THREAD"))


def replica_settings(**overrides: Any) -> Settings:
    return isolated_settings(database_read_url=REPLICA_URL, **overrides)


def unwatched_settings(**overrides: Any) -> Settings:
    """The replica read whatever its lag: what the read-your-writes rule alone does."""
    return replica_settings(database_read_lag_check_seconds=0, **overrides)


# Tables whose rows a write numbers itself: the outbox of memory changes, and messages.
AUTO_NUMBERED = ("memory_change", "conversation_message")
# Far past any number the primary hands out while the suite runs.
REPLICA_ONLY_NUMBERS = 10**15


async def out_of_the_primarys_way(replica: AsyncEngine) -> None:
    """Number the replica's own rows far above the primary's: a replica-only row that took the
    next number would collide with the primary's next row of that table and stop replication
    (a duplicate key on the replica's SQL thread) for every later test."""
    async with replica.begin() as conn:
        for table in AUTO_NUMBERED:
            await conn.execute(text(f"ALTER TABLE {table} AUTO_INCREMENT = {REPLICA_ONLY_NUMBERS}"))


def memory(tenant: str, user: str, content: str) -> NewMemory:
    return NewMemory(tenant, user, "a1", "user_profile", "text_mem", content, 6, ("e1",))


async def search(api: httpx.AsyncClient, tenant: str, user: str, query: str) -> list[str]:
    answer = await api.post(
        "/v1/memories/search",
        json={"tenant_id": tenant, "user_id": user, "agent_id": "a1", "query": query},
    )
    assert answer.status_code == 200, answer.text
    return [m["content"] for m in answer.json()["items"]]


async def remember(api: httpx.AsyncClient, tenant: str, user: str, content: str) -> str:
    added = await api.post(
        "/v1/memories",
        json={
            "tenant_id": tenant, "user_id": user, "agent_id": "a1",
            "cube_id": "user_profile", "memory_type": "text_mem", "content": content,
        },
    )  # fmt: skip
    assert added.status_code == 201, added.text
    return str(added.json()["id"])


async def test_reads_come_from_the_replica(
    tenant: str, replica: AsyncEngine, engine: AsyncEngine
) -> None:
    # Rows written on the replica alone (the primary never has them): whatever answers with
    # them read the replica.
    await out_of_the_primarys_way(replica)
    await BuiltinProvider(replica).add([memory(tenant, "u1", "The user keeps bees")])
    await MessageStore(replica).insert_many(chat(tenant, "c1", alternating(4)))
    try:
        async with client_for(replica_settings()) as api:
            assert await search(api, tenant, "u1", "bees") == ["The user keeps bees"]
            listed = await api.get("/v1/memories", params={"tenant_id": tenant, "user_id": "u1"})
            assert [m["content"] for m in listed.json()["items"]] == ["The user keeps bees"]
            messages = await api.get("/v1/conversations/c1/messages", params={"tenant_id": tenant})
            assert len(messages.json()["messages"]) == 4
            context = await api.post(
                "/v1/context",
                json={
                    "tenant_id": tenant, "user_id": "u1", "agent_id": "a1",
                    "conversation_id": "c1", "query": "bees",
                },
            )  # fmt: skip
            body = context.json()
            assert len(body["messages"]) == 4
            assert "The user keeps bees" in str(body["long_term"])
        # Nothing of it is on the primary.
        assert await MessageStore(engine).count(tenant) == 0
    finally:
        async with replica.begin() as conn:
            for table in ("long_term_memory", "conversation_message", *AUTO_NUMBERED):
                await conn.execute(text(f"DELETE FROM {table} WHERE tenant_id = :t"), {"t": tenant})


async def test_the_apis_own_writes_are_read_back_while_the_replica_lags(
    tenant: str, lagging: AsyncEngine, engine: AsyncEngine
) -> None:
    async with client_for(unwatched_settings()) as api:
        await remember(api, tenant, "u1", "The user keeps bees")
        assert await search(api, tenant, "u1", "bees") == ["The user keeps bees"]
        # Written on the primary by another process (the worker, another API replica): not
        # seen until the replica has it.
        await BuiltinProvider(engine).add([memory(tenant, "u2", "The user plays chess")])
        assert await search(api, tenant, "u2", "chess") == []
        # A forget through the API is seen at once too.
        forgot = await api.delete("/v1/users/u1/memories", params={"tenant_id": tenant})
        assert forgot.status_code == 200, forgot.text
        assert await search(api, tenant, "u1", "bees") == []


async def test_reads_return_to_the_replica_after_the_sticky_time(
    tenant: str, replica: AsyncEngine
) -> None:
    async def listed(api: httpx.AsyncClient) -> list[str]:
        answer = await api.get("/v1/memories", params={"tenant_id": tenant, "user_id": "u1"})
        assert answer.status_code == 200, answer.text
        return [m["content"] for m in answer.json()["items"]]

    async with client_for(unwatched_settings(database_read_sticky_seconds=0.5)) as api:
        async with replica.connect() as conn:
            await conn.execute(text("STOP SLAVE SQL_THREAD"))
        try:
            await remember(api, tenant, "u1", "The user keeps bees")
            assert await listed(api) == ["The user keeps bees"]
            assert await search(api, tenant, "u1", "bees") == ["The user keeps bees"]

            async def back_on_the_replica() -> bool:
                return await listed(api) == []

            # A replica that lags longer than the sticky time hides the write from reads
            # of the table again, and from the search, which reads there too: a kept answer
            # is served only while the read engine has its memories live.
            await eventually(back_on_the_replica, within=10, what="reads back on the replica")
            assert await search(api, tenant, "u1", "bees") == []
        finally:
            async with replica.connect() as conn:
                await conn.execute(text("START SLAVE SQL_THREAD"))

        async def caught_up() -> bool:
            return await listed(api) == ["The user keeps bees"]

        await eventually(caught_up, within=30, what="the replica caught up")

        async def found_again() -> bool:  # once the empty answer kept meanwhile is too old
            return await search(api, tenant, "u1", "bees") == ["The user keeps bees"]

        await eventually(found_again, within=30, what="the search on the replica caught up")


async def readyz_replica(api: httpx.AsyncClient) -> dict[str, Any]:
    answer = await api.get("/readyz")
    replica: dict[str, Any] = answer.json()["read_replica"]
    return replica


async def test_a_lagging_replica_is_bypassed_until_it_catches_up(
    tenant: str, replica: AsyncEngine, engine: AsyncEngine
) -> None:
    settings = replica_settings(
        database_read_lag_check_seconds=0.2, database_read_max_lag_seconds=1
    )
    async with client_for(settings) as api:
        assert await readyz_replica(api) == {
            "reads": "replica", "lag_seconds": 0.0, "max_lag_seconds": 1.0,
        }  # fmt: skip
        async with replica.connect() as conn:
            await conn.execute(text("STOP SLAVE SQL_THREAD"))
        try:

            async def on_the_primary() -> bool:
                return (await readyz_replica(api))["reads"] == "primary"

            await eventually(on_the_primary, within=5, what="reads moved to the primary")
            assert (await readyz_replica(api))["lag_seconds"] is None
            metrics = (await api.get("/metrics")).text
            assert "memstream_database_replica_bypassed 1.0" in metrics
            assert "memstream_database_replica_lag_seconds NaN" in metrics
            # Written on the primary by another process, which the stopped replica lacks: the
            # API reads the primary, so its memories and messages are all there.
            await BuiltinProvider(engine).add([memory(tenant, "u2", "The user plays chess")])
            await MessageStore(engine).insert_many(chat(tenant, "c2", alternating(2)))
            assert await search(api, tenant, "u2", "chess") == ["The user plays chess"]
            messages = await api.get("/v1/conversations/c2/messages", params={"tenant_id": tenant})
            assert len(messages.json()["messages"]) == 2
        finally:
            async with replica.connect() as conn:
                await conn.execute(text("START SLAVE SQL_THREAD"))

        async def back_on_the_replica() -> bool:
            return (await readyz_replica(api))["reads"] == "replica"

        await eventually(back_on_the_replica, within=30, what="reads back on the replica")
        assert (await api.get("/readyz")).status_code == 200
        assert await search(api, tenant, "u2", "chess") == ["The user plays chess"]
