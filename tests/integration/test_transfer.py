"""``memstream export`` and ``memstream import`` as an operator runs them, and
``GET /v1/users/{id}/export``: a user's memories out of each provider (the built-in store on
MariaDB, the MemOS and Mem0 fakes) and into an empty database (SQLite) and an emptied
provider give the same memories, times kept, and the same search answers; a second import
adds nothing; bad lines are reported by number and skipped."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from memstream.changes.model import Cause
from memstream.keyed import KeyedItems
from memstream.memory import NewMemory
from memstream.providers.router import ProviderRouter
from memstream.settings import Settings
from memstream.store.agents import AgentConfig
from memstream.store.database import create_engine, migrate
from memstream.store.schema import long_term_memory
from memstream.transfer.export import Selection, export_lines
from tests.fakes.mem0 import Mem0State
from tests.fakes.memos import MemOSState
from tests.support.api import client_for
from tests.support.processes import run_cli
from tests.support.settings import isolated_settings, unique

pytestmark = pytest.mark.integration

AGENT = "a1"
USER = "u1"
OLD = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)
QUERIES = ("what does the user drink", "Lisbon trip", "peanuts allergy")


@dataclass
class Source:
    tenant: str
    replaced: str  # the text an API put superseded
    live: list[dict[str, Any]]


def memories(tenant: str) -> list[NewMemory]:
    return [
        NewMemory(tenant, USER, AGENT, "user_profile", "pref_mem", "The user drinks green tea",
                  importance=7, source_event_ids=("e1", "e2"), created_at=OLD),
        NewMemory(tenant, USER, AGENT, "user_profile", "text_mem",
                  "The user is allergic to peanuts", importance=9, source_event_ids=("e3",),
                  created_at=OLD + timedelta(days=1)),
        NewMemory(tenant, USER, AGENT, f"agent_{AGENT}", "text_mem",
                  "The user said they fly to Lisbon in May", kind="episode",
                  occurred_at=OLD - timedelta(days=2), source_event_ids=("e4",),
                  created_at=OLD + timedelta(days=2)),
        NewMemory(tenant, "u2", AGENT, "user_profile", "text_mem", "Another user likes jazz",
                  created_at=OLD),
    ]  # fmt: skip


async def seed(settings: Settings, provider: str | None) -> Source:
    """The tenant's memories in ``provider``: three of u1 (one an episode), one of u2, and
    one of u1 superseded by a newer one."""
    tenant = unique("transfer")
    engine = create_engine(settings.database_url)
    router = ProviderRouter(engine, settings, config_cache_seconds=0)
    try:
        await router.agents.put(AgentConfig(tenant, AGENT, provider, model_target_id="m"))
        target = await router.for_agent(tenant, AGENT)
        await target.add(memories(tenant))
        (old,) = await target.add(
            [NewMemory(tenant, USER, AGENT, "user_profile", "text_mem", "The user drinks coffee",
                       created_at=OLD - timedelta(days=30))]
        )  # fmt: skip
        (new,) = await target.add(
            [NewMemory(tenant, USER, AGENT, "user_profile", "text_mem",
                       "The user no longer drinks coffee", supersedes=(old.id,))]
        )  # fmt: skip
        await target.delete(tenant, [old.id], cause=Cause("conflict", None, {old.id: (new.id,)}))
        live = [_shape(i) for i in await target.list_live(tenant, USER, AGENT)]
        return Source(tenant, old.content, live)
    finally:
        await router.close()
        await engine.dispose()


def _shape(item: Any) -> dict[str, Any]:
    """What an import must give back of a memory (ids are the target provider's)."""
    get = item.get if isinstance(item, dict) else lambda name: getattr(item, name)
    created = get("created_at")
    return {
        "cube_id": get("cube_id"),
        "memory_type": get("memory_type"),
        "content": get("content"),
        "source_event_ids": list(get("source_event_ids")),
        "created_at": created if isinstance(created, str) else _text(created),
    }


def _text(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


async def answers(settings: Settings, tenant: str) -> tuple[list[dict[str, Any]], list[list[str]]]:
    async with client_for(settings) as api:
        params = {"tenant_id": tenant, "user_id": USER, "agent_id": AGENT}
        listed = (await api.get("/v1/memories", params=params)).json()["items"]
        found = []
        for query in QUERIES:
            body = {**params, "query": query, "top_k": 5}
            response = await api.post("/v1/memories/search", json=body)
            assert response.status_code == 200, response.text
            found.append([i["content"] for i in response.json()["items"]])
    return sorted((_normal(i) for i in listed), key=lambda i: i["content"]), found


def _normal(item: dict[str, Any]) -> dict[str, Any]:
    shape = _shape(item)
    shape["created_at"] = _text(datetime.fromisoformat(shape["created_at"].replace("Z", "+00:00")))
    return shape


PROVIDERS = [None, "MEMOS", "MEM0"]


@pytest.mark.parametrize("provider", PROVIDERS, ids=["builtin", "memos", "mem0"])
async def test_export_then_import_into_an_empty_store_gives_the_same_memories_and_answers(
    servers: tuple[Settings, MemOSState, Mem0State], tmp_path: Path, provider: str | None
) -> None:
    settings, memos, mem0 = servers
    source = await seed(settings, provider)
    before = await answers(settings, source.tenant)
    dump = tmp_path / "memories.jsonl"
    out = run_cli(settings, "export", "--tenant-id", source.tenant, "--history", "-o", str(dump))
    assert out.returncode == 0, out.stderr
    lines = [orjson.loads(raw) for raw in dump.read_bytes().splitlines()]
    live = [line for line in lines if line["state"] == "live"]
    assert {line["user_id"] for line in live} == {USER, "u2"}
    assert len(live) == len(source.live) + 1  # u2's memory
    [replaced] = [line for line in lines if line["state"] != "live"]
    assert replaced["content"] == source.replaced
    assert replaced["state"] == "superseded"
    [newer] = [line for line in live if line["supersedes"]]
    assert newer["supersedes"] == [replaced["id"]]
    assert replaced["superseded_by"] == [newer["id"]]
    [episode] = [line for line in live if line["kind"] == "episode"]
    assert episode["occurred_at"] == _text(OLD - timedelta(days=2))
    assert episode["created_at"] == _text(OLD + timedelta(days=2))
    for field in ("id", "agent_id", "cube_id", "memory_type", "importance", "source_event_ids"):
        assert all(field in line for line in live)

    # A bad line among the good ones is reported by its number and skipped.
    raw = dump.read_bytes().splitlines()
    raw.insert(1, b'{"content": "no user", "tenant_id": "t"}')
    raw.insert(2, b"not json at all")
    raw.insert(3, b"")
    dump.write_bytes(b"\n".join(raw) + b"\n")

    # The empty target: a new database, and the external provider emptied.
    memos.reset()
    mem0.reset()
    target = isolated_settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}",
        memos_url=settings.memos_url,
        memos_api_key=settings.memos_api_key,
        mem0_url=settings.mem0_url,
        mem0_api_key=settings.mem0_api_key,
        agent_config_cache_seconds=0,
    )
    await migrate(target.database_url)
    async with client_for(target) as api:
        response = await api.put(
            f"/v1/agents/{AGENT}/config",
            params={"tenant_id": source.tenant},
            json={"long_memory_provider": provider, "model_target_id": "m"},
        )
        assert response.status_code == 200, response.text
    first = run_cli(target, "import", str(dump), "--tenant-id", source.tenant, "--agent-id", AGENT)
    assert first.returncode == 0, first.stderr
    assert f"{dump}:2: " in first.stderr and "user_id" in first.stderr
    assert f"{dump}:3: not JSON" in first.stderr
    assert f"imported {len(live)} memories into {provider or 'MYSQL'}" in first.stdout
    assert "1 history lines not imported, 2 bad lines skipped" in first.stdout

    assert await answers(target, source.tenant) == before

    again = run_cli(target, "import", str(dump), "--tenant-id", source.tenant, "--agent-id", AGENT)
    assert again.returncode == 0, again.stderr
    assert f"imported 0 memories into {provider or 'MYSQL'}, {len(live)} already there" in (
        again.stdout
    )
    assert await answers(target, source.tenant) == before


