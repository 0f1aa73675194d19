"""LongMemEval_S (development split) through the real pipeline, LLM-free, against BM25.

Each question is a tenant and user of its own: its haystack sessions' turns are published as
``message-written`` events on their dates, each session then ends, and once the chain is idle
the question searches the user's memories (top 10, asked at its ``question_date``). Turn
recall@k and session recall_any@k are read through ``source_event_ids``; Okapi BM25 over the
same user's raw turns is scored in the same run. ``LONGMEMEVAL_QUESTIONS=N`` (of 60),
``LONGMEMEVAL_PATH`` (the data file), ``LONGMEMEVAL_KEEP=1`` keeps the run's database and
``LONGMEMEVAL_DATABASE=<name>`` scores a kept one again without ingesting."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, make_url, select
from sqlalchemy import text as sql

from bench.locomo import OkapiBM25
from bench.longterm import chain_idle
from bench.support import isolated_settings, log_dir, start_worker
from memstream.broker.topics import publish
from memstream.providers.builtin import BuiltinProvider
from memstream.retrieval import RELATIVITY
from memstream.settings import Settings
from memstream.store.database import create_engine, migrate
from memstream.store.messages import MessageStore
from memstream.store.schema import conversation_message as messages
from memstream.store.schema import message_indexed as indexed
from memstream.text.tokens import count_tokens
from tests.support.settings import free_port
from tests.support.waiting import eventually

DEFAULT_PATH = (
    Path(__file__).resolve().parents[2] / "shared/data/longmemeval/longmemeval_s_dev.json.gz"
)
TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)
KS = (5, 10)
BM25 = "BM25 over raw turns"


def data_path() -> Path:
    return Path(os.environ.get("LONGMEMEVAL_PATH") or DEFAULT_PATH)


def when(raw: str) -> datetime:
    """LongMemEval's "2023/05/30 (Tue) 23:40"."""
    return datetime.strptime(raw[:10] + raw[16:], "%Y/%m/%d %H:%M")


def pick(questions: list[dict[str, Any]], n: int | None) -> list[dict[str, Any]]:
    """The first ``n`` questions, the types taken in turn (all of them without ``n``)."""
    if n is None or n >= len(questions):
        return questions
    by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for q in questions:
        by_type[q["question_type"]].append(q)
    out: list[dict[str, Any]] = []
    while len(out) < n:
        for kind in TYPES:
            if by_type[kind] and len(out) < n:
                out.append(by_type[kind].pop(0))
    return out


@dataclass
class Turn:
    event_id: str
    session_id: str
    role: str
    text: str
    evidence: bool


@dataclass
class Question:
    """One question, its tenant, its turns and the events that publish them."""

    raw: dict[str, Any]
    tenant: str
    turns: list[Turn] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    ends: list[dict[str, Any]] = field(default_factory=list)

    @property
    def user(self) -> str:
        return str(self.raw["question_id"])

    @property
    def kind(self) -> str:
        return str(self.raw["question_type"])

    @property
    def evidence(self) -> set[str]:
        return {t.event_id for t in self.turns if t.evidence}


def build(raw: dict[str, Any], run: str, n: int) -> Question:
    q = Question(raw, f"lme-{run}-{n}")
    # A haystack may hold the same session twice: its position keeps the ids apart.
    sessions = sorted(
        enumerate(
            zip(
                raw["haystack_dates"],
                raw["haystack_session_ids"],
                raw["haystack_sessions"],
                strict=True,
            )
        ),
        key=lambda s: (when(s[1][0]), s[0]),
    )
    for position, (date, session_id, turns) in sessions:
        start = when(date)
        conversation = f"{q.user}-{position}-{session_id}"
        for i, turn in enumerate(turns):
            event_id = f"{position}:{session_id}:{i}"
            q.turns.append(
                Turn(
                    event_id,
                    session_id,
                    turn["role"],
                    turn["content"],
                    bool(turn.get("has_answer")),
                )
            )
            q.messages.append(
                {
                    "event_id": event_id,
                    "tenant_id": q.tenant,
                    "user_id": q.user,
                    "agent_id": None,
                    "conversation_id": conversation,
                    "role": turn["role"],
                    "content": turn["content"],
                    "created_at": (start + timedelta(seconds=i)).isoformat() + "Z",
                }
            )
        q.ends.append(
            {
                "event_id": f"end-{conversation}",
                "tenant_id": q.tenant,
                "user_id": q.user,
                "agent_id": None,
                "conversation_id": conversation,
                "ended_at": (start + timedelta(seconds=len(turns))).isoformat() + "Z",
            }
        )
    return q


