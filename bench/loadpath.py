"""Load path of the query API: ``POST /v1/context`` served as deployed.

Data (one isolated tenant and cache prefix per run): 2,000 conversations of 200 messages each,
in MySQL and, the same rows, warm in Redis, each with a conversation summary (the window leaves
older history out, so every answer carries one); 20 users (conversation i belongs to user
i % 20) with 1,000 long-term memories each in the built-in store.

Servers, each its own uvicorn process on the same settings:
- memstream: ``memstream api``;
- reference: ``python -m bench.reference_api``, the reference design's short-term load (the
  whole cached list read, every message tokenised on every request, then the same window).

1. Short-term only (agents configured ``open_long_memory=false``): saturation throughput of
   both servers under the same ``wrk`` load (random conversations), alternated over rounds.
2. Full load path (agents on the built-in long-term store, queries that hit memories):
   latency at a fixed offered rate, open loop (requests leave on schedule whatever the
   responses do; latency counts from the scheduled send time), client in this process.

CPU per request: the server's utime + stime (``/proc/PID/stat``) over the measured window,
divided by the requests it answered.

With ``BENCH_PROFILE=FILE`` set (and ``py-spy`` installed), the server is sampled during the
full load path's measured window: raw stacks go to FILE, and the frames holding the most
samples are printed.
"""

from __future__ import annotations

import asyncio
import gc
import os
import random
import resource
import shutil
import statistics
import string
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
from prometheus_client.parser import text_string_to_metric_families

from bench.support import REPO, isolated_settings, print_top
from memstream.launch import Launched, memstream_argv, settings_env
from memstream.memory import USER_PROFILE, MemoryType, NewMemory, agent_cube
from memstream.providers.builtin import MySQLProvider
from memstream.settings import Settings
from memstream.store.cache import RedisCache
from memstream.store.database import create_engine, migrate
from memstream.store.messages import MessageStore, StoredMessage
from memstream.store.summaries import Summary, SummaryStore
from memstream.text.tokens import count_many, count_tokens
from tests.support.settings import free_port

CONVERSATIONS = 2_000
MESSAGES = 200  # per conversation, all of them cached
USERS = 20
MEMORIES = 1_000  # per user: 600 in the user profile, 100 in each agent's cube
AGENTS = 4  # conversation i talks to agent i % AGENTS
PROFILE_MEMORIES = 600
POOL = 20_000  # distinct user and distinct assistant messages the conversations draw from
INSERT_CONVERSATIONS = 50  # conversations per insert_many (10,000 rows) and per cache warm

WRK_THREADS = 2
WRK_CONNECTIONS = 64
WRK_WARMUP_SECONDS = 3
WRK_SECONDS = 15
ROUNDS = 2  # memstream and reference alternate, so drift on the machine hits both

RATE = 200  # requests/s offered in the open-loop benchmark
OPEN_WARMUP_SECONDS = 5
OPEN_SECONDS = 20
TIMEOUT_SECONDS = 5.0
KEEPALIVE = 32  # idle connections the open-loop client keeps (see load_client)

# -- synthetic text ------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    return text.split()


WORDS: dict[str, list[str]] = {
    "city": _words(
        "Lisbon Berlin Kyoto Dublin Austin Oslo Porto Seville Vienna Montreal Nairobi "
        "Hanoi Lima Prague Krakow Melbourne Edinburgh Istanbul Marseille Bologna Tallinn Bergen "
        "Valencia Ghent Zurich Busan Oaxaca Tbilisi Cork Lyon"
    ),
    "food": _words(
        "vegetarian Italian Thai Japanese Mexican Lebanese Korean Ethiopian Greek Indian "
        "Vietnamese Peruvian French Georgian Turkish Spanish"
    ),
    "dish": _words(
        "ramen paella falafel dumplings tacos risotto pho sushi curry shakshuka gnocchi "
        "bibimbap ceviche moussaka"
    ),
    "activity": _words(
        "hiking cycling bouldering sailing yoga running swimming birdwatching pottery "
        "kayaking skiing tennis climbing surfing"
    ),
    "name": _words(
        "Anna Ben Chloe Diego Emma Farid Grace Hiro Ines Jonas Kemi Liam Maya Noah Olga "
        "Priya Quentin Rosa Sami Tara"
    ),
    "relation": _words(
        "sister brother mother father partner colleague manager friend cousin "
        "neighbour daughter son"
    ),
    "job": _words(
        "nurse architect teacher engineer chef pilot lawyer dentist photographer "
        "accountant journalist physiotherapist"
    ),
    "month": _words(
        "January February March April May June July August September October November December"
    ),
    "weekday": _words("Monday Tuesday Wednesday Thursday Friday Saturday Sunday"),
    "season": _words("spring summer autumn winter"),
    "skill": _words(
        "Spanish Japanese piano guitar watercolour Python woodworking baking diving "
        "French photography"
    ),
    "thing": _words(
        "museum harbour market garden cathedral station bookshop park castle riverside gallery"
    ),
    "drink": ["espresso", "green tea", "oat latte", "mint tea", "filter coffee"],
    "n": [str(n) for n in range(2, 13)],
    "year": [str(y) for y in range(2019, 2028)],
    "day": [str(d) for d in range(1, 29)],
}

