"""Engines and the idempotent schema migration for MySQL/MariaDB and SQLite."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Column, Connection, Select, Table, event, inspect, select, text, update
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.schema import CreateColumn

from memstream.retrieval import K1, REFERENCE_TERMS, B
from memstream.store.schema import long_term_memory, memory_term, metadata
from memstream_client.retry import HttpRetry

SelectT = TypeVar("SelectT", bound=Select[Any])
T = TypeVar("T")

# MySQL's and MariaDB's "deadlock found": InnoDB rolled the transaction back at once for a
# lock a concurrent one held, and running it again is how the manual says to answer. A lock
# wait timeout (1205) is not retried: it has already waited for a lock held for long.
DEADLOCK = 1213
_AGAIN = HttpRetry(attempts=5, first=0.05, cap=1.0, spread=(0.5, 1.5))


def lost_deadlock(exc: BaseException) -> bool:
    """Whether ``exc`` is the database rolling a transaction back as a deadlock's loser."""
    if not isinstance(exc, DBAPIError):
        return False
    args: tuple[object, ...] = getattr(exc.orig, "args", ())
    return bool(args) and args[0] == DEADLOCK


async def again_on_deadlock(transaction: Callable[[], Awaitable[T]]) -> T:
    """Run ``transaction`` (one whole transaction, safe to run again once rolled back) until
    it commits, running it again, after a short spread pause, while it loses a deadlock to a
    concurrent writer (at most five tries; the last loss raises)."""
    return await _AGAIN.run(transaction, worth=lost_deadlock)


IN_LIST = 500
"""Values per ``IN (...)`` list: a longer list is read or written in chunks of this many."""


async def ping(engine: AsyncEngine) -> None:
    """One round trip to the database on a connection of the pool: it answers, or this raises."""
    async with engine.connect() as conn:
        await conn.execute(text("SELECT 1"))


def in_lists(values: Sequence[T]) -> Iterator[Sequence[T]]:
    """``values`` in chunks of ``IN_LIST``, one ``IN (...)`` list each."""
    for start in range(0, len(values), IN_LIST):
        yield values[start : start + IN_LIST]


def force_index(stmt: SelectT, table: Table, index: str) -> SelectT:
    """``stmt`` reading ``table`` through ``index`` on MySQL and MariaDB (other databases
    plan it themselves). For the load path's statements, whose best index never changes:
    MariaDB otherwise weighs every index that ``tenant_id`` prefixes, with index dives, on
    every execution, which cost it more than running the statement (docs/design/builtin-store.md,
    "Index hints")."""
    hint = f"FORCE INDEX ({index})"
    return stmt.with_hint(table, hint, "mysql").with_hint(table, hint, "mariadb")


def create_engine(
    url: str | URL, *, pool_size: int = 5, pre_ping: bool = True, read_only: bool = False
) -> AsyncEngine:
    """An async engine tuned for the dialect behind ``url``; ``pre_ping=False`` saves a round
    trip per checkout where one failed call after a lost connection is acceptable. A
    ``read_only`` engine (MySQL) runs each statement in its own transaction (autocommit), so
    a connection goes back to the pool without the ROLLBACK round trip: for reads only, never
    for a write that must be atomic with another."""
    url = make_url(url)
    if url.get_backend_name() == "sqlite":
        if url.database and url.database != ":memory:":
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(url, connect_args={"timeout": 30}, hide_parameters=True)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    query = dict(url.query)
    query.setdefault("charset", "utf8mb4")
    reads: dict[str, Any] = (
        {"isolation_level": "AUTOCOMMIT", "skip_autocommit_rollback": True} if read_only else {}
    )
    return create_async_engine(
        url.set(query=query),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=pre_ping,
        pool_recycle=1800,
        # GROUP_CONCAT joins a search's postings into one string per term: MySQL 8 caps it
        # at 1,024 bytes by default (MariaDB at 1 MB).
        connect_args={
            "connect_timeout": 5,
            "init_command": "SET SESSION group_concat_max_len = 16777216",
        },
        # An error names its statement, never its values: they are users' messages.
        hide_parameters=True,
        **reads,
    )