async def test_a_user_moves_from_mem0_to_the_builtin_store(
    servers: tuple[Settings, MemOSState, Mem0State], tmp_path: Path
) -> None:
    settings, _memos, _mem0 = servers
    source = await seed(settings, "MEM0")
    dump = tmp_path / "u1.jsonl"
    out = run_cli(
        settings, "export", "--tenant-id", source.tenant, "--user-id", USER, "-o", str(dump)
    )
    assert out.returncode == 0, out.stderr
    into = unique("moved")
    moved = run_cli(settings, "import", str(dump), "--tenant-id", into, "--agent-id", AGENT)
    assert moved.returncode == 0, moved.stderr
    assert "into MYSQL" in moved.stdout
    engine = create_engine(settings.database_url)
    try:
        async with engine.connect() as conn:
            rows = (
                await conn.execute(
                    long_term_memory.select().where(long_term_memory.c.tenant_id == into)
                )
            ).all()
    finally:
        await engine.dispose()
    assert sorted(r.content for r in rows) == sorted(m["content"] for m in source.live)
    coffee = next(r for r in rows if r.content == "The user drinks green tea")
    assert coffee.created_at.replace(tzinfo=UTC) == OLD


async def test_the_api_streams_one_users_export_as_the_command_writes_it(
    servers: tuple[Settings, MemOSState, Mem0State], tmp_path: Path
) -> None:
    settings, _memos, _mem0 = servers
    source = await seed(settings, None)
    engine = create_engine(settings.database_url)
    router = ProviderRouter(engine, settings)
    try:
        # Pages of two: the stream holds no more than a page at a time, and loses nothing.
        paged = [
            line
            async for line in export_lines(router, engine, Selection(source.tenant, USER), page=2)
        ]
    finally:
        await router.close()
        await engine.dispose()
    async with client_for(settings) as api:
        response = await api.get(f"/v1/users/{USER}/export", params={"tenant_id": source.tenant})
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/x-ndjson"
        streamed = response.content.splitlines(keepends=True)
        other = await api.get("/v1/users/nobody/export", params={"tenant_id": source.tenant})
        assert other.status_code == 200 and other.content == b""
    assert streamed == paged

    def by_text(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(items, key=lambda i: i["content"])

    assert by_text([_normal(orjson.loads(line)) for line in streamed]) == by_text(
        [_normal(m) for m in source.live]
    )
    assert {orjson.loads(line)["user_id"] for line in streamed} == {USER}
    assert len(streamed) == len(source.live)


async def test_items_under_a_key_come_back_with_their_key_and_value(
    services: Settings, tmp_path: Path
) -> None:
    settings = isolated_settings()
    tenant = unique("transfer-items")
    engine = create_engine(settings.database_url)
    router = ProviderRouter(engine, settings)
    try:
        items = KeyedItems(router, engine)
        await items.put(tenant, USER, AGENT, "user_profile", ["trips"], "next",
                        {"content": "The user flies to Porto", "nights": 3})  # fmt: skip
    finally:
        await router.close()
        await engine.dispose()
    dump = tmp_path / "items.jsonl"
    out = run_cli(settings, "export", "--tenant-id", tenant, "-o", str(dump))
    assert out.returncode == 0, out.stderr
    [line] = [orjson.loads(raw) for raw in dump.read_bytes().splitlines()]
    assert (line["namespace"], line["key"]) == (["trips"], "next")
    target = isolated_settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'items.db'}")
    moved = run_cli(target, "import", str(dump), "--tenant-id", tenant, "--agent-id", AGENT)
    assert moved.returncode == 0, moved.stderr
    engine = create_engine(target.database_url)
    router = ProviderRouter(engine, target)
    try:
        found = await KeyedItems(router, engine).get(tenant, USER, ["trips"], "next")
    finally:
        await router.close()
        await engine.dispose()
    assert found is not None
    assert found.value == {"content": "The user flies to Porto", "nights": 3}


