"""Prepared load-path statements on MariaDB's driver cursor: the rows SQLAlchemy's execute
gives, a driver error raised as SQLAlchemy's, a lost or cancelled connection invalidated and
replaced."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import (
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    bindparam,
    func,
    select,
    text,
)
from sqlalchemy.exc import DBAPIError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.store import prepared
from memstream.store.prepared import Prepared

pytestmark = pytest.mark.integration

VALUES = ["plain", "it's", 'a "quote"', "100% sure", "back\\slash", "ünïcödé 中文", "%s %(x)s"]


@pytest.fixture
async def table(engine: AsyncEngine) -> AsyncIterator[Table]:
    table = Table(
        f"prepared_{uuid.uuid4().hex[:8]}",
        MetaData(),
        Column("k", String(40)),
        Column("n", Integer),
        Column("f", Float),
        Column("note", String(40), nullable=True),
    )
    async with engine.begin() as conn:
        await conn.run_sync(table.create)
        rows = [
            {"k": k, "n": n, "f": n / 3, "note": None if n % 2 else k} for n, k in enumerate(VALUES)
        ]
        await conn.execute(table.insert(), rows)
    yield table
    async with engine.begin() as conn:
        await conn.run_sync(table.drop)


async def test_the_rows_are_those_of_sqlalchemys_execute(engine: AsyncEngine, table: Table) -> None:
    statement = (
        select(table.c.k, table.c.n, table.c.f, table.c.note)
        .where(
            table.c.k.in_(bindparam("keys", expanding=True)),
            table.c.n >= bindparam("floor"),
            table.c.k.like(bindparam("pattern")),
        )
        .order_by(table.c.n)
    )
    prepared = Prepared(statement)
    cases = [
        {"keys": VALUES, "floor": 0, "pattern": "%"},
        {"keys": VALUES[:3], "floor": 1, "pattern": "%"},
        {"keys": VALUES[3:6], "floor": 0, "pattern": "%\\%%"},  # a literal % in the pattern
        {"keys": ["none of them"], "floor": 0, "pattern": "%"},
        {"keys": VALUES[:3], "floor": 2, "pattern": "a%"},  # a shape seen before
    ]
    async with engine.connect() as conn:
        for params in cases:
            expected = [tuple(row) for row in (await conn.execute(statement, params)).all()]
            assert [tuple(row) for row in await prepared.rows(conn, params)] == expected
    assert expected == [(VALUES[2], 2, pytest.approx(2 / 3), VALUES[2])]


async def test_a_batch_answers_each_statement_s_rows_in_one_round_trip(
    engine: AsyncEngine, table: Table
) -> None:
    by_keys = Prepared(
        select(table.c.k, table.c.n)
        .where(table.c.k.in_(bindparam("keys", expanding=True)))
        .order_by(table.c.n)
    )
    counted = Prepared(select(func.count()).where(table.c.k.like(bindparam("pattern"))))
    batch = [
        (by_keys, {"keys": VALUES[:4]}),
        (counted, {"pattern": "%\\%%"}),
        (by_keys, {"keys": ["none of them"]}),
    ]
    async with engine.connect() as conn:
        separately = [[tuple(r) for r in await p.rows(conn, params)] for p, params in batch]
        together = [[tuple(r) for r in rows] for rows in await prepared.batch(conn, batch)]
        assert together == separately == [[(k, n) for n, k in enumerate(VALUES[:4])], [(2,)], []]
        # A failing statement of a batch raises as alone, and the connection stays usable.
        missing = Table(f"missing_{uuid.uuid4().hex[:8]}", MetaData(), Column("k", String(10)))
        broken = Prepared(select(missing.c.k).where(missing.c.k == bindparam("k")))
        with pytest.raises(ProgrammingError):
            await prepared.batch(conn, [batch[0], (broken, {"k": "x"})])
        assert (await conn.execute(text("SELECT 1"))).scalar() == 1


async def test_a_driver_error_is_sqlalchemys_and_leaves_the_connection_usable(
    engine: AsyncEngine,
) -> None:
    missing = Table(f"missing_{uuid.uuid4().hex[:8]}", MetaData(), Column("k", String(10)))
    prepared = Prepared(select(missing.c.k).where(missing.c.k == bindparam("k")))
    async with engine.connect() as conn:
        with pytest.raises(ProgrammingError) as raised:
            await prepared.rows(conn, {"k": "x"})
        assert not raised.value.connection_invalidated
        assert (await conn.execute(text("SELECT 1"))).scalar() == 1


async def test_a_lost_connection_is_invalidated_and_the_pool_reconnects(
    engine: AsyncEngine, table: Table
) -> None:
    prepared = Prepared(select(table.c.n).where(table.c.k == bindparam("k")))
    async with engine.connect() as conn:
        session = (await conn.execute(text("SELECT CONNECTION_ID()"))).scalar_one()
        async with engine.connect() as other:
            await other.execute(text(f"KILL {int(session)}"))
        with pytest.raises(DBAPIError) as raised:
            await prepared.rows(conn, {"k": "plain"})
        assert raised.value.connection_invalidated
    async with engine.connect() as conn:
        assert [tuple(row) for row in await prepared.rows(conn, {"k": "plain"})] == [(0,)]


async def test_a_statement_cancelled_midway_invalidates_its_connection(
    engine: AsyncEngine,
) -> None:
    # A deadline cancels the search while the server still works on it: that reply must never
    # be read as the next statement's on the same connection.
    slow = Prepared(select(func.sleep(bindparam("seconds"))))
    async with engine.connect() as conn:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await slow.rows(conn, {"seconds": 2})
        assert conn.invalidated
    async with engine.connect() as conn:
        assert [tuple(row) for row in await slow.rows(conn, {"seconds": 0})] == [(0,)]
