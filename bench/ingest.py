"""Ingest throughput on the shape of real traffic: 50,000 ``message-written`` events over 500
concurrent conversations, interleaved, real chat text (LoCoMo's turns), every stage running.

In one run on the same services: the reference design's per-message dual write (on a
sample), the sinks' own limit (multi-row INSERTs and pipelined cache writes, no Kafka),
memstream end to end with one worker (until every event is in MySQL and Redis, then until
the summary and long-term stages have caught up), the history role alone (live and from a
backlog), and two and three workers (the scaling factor, each worker's peak RSS). Each figure
comes with the load average; ``BENCH_PROFILE=FILE`` samples the one worker with py-spy."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import redis.asyncio as aioredis
from aiokafka.admin import AIOKafkaAdminClient
from sqlalchemy import insert

from bench.support import REPO, isolated_settings, log_dir, print_top
from memstream.broker import offsets
from memstream.broker.clients import (
    admin_client,
    group_less_consumer,
    make_admin,
    producer,
    stop_consumer,
)
from memstream.broker.groups import live_members
from memstream.broker.topics import ensure_topics, partitions
from memstream.launch import Launched, memstream_argv, settings_env, stop_all
from memstream.roles import ROLES, group_id, inputs_of, reading_group
from memstream.settings import Settings
from memstream.store.cache import RedisCache
from memstream.store.database import create_engine, migrate
from memstream.store.messages import MessageStore, StoredMessage
from memstream.store.schema import conversation_message
from memstream.store.summaries import SummaryStore
from memstream.text.tokens import count_tokens
from memstream.topology import PUBLIC_TOPICS, internal_topics
from tests.support.settings import free_port
from tests.support.waiting import eventually

EVENTS = 50_000
CONVERSATIONS = 500
REFERENCE_SAMPLE = 5_000  # the per-message reference is slow; its rate is taken on a sample
BATCH = 2_000
SUMMARY_TRIGGER = 20
LOCOMO = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"
FALLBACK_TEXTS = [
    "Can you book me a table for two at the Italian place near the office on Friday?",
    "Sure, I found a table at 7pm at Trattoria Roma. Shall I confirm it?",
    "Yes please, and remember I am vegetarian.",
    "Done. I noted that you are vegetarian for future bookings.",
]


def chat_texts() -> list[str]:
    """Every turn of LoCoMo's conversations (real chat text of varied length), in order."""
    path = Path(os.environ.get("MEMSTREAM_LOCOMO_PATH") or LOCOMO)
    if not path.is_file():
        return FALLBACK_TEXTS
    texts = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conversation = sample["conversation"]
        sessions = sorted(
            (k for k in conversation if re.fullmatch(r"session_\d+", k)),
            key=lambda k: int(k.split("_")[1]),
        )
        texts += [turn["text"] for key in sessions for turn in conversation[key]]
    return texts


@dataclass(frozen=True)
class Traffic:
    """One run's events: the messages, and one session end per conversation after its last."""

    tenant: str
    messages: list[dict[str, Any]]
    ends: list[dict[str, Any]]

    def in_order(self) -> list[tuple[str, dict[str, Any]]]:
        """(topic, event) in publishing order: each session end right after its last message."""
        last = {str(m["conversation_id"]): i for i, m in enumerate(self.messages)}
        ends = {str(e["conversation_id"]): e for e in self.ends}
        out: list[tuple[str, dict[str, Any]]] = []
        for i, m in enumerate(self.messages):
            out.append(("message-written", m))
            end = ends.get(str(m["conversation_id"]))
            if end is not None and last[str(m["conversation_id"])] == i:
                out.append(("session-ended", end))
        return out