MEMORY_TEMPLATES: dict[MemoryType, list[str]] = {
    "pref_mem": [
        "Prefers {food} restaurants and often orders {dish} when eating out.",
        "Likes {activity} at weekends, usually early in the morning.",
        "Prefers window seats on flights longer than {n} hours.",
        "Avoids crowded places and prefers a quiet {thing} in {city}.",
        "Drinks {drink} in the morning and no coffee after {n} pm.",
        "Does not eat {dish} and prefers lighter {food} food.",
        "Likes to book tables for {n} people on {weekday} evenings.",
    ],
    "text_mem": [
        "Lives in {city}, a short walk from the {thing}.",
        "Works from an office in {city} {n} days a week.",
        "Visited {city} in {month} {year} and loved the {thing}.",
        "Grew up in {city} and visits family there every {month}.",
        "Is planning a trip to {city} in {month} with {name}, their {relation}.",
        "Wants to learn {skill} before the end of {year}.",
        "Plans to go {activity} near {city} next {season}.",
        "Is saving up to move to {city} in {year}.",
        "{name} is the user's {relation} and works as a {job} in {city}.",
        "The user's {relation} {name} has a birthday on {month} {day}.",
        "{name}, the user's {relation}, loves {food} food and {activity}.",
        "Meets {name} for {activity} every {weekday}.",
    ],
}

QUERY_TEMPLATES = [
    "Can you recommend a {food} restaurant in {city}?",
    "What should I pack for {activity} near {city} in {month}?",
    "Remind me what my {relation} {name} does for work.",
    "Help me plan a weekend in {city} with {name}.",
    "Any gift ideas for my {relation}'s birthday in {month}?",
    "Where could I go {activity} this {season}?",
    "Find me a quiet place to eat {dish} near the {thing}.",
    "When am I going to {city} again?",
]

USER_TEMPLATES = [
    "Can you find me a {food} restaurant in {city} for {n} people on {weekday}?",
    "I'm thinking about going {activity} near {city} in {month}. Any tips?",
    "My {relation} {name} is visiting next week, what could we do in {city}?",
    "Remind me, when is my flight to {city}?",
    "Please add {skill} lessons to my plans for {month}.",
    "What's the weather usually like in {city} in {month}?",
    "Thanks! Could you also book a table somewhere near the {thing}?",
    "I'd rather avoid {dish} this time, something lighter please.",
    "Is the {thing} in {city} open on {weekday}?",
    "Ok, and how long does it take to get there from the station?",
]

ASSISTANT_TEMPLATES = [
    "I found {n} {food} places in {city} with tables free on {weekday}.",
    "The closest one is about {n} minutes from the {thing} and is known for its {dish}.",
    "In {month}, {city} is usually mild, so a light jacket should be enough for {activity}.",
    "I noted that your {relation} {name} works as a {job}, which helps when picking a place.",
    "Would you like me to confirm the booking for {n} pm?",
    "If you prefer, I can also look for options near the {thing} or in the old town.",
    "There are beginner {skill} courses starting in {month}, most of them twice a week.",
    "Here is a short plan: morning {activity}, lunch at a {food} place, then the {thing}.",
    "Prices are moderate, around {n}0 euros per person without drinks.",
    "The {thing} is open from {n} am on {weekday}s, and it is quieter before noon.",
    "Trains to {city} leave every {n}0 minutes and take a little over {n} hours.",
    "I have added a reminder for {month} {day} so you do not miss it.",
]


