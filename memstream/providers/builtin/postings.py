"""The built-in store's stored lexical postings (table ``memory_term``): written with each
memory, read per query term at search time, filled in for rows that arrived another way.

A search reads the postings of its terms for one user, joined on the live memories, and the
user's live memory count in the same statement: everything BM25 needs (tf, df, the document's
length, N), so a user costs the same whether or not this process has seen them before, and a
memory deleted through any process is never scored again."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Counter as Metric
from sqlalchemy import (
    Insert,
    ScalarSelect,
    Select,
    String,
    bindparam,
    case,
    cast,
    delete,
    func,
    select,
    update,
)
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memstream.retrieval import DocumentTerms, document_terms
from memstream.store.database import force_index
from memstream.store.schema import TERM_CHARS
from memstream.store.schema import long_term_memory as t
from memstream.store.schema import memory_term as p

WORD, PHRASE = 0, 1

POSTINGS_BUDGET = 50_000
"""At most this many postings are read and scored per search: the query's rarest terms
first, a term that no longer fits is left unread (docs/design/builtin-store.md, "Bounds")."""

INDEXED = Metric(
    "memstream_memory_terms_indexed_total",
    "Memories whose lexical postings the term backfill wrote (rows written without them).",
)


def rows_of(
    tenant_id: str, user_id: str, memory_id: str, terms: DocumentTerms
) -> list[dict[str, Any]]:
    """The ``memory_term`` rows of one memory (terms too long for the column are left out:
    no query can match them either, ``read`` skips them too)."""
    out: list[dict[str, Any]] = []
    for field_, counts in ((WORD, terms.words), (PHRASE, terms.pairs)):
        for term, tf in counts.items():
            if len(term) <= TERM_CHARS:
                out.append(
                    {
                        "tenant_id": tenant_id,
                        "user_id": user_id,
                        "term": term,
                        "field": field_,
                        "memory_id": memory_id,
                        "tf": tf,
                    }
                )
    return out


def _insert_ignore(dialect: str) -> Insert:
    # A memory indexed twice (the backfill racing a writer) keeps the same rows.
    if dialect == "sqlite":
        return sqlite.insert(p).on_conflict_do_nothing()
    stmt = mysql.insert(p)
    return stmt.on_duplicate_key_update(tf=stmt.inserted.tf)


async def write(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> None:
    for start in range(0, len(rows), 1000):
        await conn.execute(_insert_ignore(conn.dialect.name), rows[start : start + 1000])


async def remove(conn: AsyncConnection, tenant_id: str, memory_ids: Sequence[str]) -> None:
    """Drop the postings of deleted memories (in the deleting transaction)."""
    for start in range(0, len(memory_ids), 500):
        chunk = memory_ids[start : start + 500]
        await conn.execute(delete(p).where(p.c.tenant_id == tenant_id, p.c.memory_id.in_(chunk)))


@dataclass(slots=True)
class Postings:
    """The live postings of a query's terms for one user, as ``retrieval.relevance`` takes
    them, with each posted memory's length and cube."""

    n_docs: int = 0
    words: dict[str, dict[str, int]] = field(default_factory=dict)
    pairs: dict[str, dict[str, int]] = field(default_factory=dict)
    lengths: dict[str, int] = field(default_factory=dict)
    cubes: dict[str, str] = field(default_factory=dict)
    # The document frequency of the terms left unread (over the budget): idf only.
    unread: dict[str, int] = field(default_factory=dict)
    count: int = 0  # postings read


async def read(
    conn: AsyncConnection,
    tenant_id: str,
    user_id: str,
    words: Iterable[str],
    pairs: Iterable[str],
    *,
    budget: int = POSTINGS_BUDGET,
) -> Postings:
    """One statement: the postings of ``words`` and ``pairs`` of the user's live memories and
    the user's live memory count (N of the idf); at most ``budget`` postings, rarest terms
    first (the database sends no postings of a term posting more than the budget)."""
    wanted_words = {w for w in words if len(w) <= TERM_CHARS}
    wanted_pairs = {w for w in pairs if len(w) <= TERM_CHARS}
    out = Postings()
    if not wanted_words:
        return out  # nothing can match: phrases only add to a word match
    params = {
        "tenant_id": tenant_id,
        "user_id": user_id,
        "terms": sorted(wanted_words | wanted_pairs),
        "budget": budget,
    }
    rows = sorted(
        (await conn.execute(_POSTINGS, params)).all(), key=lambda row: (int(row[2]), row[0])
    )
    kept: list[tuple[str, int, int, str]] = []
    for term, field_, count, joined_postings, n_docs in rows:
        out.n_docs = int(n_docs)
        if joined_postings is None or out.count + count > budget:
            if field_ == WORD:  # a pair left unread only adds nothing
                out.unread[term] = int(count)
            continue
        out.count += count
        kept.append((term, field_, count, joined_postings))
    for term, field_, count, joined_postings in kept:
        records = [r.split(_FIELD) for r in joined_postings.split(_RECORD)]
        if len(records) != count or any(len(r) != 4 for r in records):
            # A separator inside an id, or a truncated string: read the kept terms' rows one
            # posting each.
            words_kept = {term for term, field_, *_ in kept if field_ == WORD}
            pairs_kept = {term for term, field_, *_ in kept if field_ == PHRASE}
            exact = await _read_rows(conn, tenant_id, user_id, words_kept, pairs_kept)
            exact.n_docs, exact.unread, exact.count = out.n_docs, out.unread, out.count
            return exact
        for memory_id, tf, length, cube in records:
            _add(out, wanted_words, wanted_pairs, term, field_, memory_id, tf, length, cube)
    return out