def traffic(tenant: str, texts: Sequence[str]) -> Traffic:
    """500 conversations of 100 messages, interleaved: each round gives every conversation its
    next message, in a shuffled order; each conversation's text is its own stretch of turns."""
    rng = random.Random(7)
    start = datetime(2026, 1, 1)
    per_conversation = EVENTS // CONVERSATIONS
    messages: list[dict[str, Any]] = []
    for n in range(per_conversation):
        order = list(range(CONVERSATIONS))
        rng.shuffle(order)
        for conv in order:
            i = len(messages)
            messages.append(
                {
                    "event_id": f"{tenant}-{conv}-{n}",
                    "tenant_id": tenant,
                    "user_id": f"user-{conv}",
                    "agent_id": "agent-bench",
                    "conversation_id": f"conv-{conv}",
                    "role": "user" if n % 2 == 0 else "assistant",
                    "content": texts[(conv * 97 + n) % len(texts)],
                    "created_at": (start + timedelta(milliseconds=20 * i)).isoformat() + "Z",
                }
            )
    ends = [
        {
            "event_id": f"{tenant}-end-{conv}",
            "tenant_id": tenant,
            "user_id": f"user-{conv}",
            "agent_id": "agent-bench",
            "conversation_id": f"conv-{conv}",
        }
        for conv in range(CONVERSATIONS)
    ]
    return Traffic(tenant, messages, ends)


def load() -> float:
    """The machine's load average over the last minute."""
    return os.getloadavg()[0]


def stored(e: dict[str, Any]) -> StoredMessage:
    content = str(e["content"])
    return StoredMessage(
        tenant_id=str(e["tenant_id"]),
        conversation_id=str(e["conversation_id"]),
        event_id=str(e["event_id"]),
        user_id=str(e["user_id"]),
        agent_id=str(e["agent_id"]),
        role=str(e["role"]),
        message_type="chat",
        content=content,
        token_count=count_tokens(content),
        created_at=datetime.fromisoformat(str(e["created_at"])).replace(tzinfo=None),
        source_conversation_id=str(e["conversation_id"]),
    )


def _row(m: StoredMessage) -> dict[str, object]:
    return {f: getattr(m, f) for f in StoredMessage.__dataclass_fields__}


async def reference(settings: Settings, sample: list[dict[str, Any]]) -> float:
    """The reference design's dual write, one message at a time (events/s)."""
    engine = create_engine(settings.database_url)
    client = aioredis.Redis.from_url(settings.redis_url)
    started = time.perf_counter()
    for e in sample:
        m = stored(e)
        async with engine.begin() as conn:
            await conn.execute(insert(conversation_message).values(**_row(m)))
        key = f"{settings.cache_prefix}ref:{m.tenant_id}:{m.conversation_id}"
        await client.lpush(key, orjson.dumps(_row(m), default=str))
        await client.expire(key, settings.cache_ttl_seconds)
        if await client.llen(key) > settings.cache_max_messages:
            await client.rpop(key)
    elapsed = time.perf_counter() - started
    await client.aclose()
    await engine.dispose()
    return len(sample) / elapsed


async def sinks(settings: Settings, evs: list[dict[str, Any]]) -> float:
    """Multi-row INSERTs plus pipelined cache writes, no Kafka (events/s)."""
    engine = create_engine(settings.database_url)
    client = aioredis.Redis.from_url(settings.redis_url)
    store = MessageStore(engine)
    cache = RedisCache(client, prefix=settings.cache_prefix)
    messages = [stored(e) for e in evs]
    started = time.perf_counter()
    for i in range(0, len(messages), BATCH):
        batch = messages[i : i + BATCH]
        await store.insert_many(batch)
        by_conv: dict[tuple[str, str], list[StoredMessage]] = {}
        for m in batch:
            by_conv.setdefault((m.tenant_id, m.conversation_id), []).append(m)
        cold = (await cache.append(by_conv)).cold
        await cache.warm({c: by_conv[c] for c in cold})
    elapsed = time.perf_counter() - started
    await client.aclose()
    await engine.dispose()
    return len(messages) / elapsed


