"""The built-in store's search falls back to the stored chat turns: on SQLite and MariaDB over
rows as the history stage writes them, and through the worker and the API end to end (the
passage answered with ``origin`` ``history``, a memory of the same turn answered instead,
a forgotten user's turns never again)."""

from __future__ import annotations

import random
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.broker.topics import publish
from memstream.memory import USER_PROFILE, NewMemory
from memstream.providers.builtin import BuiltinProvider
from memstream.retrieval import document_terms, normalised, relevance
from memstream.settings import Settings
from memstream.store import turns as turn_search
from memstream.store.messages import MessageStore, StoredMessage
from memstream.store.turns import HistoryIndex, day_terms
from memstream.text.terms import tokenize
from memstream.text.tokens import count_tokens
from tests.support.api import client_for
from tests.support.databases import db, statements
from tests.support.kafka import message
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

__all__ = ["db"]  # the fixture: SQLite and the real MariaDB

AT = datetime(2023, 5, 30, 12, 0)
# An explanation with no name, number or recommendation: no rule and no episode keeps it.
EXPLANATION = (
    "Well, sourdough gets its sour taste from the lactic acid bacteria living in the starter; "
    "a long, slow fermentation in a cool kitchen gives them time to work. "
    + "Bread made with commercial yeast rises faster but tastes plainer. "
    * 6
)


def stored(tenant: str, n: int, role: str, content: str, **fields: Any) -> StoredMessage:
    values: dict[str, Any] = {
        "tenant_id": tenant,
        "conversation_id": "c1",
        "event_id": f"c1-{n}",
        "user_id": "u1",
        "agent_id": None,
        "role": role,
        "message_type": "chat",
        "content": content,
        "token_count": count_tokens(content),
        "created_at": AT + timedelta(seconds=n),
        "source_conversation_id": "c1",
    }
    values.update(fields)
    return StoredMessage(**values)


async def test_a_search_answers_the_passage_of_a_stored_turn_no_memory_holds(
    db: AsyncEngine,
) -> None:
    tenant = f"hist-{uuid.uuid4().hex[:8]}"
    await MessageStore(db).insert_many(
        [
            stored(tenant, 0, "user", "Why is my sourdough bread sour?"),
            stored(tenant, 1, "assistant", EXPLANATION),
            stored(
                tenant, 2, "tool", "sour taste lactic acid fermentation", message_type="tool_result"
            ),
            stored(tenant, 3, "assistant", "Other agent: lactic acid fermentation", agent_id="a2"),
            stored(tenant, 4, "user", "I bake on Sundays with my daughter.", user_id="u2"),
        ]
    )
    provider = BuiltinProvider(db)
    query = "what gives sourdough its sour taste, lactic acid fermentation?"
    assert await provider.search(tenant, "u1", None, query) == []  # not indexed yet
    assert await HistoryIndex(db, tenant_id=tenant).run_until_done() == 5

    found = await provider.search(tenant, "u1", None, query)
    assert [i.source_event_ids for i in found] == [("c1-1",), ("c1-0",)]
    best = found[0]
    assert best.origin == "history" and best.id == "turn:c1-1"
    assert best.content.startswith("The assistant told the user (30 May 2023): ")
    assert "lactic acid" in best.content and len(best.content) < 400 < len(EXPLANATION)
    assert 0.0 < best.score <= 1.0
    # The tool result, another agent's words and another user's turns are never answered.
    assert await provider.search(tenant, "u2", None, "sourdough lactic acid") == []
    assert [i.source_event_ids for i in await provider.search(tenant, "u2", None, "Sundays")] == [
        ("c1-4",)
    ]
    assert await BuiltinProvider(db, search_history=False).search(tenant, "u1", None, query) == []

    # A memory citing the turn answers instead of its passage.
    await provider.add(
        [
            NewMemory(
                tenant,
                "u1",
                None,
                USER_PROFILE,
                "text_mem",
                "The assistant explained that lactic acid bacteria make sourdough sour.",
                source_event_ids=("c1-1",),
            )
        ]
    )
    again = await provider.search(tenant, "u1", None, query)
    assert [i.origin for i in again].count("history") == 1
    assert [i.source_event_ids for i in again] == [("c1-1",), ("c1-0",)]
    assert again[0].origin == "memory"


async def test_the_worker_indexes_what_the_history_stage_wrote_and_the_api_says_which_path(
    settings: Settings, tenant: str, engine: AsyncEngine, start_worker: Any
) -> None:
    start_worker(settings)
    events = [
        message(tenant, "s1", 0, content="Why is my sourdough bread sour?"),
        message(tenant, "s1", 1, content=EXPLANATION),
        message(tenant, "s3", 0, content="I baked rye rolls.", created_at="2026-01-05T09:00:00Z"),
        message(tenant, "s4", 0, content="I baked rye rolls!", created_at="2026-01-09T09:00:00Z"),
    ]
    await publish(settings, "message-written", events)
    search = {
        "tenant_id": tenant,
        "user_id": "user-1",
        "agent_id": "agent-1",
        "query": "what gives sourdough its sour taste?",
        "top_k": 5,
    }
    async with client_for(settings) as api:

        async def answered() -> bool:
            items = (await api.post("/v1/memories/search", json=search)).json()["items"]
            return any(i["id"] == "turn:s1-1" for i in items)

        await eventually(answered, within=180, what="the stored turn searchable")
        items = (await api.post("/v1/memories/search", json=search)).json()["items"]
        turn = next(i for i in items if i["id"] == "turn:s1-1")
        assert turn["origin"] == "history" and turn["source_event_ids"] == ["s1-1"]
        assert turn["content"].startswith("The assistant told the user")

        # The question's relative dates count from when it is asked.
        for at, expected in (
            ("2026-01-06T08:00:00Z", "turn:s3-0"),
            ("2026-01-10T08:00:00Z", "turn:s4-0"),
        ):
            asked = {**search, "query": "what did I bake yesterday?", "top_k": 1, "at": at}
            dated = (await api.post("/v1/memories/search", json=asked)).json()["items"]
            assert [i["id"] for i in dated] == [expected], at

        # Forgotten (messages kept): the user's turns are never searched again.
        forgot = await api.delete(f"/v1/users/user-1/memories?tenant_id={tenant}")
        assert forgot.status_code == 200
        after = (await api.post("/v1/memories/search", json=search)).json()["items"]
        assert not [i for i in after if i["origin"] == "history"]
        # What the user says after the forget is searched as usual.
        await publish(
            settings,
            "message-written",
            [message(tenant, "s2", 0, content="My rye starter smells of vinegar, is it sour?")],
        )

        async def new_turn() -> bool:
            items = (await api.post("/v1/memories/search", json=search)).json()["items"]
            return [i["id"] for i in items if i["origin"] == "history"] == ["turn:s2-0"]

        await eventually(new_turn, within=180, what="the turn said after the forget")


