"""The long-term chain: throughput and latency with the rule-based judge, and memory quality
on LoCoMo through the real pipeline.

1. Chain: 200 sessions of 20 messages end in one burst (sessions/s until every memory is
   persisted), then 100 more at 10 a second (p50 and p99 from ``session-ended`` to the last
   memory's ``created_at``).
2. LoCoMo: every turn of the dev split is a ``message-written``, every session then ends; once
   the chain is idle each question of categories 1-4 searches the memories, recall@5/@10 read
   through ``source_event_ids``, beside plain BM25 over the raw turns in the same run."""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from aiokafka.errors import KafkaError
from sqlalchemy import func, make_url, select
from sqlalchemy import text as sql

from bench.embedding_server import MODEL_NAME
from bench.embedding_server import running as embedding_server
from bench.locomo import CATEGORIES, KS, OkapiBM25, Recall, Sample, data_path, load
from bench.support import isolated_settings, log_dir, start_worker
from memstream.broker.groups import caught_up
from memstream.broker.topics import publish
from memstream.embeddings.client import EmbeddingClient
from memstream.providers.builtin import BuiltinProvider
from memstream.retrieval import RELATIVITY
from memstream.settings import Settings
from memstream.store.database import create_engine, migrate
from memstream.store.messages import MessageStore
from memstream.store.schema import long_term_memory as ltm
from memstream.store.schema import memory_embedding as vectors_table
from memstream.text.tokens import count_tokens
from tests.support.settings import free_port
from tests.support.waiting import eventually

BURST = 200
PACED = 100
RATE = 10.0
FACTS = [
    "I live in {city}.",
    "I love {food} and I hate {other}.",
    "My sister is called {name}.",
    "I work as a {job} at {company}.",
    "I'm planning a trip to {city2} next month.",
    "Please always answer me in short bullet points.",
]
FILL = ["Thanks!", "Sounds good.", "Could you explain that again?", "Great, tell me more."]
VALUES = {
    "city": ["Lisbon", "Oslo", "Kyoto", "Lima"],
    "food": ["ramen", "tapas", "curry", "falafel"],
    "other": ["olives", "coriander", "mushrooms", "liver"],
    "name": ["Ana", "Mei", "Sara", "Ola"],
    "job": ["nurse", "teacher", "pilot", "chemist"],
    "company": ["Acme", "Globex", "Initech", "Umbrella"],
    "city2": ["Rome", "Hanoi", "Quito", "Cairo"],
}
CHAIN_TOPICS = ("session-ended", "lt-judge", "lt-dedupe", "lt-conflict", "lt-persist")