@dataclass
class Run:
    """One end-to-end run: its rate, the load average then, the workers' CPU per 1,000 events
    while they ingested (their own, their CPU processes'), what followed, their peak RSS."""

    rate: float
    load: float
    cpu_ms: tuple[float, float]
    rss_mib: list[float]
    summaries_after: float | None = None
    checks_after: float | None = None
    long_term_after: float | None = None


async def lagging(admin: AIOKafkaAdminClient, settings: Settings, group: str, topic: str) -> int:
    """Records of ``topic`` the group has not committed yet."""
    tps = await partitions(admin, settings.topic(topic))
    consumer = group_less_consumer(settings)
    await consumer.start()
    try:
        ends = await offsets.high_watermarks(consumer, tps)
    finally:
        await stop_consumer(consumer)
    done = await offsets.committed(admin, group, tps)
    return sum(max(0, ends[tp] - done[tp]) for tp in tps)


async def end_to_end(
    settings: Settings,
    run: Traffic,
    *,
    workers: int = 1,
    stages: Sequence[str] = ROLES,
    backlog: bool = False,
    profile: str | None = None,
) -> Run:
    """Events/s until every message is in MySQL and Redis (live: timed from the first publish;
    backlog: the events wait in Kafka first, timed from the first stored row), then how long
    the summary stage and the long-term chain took to catch up (when they run)."""
    engine = create_engine(settings.database_url)
    store = MessageStore(engine)
    client = aioredis.Redis.from_url(settings.redis_url)
    cache = RedisCache(client, prefix=settings.cache_prefix)
    await ensure_topics(settings, PUBLIC_TOPICS + internal_topics(settings))
    ordered = (
        run.in_order()
        if set(stages) >= {"longterm"}
        else [("message-written", m) for m in run.messages]
    )
    if backlog:
        await send_all(settings, ordered)
    logs = log_dir("ingest")
    procs = [start_worker(settings, logs, stages) for _ in range(workers)]
    spy: subprocess.Popen[bytes] | None = None
    try:
        if not backlog:  # the workers have their partitions once a first event is stored
            await send_all(settings, [("message-written", {**run.messages[0], "event_id": "warm"})])

        async def warm() -> bool:
            return await store.count(run.tenant) >= 1

        await eventually(warm, within=180, what="worker ready")
        group = group_id(settings.app_id, stages)
        history = reading_group(settings.app_id, stages, "message-written")

        async def joined() -> bool:
            return len(await live_members(settings, history)) == workers

        # Every worker in the group before the clock starts: the figures are of a settled
        # group, not of its first rebalances.
        await eventually(joined, within=180, what="every worker in the group")
        started = time.perf_counter()
        cpu_before = [cpu_seconds(p.pid) for p in procs]
        if profile:
            spy = profiler(procs[0].pid, profile)
        if not backlog:
            await send_all(settings, ordered)
        last = run.messages[-1]
        expected = len(run.messages) + (0 if backlog else 1)

        async def done() -> bool:
            if await store.count(run.tenant) < expected:
                return False
            cached = await cache.recent(run.tenant, str(last["conversation_id"]), 1)
            return bool(cached and cached[-1].event_id == last["event_id"])

        await eventually(done, within=900, what="all events stored and cached")
        elapsed = time.perf_counter() - started
        used = [
            (own - own0, kids - kids0)
            for (own, kids), (own0, kids0) in zip(
                [cpu_seconds(p.pid) for p in procs], cpu_before, strict=True
            )
        ]
        per_k = 1_000_000 / len(run.messages)  # seconds per event -> ms per 1,000 events
        cpu_ms = (sum(u[0] for u in used) * per_k, sum(u[1] for u in used) * per_k)
        result = Run(len(run.messages) / elapsed, load(), cpu_ms, [])
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its samples on SIGINT
            spy.wait()
        admin = make_admin(settings)
        await admin.start()
        try:
            await catch_up(admin, settings, run, group, stages, result, started + elapsed)
        finally:
            await admin.close()
        result.rss_mib = [peak_rss_kib(p.pid) / 1024 for p in procs]
        return result
    finally:
        if spy is not None and spy.poll() is None:
            spy.terminate()
        stop_all(procs, timeout=30)
        await client.aclose()
        await engine.dispose()
        await drop_topics(settings)


