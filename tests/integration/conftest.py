"""Fixtures of the integration tests: the real MariaDB, Redis and Kafka (``make services``);
each test gets its own topics, consumer group, tenant ids and cache keys. The fake LLM, MemOS
and Mem0 servers run in this process and need no service."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.broker.clients import wait_for_broker
from memstream.errors import ServiceUnavailable
from memstream.settings import Settings
from memstream.store.database import create_engine, migrate
from memstream.store.messages import MessageStore
from tests.fakes.http import serve
from tests.fakes.llm import Script, llm_app
from tests.fakes.mem0 import MEM0_KEY, Mem0State, mem0_app
from tests.fakes.memos import MEMOS_KEY, MemOSState, memos_app
from tests.support.processes import WorkerProcess
from tests.support.settings import isolated_settings, unique

HOW_TO_START = "start the services with `make services` (or set the MEMSTREAM_* endpoint variables)"


@pytest.fixture(scope="session")
async def services() -> Settings:
    """Fail fast, saying how to fix it, when a real service is not reachable."""
    base = Settings()
    try:
        await wait_for_broker(base, within=10)
    except ServiceUnavailable as exc:
        pytest.fail(f"Kafka is not reachable: {exc}; {HOW_TO_START}")
    try:
        await migrate(base.database_url)
    except Exception as exc:
        pytest.fail(f"the database {base.database_url} is not reachable: {exc}; {HOW_TO_START}")
    client = aioredis.Redis.from_url(base.redis_url)
    try:
        await client.ping()
    except Exception as exc:
        pytest.fail(f"Redis {base.redis_url} is not reachable: {exc}; {HOW_TO_START}")
    finally:
        await client.aclose()
    return base


@pytest.fixture
def settings(services: Settings) -> Settings:
    return isolated_settings()


@pytest.fixture
def tenant() -> str:
    return unique("tenant")


@pytest.fixture(scope="session")
async def engine(services: Settings) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(services.database_url)
    yield engine
    await engine.dispose()


@pytest.fixture
def store(engine: AsyncEngine) -> MessageStore:
    return MessageStore(engine)


@pytest.fixture
async def redis_client(services: Settings) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(services.redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[list[WorkerProcess]]:
    """Worker processes a test starts; all stopped afterwards, logs kept in tmp_path."""
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.kill()


@pytest.fixture
def start_worker(workers: list[WorkerProcess], tmp_path: Path):  # type: ignore[no-untyped-def]
    def start(settings: Settings, name: str = "worker", stages: str | None = None) -> WorkerProcess:
        worker = WorkerProcess(settings, tmp_path, name, stages).start()
        workers.append(worker)
        return worker

    return start


@pytest.fixture(scope="module")
def llm_server() -> Iterator[tuple[str, Script]]:
    """The fake OpenAI-compatible server; yields its ``/v1`` base URL and its script."""
    script = Script()
    with serve(llm_app(script)) as url:
        yield f"{url}/v1", script


@pytest.fixture(scope="module")
def memos_server() -> Iterator[tuple[str, MemOSState]]:
    state = MemOSState()
    with serve(memos_app(state)) as url:
        yield url, state


@pytest.fixture(scope="module")
def mem0_server() -> Iterator[tuple[str, Mem0State]]:
    state = Mem0State()
    with serve(mem0_app(state)) as url:
        yield url, state


@pytest.fixture
def servers(
    services: Settings,
    memos_server: tuple[str, MemOSState],
    mem0_server: tuple[str, Mem0State],
) -> tuple[Settings, MemOSState, Mem0State]:
    """Settings of this test's own on the fake MemOS and Mem0 servers, emptied first."""
    (memos_url, memos), (mem0_url, mem0) = memos_server, mem0_server
    memos.reset()
    mem0.reset()
    settings = isolated_settings(
        memos_url=memos_url,
        memos_api_key=MEMOS_KEY,
        mem0_url=mem0_url,
        mem0_api_key=MEM0_KEY,
        agent_config_cache_seconds=0,
    )
    return settings, memos, mem0
