"""``memstream/store/`` is the one home of SQL: no module elsewhere in the library builds a
statement or names a table. Outside it, the database is reached through the store's functions
and classes; an engine or a connection may be passed along (``sqlalchemy.ext.asyncio``) and a
database error caught (``sqlalchemy.exc``)."""

from __future__ import annotations

from pathlib import Path

from tests.support.sources import import_lines, imported_from

REPO = Path(__file__).resolve().parents[2]
LIBRARY = ("memstream", "agents", "streams", "tables")
STORE = REPO / "memstream" / "store"
# What may be imported from SQLAlchemy outside the store: engines and connections to pass on,
# errors to catch.
PASSED_ON = ("sqlalchemy.ext.asyncio", "sqlalchemy.exc")


def sql_outside_the_store(path: Path) -> list[str]:
    """What ``path`` imports that builds SQL: SQLAlchemy's statements, or the store's tables
    (its upper-case constants, such as ``TERM_CHARS``, are not tables)."""
    found = []
    for line in import_lines(path):
        if line[0] == "import":
            modules = ["".join(line[1:]).split("as")[0]]
            names: list[str] = []
        else:
            module, names = imported_from(line)
            modules = [module]
        for module in modules:
            if module.startswith("sqlalchemy") and module not in PASSED_ON:
                found.append(f"{module}: {' '.join(names)}")
            elif module == "memstream.store.schema":
                tables = [n for n in names if n != "as" and not n.isupper()]
                if tables:
                    found.append(f"{module}: {' '.join(tables)}")
    return found


def test_no_sql_is_built_outside_the_store() -> None:
    outside = {}
    for root in LIBRARY:
        for path in sorted((REPO / root).rglob("*.py")):
            if STORE in path.parents:
                continue
            if found := sql_outside_the_store(path):
                outside[str(path.relative_to(REPO))] = found
    assert outside == {}