def _sqlite_pragmas(dbapi_conn: object, _record: object) -> None:
    # WAL lets the API read while the worker writes; NORMAL sync is durable across app crashes.
    cursor = dbapi_conn.cursor()  # type: ignore[attr-defined]
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


async def ensure_database(url: str | URL) -> None:
    """Create the MySQL database named in ``url`` when it is missing (SQLite creates itself)."""
    url = make_url(url)
    if url.get_backend_name() == "sqlite" or not url.database:
        return
    server = create_engine(url.set(database=""), pool_size=1)
    try:
        async with server.begin() as conn:
            name = url.database.replace("`", "``")
            await conn.execute(
                text(f"CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4")
            )
    finally:
        await server.dispose()


async def migrate(url: str | URL) -> list[str]:
    """Create every missing table, column and index; safe to run any number of times."""
    await ensure_database(url)
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(metadata.create_all, checkfirst=True)
            await conn.run_sync(_add_missing_columns)
            await conn.run_sync(_create_missing_indexes)
            await conn.run_sync(_fill_term_impacts)
        return sorted(metadata.tables)
    finally:
        await engine.dispose()


def _fill_term_impacts(conn: Connection) -> None:
    """Postings written before they carried their memory's cube and their impact get both,
    from the memory's row (``retrieval.impact`` in SQL), so a search scores them at once."""
    terms, memories = memory_term, long_term_memory
    of_memory = memories.c.id == terms.c.memory_id
    length = select(memories.c.term_count).where(of_memory).scalar_subquery()
    tf = terms.c.tf
    # A plain read first (no locks): the update's scan would lock every posting it reads,
    # holding off writers, on every migrate after the fill too.
    if conn.execute(select(terms.c.tf).where(terms.c.impact.is_(None)).limit(1)).first() is None:
        return
    conn.execute(
        update(terms)
        .where(terms.c.impact.is_(None))
        .values(
            cube_id=select(memories.c.cube_id).where(of_memory).scalar_subquery(),
            impact=(K1 + 1.0) * tf / (tf + K1 * (1.0 - B) + K1 * B / REFERENCE_TERMS * length),
        )
    )


# Indexes an earlier version created that a later one replaced: dropped by ``migrate``.
REPLACED_INDEXES = {"message_indexed": ("ix_message_indexed_user",)}


def _create_missing_indexes(conn: Connection) -> None:
    """``create_all`` skips tables that exist: add the indexes added to them since, and drop
    those replaced since (each costs every write)."""
    inspector = inspect(conn)
    for table in metadata.sorted_tables:
        existing = {ix["name"] for ix in inspector.get_indexes(table.name)}
        for index in table.indexes:
            if index.name not in existing:
                index.create(conn)
        for name in REPLACED_INDEXES.get(table.name, ()):
            if name in existing:
                on_table = "" if conn.dialect.name == "sqlite" else f" ON {table.name}"
                conn.execute(text(f"DROP INDEX {name}{on_table}"))


def _add_missing_columns(conn: Connection) -> None:
    """``create_all`` skips tables that exist: add the columns added to them since.

    A new column of an existing table must be nullable or have a server default, so that
    the rows already there get a value (SQLite refuses anything else too)."""
    inspector = inspect(conn)
    for table in metadata.sorted_tables:
        existing = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name not in existing:
                _add_column(conn, table, column)


def _add_column(conn: Connection, table: Table, column: Column[object]) -> None:
    if not column.nullable and column.server_default is None:
        raise RuntimeError(
            f"cannot add {table.name}.{column.name} to existing rows: "
            "it is NOT NULL without a server default"
        )
    preparer = conn.dialect.identifier_preparer
    spec = CreateColumn(column).compile(dialect=conn.dialect)
    statement = f"ALTER TABLE {preparer.format_table(table)} ADD COLUMN {spec}"
    try:
        conn.exec_driver_sql(statement)
    except DBAPIError:
        # Another migration running at the same time may have added it first.
        columns = {c["name"] for c in inspect(conn).get_columns(table.name)}
        if column.name not in columns:
            raise
