"""The database a test of the built-in store runs on: SQLite and MariaDB, migrated."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
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