@dataclass
class Score:
    """Sums over the questions of one type (or all): recall, session hits, tokens."""

    questions: int = 0
    with_turns: int = 0  # questions that have evidence turns
    turn_recall: dict[int, float] = field(default_factory=lambda: dict.fromkeys(KS, 0.0))
    session_any: dict[int, int] = field(default_factory=lambda: dict.fromkeys(KS, 0))
    tokens: int = 0
    items: int = 0

    def add(self, q: Question, found: Sequence[tuple[Sequence[str], str]]) -> None:
        self.questions += 1
        evidence = q.evidence
        answer_sessions = set(q.raw["answer_session_ids"])
        session_of = {t.event_id: t.session_id for t in q.turns}
        if evidence:
            self.with_turns += 1
        for k in KS:
            cited = {e for ids, _ in found[:k] for e in ids}
            if evidence:
                self.turn_recall[k] += len(evidence & cited) / len(evidence)
            if any(session_of.get(e) in answer_sessions for e in cited):
                self.session_any[k] += 1
        self.tokens += sum(count_tokens(text) for _, text in found[:10])
        self.items += len(found[:10])

    def turn(self, k: int) -> float:
        return 100 * self.turn_recall[k] / max(1, self.with_turns)

    def session(self, k: int) -> float:
        return 100 * self.session_any[k] / max(1, self.questions)

    def mean_tokens(self) -> float:
        return self.tokens / max(1, self.questions)


def variants(engine: Any) -> dict[str, BuiltinProvider]:
    return {
        f"memstream, relativity {RELATIVITY}": BuiltinProvider(engine, relativity=RELATIVITY),
        "memstream, no threshold": BuiltinProvider(engine, relativity=0.0),
    }


async def search(provider: BuiltinProvider, q: Question) -> list[tuple[Sequence[str], str]]:
    asked = when(q.raw["question_date"])
    items = await provider.search(q.tenant, q.user, None, q.raw["question"], top_k=10, at=asked)
    return [(item.source_event_ids, item.content) for item in items]


async def score(engine: Any, questions: list[Question]) -> dict[str, dict[str, Score]]:
    providers = variants(engine)
    scores: dict[str, dict[str, Score]] = {
        label: {kind: Score() for kind in ("all", *TYPES)} for label in [*providers, BM25]
    }
    for q in questions:
        bm25 = OkapiBM25([t.text for t in q.turns])
        found: dict[str, list[tuple[Sequence[str], str]]] = {
            label: await search(provider, q) for label, provider in providers.items()
        }
        found[BM25] = [
            ((q.turns[d].event_id,), q.turns[d].text) for d in bm25.top(q.raw["question"], 10)
        ]
        for label, ranked in found.items():
            for kind in ("all", q.kind):
                scores[label][kind].add(q, ranked)
    for provider in providers.values():
        await provider.aclose()
    return scores


def report(scores: dict[str, dict[str, Score]], questions: list[Question]) -> None:
    print(f"\nLongMemEval_S dev, {len(questions)} questions, top 10 (rule-based judge):")
    print(
        f"  {'':30s}{'turn@5':>8s}{'turn@10':>8s}{'sess@5':>8s}{'sess@10':>8s}"
        f"{'tokens@10':>10s}{'items':>7s}"
    )
    for kind in ("all", *TYPES):
        if not scores[BM25][kind].questions:
            continue
        print(f"  {kind} ({scores[BM25][kind].questions} questions)")
        for label, per_kind in scores.items():
            s = per_kind[kind]
            print(
                f"    {label:28s}{s.turn(5):8.1f}{s.turn(10):8.1f}{s.session(5):8.1f}"
                f"{s.session(10):8.1f}{s.mean_tokens():10.0f}{s.items / max(1, s.questions):7.1f}"
            )
    base = scores[BM25]
    for label, per_kind in scores.items():
        if label == BM25:
            continue
        ratios = ", ".join(
            f"{kind} {per_kind[kind].turn(10) / max(base[kind].turn(10), 1e-9):.2f}x"
            for kind in TYPES
            if base[kind].questions
        )
        tokens = per_kind["all"].tokens / max(1, base["all"].tokens)
        overall = per_kind["all"].turn(10) / max(base["all"].turn(10), 1e-9)
        print(
            f"  {label}: turn recall@10 {overall:.2f}x BM25 ({ratios}); tokens of the top 10 "
            f"{tokens:.2f}x BM25's"
        )


