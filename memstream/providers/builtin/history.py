"""Search over the stored chat turns, beside the memory search: where memories cannot answer,
the best passages of what was said (``conversation_message``) fill the same top k, so a search
is never worse than search over the user's own history (docs/design/builtin-store.md).

The turn index (``message_term``, ``message_indexed``) is filled by the worker from the rows
the history stage wrote (``HistoryIndex``); a search reads only its terms' postings of one
user, at most ``POSTINGS_BUDGET`` of them, then the rows of its best few turns."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from prometheus_client import Counter as Metric
from sqlalchemy import Insert, and_, delete, func, or_, select, update
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memstream.memory import USER_PROFILE, MemoryItem
from memstream.retrieval import document_terms, normalised, relevance
from memstream.store.schema import TERM_CHARS
from memstream.store.schema import conversation_message as m
from memstream.store.schema import message_indexed as x
from memstream.store.schema import message_term as p
from memstream.text.dates import display_date
from memstream.text.terms import tokenize

ORIGIN = "history"
"""``MemoryItem.origin`` of a passage of a stored turn (a memory's is ``"memory"``)."""

SEARCHED_ROLES = ("user", "assistant")
POSTINGS_BUDGET = 20_000
INLINE_POSTINGS = 2_000
"""At most this many postings are scored per search, the query's rarest terms first."""
PASSAGE_CHARS = 320
"""A turn is answered as its best passage of about this many characters: a raw assistant
turn runs to thousands, and the top k shares the load path's budget with the memories."""
# Okapi BM25 against the user's average turn length: turns are ranked among turns only.
K1, B = 1.2, 0.75
# Messages whose id is this far below the newest indexed one are still looked for: a
# transaction of the history stage that committed after a later one.
SLACK_IDS = 10_000

INDEXED = Metric(
    "memstream_history_turns_indexed_total",
    "Stored messages the turn index has read (searchable chat turns and the others).",
)


def _insert_ignore(dialect: str, table: Any) -> Insert:
    # A message indexed twice (two leaders in a rebalance) keeps the same rows.
    if dialect == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing()
    stmt = mysql.insert(table)
    first = next(iter(table.primary_key.columns))
    return stmt.on_duplicate_key_update({first.name: stmt.inserted[first.name]})


class HistoryIndex:
    """Fills the turn index from ``conversation_message``: the rows the history stage wrote,
    and the rows written before the index existed, oldest first."""

    def __init__(
        self, engine: AsyncEngine, *, per_tick: int = 500, tenant_id: str | None = None
    ) -> None:
        self._engine = engine
        self.per_tick = per_tick
        self.tenant_id = tenant_id  # only this tenant's messages (a benchmark, a test)

    async def tick(self) -> int:
        """Index the next ``per_tick`` messages lacking a ``message_indexed`` row."""
        async with self._engine.connect() as conn:
            newest = (await conn.execute(select(func.max(x.c.message_id)))).scalar()
            query = (
                select(m.c.id, m.c.tenant_id, m.c.user_id, m.c.agent_id, m.c.role)
                .add_columns(m.c.message_type, m.c.content, m.c.created_at)
                .outerjoin(x, x.c.message_id == m.c.id)
                .where(x.c.message_id.is_(None), m.c.id > (newest or 0) - SLACK_IDS)
                .order_by(m.c.id)
                .limit(self.per_tick)
            )
            if self.tenant_id is not None:
                query = query.where(m.c.tenant_id == self.tenant_id)
            pending = [tuple(row) for row in (await conn.execute(query)).all()]
        if not pending:
            return 0
        # Tokenizing long turns is the expensive part: off the worker's loop.
        docs, terms = await asyncio.to_thread(_index_rows, pending)
        async with self._engine.begin() as conn:
            dialect = conn.dialect.name
            for start in range(0, len(terms), 1000):
                await conn.execute(_insert_ignore(dialect, p), terms[start : start + 1000])
            await conn.execute(_insert_ignore(dialect, x), docs)
        INDEXED.inc(len(docs))
        return len(docs)

    async def run_until_done(self) -> int:
        """Tick until every stored message is indexed (tests, a benchmark)."""
        total = 0
        while done := await self.tick():
            total += done
        return total


def day_terms(at: datetime) -> str:
    """A turn's day and week as words, searchable with it, as an episode's line carries its
    day: a question's relative date made absolute (``text.dates.dated_query``: "on 29 May
    2023", "in the week of 15 May 2023", "in May 2023") finds what was said then."""
    monday = at.date() - timedelta(days=at.weekday())
    return f"{display_date(at)}, the week of {display_date(monday)}"


def _index_rows(
    rows: Sequence[tuple[Any, ...]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    docs: list[dict[str, Any]] = []
    terms: list[dict[str, Any]] = []
    for message_id, tenant_id, user_id, agent_id, role, message_type, content, at in rows:
        length = 0
        if role in SEARCHED_ROLES and message_type == "chat" and content:
            counted = document_terms(f"{content}\n{day_terms(at)}")
            length = counted.length
            terms += [
                {
                    "tenant_id": tenant_id,
                    "user_id": user_id,
                    "term": term,
                    "message_id": message_id,
                    "tf": tf,
                }
                for term, tf in counted.words.items()
                if len(term) <= TERM_CHARS
            ]
        docs.append(
            {
                "message_id": message_id,
                "tenant_id": tenant_id,
                "user_id": user_id,
                "agent_id": agent_id,
                "role": role,
                "term_count": length,
            }
        )
    return docs, terms


# --- search ------------------------------------------------------------------------------


@dataclass(slots=True)
class TurnPostings:
    """The postings of a query's words over one user's searchable turns."""

    n_docs: int = 0
    average: float = 1.0
    words: dict[str, dict[str, int]] = field(default_factory=dict)
    lengths: dict[str, int] = field(default_factory=dict)
    unread: dict[str, int] = field(default_factory=dict)


def _visible(tenant_id: str, user_id: str, agent_id: str | None) -> Any:
    """The user's turns of any agent, the assistant's only of the agent searching: what one
    agent told the user is not another agent's to repeat."""
    same_agent = x.c.agent_id.is_(None) if agent_id is None else x.c.agent_id == agent_id
    return and_(
        x.c.tenant_id == tenant_id,
        x.c.user_id == user_id,
        x.c.term_count > 0,
        or_(x.c.role == "user", same_agent),
    )


async def read_postings(
    conn: AsyncConnection,
    tenant_id: str,
    user_id: str,
    agent_id: str | None,
    words: Sequence[str],
    *,
    budget: int = POSTINGS_BUDGET,
) -> TurnPostings:
    """The user's turn count and average length and the document frequency of ``words``,
    then their postings, rarest first, at most ``budget`` of them (a term over it weighs in
    the idf only)."""
    found = TurnPostings()
    wanted = sorted({w for w in words if len(w) <= TERM_CHARS})
    if not wanted:
        return found
    visible = _visible(tenant_id, user_id, agent_id)
    # The user's turn count and average length ride along with the document frequencies: one
    # round trip fewer (uncorrelated, the database computes them once).
    n_docs = select(func.count()).where(visible).scalar_subquery()
    average = select(func.avg(x.c.term_count)).where(visible).scalar_subquery()
    own = (p.c.tenant_id == tenant_id, p.c.user_id == user_id)
    df_rows = (
        await conn.execute(
            select(p.c.term, func.count(), n_docs, average)
            .where(*own, p.c.term.in_(wanted))
            .group_by(p.c.term)
        )
    ).all()
    if not df_rows or not df_rows[0][2]:
        return found
    found.n_docs, found.average = int(df_rows[0][2]), float(df_rows[0][3] or 1.0)
    read: list[str] = []
    spent = 0
    for term, df, _, _ in sorted(df_rows, key=lambda row: (row[1], row[0])):
        if spent + df <= budget:
            read.append(term)
            spent += df
        else:
            found.unread[term] = int(df)
    if not read:
        return found
    rows = await conn.execute(
        select(p.c.term, p.c.message_id, p.c.tf, x.c.term_count)
        .join(x, x.c.message_id == p.c.message_id)
        .where(*own, p.c.term.in_(read), visible)
    )
    for term, message_id, tf, length in rows.all():
        doc = str(message_id)
        found.words.setdefault(term, {})[doc] = int(tf)
        found.lengths[doc] = int(length)
    return found


def rank(terms: Sequence[str], found: TurnPostings, top_k: int) -> list[tuple[float, int]]:
    """The best ``top_k`` turns as (normalised score, message id), best first."""
    if not found.words:
        return []
    base, scale = K1 * (1.0 - B), K1 * B / max(found.average, 1.0)
    norms = {doc: base + scale * length for doc, length in found.lengths.items()}
    scores = relevance(terms, found.n_docs, found.words, {}, norms, k1=K1, unread=found.unread)
    best = sorted(scores.items(), key=lambda kv: (-kv[1], int(kv[0])))[:top_k]
    return [(normalised(score), int(doc)) for doc, score in best]


async def search_turns(
    conn: AsyncConnection,
    tenant_id: str,
    user_id: str,
    agent_id: str | None,
    query: str,
    top_k: int,
    *,
    budget: int = POSTINGS_BUDGET,
) -> list[MemoryItem]:
    """The user's best ``top_k`` turns for ``query``, each as its best passage."""
    terms = tokenize(query)
    found = await read_postings(conn, tenant_id, user_id, agent_id, terms, budget=budget)
    postings = sum(len(docs) for docs in found.words.values())
    # Many postings are scored in a thread, so that the loop keeps serving (as memories are).
    if postings > INLINE_POSTINGS:
        best = await asyncio.to_thread(rank, terms, found, top_k)
    else:
        best = rank(terms, found, top_k)
    if not best:
        return []
    ids = [message_id for _, message_id in best]
    rows = await conn.execute(
        select(m.c.id, m.c.event_id, m.c.role, m.c.content, m.c.created_at, m.c.agent_id).where(
            m.c.tenant_id == tenant_id, m.c.user_id == user_id, m.c.id.in_(ids)
        )
    )
    # A message forgotten since it was indexed has no row and is never answered.
    by_id = {row.id: row for row in rows.all()}
    query_words = frozenset(terms)
    out: list[MemoryItem] = []
    for score, message_id in best:
        row = by_id.get(message_id)
        if row is None:
            continue
        out.append(
            MemoryItem(
                id=f"turn:{row.event_id}",
                tenant_id=tenant_id,
                user_id=user_id,
                agent_id=row.agent_id,
                cube_id=USER_PROFILE,
                memory_type="text_mem",
                content=turn_line(row.role, row.created_at, passage(row.content, query_words)),
                importance=1,
                source_event_ids=(row.event_id,),
                created_at=row.created_at.replace(tzinfo=UTC),
                score=score,
                kind="episode",
                occurred_at=row.created_at.replace(tzinfo=UTC),
                origin=ORIGIN,
            )
        )
    return out


# --- passages and the merge (pure) -------------------------------------------------------


_SENTENCE = re.compile(r"[^.!?。！？\n]+(?:[.!?。！？]+|\n+|$)")
_SPACES = re.compile(r"\s+")


_WORD = re.compile(r"\w+")


@lru_cache(maxsize=65_536)
def _terms_of_word(word: str) -> frozenset[str]:
    return frozenset(tokenize(word))


def _terms_of(sentence: str) -> frozenset[str]:
    """The index terms of ``sentence``, a word at a time through a cache: a passage is cut
    from long turns on every search, and most of their words recur."""
    out: set[str] = set()
    for word in _WORD.findall(sentence.lower()):
        out |= _terms_of_word(word)
    return frozenset(out)


def turn_line(role: str, at: datetime, text: str) -> str:
    """A passage as one dated, attributed line, like an episode."""
    who = "The user said" if role == "user" else "The assistant told the user"
    return f"{who} ({display_date(at)}): {text}"


def passage(text: str, query_words: frozenset[str], limit: int = PASSAGE_CHARS) -> str:
    """The run of sentences of ``text`` within ``limit`` characters holding the most distinct
    query words (the earliest such run), cut at a word past it; the whole text when short."""
    text = _SPACES.sub(" ", text).strip()
    if len(text) <= limit:
        return text
    sentences = [s.strip() for s in _SENTENCE.findall(text) if s.strip()]
    hits = [_terms_of(s) & query_words for s in sentences]
    best, best_words, best_start = "", -1, 0
    for start in range(len(sentences)):
        run: list[str] = []
        words: set[str] = set()
        size = 0
        for end in range(start, len(sentences)):
            if run and size + len(sentences[end]) + 1 > limit:
                break
            run.append(sentences[end])
            words |= hits[end]
            size += len(sentences[end]) + 1
        if len(words) > best_words:
            best, best_words, best_start = " ".join(run), len(words), start
    if len(best) > limit:
        best = best[:limit].rsplit(" ", 1)[0] + "…"
    return ("…" if best_start else "") + best


def merge(
    memories: Sequence[MemoryItem], turns: Sequence[MemoryItem], top_k: int
) -> list[MemoryItem]:
    """The memories, then passages filling what they leave of the top ``top_k``: the stored
    turns answer where memories cannot (none scored above the threshold, or too few). A
    passage of a turn that a memory already cites adds nothing and is left out. The two scores
    are not on one scale (a memory is short, a turn long and ranked among turns), so a
    passage never displaces a memory; its score is capped at the one before it, so the list
    stays sorted by score and a memory keeps its own."""
    cited = {e for item in memories for e in item.source_event_ids}
    extra = [t for t in turns if not cited.intersection(t.source_event_ids)]
    out = list(memories)
    for item in extra[: max(0, top_k - len(memories))]:
        if out and item.score > out[-1].score:
            item = replace(item, score=out[-1].score)
        out.append(item)
    return out


async def forget_turns(engine: AsyncEngine, tenant_id: str, user_id: str) -> None:
    """A forgotten user's turns are never searched again, whether or not their messages are
    purged: their postings go, and their rows stay read (so they are not indexed again) but
    unsearchable. What the user says after the forget is indexed as usual."""
    async with engine.begin() as conn:
        await conn.execute(delete(p).where(p.c.tenant_id == tenant_id, p.c.user_id == user_id))
        await conn.execute(
            update(x)
            .where(x.c.tenant_id == tenant_id, x.c.user_id == user_id, x.c.term_count > 0)
            .values(term_count=0)
        )
