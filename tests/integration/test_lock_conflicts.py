"""A transaction that loses a real deadlock on MariaDB runs again and commits; other database
errors are not retried."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.store.database import again_on_deadlock, lost_deadlock
from tests.support.waiting import eventually


async def lock_waits(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        query = "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'"
        return int((await conn.execute(text(query))).scalar() or 0)


async def test_the_loser_of_a_deadlock_runs_again_and_commits(engine: AsyncEngine) -> None:
    table = f"deadlock_{uuid.uuid4().hex[:10]}"
    async with engine.begin() as conn:
        await conn.execute(text(f"CREATE TABLE {table} (id INT PRIMARY KEY, v INT) ENGINE=InnoDB"))
        await conn.execute(text(f"INSERT INTO {table} VALUES (1, 0), (2, 0)"))
    try:
        async with engine.connect() as holder:
            # The holder's transaction weighs more (many rows written), so InnoDB rolls back
            # the other one when the two deadlock.
            await holder.begin()
            await holder.execute(text(f"UPDATE {table} SET v = 1 WHERE id = 1"))
            rows = ", ".join(f"({n}, 0)" for n in range(3, 203))
            await holder.execute(text(f"INSERT INTO {table} VALUES {rows}"))
            tries = 0
            waiting: asyncio.Task[object] | None = None
            holder_asked = asyncio.Event()

            async def work() -> int:
                nonlocal tries, waiting
                tries += 1
                async with engine.begin() as conn:
                    await conn.execute(text(f"UPDATE {table} SET v = v + 10 WHERE id = 2"))
                    if waiting is None:
                        # The holder now waits for row 2, which this transaction holds...
                        waiting = asyncio.create_task(
                            holder.execute(text(f"UPDATE {table} SET v = 2 WHERE id = 2"))
                        )
                        holder_asked.set()
                        await eventually(lambda: _waits(engine), within=10, what="a lock wait")
                    # ...and this one for row 1, which the holder holds: a deadlock.
                    await conn.execute(text(f"UPDATE {table} SET v = v + 10 WHERE id = 1"))
                return tries

            retried = asyncio.create_task(again_on_deadlock(work))
            await asyncio.wait_for(holder_asked.wait(), timeout=10)
            assert waiting is not None
            await waiting  # the deadlock's loser rolled back: the holder has row 2 now
            await holder.commit()
            assert await retried == 2
        async with engine.connect() as conn:
            found = await conn.execute(text(f"SELECT id, v FROM {table} WHERE id <= 2"))
            values = {int(i): int(v) for i, v in found}
        assert (values[1], values[2]) == (11, 12)  # the second try ran on the holder's rows
    finally:
        async with engine.begin() as conn:
            await conn.execute(text(f"DROP TABLE {table}"))


async def _waits(engine: AsyncEngine) -> bool:
    return await lock_waits(engine) > 0


async def test_an_error_that_is_no_deadlock_raises_at_once(engine: AsyncEngine) -> None:
    tries = 0

    async def broken() -> None:
        nonlocal tries
        tries += 1
        async with engine.connect() as conn:
            await conn.execute(text("SELECT * FROM no_such_table_here"))

    with pytest.raises(ProgrammingError) as raised:
        await again_on_deadlock(broken)
    assert tries == 1
    assert isinstance(raised.value, DBAPIError) and not lost_deadlock(raised.value)
