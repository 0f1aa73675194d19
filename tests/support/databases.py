"""The database a test of the built-in store runs on: SQLite and MariaDB, migrated; and the
statements a block of code runs on it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.store.database import create_engine, migrate

MARIADB_URL = "mysql+aiomysql://root@127.0.0.1:3306/memstream"


@pytest.fixture(params=["sqlite", "mariadb"])
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}" if request.param == "sqlite" else None
    url = url or MARIADB_URL
    try:
        await migrate(url)
    except Exception as exc:  # pragma: no cover - depends on the machine
        pytest.fail(f"{url} is not reachable: {exc}; start the services with `make services`")
    engine = create_engine(url)
    yield engine
    await engine.dispose()


@contextmanager
def statements(db: AsyncEngine) -> Iterator[list[str]]:
    """The SQL statements run on ``db`` inside the block."""
    seen: list[str] = []

    def count(*args: Any) -> None:
        seen.append(args[2])

    event.listen(db.sync_engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(db.sync_engine, "before_cursor_execute", count)
