"""A prepared load-path statement's SQL, made once per shape of its lists: the values land
where SQLAlchemy would put them, the statement's own literals stay, and bind processors run."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Column,
    Integer,
    MetaData,
    String,
    Table,
    TypeDecorator,
    bindparam,
    literal,
    select,
)
from sqlalchemy.dialects import mysql

from memstream.store import prepared
from memstream.store.prepared import Prepared

_table = Table(
    "t",
    MetaData(),
    Column("k", String(20)),
    Column("n", Integer),
)


class Shouted(TypeDecorator[str]):
    impl = String
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> Any:
        return None if value is None else value.upper()


STATEMENT = select(_table.c.k, literal(7).label("seven")).where(
    _table.c.n >= bindparam("floor"),
    _table.c.k.in_(bindparam("keys", expanding=True)),
    _table.c.k != bindparam("loud", type_=Shouted()),
    _table.c.n.in_(bindparam("ns", expanding=True)),
)


def test_each_value_lands_where_sqlalchemy_puts_it() -> None:
    statement = Prepared(STATEMENT)
    dialect = mysql.dialect()
    cases = [
        ({"floor": 3, "keys": ["a", "b"], "loud": "x", "ns": [1]}, [7, 3, "a", "b", "X", 1]),
        # The same shape again: the same SQL, the new values.
        ({"floor": 4, "keys": ["c", "d"], "loud": "y", "ns": [9]}, [7, 4, "c", "d", "Y", 9]),
        ({"floor": 0, "keys": ["e"], "loud": "z", "ns": [1, 2, 3]}, [7, 0, "e", "Z", 1, 2, 3]),
    ]
    for params, values in cases:
        shape = statement.shape(dialect, params)
        assert shape.args(params) == values
        # SQLAlchemy's own expansion of the statement, placeholders in the same places.
        state = STATEMENT.compile(dialect=dialect).construct_expanded_state(params)
        assert shape.sql == state.statement
    assert len(statement._shapes) == 2


def test_a_processed_value_is_processed_each_time() -> None:
    statement = Prepared(STATEMENT)
    params = {"floor": 1, "keys": ["a"], "loud": "quiet", "ns": [2]}
    assert "QUIET" in statement.shape(mysql.dialect(), params).args(params)
    params["loud"] = "again"
    assert "AGAIN" in statement.shape(mysql.dialect(), params).args(params)


def test_shapes_are_bounded(monkeypatch: Any) -> None:
    monkeypatch.setattr(prepared, "SHAPES", 3)
    statement = Prepared(STATEMENT)
    for n in range(1, 6):
        statement.shape(mysql.dialect(), {"floor": 0, "keys": ["k"] * n, "loud": "", "ns": [1]})
    assert [key[1] for key in statement._shapes] == [3, 4, 5]  # the least recently used went