def _fields(template: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


def fill(template: str, rng: random.Random) -> str:
    return template.format(**{f: rng.choice(WORDS[f]) for f in _fields(template)})


def user_text(rng: random.Random) -> str:
    parts = [fill(rng.choice(USER_TEMPLATES), rng) for _ in range(rng.choice((1, 1, 1, 2)))]
    return " ".join(parts)


def assistant_text(rng: random.Random) -> str:
    # Mostly a few sentences, sometimes a long answer (a plan, a list of options).
    count = rng.randint(8, 14) if rng.random() < 0.1 else rng.randint(1, 5)
    return " ".join(fill(rng.choice(ASSISTANT_TEMPLATES), rng) for _ in range(count))


def query_text(rng: random.Random) -> str:
    return fill(rng.choice(QUERY_TEMPLATES), rng)


def summary_text(rng: random.Random) -> str:
    """A conversation summary of a few hundred tokens, attributed as the summaries are."""
    said = [f"User: {user_text(rng)}" for _ in range(4)]
    said += [f"Assistant: {fill(rng.choice(ASSISTANT_TEMPLATES), rng)}" for _ in range(8)]
    rng.shuffle(said)
    return " ".join(said)


# -- data ----------------------------------------------------------------------------------


def user_of(conversation: int) -> str:
    return f"user-{conversation % USERS}"


def agent_of(conversation: int, *, long_term: bool) -> str:
    return f"{'lt' if long_term else 'st'}-agent-{conversation % AGENTS}"


def message_pool(rng: random.Random) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """Distinct user and assistant texts with their cl100k_base token counts."""
    users = list({user_text(rng) for _ in range(POOL)})
    assistants = list({assistant_text(rng) for _ in range(POOL)})
    return (
        list(zip(users, count_many(users), strict=True)),
        list(zip(assistants, count_many(assistants), strict=True)),
    )


def conversation(
    tenant: str,
    i: int,
    pool: tuple[list[tuple[str, int]], list[tuple[str, int]]],
    rng: random.Random,
) -> list[StoredMessage]:
    start = datetime(2026, 3, 1) + timedelta(minutes=i)
    out = []
    for n in range(MESSAGES):
        role = "user" if n % 2 == 0 else "assistant"
        content, tokens = rng.choice(pool[n % 2])
        out.append(
            StoredMessage(
                tenant_id=tenant,
                conversation_id=f"conv-{i}",
                event_id=f"conv-{i}-{n}",
                user_id=user_of(i),
                agent_id=agent_of(i, long_term=True),
                role=role,
                message_type="chat",
                content=content,
                token_count=tokens,
                created_at=start + timedelta(seconds=20 * n),
                source_conversation_id=f"conv-{i}",
            )
        )
    return out


def memories(tenant: str, user: str, rng: random.Random) -> list[NewMemory]:
    """1,000 distinct memories of one user: the profile, then each agent's cube."""
    cubes: list[tuple[str, str | None, int]] = [(USER_PROFILE, None, PROFILE_MEMORIES)]
    per_agent = (MEMORIES - PROFILE_MEMORIES) // AGENTS
    cubes += [
        (agent_cube(agent_of(a, long_term=True)), agent_of(a, long_term=True), per_agent)
        for a in range(AGENTS)
    ]
    out = []
    for cube, agent, count in cubes:
        seen: set[str] = set()
        while len(seen) < count:
            memory_type: MemoryType = rng.choice(("pref_mem", "text_mem", "text_mem"))
            content = fill(rng.choice(MEMORY_TEMPLATES[memory_type]), rng)
            if content in seen:
                continue
            seen.add(content)
            out.append(
                NewMemory(
                    tenant_id=tenant,
                    user_id=user,
                    agent_id=agent,
                    cube_id=cube,
                    memory_type=memory_type,
                    content=content,
                    importance=rng.randint(3, 8),
                )
            )
    return out


async def load_data(settings: Settings, tenant: str) -> dict[str, float]:
    """Messages into MySQL and the same into Redis, memories into the built-in store."""
    rng = random.Random(20260301)
    engine = create_engine(settings.database_url, pool_size=4)
    store = MessageStore(engine)
    cache = RedisCache.from_url(
        settings.redis_url,
        timeout=30,
        prefix=settings.cache_prefix,
        max_messages=settings.cache_max_messages,
        ttl_seconds=settings.cache_ttl_seconds,
    )
    provider = MySQLProvider(engine)
    took: dict[str, float] = {}
    try:
        started = time.perf_counter()
        pool = message_pool(rng)
        took["texts and token counts"] = time.perf_counter() - started

        started = time.perf_counter()
        tokens = 0

        async def chunk(first: int) -> None:
            nonlocal tokens
            convs = {
                (tenant, f"conv-{i}"): conversation(tenant, i, pool, rng)
                for i in range(first, min(first + INSERT_CONVERSATIONS, CONVERSATIONS))
            }
            rows = [m for ms in convs.values() for m in ms]
            tokens += sum(m.token_count for m in rows)
            await asyncio.gather(store.insert_many(rows), cache.warm(convs))

        firsts = list(range(0, CONVERSATIONS, INSERT_CONVERSATIONS))
        for pair in range(0, len(firsts), 2):  # two chunks in flight
            await asyncio.gather(*(chunk(f) for f in firsts[pair : pair + 2]))
        took["messages into MySQL and Redis"] = time.perf_counter() - started
        took["mean tokens per message"] = tokens / (CONVERSATIONS * MESSAGES)

        started = time.perf_counter()
        for u in range(USERS):
            await provider.add(memories(tenant, f"user-{u}", rng))
        took["memories into the built-in store"] = time.perf_counter() - started

        started = time.perf_counter()
        summaries = SummaryStore(engine)
        for i in range(CONVERSATIONS):
            text = summary_text(rng)
            await summaries.save(
                tenant,
                f"conv-{i}",
                Summary(text, count_tokens(text)),
                covered=MESSAGES - 20,
                last_message_id=0,
            )
        took["conversation summaries"] = time.perf_counter() - started
    finally:
        await cache.close()
        await engine.dispose()
    return took


# -- servers -------------------------------------------------------------------------------


@dataclass
class Server:
    name: str
    argv: list[str]
    env: dict[str, str]
    port: int
    log_path: Path
    process: Launched | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, within: float = 60) -> None:
        """Start the server and return once its ``/healthz`` answers."""
        self.process = Launched.start(
            self.argv,
            env=self.env,
            ready_url=f"{self.base}/healthz",
            timeout=within,
            log_path=self.log_path,
            cwd=REPO,
            name=self.name,
        )

    def cpu_seconds(self) -> float:
        """utime + stime of the server process (all its threads) so far."""
        with open(f"/proc/{self.pid}/stat") as fh:
            fields = fh.read().rpartition(")")[2].split()
        # After the command name: state is field 3, utime and stime are fields 14 and 15.
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def runqueue_seconds(self) -> float:
        """How long the server's main thread (the event loop) has waited for a CPU while
        runnable (``/proc/PID/schedstat``)."""
        with open(f"/proc/{self.pid}/schedstat") as fh:
            return int(fh.read().split()[1]) / 1e9

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