async def test_an_import_the_provider_stops_says_where_and_a_second_one_finishes(
    servers: tuple[Settings, MemOSState, Mem0State], tmp_path: Path
) -> None:
    settings, _memos, mem0 = servers
    source = await seed(settings, None)
    dump = tmp_path / "u1.jsonl"
    out = run_cli(settings, "export", "--tenant-id", source.tenant, "-o", str(dump))
    assert out.returncode == 0, out.stderr
    into = unique("to-mem0")
    engine = create_engine(settings.database_url)
    router = ProviderRouter(engine, settings)
    try:
        await router.agents.put(AgentConfig(into, AGENT, "MEM0", model_target_id="m"))
    finally:
        await router.close()
        await engine.dispose()
    mem0.http_error["POST /memories"] = 500
    failed = run_cli(settings, "import", str(dump), "--tenant-id", into, "--agent-id", AGENT)
    assert failed.returncode == 1
    assert "stopped at line" in failed.stderr and "import the file again" in failed.stderr
    assert "imported 0 memories into MEM0" in failed.stdout
    del mem0.http_error["POST /memories"]
    done = run_cli(settings, "import", str(dump), "--tenant-id", into, "--agent-id", AGENT)
    assert done.returncode == 0, done.stderr
    assert f"imported {len(source.live) + 1} memories into MEM0" in done.stdout
