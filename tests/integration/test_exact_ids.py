"""Ids compare exactly. The database pads with spaces when it compares, so an event for tenant
``"acme "`` would be readable with the ``acme`` key: such ids are refused at the contract's
edge, events dead-lettered with the reason and API bodies and parameters answered 422."""

from __future__ import annotations

import orjson
import pytest

from memstream.events.deadletter import DeadLetter, SourceRecord
from memstream.history import HistoryWriter
from memstream.settings import Settings
from memstream.store.messages import MessageStore
from memstream.store.rebuilds import CacheRebuilds
from tests.support.api import client_for
from tests.support.kafka import message
from tests.support.settings import isolated_settings

pytestmark = pytest.mark.integration


async def test_an_event_for_a_padded_tenant_is_dead_lettered_and_never_read(
    services: Settings, tenant: str, store: MessageStore, engine
) -> None:
    letters: list[DeadLetter] = []

    async def collect(batch: object) -> None:
        letters.extend(batch)  # type: ignore[call-overload]

    writer = HistoryWriter(
        store, None, collect, rebuilds=CacheRebuilds(engine), max_content_chars=32768
    )
    padded = [
        message(f"{tenant} ", "c1", 0),
        message(tenant, "c1", 1, user_id="u1 "),
        message(tenant, " c1", 2),
    ]
    records = [
        SourceRecord("message-written", 0, n, None, b"c1", orjson.dumps(event))
        for n, event in enumerate(padded)
    ]
    await writer.process(records)
    assert [letter.reason for letter in letters] == ["schema_violation"] * 3
    assert all(b"white space" in letter.value for letter in letters)
    assert await store.count(tenant) == 0

    settings = isolated_settings(api_keys=f"key-{tenant}:{tenant}")
    async with client_for(settings, headers={"authorization": f"Bearer key-{tenant}"}) as api:
        stored = await api.get("/v1/conversations/c1/messages", params={"tenant_id": tenant})
        assert stored.status_code == 200, stored.text
        assert stored.json()["messages"] == []
        body = {"tenant_id": tenant, "user_id": "u1 ", "conversation_id": "c1", "query": "hi"}
        refused = await api.post("/v1/context", json=body)
        assert refused.status_code == 422, refused.text
        padded_query = await api.get(
            "/v1/memories", params={"tenant_id": f"{tenant} ", "user_id": "u1"}
        )
        assert padded_query.status_code == 422, padded_query.text
        padded_path = await api.delete("/v1/users/u1%20/memories", params={"tenant_id": tenant})
        assert padded_path.status_code == 422, padded_path.text