_FIELD, _RECORD = "\x1f", "\x1e"  # ASCII unit and record separators


def _live_count() -> ScalarSelect[Any]:
    """The user's live memory count (N of the idf), for ``tenant_id`` and ``user_id``."""
    count = (
        select(func.count())
        .select_from(t)
        .where(
            t.c.tenant_id == bindparam("tenant_id"),
            t.c.user_id == bindparam("user_id"),
            t.c.deleted_at.is_(None),
        )
    )
    return force_index(count, t, "ix_memory_scope").scalar_subquery()


# The postings of the terms ``terms`` of the user's live, indexed memories.
_SCOPE = (
    p.c.tenant_id == bindparam("tenant_id"),
    p.c.user_id == bindparam("user_id"),
    p.c.term.in_(bindparam("terms", expanding=True)),
    t.c.tenant_id == bindparam("tenant_id"),
    t.c.deleted_at.is_(None),
    t.c.term_count.is_not(None),
)
_JOINED = p.join(t, t.c.id == p.c.memory_id)

# One row per term, its postings joined in one string: the driver decodes a thousand rows in
# milliseconds, one string in well under one (a common word posts thousands). Built once with
# bound parameters: constructing the statement and its cache key cost more CPU per search
# than the driver's work (the compiled form is the engine's, cached by that key).
_POSTING = (
    p.c.memory_id
    + _FIELD
    + cast(p.c.tf, String)
    + _FIELD
    + cast(t.c.term_count, String)
    + _FIELD
    + t.c.cube_id
)


def _by_keys(stmt: Select[Any]) -> Select[Any]:
    """The postings by their primary key, each joined to its memory by the memory's."""
    return force_index(force_index(stmt, p, "PRIMARY"), t, "PRIMARY")


_POSTINGS = _by_keys(
    select(
        p.c.term,
        p.c.field,
        func.count(),
        case(
            (func.count() <= bindparam("budget"), func.aggregate_strings(_POSTING, _RECORD)),
            else_=None,
        ),
        _live_count(),
    )
    .select_from(_JOINED)
    .where(*_SCOPE)
    .group_by(p.c.term, p.c.field)
)
_POSTING_ROWS = _by_keys(
    select(p.c.memory_id, p.c.term, p.c.field, p.c.tf, t.c.term_count, t.c.cube_id, _live_count())
    .select_from(_JOINED)
    .where(*_SCOPE)
)


def _add(
    out: Postings,
    words: set[str],
    pairs: set[str],
    term: str,
    field_: int,
    memory_id: str,
    tf: object,
    length: object,
    cube: str,
) -> None:
    if field_ == WORD and term in words:
        target = out.words
    elif field_ == PHRASE and term in pairs:
        target = out.pairs
    else:
        return
    target.setdefault(term, {})[memory_id] = int(str(tf))
    out.lengths[memory_id] = int(str(length))
    out.cubes[memory_id] = cube


async def _read_rows(
    conn: AsyncConnection, tenant_id: str, user_id: str, words: set[str], pairs: set[str]
) -> Postings:
    """``read`` one posting per row (the slow, always exact form)."""
    out = Postings()
    params = {"tenant_id": tenant_id, "user_id": user_id, "terms": sorted(words | pairs)}
    for memory_id, term, field_, tf, length, cube, n_docs in (
        await conn.execute(_POSTING_ROWS, params)
    ).all():
        out.n_docs = int(n_docs)
        _add(out, words, pairs, term, field_, memory_id, tf, length, cube)
    return out


class TermBackfill:
    """Writes the postings of live memories that have none (``term_count`` NULL): rows
    imported by SQL, and rows written before the postings existed, after ``memstream migrate``."""

    def __init__(
        self, engine: AsyncEngine, *, per_tick: int = 500, tenant_id: str | None = None
    ) -> None:
        self._engine = engine
        self.per_tick = per_tick
        self.tenant_id = tenant_id  # only this tenant's memories (an import, a benchmark)

    async def tick(self) -> int:
        """Index the next ``per_tick`` memories lacking postings; answers how many."""
        query = (
            select(t.c.id, t.c.tenant_id, t.c.user_id, t.c.content)
            .where(t.c.term_count.is_(None), t.c.deleted_at.is_(None))
            .limit(self.per_tick)
        )
        if self.tenant_id is not None:
            query = query.where(t.c.tenant_id == self.tenant_id)
        async with self._engine.connect() as conn:
            pending = (await conn.execute(query)).all()
        if not pending:
            return 0
        async with self._engine.begin() as conn:
            for row in pending:
                terms = document_terms(row.content)
                await write(conn, rows_of(row.tenant_id, row.user_id, row.id, terms))
                await conn.execute(
                    update(t)
                    .where(t.c.id == row.id, t.c.term_count.is_(None))
                    .values(term_count=terms.length)
                )
        INDEXED.inc(len(pending))
        return len(pending)

    async def run_until_done(self) -> int:
        """Tick until every live memory has its postings (tests, an import, after migrate)."""
        total = 0
        while done := await self.tick():
            total += done
        return total