async def catch_up(
    admin: AIOKafkaAdminClient,
    settings: Settings,
    run: Traffic,
    group: str,
    stages: Sequence[str],
    result: Run,
    stored_at: float,
) -> None:
    """How long after ``stored_at`` the summaries and the long-term chain caught up."""
    summaries = SummaryStore(create_engine(settings.database_url))
    if "summary" in stages:
        keys = [(run.tenant, f"conv-{c}") for c in range(CONVERSATIONS)]

        async def summarised() -> bool:
            counts = await summaries.uncovered_counts(keys)
            return not any(n >= SUMMARY_TRIGGER for n in counts.values())

        await eventually(summarised, within=600, what="summaries caught up")
        result.summaries_after = time.perf_counter() - stored_at

        async def checked() -> bool:
            return await lagging(admin, settings, group, "summary-check") == 0

        # The session stage asks for a summary at each session end too.
        await eventually(checked, within=900, what="summary checks consumed")
        result.checks_after = time.perf_counter() - stored_at
    if "longterm" in stages:

        async def chain_done() -> bool:
            for topic in inputs_of("longterm"):
                if await lagging(admin, settings, group, topic):
                    return False
            return True

        await eventually(chain_done, within=900, what="long-term chain caught up")
        result.long_term_after = time.perf_counter() - stored_at


async def drop_topics(settings: Settings) -> None:
    """Delete the run's topics (its own prefix and group): a broker holds an open file or
    more per partition, and each run makes a few hundred."""
    async with admin_client(settings) as admin:
        ours = [t for t in await admin.list_topics() if t.startswith(settings.app_id)]
        if ours:
            await admin.delete_topics(ours)