def servers(settings: Settings, log_dir: Path) -> tuple[Server, Server]:
    port = free_port()
    memstream = Server(
        "memstream api",
        memstream_argv("api"),
        settings_env(settings.model_copy(update={"api_port": port})),
        port,
        log_dir / "memstream-api.log",
    )
    port = free_port()
    reference = Server(
        "reference api",
        [sys.executable, "-m", "bench.reference_api"],
        {**settings_env(settings), "BENCH_REFERENCE_PORT": str(port)},
        port,
        log_dir / "reference-api.log",
    )
    return memstream, reference


@dataclass(frozen=True)
class Usage:
    """CPU seconds so far: the server process's, this process's and its waited children's
    (the load generator), and the whole machine's busy and total."""

    server: float
    waited: float
    client: float
    busy: float
    total: float

    @classmethod
    def now(cls, server: Server) -> Usage:
        with open("/proc/stat") as fh:
            ticks = [int(v) for v in fh.readline().split()[1:9]]
        tick = os.sysconf("SC_CLK_TCK")
        idle = ticks[3] + ticks[4]  # idle and iowait
        mine = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        client = mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime
        return cls(
            server.cpu_seconds(),
            server.runqueue_seconds(),
            client,
            (sum(ticks) - idle) / tick,
            sum(ticks) / tick,
        )

    def since(self, before: Usage) -> Window:
        wall = (self.total - before.total) / (os.cpu_count() or 1)
        server = self.server - before.server
        client = self.client - before.client
        return Window(
            server_seconds=server,
            server_cores=server / wall,
            server_waiting=(self.waited - before.waited) / wall,
            client_cores=client / wall,
            rest_cores=(self.busy - before.busy - server - client) / wall,
        )


@dataclass(frozen=True)
class Window:
    """CPU use over a measured window: the server's seconds, and the average busy cores of
    the server, the load generator, and the rest of the machine (MariaDB, Redis, Kafka and
    anything else running)."""

    server_seconds: float
    server_cores: float
    server_waiting: float  # share of the window the event loop was runnable but not running
    client_cores: float
    rest_cores: float

    def describe(self) -> str:
        return (
            f"cores busy: server {self.server_cores:.2f}, load generator"
            f" {self.client_cores:.2f}, rest {self.rest_cores:.2f} (of {os.cpu_count()});"
            f" the server waited for a core {1000 * self.server_waiting:.0f} ms per second"
        )


# -- requests ------------------------------------------------------------------------------


def body(tenant: str, i: int, query: str, *, long_term: bool) -> dict[str, Any]:
    return {
        "tenant_id": tenant,
        "user_id": user_of(i),
        "agent_id": agent_of(i, long_term=long_term),
        "conversation_id": f"conv-{i}",
        "query": query,
    }