async def search_cost(engine: Any, questions: list[Question]) -> None:
    """This process's CPU time per search, the memories alone and with the stored turns,
    each question asked five times after a first, uncounted round (warm connections)."""
    provider = BuiltinProvider(engine)
    rounds = 5

    async def memories_only(q: Question) -> object:
        return await provider.search_memories(q.tenant, q.user, None, q.raw["question"])

    async def with_turns(q: Question) -> object:
        asked = when(q.raw["question_date"])
        return await provider.search(q.tenant, q.user, None, q.raw["question"], at=asked)

    cost = {}
    for label, call in (("memories only", memories_only), ("memories + turns", with_turns)):
        for q in questions:
            await call(q)
        provider.clear_cache()
        began = time.process_time()
        for _ in range(rounds):
            for q in questions:
                await call(q)
            provider.clear_cache()  # the lexical answer cache would answer repeats
        cost[label] = (time.process_time() - began) * 1000 / (rounds * len(questions))
    await provider.aclose()
    print(
        f"\nCPU of this process per search on {engine.dialect.name} (top 10, "
        f"{len(questions)} users of ~480 turns): "
        + ", ".join(f"{label} {ms:.2f} ms" for label, ms in cost.items())
    )


async def stored_count(engine: Any, questions: list[Question]) -> int:
    store = MessageStore(engine)
    return sum([await store.count(q.tenant) for q in questions])


async def wait_indexed(engine: Any) -> None:
    """Until the worker's turn index has read every stored message."""

    async def done() -> bool:
        async with engine.connect() as conn:
            left = await conn.execute(
                select(func.count())
                .select_from(messages.outerjoin(indexed, indexed.c.message_id == messages.c.id))
                .where(indexed.c.message_id.is_(None))
            )
            return int(left.scalar_one()) == 0

    await eventually(done, within=3600, what="turn index filled")


async def main() -> None:
    path = data_path()
    if not path.is_file():
        print(f"LongMemEval data not found at {path}; set LONGMEMEVAL_PATH")
        return
    raw = json.loads(gzip.decompress(path.read_bytes()))
    limit = os.environ.get("LONGMEMEVAL_QUESTIONS")
    kept = os.environ.get("LONGMEMEVAL_DATABASE")  # a run's database kept, scored again
    run = kept.rsplit("_", 1)[-1] if kept else uuid.uuid4().hex[:8]
    questions = [build(r, run, n) for n, r in enumerate(pick(raw, int(limit) if limit else None))]
    base = Settings()
    # A database of its own, dropped at the end unless LONGMEMEVAL_KEEP is set.
    database = make_url(base.database_url).set(database=f"memstream_bench_lme_{run}")
    database_url = database.render_as_string(hide_password=False)
    engine = create_engine(database_url)
    if kept:
        report(await score(engine, questions), questions)
        await search_cost(engine, questions)
        await engine.dispose()
        return
    await migrate(database_url)
    settings = isolated_settings(
        worker_web_port=free_port(), log_level="WARNING", database_url=database_url
    )
    worker = start_worker(settings, log_dir("longmemeval"))
    try:
        await ingest(settings, engine, questions)
        report(await score(engine, questions), questions)
        await search_cost(engine, questions)
    finally:
        worker.stop(timeout=30)
        if os.environ.get("LONGMEMEVAL_KEEP"):
            print(f"kept: LONGMEMEVAL_DATABASE={database.database} scores it again")
        else:
            async with engine.begin() as conn:
                await conn.execute(sql(f"DROP DATABASE IF EXISTS `{database.database}`"))
        await engine.dispose()


async def ingest(settings: Settings, engine: Any, questions: list[Question]) -> None:
    """Every turn published and stored, every session ended, the chain idle, the turns
    indexed; the times printed."""
    turns = [m for q in questions for m in q.messages]
    began = time.perf_counter()
    await publish(settings, "message-written", turns)

    async def stored() -> bool:
        return await stored_count(engine, questions) == len(turns)

    await eventually(stored, within=3600, what="LongMemEval turns stored")
    stored_in = time.perf_counter() - began
    began = time.perf_counter()
    await publish(settings, "session-ended", [e for q in questions for e in q.ends])
    await asyncio.sleep(5)
    await eventually(lambda: chain_idle(settings), within=7200, what="chain idle")
    chain = time.perf_counter() - began
    began = time.perf_counter()
    await wait_indexed(engine)
    indexed = time.perf_counter() - began
    async with engine.connect() as conn:
        live = (
            await conn.execute(
                sql("SELECT count(*) FROM long_term_memory WHERE deleted_at IS NULL")
            )
        ).scalar_one()
    print(
        f"{len(turns):,} messages in {sum(len(q.ends) for q in questions):,} sessions of "
        f"{len(questions)} users: stored in {stored_in:.0f} s, chain idle {chain:.0f} s after "
        f"the sessions ended, history indexed {indexed:.0f} s later; {live:,} live memories "
        f"({os.cpu_count()} cores shared with other work, load average "
        f"{os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    asyncio.run(main())
