"""Search over the stored chat turns, beside the memory search: where memories cannot answer,
the best passages of what was said (``conversation_message``) fill the same top k, so a search
is never worse than search over the user's own history (docs/design/builtin-store.md).

The turn index (``message_term``, ``message_indexed``) is filled by the worker from the rows
the history stage wrote (``HistoryIndex``); a search is one statement, scored in the
database: at most ``POSTINGS_BUDGET`` postings of its words over one user's turns, and the
rows of its best few turns only."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import cache, lru_cache
from typing import Any, NamedTuple

import orjson
from prometheus_client import Counter as Metric
from sqlalchemy import (
    Insert,
    Select,
    and_,
    bindparam,
    case,
    delete,
    func,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memstream.memory import USER_PROFILE, MemoryItem
from memstream.retrieval import BACKGROUND_DOCS, document_terms, normalised
from memstream.store.database import force_index
from memstream.store.postings import query_tf, repeat_lists
from memstream.store.prepared import Prepared
from memstream.store.schema import TERM_CHARS
from memstream.store.schema import conversation_message as messages
from memstream.store.schema import message_indexed as indexed
from memstream.store.schema import message_term as turn_terms
from memstream.text.dates import display_date
from memstream.text.terms import tokenize

ORIGIN = "history"
"""``MemoryItem.origin`` of a passage of a stored turn (a memory's is ``"memory"``)."""

SEARCHED_ROLES = ("user", "assistant")
POSTINGS_BUDGET = 20_000
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
            newest = (await conn.execute(select(func.max(indexed.c.message_id)))).scalar()
            query = (
                select(
                    messages.c.id,
                    messages.c.tenant_id,
                    messages.c.user_id,
                    messages.c.agent_id,
                    messages.c.role,
                )
                .add_columns(
                    messages.c.message_type,
                    messages.c.content,
                    messages.c.created_at,
                )
                .outerjoin(indexed, indexed.c.message_id == messages.c.id)
                .where(
                    indexed.c.message_id.is_(None),
                    messages.c.id > (newest or 0) - SLACK_IDS,
                )
                .order_by(messages.c.id)
                .limit(self.per_tick)
            )
            if self.tenant_id is not None:
                query = query.where(messages.c.tenant_id == self.tenant_id)
            pending = [tuple(row) for row in (await conn.execute(query)).all()]
        if not pending:
            return 0
        # Tokenizing long turns is the expensive part: off the worker's loop.
        docs, terms = await asyncio.to_thread(_index_rows, pending)
        async with self._engine.begin() as conn:
            dialect = conn.dialect.name
            for start in range(0, len(terms), 1000):
                await conn.execute(_insert_ignore(dialect, turn_terms), terms[start : start + 1000])
            await conn.execute(_insert_ignore(dialect, indexed), docs)
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


def _visible() -> Any:
    """The searchable turns of the user (``tenant_id``, ``user_id``) the search may answer:
    the user's of any agent, the assistant's only of the agent searching (``agent_id``, NULL
    for none): what one agent told the user is not another agent's to repeat."""
    same_agent = indexed.c.agent_id.is_not_distinct_from(bindparam("agent_id"))
    return and_(
        indexed.c.tenant_id == bindparam("tenant_id"),
        indexed.c.user_id == bindparam("user_id"),
        indexed.c.term_count > 0,
        or_(indexed.c.role == "user", same_agent),
    )


@cache
def _ranking(levels: int) -> Select[Any]:
    """The one statement of a turn search: the user's visible turn count and average length
    (N and the length reference of BM25), the postings of the query's words over those turns
    with each turn's length, their document frequency, the budget applied rarest words first
    (a word past it weighs in the ideal only), Okapi BM25 over what is read divided by the
    ideal score, then the rows of the best ``top_k`` turns only. Built once per count of
    repeat lists: the engine caches its compiled form."""
    stats = force_index(
        select(func.count().label("n_docs"), func.avg(indexed.c.term_count).label("average")).where(
            _visible()
        ),
        indexed,
        "ix_message_indexed_visible",
    ).subquery("stats")
    hits = force_index(
        force_index(
            select(
                turn_terms.c.term,
                turn_terms.c.message_id,
                turn_terms.c.tf,
                indexed.c.term_count,
                func.count().over(partition_by=turn_terms.c.term).label("df"),
                func.row_number()
                .over(partition_by=turn_terms.c.term, order_by=turn_terms.c.message_id)
                .label("nth"),
            )
            .select_from(turn_terms.join(indexed, indexed.c.message_id == turn_terms.c.message_id))
            .where(
                turn_terms.c.tenant_id == bindparam("tenant_id"),
                turn_terms.c.user_id == bindparam("user_id"),
                turn_terms.c.term.in_(bindparam("terms", expanding=True)),
                _visible(),
            ),
            turn_terms,
            "PRIMARY",
        ),
        indexed,
        "PRIMARY",
    ).subquery("hits")
    n_docs = stats.c.n_docs + (BACKGROUND_DOCS + 0.5)
    # As retrieval._idf (the Lucene form, the background documents added to N).
    idf = func.ln(1.0 + (n_docs - hits.c.df) / (hits.c.df + 0.5))
    qtf = query_tf(hits.c.term, levels)
    average = case((stats.c.average < 1.0, 1.0), else_=stats.c.average)
    norm = K1 * (1.0 - B) + K1 * B * hits.c.term_count / average
    first = hits.c.nth == 1
    weighed = (
        select(
            hits.c.message_id,
            (qtf * idf * (K1 + 1.0) * hits.c.tf / (hits.c.tf + norm)).label("part"),
            # The ideal score: each of the query's words once, read or not.
            func.sum(case((first, idf * qtf), else_=0.0)).over().label("ideal"),
            func.sum(case((first, qtf), else_=0)).over().label("words"),
            # Every posting of a word through the last of its peers, rarest words first.
            func.count().over(order_by=(hits.c.df, hits.c.term)).label("upto"),
            n_docs.label("n_docs"),
        )
        .select_from(hits.join(stats, true()))
        .subquery("weighed")
    )
    # The query's words no turn holds weigh in the ideal with a document frequency of 0.
    unseen: Any = bindparam("word_count") - func.max(weighed.c.words)
    idf_unseen = func.ln(1.0 + func.max(weighed.c.n_docs) / 0.5)
    relevance = func.sum(weighed.c.part) / (func.max(weighed.c.ideal) + unseen * idf_unseen)
    scored = (
        select(weighed.c.message_id, relevance.label("relevance"))
        .where(weighed.c.upto <= bindparam("budget"))
        .group_by(weighed.c.message_id)
        .subquery("scored")
    )
    # Best first by relevance (the score shown is capped at 1, the order is not: a turn
    # naming the question's day twice ranks above one naming it once), ties by the older.
    place = func.row_number().over(order_by=(scored.c.relevance.desc(), scored.c.message_id))
    ranked = (
        select(scored.c.message_id, scored.c.relevance, place.label("place"))
        .where(scored.c.relevance > 0.0)
        .subquery("ranked")
    )
    return force_index(
        # The row as one JSON array, as the memories' search reads its rows (``PACKED``).
        select(
            func.json_array(
                messages.c.event_id,
                messages.c.role,
                messages.c.content,
                messages.c.created_at,
                messages.c.agent_id,
            ).label("packed"),
            ranked.c.relevance,
        )
        .select_from(ranked.join(messages, messages.c.id == ranked.c.message_id))
        .where(
            ranked.c.place <= bindparam("top_k"),
            messages.c.tenant_id == bindparam("tenant_id"),
            messages.c.user_id == bindparam("user_id"),
        )
        .order_by(ranked.c.place),
        messages,
        "PRIMARY",
    )


@cache
def _prepared(levels: int) -> Prepared:
    return Prepared(_ranking(levels))


async def search_turns(
    conn: AsyncConnection,
    tenant_id: str,
    user_id: str,
    agent_id: str | None,
    query: str,
    top_k: int,
    *,
    cited: frozenset[str] = frozenset(),
    budget: int = POSTINGS_BUDGET,
) -> list[MemoryItem]:
    """The user's best ``top_k`` turns for ``query`` but those of the events in ``cited``
    (which memories already answer), each as its best passage: one statement, scored in the
    database (``_ranking``); a passage is cut only for a turn that is answered."""
    search = turn_search(tenant_id, user_id, agent_id, query, top_k, cited=cited, budget=budget)
    if search is None:
        return []
    rows = await search.statement.rows(conn, search.params)
    return passages_of(rows, tenant_id, user_id, search.words, top_k, cited=cited)


class TurnSearch(NamedTuple):
    """A turn search's statement and parameters, and the query's words its passages are cut
    around."""

    statement: Prepared
    params: dict[str, Any]
    words: frozenset[str]


def turn_search(
    tenant_id: str,
    user_id: str,
    agent_id: str | None,
    query: str,
    top_k: int,
    *,
    cited: frozenset[str] = frozenset(),
    budget: int = POSTINGS_BUDGET,
) -> TurnSearch | None:
    """``search_turns``' statement and its parameters, for a caller that runs it beside
    another in one round trip (``prepared.batch``); None when nothing can match."""
    terms = tokenize(query)
    counts = Counter(terms)
    wanted = sorted(term for term in counts if len(term) <= TERM_CHARS)
    if not wanted or top_k <= 0:
        return None
    repeats = repeat_lists(counts, wanted)
    params: dict[str, Any] = {
        "tenant_id": tenant_id,
        "user_id": user_id,
        "agent_id": agent_id,
        "terms": wanted,
        "word_count": len(terms),
        "budget": budget,
        "top_k": top_k + len(cited),  # enough to leave top_k once the cited are left out
        **repeats,
    }
    return TurnSearch(_prepared(len(repeats) + 1), params, frozenset(terms))


def passages_of(
    rows: Sequence[Any],
    tenant_id: str,
    user_id: str,
    query_words: frozenset[str],
    top_k: int,
    *,
    cited: frozenset[str] = frozenset(),
) -> list[MemoryItem]:
    """The answered turns of ``turn_search``'s rows (``TurnSearch.words``: the query's), the
    ``cited`` left out."""
    # A message forgotten since it was indexed has no row and is never answered.
    found = []
    for packed, relevance in rows:
        event_id, role, content, created, agent_id = orjson.loads(packed)
        if event_id in cited:
            continue
        at = datetime.fromisoformat(created).replace(tzinfo=UTC)
        found.append(
            MemoryItem(
                id=f"turn:{event_id}",
                tenant_id=tenant_id,
                user_id=user_id,
                agent_id=agent_id,
                cube_id=USER_PROFILE,
                memory_type="text_mem",
                content=turn_line(role, at, passage(content, query_words)),
                importance=1,
                source_event_ids=(event_id,),
                created_at=at,
                score=normalised(float(relevance)),
                kind="episode",
                occurred_at=at,
                origin=ORIGIN,
            )
        )
        if len(found) == top_k:
            break
    return found


# --- passages and the merge (pure) -------------------------------------------------------


_SENTENCE = re.compile(r"[^.!?。！？\n]+(?:[.!?。！？]+|\n+|$)")


@lru_cache(maxsize=65_536)
def _terms_of_word(word: str) -> frozenset[str]:
    return frozenset(tokenize(word))


def _terms_of(sentence: str) -> set[str]:
    """The index terms of ``sentence``, a word (split at white space, its punctuation
    included) at a time through a cache: a passage is cut from long turns on every search,
    and most of their words recur."""
    out: set[str] = set()
    for word in sentence.lower().split():
        out |= _terms_of_word(word)
    return out


def turn_line(role: str, at: datetime, text: str) -> str:
    """A passage as one dated, attributed line, like an episode."""
    who = "The user said" if role == "user" else "The assistant told the user"
    return f"{who} ({display_date(at)}): {text}"


def passage(text: str, query_words: frozenset[str], limit: int = PASSAGE_CHARS) -> str:
    """The run of sentences of ``text`` within ``limit`` characters holding the most distinct
    query words (the earliest such run), cut at a word past it; the whole text when short."""
    text = " ".join(text.split())
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
        await conn.execute(
            delete(turn_terms).where(
                turn_terms.c.tenant_id == tenant_id, turn_terms.c.user_id == user_id
            )
        )
        await conn.execute(
            update(indexed)
            .where(
                indexed.c.tenant_id == tenant_id,
                indexed.c.user_id == user_id,
                indexed.c.term_count > 0,
            )
            .values(term_count=0)
        )
