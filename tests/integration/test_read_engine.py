"""The read-only engine (the API's reads): each statement in its own transaction, so a
connection goes back to the pool without a ROLLBACK and its next checkout sees what was
committed since, never a snapshot kept from an earlier read."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.settings import Settings
from memstream.store.database import create_engine

pytestmark = pytest.mark.integration


async def test_a_read_only_connection_sees_each_commit_and_returns_without_a_rollback(
    services: Settings, engine: AsyncEngine
) -> None:
    table = f"read_engine_{uuid.uuid4().hex[:8]}"
    reader = create_engine(services.database_url, pool_size=1, read_only=True)
    async with engine.begin() as conn:
        await conn.execute(text(f"CREATE TABLE {table} (n INT PRIMARY KEY)"))
    try:
        counts, rollbacks = [], []
        for n in range(3):
            async with reader.connect() as conn:  # the pool's one connection, each time
                assert (await conn.execute(text("SELECT @@autocommit"))).scalar() == 1
                counts.append((await conn.execute(text(f"SELECT COUNT(*) FROM {table}"))).scalar())
                status = text("SHOW SESSION STATUS LIKE 'Com_rollback'")
                rollbacks.append((await conn.execute(status)).one()[1])
            async with engine.begin() as conn:
                await conn.execute(text(f"INSERT INTO {table} VALUES (:n)"), {"n": n})
        assert counts == [0, 1, 2]
        assert len(set(rollbacks)) == 1  # the session has run no ROLLBACK between checkouts
    finally:
        await reader.dispose()
        async with engine.begin() as conn:
            await conn.execute(text(f"DROP TABLE {table}"))
