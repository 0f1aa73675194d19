"""The built-in store's stored lexical postings (table ``memory_term``): written with each
memory, read per query term at search time, filled in for rows that arrived another way.

A search reads the postings of its terms for one user, joined on the live memories, and the
user's live memory count in the same statement: everything BM25 needs (tf, df, the document's
length, N), so a user costs the same whether or not this process has seen them before, and a
memory deleted through any process is never scored again."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from prometheus_client import Counter as Metric
from sqlalchemy import (
    Insert,
    ScalarSelect,
    Select,
    String,
    and_,
    bindparam,
    case,
    cast,
    delete,
    func,
    literal,
    select,
    true,
    update,
)
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memstream.memory import MemoryItem
from memstream.retrieval import (
    BACKGROUND_DOCS,
    PHRASE_WEIGHT,
    DocumentTerms,
    document_terms,
    impact,
)
from memstream.store import memory_rows, stamps
from memstream.store.database import force_index, in_lists
from memstream.store.prepared import Prepared
from memstream.store.schema import TERM_CHARS, long_term_memory, memory_term
from memstream.text.terms import phrases

WORD, PHRASE = 0, 1

POSTINGS_BUDGET = 50_000
"""At most this many postings are read and scored per search: the query's rarest terms
first, a term that no longer fits is left unread (docs/design/builtin-store.md, "Bounds")."""

INDEXED = Metric(
    "memstream_memory_terms_indexed_total",
    "Memories whose lexical postings the term backfill wrote (rows written without them).",
)


def rows_of(
    tenant_id: str, user_id: str, memory_id: str, terms: DocumentTerms, *, cube_id: str
) -> list[dict[str, Any]]:
    """The ``memory_term`` rows of one memory of cube ``cube_id``, each with its term's impact
    (terms too long for the column are left out: no query can match them either, ``read``
    skips them too)."""
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
                        "cube_id": cube_id,
                        "impact": impact(tf, terms.length),
                    }
                )
    return out


def _insert_ignore(dialect: str) -> Insert:
    # A memory indexed twice (the backfill racing a writer) keeps the same rows.
    if dialect == "sqlite":
        return sqlite.insert(memory_term).on_conflict_do_nothing()
    stmt = mysql.insert(memory_term)
    return stmt.on_duplicate_key_update(
        tf=stmt.inserted.tf, cube_id=stmt.inserted.cube_id, impact=stmt.inserted.impact
    )


async def write(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> None:
    for start in range(0, len(rows), 1000):
        await conn.execute(_insert_ignore(conn.dialect.name), rows[start : start + 1000])


async def remove(conn: AsyncConnection, tenant_id: str, memory_ids: Sequence[str]) -> None:
    """Drop the postings of deleted memories (in the deleting transaction)."""
    for start in range(0, len(memory_ids), 500):
        chunk = memory_ids[start : start + 500]
        await conn.execute(
            delete(memory_term).where(
                memory_term.c.tenant_id == tenant_id, memory_term.c.memory_id.in_(chunk)
            )
        )


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
    return _counted().scalar_subquery()


def _counted() -> Select[Any]:
    """``SELECT count(*) AS n_docs``: the user's live memories, on the index of their scope."""
    count = (
        select(func.count().label("n_docs"))
        .select_from(long_term_memory)
        .where(
            long_term_memory.c.tenant_id == bindparam("tenant_id"),
            long_term_memory.c.user_id == bindparam("user_id"),
            long_term_memory.c.deleted_at.is_(None),
        )
    )
    return force_index(count, long_term_memory, "ix_memory_scope")


# The postings of the terms ``terms`` of the user's live, indexed memories.
_SCOPE = (
    memory_term.c.tenant_id == bindparam("tenant_id"),
    memory_term.c.user_id == bindparam("user_id"),
    memory_term.c.term.in_(bindparam("terms", expanding=True)),
    long_term_memory.c.tenant_id == bindparam("tenant_id"),
    long_term_memory.c.deleted_at.is_(None),
    long_term_memory.c.term_count.is_not(None),
)
_JOINED = memory_term.join(long_term_memory, long_term_memory.c.id == memory_term.c.memory_id)

# One row per term, its postings joined in one string: the driver decodes a thousand rows in
# milliseconds, one string in well under one (a common word posts thousands). Built once with
# bound parameters: constructing the statement and its cache key cost more CPU per search
# than the driver's work (the compiled form is the engine's, cached by that key).
_POSTING = (
    memory_term.c.memory_id
    + _FIELD
    + cast(memory_term.c.tf, String)
    + _FIELD
    + cast(long_term_memory.c.term_count, String)
    + _FIELD
    + long_term_memory.c.cube_id
)


def _by_keys(stmt: Select[Any]) -> Select[Any]:
    """The postings by their primary key, each joined to its memory by the memory's."""
    return force_index(force_index(stmt, memory_term, "PRIMARY"), long_term_memory, "PRIMARY")