async def send_all(settings: Settings, ordered: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """Publish (topic, event) pairs in order, keyed by conversation, and wait for every ack."""
    async with producer(settings) as client:
        sent = []
        for topic, event in ordered:
            key = str(event["conversation_id"]).encode()
            sent.append(await client.send(settings.topic(topic), orjson.dumps(event), key=key))
        await asyncio.gather(*sent)


def start_worker(settings: Settings, logs: Path, stages: Sequence[str]) -> Launched:
    own = settings.model_copy(update={"worker_web_port": free_port()})
    argv = memstream_argv("worker", "--stages", ",".join(stages))
    return Launched.start(
        argv,
        env=settings_env(own),
        log_path=logs / f"worker-{uuid.uuid4().hex[:6]}.log",
        cwd=REPO,
        name="memstream worker",
    )


def peak_rss_kib(pid: int) -> int:
    """The peak RSS of a process plus those of its children (the CPU processes)."""
    with open(f"/proc/{pid}/status") as fh:
        own = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM"))
    return own + sum(peak_rss_kib(child) for child in children(pid))


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(utime + stime of the process, the same summed over its living children)."""
    return _cpu(pid), sum(_cpu(child) for child in children(pid))


def _cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def profiler(pid: int, path: str) -> subprocess.Popen[bytes] | None:
    """py-spy sampling the worker (and its child processes) until terminated."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("    (no py-spy: no profile)")
        return None
    argv = [spy, "record", "--pid", str(pid), "--subprocesses", "--rate", "200"]
    argv += ["--format", "raw", "--output", path, "--nonblocking"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# Frames every sample of a process passes through, whatever it does.
_FRAMES_NOT_SHOWN = (
    "process ",
    "spawn_main(",
    "runpy",
    "<module>",
    "cli/main",
    "mode/worker",
    "worker.py",
    "base_events",
    "asyncio/events",
    "multiprocessing/",
    "concurrent/futures",
)


def print_profile(path: str, top: int = 25) -> None:
    """The functions on the most sampled stacks (inclusive share of all samples, the worker
    and its CPU processes together), and each process's share."""
    if not Path(path).exists():
        return
    total = 0
    inclusive: Counter[str] = Counter()
    processes: Counter[str] = Counter()
    for line in Path(path).read_text().splitlines():
        stack, _, samples = line.rpartition(" ")
        if not stack or not samples.isdigit():
            continue
        total += int(samples)
        frames = stack.split(";")
        # A CPU process's stacks start with the worker's name, then its own.
        child = any("multiprocessing" in frame for frame in frames[:2])
        processes["CPU processes" if child else "worker"] += int(samples)
        for name in {_frame(frame) for frame in frames[1:]}:
            inclusive[name] += int(samples)
    shares = ", ".join(f"{name} {100 * n / max(1, total):.0f}%" for name, n in processes.items())
    print(f"    profile of the one-worker run: {total} samples ({shares}); raw stacks: {path}")
    print_top(inclusive, total, top, _FRAMES_NOT_SHOWN)


def _frame(frame: str) -> str:
    name, _, where = frame.partition(" (")
    module = where.rstrip(")").rsplit(":", 1)[0]
    module = module.split("site-packages/")[-1].split(f"{REPO.name}/")[-1]
    return f"{name} ({module})"


PLANS: list[tuple[str, dict[str, Any]]] = [
    ("every stage, 1 worker, live", {}),
    ("history role only, 1 worker, live", {"stages": ("history",)}),
    ("history role only, 1 worker, backlog", {"stages": ("history",), "backlog": True}),
    ("every stage, 2 workers, live", {"workers": 2}),
    ("every stage, 3 workers, live", {"workers": 3}),
]


async def main() -> None:
    base = Settings()
    await migrate(base.database_url)
    texts = chat_texts()
    print(
        f"ingest: {EVENTS} message-written events over {CONVERSATIONS} concurrent conversations,"
        f" interleaved, {len(texts)} distinct chat texts; one session end per conversation"
    )
    sample = traffic(f"ref-{uuid.uuid4().hex[:8]}", texts).messages[:REFERENCE_SAMPLE]
    ref_rate = await reference(isolated_settings(), sample)
    print(f"  reference per-message dual write: {ref_rate:6.0f} events/s ", end="")
    print(f"({REFERENCE_SAMPLE} sampled; load {load():.1f})")
    sink_events = traffic(f"sink-{uuid.uuid4().hex[:8]}", texts).messages
    sink_rate = await sinks(isolated_settings(), sink_events)
    print(f"  sinks' limit (batched, no Kafka): {sink_rate:6.0f} events/s (load {load():.1f})")
    profile = os.environ.get("BENCH_PROFILE")
    one: float | None = None
    for label, options in PLANS:
        tenant = f"e2e-{uuid.uuid4().hex[:8]}"
        settings = isolated_settings(topic_partitions=8, log_level="WARNING")
        first = one is None
        result = await end_to_end(
            settings, traffic(tenant, texts), profile=profile if first else None, **options
        )
        one = one or result.rate
        print(f"  memstream, {label}: {result.rate:.0f} events/s (load {result.load:.1f})")
        print(
            f"    {result.rate / ref_rate:.1f}x the reference, {result.rate / sink_rate:.2f}",
            end="",
        )
        print(" of the sinks' limit", end="")
        print(f", {result.rate / one:.2f}x one worker" if options.get("workers") else "")
        own, children = result.cpu_ms
        print(
            f"    CPU per 1,000 events: {own:.0f} ms in the worker(s), {children:.0f} ms in", end=""
        )
        print(f" their CPU processes; peak RSS {', '.join(f'{r:.0f}' for r in result.rss_mib)} MiB")
        if result.summaries_after is not None:
            behind = f"{result.summaries_after:.1f} s"
            print(f"    no conversation 20 messages past its summary {behind} after the", end="")
            print(f" last event; every summary check read {result.checks_after:.1f} s after it")
        if result.long_term_after is not None:
            print(f"    the long-term chain caught up {result.long_term_after:.1f} s after it")
        if first and profile:
            print_profile(profile)
