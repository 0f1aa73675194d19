"""The load path's SELECTs on MySQL run on the driver's own cursor, their SQL made once per
shape of their ``IN`` lists.

Through SQLAlchemy, every execution of a cached statement walks the statement for its cache
key, renders its ``IN`` lists again, builds the parameters and goes through an execution
context and a result: a quarter of a search's API CPU (docs/design/builtin-store.md,
"Statements on the driver's cursor"). ``Prepared`` does that once per count of items in each
list and at execution only fills the values in. On other drivers (SQLite) it is SQLAlchemy's
``execute``; with a listener on the engine's statements, the same SQL through SQLAlchemy's
execution. A driver error is raised as ``DBAPIError``, the connection invalidated when it was
lost or the statement cancelled, as SQLAlchemy does."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import Executable
from sqlalchemy.sql.compiler import SQLCompiler

SHAPES = 512
"""Distinct ``IN`` list shapes kept per statement (the least recently used one goes)."""

_DRIVERS = frozenset({"aiomysql"})


class _Slot(NamedTuple):
    """Where one positional value comes from: ``params[name]``, or its ``item``-th item."""

    name: str
    item: int | None


@dataclass(frozen=True, slots=True)
class _Shape:
    """The SQL of one shape of the statement's lists and how to fill its values in."""

    sql: str
    recipe: tuple[tuple[_Slot | Any, Callable[[Any], Any] | None], ...]

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        out = []
        for source, process in self.recipe:
            if isinstance(source, _Slot):
                value = params[source.name]
                if source.item is not None:
                    value = value[source.item]
            else:
                value = source  # a literal of the statement itself
            out.append(value if process is None else process(value))
        return out


class Prepared:
    """One SELECT of the load path; ``rows`` runs it."""

    def __init__(self, statement: Executable) -> None:
        self.statement = statement
        self._compiled: dict[str, SQLCompiler] = {}
        self._expanding: dict[str, tuple[str, ...]] = {}
        self._shapes: OrderedDict[tuple[Any, ...], _Shape] = OrderedDict()

    async def rows(self, conn: AsyncConnection, params: Mapping[str, Any]) -> Sequence[Any]:
        """Every row of the statement with ``params``, as tuples (or SQLAlchemy rows)."""
        [rows] = await batch(conn, [(self, params)])
        return rows

    def shape(self, dialect: Dialect, params: Mapping[str, Any]) -> _Shape:
        """The SQL for the lengths of ``params``' lists, made on first use."""
        compiled = self._compiled.get(dialect.name)
        if compiled is None:
            compiled = self.statement.compile(dialect=dialect)  # type: ignore[attr-defined]
            assert isinstance(compiled, SQLCompiler)
            self._compiled[dialect.name] = compiled
            self._expanding[dialect.name] = tuple(
                bind.key for bind in compiled.binds.values() if bind.expanding
            )
        expanding = self._expanding[dialect.name]
        key = (dialect.name, *(len(params[name]) for name in expanding))
        shape = self._shapes.get(key)
        if shape is not None:
            self._shapes.move_to_end(key)
            return shape
        shape = _shape(compiled, params, expanding)
        self._shapes[key] = shape
        if len(self._shapes) > SHAPES:
            self._shapes.popitem(last=False)
        return shape


async def batch(
    conn: AsyncConnection, statements: Sequence[tuple[Prepared, Mapping[str, Any]]]
) -> list[Sequence[Any]]:
    """The rows of each statement with its parameters, in order: on MySQL all of them in one
    round trip (one text of several statements, which the driver always allows), elsewhere
    one after the other."""
    dialect = conn.dialect
    if dialect.driver not in _DRIVERS:
        return [(await conn.execute(p.statement, dict(params))).all() for p, params in statements]
    shapes = [p.shape(dialect, params) for p, params in statements]
    sql = ";\n".join(shape.sql for shape in shapes)
    args = [
        arg
        for shape, (_, params) in zip(shapes, statements, strict=True)
        for arg in shape.args(params)
    ]
    events = conn.sync_connection.dispatch if conn.sync_connection is not None else None
    if events is not None and (events.before_cursor_execute or events.after_cursor_execute):
        # Something listens to the engine's statements (tracing, a test): through
        # SQLAlchemy's execution, the same SQL and values, it sees each of them.
        return [
            (await conn.exec_driver_sql(shape.sql, tuple(shape.args(params)))).all()
            for shape, (_, params) in zip(shapes, statements, strict=True)
        ]
    raw = await conn.get_raw_connection()
    driver = raw.driver_connection
    assert driver is not None
    try:
        async with driver.cursor() as cursor:
            await cursor.execute(sql, args)
            out = [await cursor.fetchall()]
            for _ in shapes[1:]:
                await cursor.nextset()
                out.append(await cursor.fetchall())
            return out
    except dialect.loaded_dbapi.Error as exc:
        lost = dialect.is_disconnect(exc, raw.dbapi_connection, None)
        if lost:
            await conn.invalidate(exc)
        raise DBAPIError.instance(
            sql,
            args,
            exc,
            dialect.loaded_dbapi.Error,
            connection_invalidated=lost,
            dialect=dialect,
        ) from exc
    except BaseException as exc:
        if not isinstance(exc, Exception):
            # Cancelled (a deadline) or interrupted mid-statement: its reply is still on
            # the wire, so the connection is not given to anyone again, as SQLAlchemy does.
            await conn.invalidate(exc)
        raise


def _shape(compiled: SQLCompiler, params: Mapping[str, Any], expanding: Sequence[str]) -> _Shape:
    """Expanded once with markers for values: where each marker lands is the recipe."""
    markers: dict[str, Any] = {
        name: (
            [_Slot(name, i) for i in range(len(value))] if name in expanding else _Slot(name, None)
        )
        for name, value in params.items()
    }
    state = compiled.construct_expanded_state(markers)
    if state.positiontup is None:
        raise TypeError("a prepared statement needs a positional paramstyle")
    # As SQLAlchemy's execution context: the statement's processors, then the expanded ones.
    processors: dict[str, Any] = {**compiled._bind_processors, **state.processors}
    recipe = tuple((state.parameters[name], processors.get(name)) for name in state.positiontup)
    return _Shape(state.statement, recipe)