def session_events(tenant: str, n: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Twenty messages (six facts among small talk) of session ``n`` and its end event."""
    user, conversation = f"user-{n}", f"conv-{n}"
    values = {k: v[n % len(v)] for k, v in VALUES.items()}
    lines = [fact.format(**values) for fact in FACTS] + FILL
    events = []
    start = datetime(2026, 3, 1) + timedelta(minutes=n)
    for i in range(20):
        role = "user" if i % 2 == 0 else "assistant"
        text = lines[(i // 2) % len(lines)] if role == "user" else "Noted, thank you."
        events.append(
            {
                "event_id": f"{conversation}-{i}",
                "tenant_id": tenant,
                "user_id": user,
                "agent_id": "agent-bench",
                "conversation_id": conversation,
                "role": role,
                "content": text,
                "created_at": (start + timedelta(seconds=i)).isoformat() + "Z",
            }
        )
    end = {
        "event_id": f"end-{conversation}",
        "tenant_id": tenant,
        "user_id": user,
        "agent_id": "agent-bench",
        "conversation_id": conversation,
    }
    return events, end


async def chain_idle(settings: Settings) -> bool:
    try:
        for topic in CHAIN_TOPICS:
            if not await caught_up(settings, topic):
                return False
    except KafkaError:
        return False  # a broker busy with other jobs: asked again on the next poll
    return True


async def summaries_written(settings: Settings) -> bool:
    """Whether the history and summary stages have committed every record sent to them."""
    try:
        return all([await caught_up(settings, t) for t in ("message-written", "summary-check")])
    except KafkaError:
        return False  # a broker busy with other jobs: asked again on the next poll


async def users_with_memories(engine: Any, tenant: str) -> dict[str, datetime]:
    query = (
        select(ltm.c.user_id, func.max(ltm.c.created_at))
        .where(ltm.c.tenant_id == tenant)
        .group_by(ltm.c.user_id)
    )
    async with engine.connect() as conn:
        return {u: t for u, t in (await conn.execute(query)).all()}


async def chain(base: Settings) -> None:
    tenant = f"lt-{uuid.uuid4().hex[:8]}"
    settings = isolated_settings(worker_web_port=free_port(), log_level="WARNING")
    engine = create_engine(base.database_url)
    store = MessageStore(engine)
    worker = start_worker(settings, log_dir("longterm"))
    try:
        sessions = [session_events(tenant, n) for n in range(BURST + PACED)]
        await publish(settings, "message-written", [e for events, _ in sessions for e in events])

        async def stored() -> bool:
            return await store.count(tenant) == 20 * len(sessions)

        await eventually(stored, within=300, what="messages stored")
        started = time.time()
        await publish(settings, "session-ended", [end for _, end in sessions[:BURST]])

        async def burst_done() -> bool:
            return len(await users_with_memories(engine, tenant)) >= BURST

        await eventually(burst_done, within=600, what="burst persisted")
        burst_seconds = time.time() - started

        sent: dict[str, float] = {}
        for _, end in sessions[BURST:]:
            sent[end["user_id"]] = time.time()
            await publish(settings, "session-ended", [end])
            await asyncio.sleep(1 / RATE)

        async def paced_done() -> bool:
            return len(await users_with_memories(engine, tenant)) >= BURST + PACED

        await eventually(paced_done, within=600, what="paced sessions persisted")
        done = await users_with_memories(engine, tenant)
        # created_at is naive UTC, written by the provider when the memory is stored.
        latencies = sorted(
            (done[u] - datetime.utcfromtimestamp(t)).total_seconds() for u, t in sent.items()
        )
        async with engine.connect() as conn:
            memories = (
                await conn.execute(
                    select(func.count()).select_from(ltm).where(ltm.c.tenant_id == tenant)
                )
            ).scalar_one()
        print(f"long-term chain, rule-based judge, {BURST} sessions of 20 messages in a burst:")
        print(f"  throughput            : {BURST / burst_seconds:8.1f} sessions/s")
        print(f"  memories per session  : {memories / (BURST + PACED):8.1f}")
        print(f"paced at {RATE:.0f} sessions/s, session-ended -> memories persisted:")
        print(f"  p50                   : {statistics.median(latencies) * 1000:8.0f} ms")
        p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
        print(f"  p99                   : {p99 * 1000:8.0f} ms")
    finally:
        worker.stop(timeout=30)
        await engine.dispose()


def locomo_time(raw: str, index: int) -> str:
    """LoCoMo's session time ("1:56 pm on 8 May, 2023") plus one second per turn."""
    moment = datetime.strptime(
        raw.replace(" pm", "PM").replace(" am", "AM"), "%I:%M%p on %d %B, %Y"
    )
    return (moment + timedelta(seconds=index)).isoformat() + "Z"


async def locomo(base: Settings) -> None:
    with ExitStack() as stack:
        embeddings: str | None = None
        try:
            embeddings = stack.enter_context(embedding_server())
        except RuntimeError as exc:
            print(f"LoCoMo with embeddings: skipped, {exc}")
        await locomo_pipeline(base, embeddings)


@dataclass(frozen=True)
class Subset:
    """The first ``samples`` LoCoMo conversations, each cut to its first ``sessions`` sessions;
    only the questions whose evidence lies in what is kept are scored."""

    samples: int
    sessions: int

    def keep(self, sample: Sample) -> Sample:
        turns = [t for t in sample.turns if session_of_turn(t.dia_id) <= self.sessions]
        known = {t.dia_id for t in turns}
        questions = [q for q in sample.questions if q.evidence <= known]
        return replace(sample, turns=turns, questions=questions)


def session_of_turn(dia_id: str) -> int:
    """LoCoMo's ``D3:12`` is turn 12 of session 3."""
    return int(dia_id.split(":")[0].lstrip("D"))


@dataclass
class PipelineRun:
    """What one run of the chain over LoCoMo measured: per-session latencies (when sessions
    ended one at a time), what was stored, and the recall of each search variant."""

    stored_seconds: list[float] = field(default_factory=list)
    """Per session: from its ``session-ended`` to the last memory it wrote or expired."""
    idle_seconds: list[float] = field(default_factory=list)
    """Per session: from its ``session-ended`` until every chain topic was committed."""
    sessions_without_writes: int = 0
    memories: int = 0
    episodes: int = 0
    questions: int = 0
    recalls: dict[str, Recall] = field(default_factory=dict)


async def last_write(engine: Any, tenant: str) -> datetime | None:
    """The newest ``created_at`` or ``deleted_at`` of ``tenant``'s memories (naive UTC)."""
    query = select(func.max(ltm.c.created_at), func.max(ltm.c.deleted_at)).where(
        ltm.c.tenant_id == tenant
    )
    async with engine.connect() as conn:
        times = (await conn.execute(query)).one()
    return max((t for t in times if t is not None), default=None)


async def end_one_at_a_time(
    settings: Settings, engine: Any, tenant: str, ends: list[dict[str, Any]], run: PipelineRun
) -> None:
    """Each session ends once the chain is idle after the one before; its latencies go into
    ``run`` and are printed as they come (a slow model's run can be read while it goes)."""
    for n, end in enumerate(ends, 1):
        sent = time.time()
        await publish(settings, "session-ended", [end])
        await eventually(lambda: chain_idle(settings), within=3600, what="chain idle")
        idle = time.time() - sent
        written = await last_write(engine, tenant)
        # created_at/deleted_at are naive UTC, written by the worker on this machine's clock.
        stored = (written - datetime.utcfromtimestamp(sent)).total_seconds() if written else -1.0
        run.idle_seconds.append(idle)
        if stored >= 0:
            run.stored_seconds.append(stored)
        else:
            run.sessions_without_writes += 1
        shown = f"{stored:.1f} s" if stored >= 0 else "nothing written"
        print(
            f"  session {n}/{len(ends)} {end['conversation_id']}: stored {shown}, "
            f"chain idle {idle:.1f} s",
            flush=True,
        )


async def locomo_pipeline(
    base: Settings,
    embeddings: str | None,
    *,
    subset: Subset | None = None,
    overrides: dict[str, Any] | None = None,
    judge: str = "rule-based judge",
    after: Callable[[int], Awaitable[None]] | None = None,
    one_at_a_time: bool = False,
) -> PipelineRun:
    """The chain over LoCoMo (or a ``subset``) on one worker with ``overrides`` of its
    settings; with ``embeddings`` (a ``/v1`` base URL) the worker embeds the memories as it
    writes them, and search is scored lexical and hybrid. ``after(port)`` reads the worker's
    metrics on its web port once the chain is idle. Sessions end in one burst, or
    ``one_at_a_time``, each once the chain is idle, with its latency measured."""
    import json

    raw_samples = json.loads(data_path().read_text(encoding="utf-8"))
    samples = load(data_path())
    if subset is not None:
        raw_samples = raw_samples[: subset.samples]
        samples = [subset.keep(sample) for sample in samples[: subset.samples]]
    tenant = f"locomo-{uuid.uuid4().hex[:8]}"
    vectors = (
        {"embedding_base_url": embeddings, "embedding_model": MODEL_NAME} if embeddings else {}
    )
    # A database of its own: the worker's embedding backfill embeds every memory it finds,
    # and the shared test database holds other runs' memories.
    database = make_url(base.database_url).set(database=f"memstream_bench_{tenant[7:]}")
    database_url = database.render_as_string(hide_password=False)
    await migrate(database_url)
    settings = isolated_settings(
        worker_web_port=free_port(),
        log_level="WARNING",
        database_url=database_url,
        **vectors,
        **(overrides or {}),
    )
    engine = create_engine(database_url)
    worker = start_worker(settings, log_dir("longterm"))
    try:
        messages: list[dict[str, Any]] = []
        ends: list[dict[str, Any]] = []
        for raw in raw_samples:
            conversation = raw["conversation"]
            sample_id = raw["sample_id"]
            sessions = sorted(
                (k for k in conversation if k.startswith("session_") and k[8:].isdigit()),
                key=lambda k: int(k[8:]),
            )[: subset.sessions if subset else None]
            for key in sessions:
                conv = f"{sample_id}-{key}"
                when = conversation.get(f"{key}_date_time", "1:00 pm on 1 January, 2023")
                for i, turn in enumerate(conversation[key]):
                    text = turn["text"]
                    if turn.get("blip_caption"):
                        text += f" [shares a photo of {turn['blip_caption']}]"
                    messages.append(
                        {
                            "event_id": f"{sample_id}:{turn['dia_id']}",
                            "tenant_id": tenant,
                            "user_id": sample_id,
                            "agent_id": None,
                            "conversation_id": conv,
                            "role": "user",
                            "content": text,
                            "created_at": locomo_time(when, i),
                            "metadata": {"speaker": turn["speaker"]},
                        }
                    )
                ends.append(
                    {
                        "event_id": f"end-{conv}",
                        "tenant_id": tenant,
                        "user_id": sample_id,
                        "agent_id": None,
                        "conversation_id": conv,
                    }
                )
        await publish(settings, "message-written", messages)
        store = MessageStore(engine)

        async def stored() -> bool:
            return await store.count(tenant) == len(messages)

        await eventually(stored, within=300, what="LoCoMo turns stored")
        run = PipelineRun()
        if one_at_a_time:
            # The summaries the turns call for (20 uncovered messages of a conversation) come
            # first: with a model they share its one slot, and would be counted in the
            # latency of whichever sessions end while they are written.
            began = time.perf_counter()
            await eventually(
                lambda: summaries_written(settings), within=3600, what="summaries written"
            )
            print(
                f"LoCoMo, {len(ends)} sessions ({judge}), ended one at a time (the turns' "
                f"summaries written {time.perf_counter() - began:.0f} s after they were stored):",
                flush=True,
            )
            await end_one_at_a_time(settings, engine, tenant, ends, run)
        else:
            await publish(settings, "session-ended", ends)
            await asyncio.sleep(5)
            began = time.perf_counter()
            await eventually(lambda: chain_idle(settings), within=7200, what="chain idle")
            print(
                f"LoCoMo, {len(ends)} sessions ({judge}): the chain was idle "
                f"{time.perf_counter() - began:.0f} s after the last session ended"
            )
        if after is not None:
            await after(settings.worker_web_port)

        embedder = EmbeddingClient.from_settings(settings)
        if embedder is not None:
            began = time.perf_counter()
            await eventually(
                lambda: all_embedded(engine, tenant), within=900, what="memories embedded"
            )
            waited = time.perf_counter() - began
            print(f"(memories all embedded by the worker {waited:.0f} s after the chain was idle)")
        await report_pipeline(engine, tenant, samples, embedder, judge, run)
        return run
    finally:
        worker.stop(timeout=30)
        async with engine.begin() as conn:
            await conn.execute(sql(f"DROP DATABASE IF EXISTS `{database.database}`"))
        await engine.dispose()


async def all_embedded(engine: Any, tenant: str) -> bool:
    """Whether every live memory of ``tenant`` has its vector."""
    live = (ltm.c.tenant_id == tenant, ltm.c.deleted_at.is_(None))
    missing = (
        select(func.count())
        .select_from(ltm.outerjoin(vectors_table, vectors_table.c.memory_id == ltm.c.id))
        .where(*live, vectors_table.c.memory_id.is_(None))
    )
    async with engine.connect() as conn:
        return int((await conn.execute(missing)).scalar_one()) == 0


async def report_pipeline(
    engine: Any,
    tenant: str,
    samples: list[Any],
    embedder: EmbeddingClient | None = None,
    judge: str = "rule-based judge",
    run: PipelineRun | None = None,
) -> None:
    """Recall of the evidence through what the chain kept, at the load path's relativity
    threshold and without one (and hybrid, with ``embedder``), next to BM25 over every raw
    turn, with the tokens returned; kept in ``run`` too."""
    variants = {
        f"memstream, relativity {RELATIVITY}": BuiltinProvider(engine, relativity=RELATIVITY),
        "memstream, no threshold": BuiltinProvider(engine, relativity=0.0),
    }
    if embedder is not None:
        variants |= {
            f"hybrid, relativity {RELATIVITY}": BuiltinProvider(
                engine, relativity=RELATIVITY, embedder=embedder, query_timeout=5.0
            ),
            "hybrid, no threshold": BuiltinProvider(
                engine, relativity=0.0, embedder=embedder, query_timeout=5.0
            ),
        }
    bm25_label = "BM25 over raw turns"
    recalls = {label: Recall() for label in [*variants, bm25_label]}
    returned_tokens = dict.fromkeys(recalls, 0)
    stored_items = stored_tokens = episodes = questions = 0
    for sample in samples:
        live = await variants["memstream, no threshold"].list_live(tenant, sample.sample_id, None)
        stored_items += len(live)
        episodes += sum(1 for m in live if m.kind == "episode")
        stored_tokens += sum(count_tokens(m.content) for m in live)
        plain = OkapiBM25([turn.text for turn in sample.turns])
        prefix = f"{sample.sample_id}:"
        for question in sample.questions:
            questions += 1
            ranked: dict[str, list[tuple[tuple[str, ...], str]]] = {}
            for label, provider in variants.items():
                items = await provider.search(
                    tenant, sample.sample_id, None, question.text, top_k=max(KS)
                )
                ranked[label] = [
                    (tuple(e.removeprefix(prefix) for e in item.source_event_ids), item.content)
                    for item in items[: max(KS)]
                ]
            ranked[bm25_label] = [
                ((sample.turns[d].dia_id,), sample.turns[d].text)
                for d in plain.top(question.text, max(KS))
            ]
            for label, found in ranked.items():
                recalls[label].count(question)
                for k in KS:
                    recalls[label].add(question, k, [cited for cited, _ in found])
                returned_tokens[label] += sum(count_tokens(text) for _, text in found)
    if run is not None:
        run.memories, run.episodes, run.questions = stored_items, episodes, questions
        run.recalls = recalls
    turns = sum(len(s.turns) for s in samples)
    print(
        f"LoCoMo dev through the pipeline ({judge}): {turns} turns, {questions} questions -> "
        f"{stored_items} memories ({episodes} episodes), {stored_tokens:,} tokens stored"
    )
    header = "  " + f"{'':34s}" + "".join(f"{'@' + str(k):>8s}" for k in KS)
    header += "".join(f"{name[:11]:>13s}" for name in CATEGORIES.values()) + "  tokens@10"
    print(header)
    for label, recall in recalls.items():
        row = f"  {label:34s}" + "".join(f"{recall.at(k):7.1f}%" for k in KS)
        row += "".join(f"{recall.at(5, c):5.1f}/{recall.at(10, c):5.1f}  " for c in CATEGORIES)
        row += f"{returned_tokens[label] / questions:9.0f}"
        print(row)
    baseline = recalls[bm25_label]
    for label in variants:
        ratio = recalls[label].at(10) / max(baseline.at(10), 1e-9)
        tokens = returned_tokens[label] / max(returned_tokens[bm25_label], 1)
        print(
            f"  {label}: recall@10 {ratio:.2f}x BM25, tokens of the top 10 {tokens:.2f}x "
            f"BM25's; dia_ids per item {recalls[label].mean_dia_ids(10):.2f}, "
            f"items at k=10 {recalls[label].mean_items(10):.1f}"
        )


async def main() -> None:
    base = Settings()
    await migrate(base.database_url)
    await chain(base)
    await locomo(base)


async def locomo_only() -> None:
    """Only the LoCoMo half: ``python -m bench longterm-locomo``."""
    base = Settings()
    await migrate(base.database_url)
    await locomo(base)


if __name__ == "__main__":
    asyncio.run(main())