_POSTINGS = _by_keys(
    select(
        memory_term.c.term,
        memory_term.c.field,
        func.count(),
        case(
            (func.count() <= bindparam("budget"), func.aggregate_strings(_POSTING, _RECORD)),
            else_=None,
        ),
        _live_count(),
    )
    .select_from(_JOINED)
    .where(*_SCOPE)
    .group_by(memory_term.c.term, memory_term.c.field)
)
_POSTING_ROWS = _by_keys(
    select(
        memory_term.c.memory_id,
        memory_term.c.term,
        memory_term.c.field,
        memory_term.c.tf,
        long_term_memory.c.term_count,
        long_term_memory.c.cube_id,
        _live_count(),
    )
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


# --- scoring in the database ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ranked:
    """A live memory of a search's pool: the memory and its relevance (``bm25 / ideal``)."""

    item: MemoryItem
    relevance: float


def repeat_lists(counts: Counter[str], wanted: Sequence[str]) -> dict[str, list[str]]:
    """The parameters ``query_tf`` reads: ``repeat<n>``, the terms of ``wanted`` the query
    holds at least n times, for n from 2 to the most any term is repeated."""
    levels = max(counts[term] for term in wanted)
    return {
        f"repeat{level}": [term for term in wanted if counts[term] >= level]
        for level in range(2, levels + 1)
    }


def query_tf(term: Any, levels: int) -> Any:
    """A term's count in the query, in SQL: 1, plus 1 for each list ``repeat2``..
    ``repeat<levels>`` holding it (``repeat_lists``)."""
    count: Any = literal(1)
    for level in range(2, levels + 1):
        repeated = term.in_(bindparam(f"repeat{level}", expanding=True))
        count = count + case((repeated, 1), else_=0)
    return count


@cache
def _ranking(levels: int) -> Select[Any]:
    """The one statement of a lexical search: the postings of the query's terms of one user
    (the primary key's prefix, no join) read once, their document frequency, the idf over the
    user's live count, the budget applied rarest terms first, each memory scored from the
    stored impacts, thresholded and cut to the pool of each readable cube; then only the
    pool's live rows, each packed in one column. Each step reads the one before it once (a derived
    table read twice is computed twice). Built once per count of repeat lists (a query
    repeating a term is rare): the engine caches its compiled form."""
    term_key = (memory_term.c.term, memory_term.c.field)
    # The live count read once, beside the postings: as a scalar subquery in each of the
    # three places it is used, the database planned and ran it three times.
    stats = _counted().subquery("stats")
    hits = force_index(
        select(
            memory_term.c.term,
            memory_term.c.field,
            memory_term.c.memory_id,
            memory_term.c.cube_id,
            memory_term.c.impact,
            func.count().over(partition_by=term_key).label("df"),
            func.row_number()
            .over(partition_by=term_key, order_by=memory_term.c.memory_id)
            .label("nth"),
            (stats.c.n_docs + (BACKGROUND_DOCS + 0.5)).label("n_docs"),
        )
        .select_from(memory_term.join(stats, true()))
        .where(
            memory_term.c.tenant_id == bindparam("tenant_id"),
            memory_term.c.user_id == bindparam("user_id"),
            memory_term.c.term.in_(bindparam("terms", expanding=True)),
        ),
        memory_term,
        "PRIMARY",
    ).subquery("hits")
    n_docs = hits.c.n_docs
    # As retrieval._idf: the Lucene form over the live memories plus the background ones.
    idf = func.ln(1.0 + (n_docs - hits.c.df) / (hits.c.df + 0.5))
    qtf = query_tf(hits.c.term, levels)
    word, first = hits.c.field == WORD, hits.c.nth == 1
    # Every posting of a term through the last of its peers, rarest terms first: how many
    # postings scoring this term takes (``RANGE`` counts the peers of the current row).
    upto = func.count().over(order_by=(hits.c.df, hits.c.term, hits.c.field))
    weighed = select(
        hits.c.memory_id,
        hits.c.cube_id,
        hits.c.field,
        (hits.c.impact * idf * qtf * case((word, 1.0), else_=PHRASE_WEIGHT)).label("part"),
        # The ideal score: each of the query's words once, read or not (pairs add nothing).
        func.sum(case((and_(word, first), idf * qtf), else_=0.0)).over().label("ideal"),
        func.sum(case((and_(word, first), qtf), else_=0)).over().label("words"),
        upto.label("upto"),
        n_docs.label("n_docs"),
    ).subquery("weighed")
    # The query's words no memory holds weigh in the ideal with a document frequency of 0.
    unseen: Any = bindparam("word_count") - func.max(weighed.c.words)
    idf_unseen = func.ln(1.0 + func.max(weighed.c.n_docs) / 0.5)
    relevance = func.sum(weighed.c.part) / (func.max(weighed.c.ideal) + unseen * idf_unseen)
    scored = (
        select(weighed.c.memory_id, weighed.c.cube_id, relevance.label("relevance"))
        .where(
            weighed.c.upto <= bindparam("budget"),
            weighed.c.cube_id.in_(bindparam("cubes", expanding=True)),
        )
        .group_by(weighed.c.memory_id, weighed.c.cube_id)
        # A word pair adds to a memory a word of the query matched, never on its own.
        .having(func.min(weighed.c.field) == WORD)
        .subquery("scored")
    )
    place = func.row_number().over(
        partition_by=scored.c.cube_id,
        order_by=(scored.c.relevance.desc(), scored.c.memory_id.desc()),
    )
    ranked = (
        select(scored.c.memory_id, scored.c.relevance, place.label("place"))
        .where(scored.c.relevance >= bindparam("floor"), scored.c.relevance > 0.0)
        .subquery("ranked")
    )
    # The pool first, then each of its rows by primary key: the join's order fixed, as the
    # estimate of a derived table's rows can lead the planner to scan the tenant's rows.
    return force_index(
        select(memory_rows.PACKED, ranked.c.relevance)
        .prefix_with("STRAIGHT_JOIN", dialect="mysql")
        .select_from(ranked.join(long_term_memory, long_term_memory.c.id == ranked.c.memory_id))
        .where(
            ranked.c.place <= bindparam("pool"),
            long_term_memory.c.tenant_id == bindparam("tenant_id"),
            long_term_memory.c.deleted_at.is_(None),
        ),
        long_term_memory,
        "PRIMARY",
    )


@cache
def _prepared(levels: int) -> Prepared:
    return Prepared(_ranking(levels))


async def ranked(
    conn: AsyncConnection,
    tenant_id: str,
    user_id: str,
    terms: Sequence[str],
    cubes: Sequence[str],
    *,
    pool: int,
    floor: float,
    budget: int = POSTINGS_BUDGET,
) -> list[Ranked]:
    """The pool of a lexical search, scored in the database in one statement: in each of
    ``cubes`` the ``pool`` live memories of the user most relevant to the query's ``terms``
    (``retrieval.relevance`` over the stored impacts, the same scores), those reaching
    ``floor`` only, best first by cube; at most ``budget`` postings scored, the rarest
    terms first (a term past it weighs in the ideal only)."""
    counts = Counter(terms)
    counts.update(phrases(terms))
    wanted = sorted(term for term in counts if len(term) <= TERM_CHARS)
    if not any(" " not in term for term in wanted) or not cubes or pool <= 0:
        return []  # no word can match: pairs only add to a word's match
    repeats = repeat_lists(counts, wanted)
    params: dict[str, Any] = {
        "tenant_id": tenant_id,
        "user_id": user_id,
        "terms": wanted,
        "word_count": len(terms),
        "budget": budget,
        "cubes": list(cubes),
        "floor": floor,
        "pool": pool,
        **repeats,
    }
    rows = await _prepared(len(repeats) + 1).rows(conn, params)
    found = [
        Ranked(memory_rows.unpacked(tenant_id, user_id, packed), float(relevance))
        for packed, relevance in rows
    ]
    # As ``ranking.lexical_pools`` orders them: by (relevance, id), the greater first.
    found.sort(key=lambda r: (r.relevance, r.item.id), reverse=True)
    return found


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
        """Index the next ``per_tick`` memories lacking postings; answers how many. A few
        statements a tick, not two a memory: the postings in multi-row inserts, the lengths
        in one update."""
        query = (
            select(
                long_term_memory.c.id,
                long_term_memory.c.tenant_id,
                long_term_memory.c.user_id,
                long_term_memory.c.cube_id,
                long_term_memory.c.content,
            )
            .where(long_term_memory.c.term_count.is_(None), long_term_memory.c.deleted_at.is_(None))
            .limit(self.per_tick)
        )
        if self.tenant_id is not None:
            query = query.where(long_term_memory.c.tenant_id == self.tenant_id)
        async with self._engine.connect() as conn:
            pending = (await conn.execute(query)).all()
        if not pending:
            return 0
        lengths: dict[str, int] = {}
        posted: list[dict[str, Any]] = []
        for row in pending:
            terms = document_terms(row.content)
            lengths[row.id] = terms.length
            posted += rows_of(row.tenant_id, row.user_id, row.id, terms, cube_id=row.cube_id)
        async with self._engine.begin() as conn:
            await write(conn, posted)
            # A row deleted or indexed meanwhile keeps what it has.
            for ids in in_lists(sorted(lengths)):
                await conn.execute(
                    update(long_term_memory)
                    .where(long_term_memory.c.id.in_(ids), long_term_memory.c.term_count.is_(None))
                    .values(
                        term_count=case({i: lengths[i] for i in ids}, value=long_term_memory.c.id)
                    )
                )
            # Searchable now: a process keeping these users' memories reads them again.
            await stamps.bump(conn, ((row.tenant_id, row.user_id) for row in pending))
        INDEXED.inc(len(pending))
        return len(pending)

    async def run_until_done(self) -> int:
        """Tick until every live memory has its postings (tests, an import, after migrate)."""
        total = 0
        while done := await self.tick():
            total += done
        return total