async def test_a_relative_date_in_the_question_finds_the_turns_of_that_day(
    db: AsyncEngine,
) -> None:
    tenant = f"hist-{uuid.uuid4().hex[:8]}"
    days = [datetime(2023, 5, d, 18, 0) for d in (2, 16, 23)]
    await MessageStore(db).insert_many(
        [
            stored(tenant, n, "user", "We tried a new recipe for dinner.", created_at=day)
            for n, day in enumerate(days)
        ]
    )
    await HistoryIndex(db, tenant_id=tenant).run_until_done()
    provider = BuiltinProvider(db)
    query = "What did we cook for dinner two weeks ago?"
    asked = datetime(2023, 5, 30, 9, 0)  # "two weeks ago": the week of 15 May 2023
    found = await provider.search(tenant, "u1", None, query, top_k=1, at=asked)
    assert [i.source_event_ids for i in found] == [("c1-1",)]
    assert "(16 May 2023)" in found[0].content
    a_week_later = await provider.search(tenant, "u1", None, query, top_k=1, at=days[2])
    assert [i.source_event_ids for i in a_week_later] == [("c1-0",)]


def okapi(
    turns: list[StoredMessage], query: str, budget: int, top_k: int
) -> list[tuple[str, float]]:
    """Okapi BM25 over ``turns`` in Python, against their average length, at most ``budget``
    postings read rarest words first: what the database's one statement must answer."""
    docs = {t.event_id: document_terms(f"{t.content}\n{day_terms(t.created_at)}") for t in turns}
    average = max(1.0, sum(d.length for d in docs.values()) / len(docs))
    terms = tokenize(query)
    postings: dict[str, dict[str, int]] = {}
    for event_id, counted in docs.items():
        for term, tf in counted.words.items():
            if term in terms:
                postings.setdefault(term, {})[event_id] = tf
    read: dict[str, dict[str, int]] = {}
    unread: dict[str, int] = {}
    spent = 0
    for term, posted in sorted(postings.items(), key=lambda kv: (len(kv[1]), kv[0])):
        if spent + len(posted) <= budget:
            read[term], spent = posted, spent + len(posted)
        else:
            unread[term] = len(posted)
    k1, b = turn_search.K1, turn_search.B
    norms = {e: k1 * (1 - b) + k1 * b * d.length / average for e, d in docs.items()}
    scores = relevance(terms, len(docs), read, {}, norms, k1=k1, unread=unread)
    order = {t.event_id: n for n, t in enumerate(turns)}
    best = sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))
    return [(event_id, normalised(score)) for event_id, score in best[:top_k]]


async def test_the_turn_search_is_one_statement_ranking_as_okapi_bm25(db: AsyncEngine) -> None:
    tenant = f"hist-{uuid.uuid4().hex[:8]}"
    rng = random.Random(7)
    words = [
        "bread",
        "starter",
        "flour",
        "oven",
        "rye",
        "crust",
        "dough",
        "salt",
        "water",
        "kitchen",
        "timer",
        "sunday",
    ]
    turns = [
        stored(
            tenant,
            n,
            "user" if n % 3 else "assistant",
            " ".join(rng.choice(words) for _ in range(rng.randint(4, 40))) + ".",
            agent_id="a1" if n % 3 == 0 else None,
        )
        for n in range(60)
    ]
    # Turns the search of agent a1 never answers: another agent's and another user's.
    hidden = [
        stored(tenant, 100, "assistant", "rye rye rye starter", agent_id="a2"),
        stored(tenant, 101, "user", "rye starter flour", user_id="u2"),
    ]
    await MessageStore(db).insert_many(turns + hidden)
    await HistoryIndex(db, tenant_id=tenant).run_until_done()
    cases = [
        ("rye starter", turn_search.POSTINGS_BUDGET, 10),
        ("rye rye starter crust, and the oven timer", turn_search.POSTINGS_BUDGET, 5),
        ("flour water salt unknownword", 40, 10),  # the common words left unread
        ("dough", turn_search.POSTINGS_BUDGET, 3),
    ]
    for query, budget, top_k in cases:
        with statements(db) as seen:
            async with db.connect() as conn:
                found = await turn_search.search_turns(
                    conn, tenant, "u1", "a1", query, top_k, budget=budget
                )
        assert len(seen) == 1, seen
        expected = okapi(turns, query, budget, top_k)
        assert [i.source_event_ids[0] for i in found] == [e for e, _ in expected], query
        assert [i.score for i in found] == pytest.approx([s for _, s in expected], rel=1e-6)