async def configure_agents(server: Server, tenant: str) -> None:
    """Short-term agents with long-term memory off, long-term agents on the built-in store."""
    async with httpx.AsyncClient(base_url=server.base) as client:
        for a in range(AGENTS):
            for long_term in (False, True):
                r = await client.put(
                    f"/v1/agents/{agent_of(a, long_term=long_term)}/config",
                    params={"tenant_id": tenant},
                    json={
                        "long_memory_provider": "MYSQL",
                        "open_long_memory": long_term,
                        "model_target_id": "bench-model",
                    },
                )
                r.raise_for_status()


@dataclass
class Pass:
    """What one request per conversation answered (a priming and checking pass)."""

    responses: int
    mean_messages: float
    mean_message_tokens: float
    mean_bytes: float
    with_items: int
    mean_items: float
    degraded: Counter[str]
    providers: Counter[str]


async def one_pass(server: Server, bodies: Sequence[dict[str, Any]], workers: int = 16) -> Pass:
    """Every body once, ``workers`` at a time; a non-200 answer is an error."""
    todo = list(bodies)
    answers: list[tuple[int, dict[str, Any]]] = []

    async def worker(client: httpx.AsyncClient) -> None:
        while todo:
            r = await client.post("/v1/context", json=todo.pop())
            if r.status_code != 200:
                raise RuntimeError(f"{server.name}: HTTP {r.status_code}: {r.text[:300]}")
            answers.append((len(r.content), r.json()))

    limits = httpx.Limits(max_connections=workers)
    timeout = httpx.Timeout(30)
    async with httpx.AsyncClient(base_url=server.base, limits=limits, timeout=timeout) as client:
        await asyncio.gather(*(worker(client) for _ in range(workers)))
    n = len(answers)
    return Pass(
        responses=n,
        mean_messages=sum(len(a["messages"]) for _, a in answers) / n,
        mean_message_tokens=sum(a["tokens"]["messages"] for _, a in answers) / n,
        mean_bytes=sum(size for size, _ in answers) / n,
        with_items=sum(1 for _, a in answers if a["long_term"]["items"]),
        mean_items=sum(len(a["long_term"]["items"]) for _, a in answers) / n,
        degraded=Counter(part for _, a in answers for part in a["degraded"]),
        providers=Counter(str(a["long_term"]["provider"]) for _, a in answers),
    )


# -- benchmark 1: saturation throughput with wrk -------------------------------------------

WRK_SCRIPT = """
local bodies = {
%(bodies)s
}
local headers = { ["Content-Type"] = "application/json" }
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("seed", threads)
end

function init(args)
  math.randomseed(os.time() * 1000 + seed * 7919)
end

function request()
  return wrk.format("POST", "/v1/context", headers, bodies[math.random(#bodies)])
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_RESULT {"requests": %%d, "duration_us": %%d, "bytes": %%d, "connect": %%d, '
    .. '"read": %%d, "write": %%d, "status": %%d, "timeout": %%d, "p50_us": %%d, '
    .. '"p99_us": %%d, "max_us": %%d}\\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write,
    e.status, e.timeout, latency:percentile(50), latency:percentile(99), latency.max))
end
"""


def wrk_script(path: Path, bodies: Sequence[dict[str, Any]]) -> None:
    """A wrk script POSTing one of ``bodies`` (one per conversation) at random per request."""
    lines = ",\n".join(f"  [==[{orjson.dumps(b).decode()}]==]" for b in bodies)
    path.write_text(WRK_SCRIPT % {"bodies": lines})


@dataclass
class Saturation:
    rate: float
    requests: int
    errors: int
    p50_ms: float
    p99_ms: float
    cpu_ms: float  # server CPU per request
    usage: Window


