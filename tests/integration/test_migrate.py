"""``memstream migrate`` upgrades a database made by an older release: missing tables, columns
and indexes are added, rows already there keep their data; on SQLite and MariaDB."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import (
    JSON,
    Column,
    Connection,
    DateTime,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    inspect,
    text,
)
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.identity import content_hash
from memstream.memory import USER_PROFILE, NewMemory
from memstream.providers.builtin import BuiltinProvider
from memstream.store.database import create_engine, migrate
from memstream.store.postings import TermBackfill

pytestmark = pytest.mark.integration

MARIADB_SERVER = "mysql+aiomysql://root@127.0.0.1:3306"
OLD_CONTENT = "The user keeps bees on the roof."

# ``long_term_memory`` as the first releases created it: no kind, no occurred_at.
old = MetaData()
Table(
    "long_term_memory",
    old,
    Column("id", String(64), primary_key=True),
    Column("tenant_id", String(128), nullable=False),
    Column("user_id", String(128), nullable=False),
    Column("agent_id", String(128), nullable=True),
    Column("cube_id", String(140), nullable=False),
    Column("memory_type", String(16), nullable=False),
    Column("content", Text, nullable=False),
    Column("importance", SmallInteger, nullable=False),
    Column("source_event_ids", JSON, nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("created_at", DateTime, nullable=False),
    Column("deleted_at", DateTime, nullable=True),
)


@pytest.fixture(params=["sqlite", "mariadb"])
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
        return
    name = f"memstream_migrate_{uuid.uuid4().hex[:10]}"
    server = create_engine(MARIADB_SERVER)
    try:
        async with server.begin() as conn:
            await conn.execute(text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
    except Exception as exc:  # pragma: no cover - depends on the machine
        pytest.fail(f"MariaDB is not reachable: {exc}; start the services with `make services`")
    try:
        yield f"{MARIADB_SERVER}/{name}"
    finally:
        async with server.begin() as conn:
            await conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
        await server.dispose()


async def columns_and_indexes(engine: AsyncEngine, table: str) -> tuple[set[str], set[str]]:
    def read(sync_conn: Connection) -> tuple[set[str], set[str]]:
        inspector = inspect(sync_conn)
        columns = {c["name"] for c in inspector.get_columns(table)}
        return columns, {i["name"] for i in inspector.get_indexes(table) if i["name"]}

    async with engine.connect() as conn:
        return await conn.run_sync(read)


async def test_migrate_adds_what_an_old_database_lacks(url: str) -> None:
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(old.create_all)
            await conn.execute(
                old.tables["long_term_memory"].insert(),
                [
                    {
                        "id": "old-1",
                        "tenant_id": "t",
                        "user_id": "u1",
                        "agent_id": None,
                        "cube_id": USER_PROFILE,
                        "memory_type": "text_mem",
                        "content": OLD_CONTENT,
                        "importance": 5,
                        "source_event_ids": ["e1"],
                        "content_hash": content_hash(OLD_CONTENT),
                        "created_at": datetime(2025, 5, 1, 12, 0),
                    }
                ],
            )
        columns, indexes = await columns_and_indexes(engine, "long_term_memory")
        assert "kind" not in columns and "ix_memory_written" not in indexes

        await migrate(url)
        await migrate(url)  # and again: nothing left to do, no error

        columns, indexes = await columns_and_indexes(engine, "long_term_memory")
        assert {"kind", "occurred_at", "term_count"} <= columns
        assert "ix_memory_terms_pending" in indexes
        term_columns, term_indexes = await columns_and_indexes(engine, "memory_term")
        assert {"term", "field", "memory_id", "tf"} <= term_columns
        assert "ix_term_memory" in term_indexes
        assert "ix_memory_written" in indexes
        embedding_columns, embedding_indexes = await columns_and_indexes(engine, "memory_embedding")
        assert {"memory_id", "model", "dims", "vector"} <= embedding_columns
        assert "ix_embedding_user" in embedding_indexes

        # The old row reads as a fact with no date; new rows carry their kind and date.
        provider = BuiltinProvider(engine)
        [item] = await provider.list_live("t", "u1", None)
        assert (item.id, item.kind, item.occurred_at) == ("old-1", "fact", None)
        said = datetime(2025, 5, 2, 9, 30)
        episode = NewMemory(
            "t",
            "u1",
            None,
            USER_PROFILE,
            "text_mem",
            "On 2 May 2025 the user said the bees swarmed.",
            kind="episode",
            occurred_at=said,
        )
        [added] = await provider.add([episode])
        assert added.kind == "episode" and added.occurred_at is not None
        assert added.occurred_at.replace(tzinfo=None) == said
        # Rows written before the postings existed are searchable once the term backfill has
        # indexed them; new rows at once.
        hits = await provider.search("t", "u1", None, "bees")
        assert {h.id for h in hits} == {added.id}
        assert await TermBackfill(engine).run_until_done() == 1
        hits = await provider.search("t", "u1", None, "bees")
        assert {h.id for h in hits} == {"old-1", added.id}
    finally:
        await engine.dispose()


# ``memory_term`` before its postings carried their memory's cube and their impact.
before_impacts = MetaData()
Table(
    "memory_term",
    before_impacts,
    Column("tenant_id", String(128), primary_key=True),
    Column("user_id", String(128), primary_key=True),
    Column("term", String(64), primary_key=True),
    Column("field", SmallInteger, primary_key=True, autoincrement=False),
    Column("memory_id", String(64), primary_key=True),
    Column("tf", Integer, nullable=False),
)


async def test_migrate_fills_in_the_impacts_of_postings_written_without_them(url: str) -> None:
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(before_impacts.create_all)
        await migrate(url)  # every other table as it is now
        # A memory and its postings as the release before wrote them: no cube, no impact.
        provider = BuiltinProvider(engine)
        [stored] = await provider.add(
            [NewMemory("t", "old", None, USER_PROFILE, "text_mem", OLD_CONTENT)]
        )
        async with engine.begin() as conn:
            await conn.execute(text("UPDATE memory_term SET cube_id = NULL, impact = NULL"))
        assert await provider.search("t", "old", None, "bees on the roof") == []

        await migrate(url)
        [now] = await provider.add(
            [NewMemory("t", "new", None, USER_PROFILE, "text_mem", OLD_CONTENT)]
        )
        [old_hit] = await provider.search("t", "old", None, "bees on the roof")
        [new_hit] = await provider.search("t", "new", None, "bees on the roof")
        assert (old_hit.id, new_hit.id) == (stored.id, now.id)
        assert old_hit.score == new_hit.score > 0
    finally:
        await engine.dispose()


# ``message_indexed`` with the index a turn search read before it covered who said each turn.
before_covering = MetaData()
Table(
    "message_indexed",
    before_covering,
    Column("message_id", Integer, primary_key=True, autoincrement=False),
    Column("tenant_id", String(128), nullable=False),
    Column("user_id", String(128), nullable=False),
    Column("agent_id", String(128), nullable=True),
    Column("role", String(16), nullable=False),
    Column("term_count", Integer, nullable=False),
    Index("ix_message_indexed_user", "tenant_id", "user_id", "term_count"),
)


async def test_migrate_replaces_an_index_a_later_release_replaced(url: str) -> None:
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(before_covering.create_all)
        _, indexes = await columns_and_indexes(engine, "message_indexed")
        assert "ix_message_indexed_user" in indexes

        await migrate(url)
        await migrate(url)

        _, indexes = await columns_and_indexes(engine, "message_indexed")
        assert "ix_message_indexed_visible" in indexes
        assert "ix_message_indexed_user" not in indexes
    finally:
        await engine.dispose()
