"""Processed-message marks are pruned once expired, on MariaDB and on the embedded SQLite."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.settings import Settings
from memstream.store.database import create_engine, migrate
from memstream.store.marks import MarkStore, mark_of
from memstream.store.schema import processed_mark

pytestmark = pytest.mark.integration


@pytest.fixture(params=["mariadb", "sqlite"])
async def database(
    request: pytest.FixtureRequest, services: Settings, tmp_path: Path
) -> AsyncIterator[AsyncEngine]:
    if request.param == "mariadb":
        engine = create_engine(services.database_url)
    else:
        url = f"sqlite+aiosqlite:///{tmp_path / 'marks.db'}"
        await migrate(url)
        engine = create_engine(url)
    yield engine
    await engine.dispose()


async def marks_of(engine: AsyncEngine, tenant: str) -> int:
    query = select(func.count()).where(processed_mark.c.tenant_id == tenant)
    async with engine.connect() as conn:
        return int((await conn.execute(query)).scalar_one())


async def old_marks(engine: AsyncEngine, tenant: str, count: int) -> None:
    """``count`` marks of ``tenant`` that expired a day ago."""
    expired = datetime.now(UTC).replace(tzinfo=None) - timedelta(days=1)
    rows = [
        {"tenant_id": tenant, "conversation_id": "old", "mark": mark_of("user", str(i)),
         "expires_at": expired}
        for i in range(count)
    ]  # fmt: skip
    async with engine.begin() as conn:
        await conn.execute(insert(processed_mark), rows)


async def test_recording_marks_prunes_the_expired_ones(database, tenant):
    await old_marks(database, tenant, 7)
    store = MarkStore(database)
    await store.record(tenant, "new", [mark_of("user", "hello")])
    assert await marks_of(database, tenant) == 1
    assert await store.present(tenant, "new", [mark_of("user", "hello")])

    # Pruning runs at most once per interval: expired marks wait for the next one.
    await old_marks(database, tenant, 3)
    await store.record(tenant, "new", [mark_of("user", "again")])
    assert await marks_of(database, tenant) == 5


async def test_a_prune_deletes_in_chunks_and_counts_what_it_deleted(database, tenant):
    await old_marks(database, tenant, 5)
    store = MarkStore(database, prune_every=0)
    await store.record(tenant, "new", [mark_of("user", "kept")])
    assert await marks_of(database, tenant) == 1
    await old_marks(database, tenant, 5)
    assert await store.prune(chunk=2, rounds=2) >= 4
    assert await store.prune(chunk=2) >= 1
    assert await marks_of(database, tenant) == 1