async def wrk(server: Server, script: Path, seconds: int) -> dict[str, int]:
    wrk_bin = shutil.which("wrk")
    if wrk_bin is None:
        raise RuntimeError("wrk is not installed: apt-get install -y wrk")
    proc = await asyncio.create_subprocess_exec(
        wrk_bin,
        f"-t{WRK_THREADS}",
        f"-c{WRK_CONNECTIONS}",
        f"-d{seconds}s",
        "--timeout",
        "10s",
        "-s",
        str(script),
        server.base,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    text = out.decode(errors="replace")
    for line in text.splitlines():
        if line.startswith("WRK_RESULT "):
            result: dict[str, int] = orjson.loads(line.removeprefix("WRK_RESULT "))
            return result
    raise RuntimeError(f"wrk gave no result:\n{text}")


async def saturate(server: Server, script: Path) -> Saturation:
    await wrk(server, script, WRK_WARMUP_SECONDS)
    before = Usage.now(server)
    r = await wrk(server, script, WRK_SECONDS)
    usage = Usage.now(server).since(before)
    if not server.alive():
        raise RuntimeError(f"{server.name} died; see {server.log_path}")
    errors = r["connect"] + r["read"] + r["write"] + r["status"] + r["timeout"]
    return Saturation(
        rate=r["requests"] / (r["duration_us"] / 1e6),
        requests=r["requests"],
        errors=errors,
        p50_ms=r["p50_us"] / 1000,
        p99_ms=r["p99_us"] / 1000,
        cpu_ms=1000 * usage.server_seconds / max(1, r["requests"]),
        usage=usage,
    )


# -- benchmark 2: latency at a fixed offered rate, open loop --------------------------------


@dataclass
class OpenLoop:
    offered: int
    answered: int
    latencies_ms: list[float]
    errors: Counter[str]
    degraded: int
    degraded_parts: Counter[str]
    with_items: int
    max_send_lag_ms: float
    cpu_ms: float
    usage: Window
    inside: dict[float, float]  # memstream_load_path_seconds{path="total"} buckets, by le

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies_ms)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]

    def over_ms(self, bound_ms: float) -> float:
        """The share of requests slower than ``bound_ms`` (from their scheduled send time)."""
        slow = sum(1 for latency in self.latencies_ms if latency > bound_ms)
        return slow / len(self.latencies_ms) if self.latencies_ms else float("nan")

    def inside_bound_ms(self, p: float) -> float:
        """The upper bound of the histogram bucket holding the p-th percentile of the time
        spent inside the load path (``LoadPath.context``), as the server measured it."""
        count = self.inside.get(float("inf"), 0.0)
        for le, cumulative in sorted(self.inside.items()):
            if count and cumulative >= p / 100 * count:
                return 1000 * le
        return float("nan")

    def inside_over_ms(self, bound_ms: float) -> float:
        """The share of requests that spent more than ``bound_ms`` inside the load path."""
        count = self.inside.get(float("inf"), 0.0)
        within = self.inside.get(bound_ms / 1000, float("nan"))
        return (count - within) / count if count else float("nan")


async def load_histogram(client: httpx.AsyncClient) -> dict[float, float]:
    """memstream's own load-path latency histogram (path ``total``), cumulative by bucket."""
    text = (await client.get("/metrics")).text
    out: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "memstream_load_path_seconds":
            for sample in family.samples:
                if sample.name.endswith("_bucket") and sample.labels.get("path") == "total":
                    out[float(sample.labels["le"])] = sample.value
    return out


def load_client(server: Server) -> httpx.AsyncClient:
    """The open-loop generator's one client: no request ever waits for a connection.

    Idle keep-alive connections are capped, though: httpcore 1.0's pool does work quadratic
    in its number of connections for every idle one on every request, so after a stall of
    the server had opened a hundred connections the client itself would fall behind (and
    then open more). The send lag and load-generator CPU printed with each result show
    whether the client kept its schedule."""
    return httpx.AsyncClient(
        base_url=server.base,
        limits=httpx.Limits(max_connections=4096, max_keepalive_connections=KEEPALIVE),
        timeout=httpx.Timeout(TIMEOUT_SECONDS),
    )


async def open_loop(
    client: httpx.AsyncClient,
    server: Server,
    bodies: Sequence[dict[str, Any]],
    rate: int,
    seconds: int,
) -> OpenLoop:
    """Send ``rate`` requests/s for ``seconds`` on a fixed schedule, whatever the answers do;
    each latency counts from the request's scheduled send time (queueing is not hidden)."""
    count = rate * seconds
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    degraded_parts: Counter[str] = Counter()
    counts = {"answered": 0, "degraded": 0, "items": 0}
    lag = 0.0
    loop = asyncio.get_running_loop()

    async def send(payload: bytes, at: float) -> None:
        try:
            r = await client.post(
                "/v1/context", content=payload, headers={"content-type": "application/json"}
            )
        except httpx.HTTPError as exc:
            # A failure counts in the percentiles too, at the time it took to fail.
            latencies.append(1000 * (loop.time() - at))
            errors["timeout" if isinstance(exc, httpx.TimeoutException) else repr(exc)] += 1
            return
        latencies.append(1000 * (loop.time() - at))
        counts["answered"] += 1
        if r.status_code != 200:
            errors[f"HTTP {r.status_code}"] += 1
            return
        answer = orjson.loads(r.content)
        if answer["degraded"]:
            counts["degraded"] += 1
            degraded_parts.update(answer["degraded"])
        if answer["long_term"]["items"]:
            counts["items"] += 1

    payloads = [orjson.dumps(bodies[i % len(bodies)]) for i in range(count)]
    tasks = []
    histogram = await load_histogram(client)
    before = Usage.now(server)
    first = loop.time() + 0.05
    for i, payload in enumerate(payloads):
        at = first + i / rate
        delay = at - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            lag = max(lag, -delay)
        tasks.append(asyncio.create_task(send(payload, at)))
    await asyncio.gather(*tasks)
    usage = Usage.now(server).since(before)
    inside = {le: n - histogram.get(le, 0.0) for le, n in (await load_histogram(client)).items()}
    return OpenLoop(
        offered=count,
        answered=counts["answered"],
        latencies_ms=latencies,
        errors=errors,
        degraded=counts["degraded"],
        degraded_parts=degraded_parts,
        with_items=counts["items"],
        max_send_lag_ms=1000 * lag,
        cpu_ms=1000 * usage.server_seconds / max(1, counts["answered"]),
        usage=usage,
        inside=inside,
    )


# -- where the time goes ------------------------------------------------------------------


def profiler(server: Server) -> subprocess.Popen[bytes] | None:
    """py-spy sampling the server for the measured window, when ``BENCH_PROFILE`` asks."""
    path = os.environ.get("BENCH_PROFILE")
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not path or not Path(spy).exists():
        return None
    argv = [spy, "record", "--pid", str(server.pid), "--duration", str(OPEN_SECONDS)]
    argv += ["--rate", "250", "--format", "raw", "--output", path, "--nonblocking"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def print_profile(path: str, top: int = 30) -> None:
    """The functions on the most sampled stacks (inclusive), memstream's and its libraries'."""
    total = 0
    inclusive: Counter[str] = Counter()
    for line in Path(path).read_text().splitlines():
        stack, _, samples = line.rpartition(" ")
        if not stack:
            continue
        total += int(samples)
        names = {frame.split(" (")[0] + " (" + _module(frame) + ")" for frame in stack.split(";")}
        for name in names:
            inclusive[name] += int(samples)
    print(f"    profile of the measured window ({total} samples, inclusive), raw stacks: {path}")
    print_top(inclusive, total, top, _FRAMES_NOT_SHOWN)


# Frames every request passes through whatever it does: the server loop and the runner.
_FRAMES_NOT_SHOWN = (
    "runpy",
    "uvicorn/main",
    "uvicorn/server",
    "uvicorn/_compat",
    "asyncio/runners",
    "__main__",
    "cli/main",
)


def _module(frame: str) -> str:
    where = frame.rpartition(" (")[2].rstrip(")").rsplit(":", 1)[0]
    return where.split("site-packages/")[-1].split(f"{REPO.name}/")[-1]


# -- the run -------------------------------------------------------------------------------


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def _print_pass(name: str, p: Pass) -> None:
    print(
        f"    {name:<24}: {p.mean_messages:5.1f} messages ({p.mean_message_tokens:,.0f} tokens)"
        f", {p.mean_bytes / 1024:5.1f} KiB, long-term {dict(p.providers)}"
        f", items in {p.with_items}/{p.responses} (mean {p.mean_items:.1f})"
        f", degraded {dict(p.degraded) or 'none'}"
    )


def _print_open(name: str, r: OpenLoop) -> None:
    errors = sum(r.errors.values())
    print(
        f"  {name}: {r.answered}/{r.offered} answered at {RATE} req/s offered"
        f"\n    latency ms  p50 {r.percentile(50):6.1f}  p90 {r.percentile(90):6.1f}"
        f"  p99 {r.percentile(99):6.1f}  max {max(r.latencies_ms, default=float('nan')):6.1f}"
        f"  ({100 * r.over_ms(20):.2f}% over 20 ms)"
        f"\n    errors/timeouts {errors} {dict(r.errors) or ''}"
        f"; degraded {r.degraded} {dict(r.degraded_parts) or ''}"
        f"; with long-term items {r.with_items}"
        f"\n    inside the load path (server's histogram): p50 <= {r.inside_bound_ms(50):g} ms,"
        f" p99 <= {r.inside_bound_ms(99):g} ms, {100 * r.inside_over_ms(20):.2f}% over 20 ms"
        f"\n    server CPU {r.cpu_ms:.2f} ms/request"
        f"; client max send lag {r.max_send_lag_ms:.1f} ms"
        f"\n    {r.usage.describe()}"
    )


async def main() -> None:
    base = Settings()
    await migrate(base.database_url)
    settings = isolated_settings(log_level="WARNING")
    tenant = f"lp-{uuid.uuid4().hex[:8]}"
    print(
        f"loadpath: {CONVERSATIONS} conversations x {MESSAGES} cached messages, {USERS} users"
        f" x {MEMORIES} memories, tenant {tenant}"
    )
    took = await load_data(settings, tenant)
    for what, value in took.items():
        print(f"  {what:<34}: {value:8.1f}")

    log_dir = Path(tempfile.mkdtemp(prefix="bench-loadpath-"))
    memstream, reference = servers(settings, log_dir)
    try:
        for server in (memstream, reference):
            server.start()
        await configure_agents(memstream, tenant)

        rng = random.Random(7)
        queries = [query_text(rng) for _ in range(1_000)]
        short = [
            body(tenant, i, rng.choice(queries), long_term=False) for i in range(CONVERSATIONS)
        ]
        full = [body(tenant, i, rng.choice(queries), long_term=True) for i in range(CONVERSATIONS)]

        # One request per conversation on each server: primes the summary cache and the
        # per-user memory indexes (the first full pass finds them cold), and checks that the
        # answers are what is measured.
        print("  one request per conversation, 16 at a time (priming and checks):")
        passes = {
            "memstream, short-term": await one_pass(memstream, short),
            "reference, short-term": await one_pass(reference, short),
            "memstream, full, cold": await one_pass(memstream, full),
            "memstream, full, warm": await one_pass(memstream, full),
        }
        for name, p in passes.items():
            _print_pass(name, p)
        checked = [p for name, p in passes.items() if not name.endswith("cold")]
        if any(p.degraded for p in checked):
            # Only time limits degrade a warm answer: the machine is busier than the server.
            print("    NOTE: answers degraded once the caches were warm; the machine is busy")
        if any(p.providers != {"None": p.responses} for p in checked[:2]):
            raise RuntimeError("short-term answers come with long-term memory")
        if passes["memstream, full, warm"].providers != {"MYSQL": CONVERSATIONS}:
            raise RuntimeError("full answers come without the built-in long-term store")

        print(
            f"  saturation, short-term only: wrk {WRK_THREADS} threads, {WRK_CONNECTIONS}"
            f" connections, {WRK_SECONDS} s after {WRK_WARMUP_SECONDS} s warm-up,"
            f" {ROUNDS} rounds"
        )
        script = log_dir / "context.lua"
        wrk_script(script, short)
        runs: dict[str, list[Saturation]] = {"memstream": [], "reference": []}
        for _ in range(ROUNDS):
            for name, server in (("memstream", memstream), ("reference", reference)):
                sat = await saturate(server, script)
                runs[name].append(sat)
                print(
                    f"    {name:<9}: {sat.rate:7.0f} req/s, p50 {sat.p50_ms:6.1f} ms"
                    f", p99 {sat.p99_ms:6.1f} ms, {sat.errors} errors"
                    f", server CPU {sat.cpu_ms:.2f} ms/request"
                    f"; {sat.usage.describe()}"
                )
        rates = {name: _mean([r.rate for r in rs]) for name, rs in runs.items()}
        cpu = {name: _mean([r.cpu_ms for r in rs]) for name, rs in runs.items()}
        print(f"    memstream : {rates['memstream']:7.0f} req/s, {cpu['memstream']:.2f} ms CPU")
        print(f"    reference : {rates['reference']:7.0f} req/s, {cpu['reference']:.2f} ms CPU")
        print(f"    ratio     : {rates['memstream'] / rates['reference']:7.1f}x (goal >= 3x)")

        # The client shares this process: keep the collector from pausing it mid-schedule.
        gc.collect()
        gc.freeze()
        print(
            f"  open loop: {RATE} req/s offered for {OPEN_SECONDS} s after"
            f" {OPEN_WARMUP_SECONDS} s warm-up, httpx client in the bench process"
        )
        bodies = {"full load path": full, "short-term only": short}
        for name, these in bodies.items():
            warm = random.Random(11).choices(these, k=RATE * OPEN_WARMUP_SECONDS)
            measured = random.Random(13).choices(these, k=RATE * OPEN_SECONDS)
            async with load_client(memstream) as client:
                await open_loop(client, memstream, warm, RATE, OPEN_WARMUP_SECONDS)
                spy = profiler(memstream) if name == "full load path" else None
                result = await open_loop(client, memstream, measured, RATE, OPEN_SECONDS)
            _print_open(f"memstream, {name}", result)
            if spy is not None:
                spy.wait()
                print_profile(os.environ["BENCH_PROFILE"])
            if name == "full load path":
                verdict = "met" if result.percentile(99) <= 20 else "NOT met"
                print(f"    goal p99 <= 20 ms: {verdict}")
        print(f"  server logs: {log_dir}")
    finally:
        for server in (memstream, reference):
            server.stop()
