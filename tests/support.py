"""Helpers for tests on the real services: isolated settings, worker processes, topic reads."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from memstream.kafka import admin_client, ensure_topics, partitions_of, producer
from memstream.settings import Settings

REPO = Path(__file__).resolve().parent.parent


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def isolated_settings(**overrides: Any) -> Settings:
    """Settings on the shared services with this test's own topics, group and cache keys."""
    tag = uuid.uuid4().hex[:10]
    values: dict[str, Any] = {
        "app_id": f"test-{tag}",
        "topic_prefix": f"test-{tag}.",
        "cache_prefix": f"test-{tag}:",
        "topic_partitions": 4,
        "worker_web_port": free_port(),
        "batch_within_seconds": 0.05,
    }
    values.update(overrides)
    return Settings(**values)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that makes a child process build exactly ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")}
    for name, value in settings.model_dump().items():
        if hasattr(value, "get_secret_value"):
            value = value.get_secret_value()
        env[f"MEMSTREAM_{name.upper()}"] = str(value)
    return env


class WorkerProcess:
    """A real ``memstream worker`` process with its own log file."""

    def __init__(self, settings: Settings, log_dir: Path, name: str = "worker") -> None:
        self.settings = settings
        self.log_path = log_dir / f"{name}-{uuid.uuid4().hex[:6]}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memstream", "worker"],
            env=settings_env(self.settings),
            stdout=self.log_path.open("wb"),
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


async def eventually(
    check: Callable[[], Awaitable[bool]], *, within: float = 60, what: str = "condition"
) -> None:
    """Poll ``check`` until it holds; fail with ``what`` after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        if await check():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.25)


async def publish(
    settings: Settings, topic_name: str, values: Iterable[bytes | dict[str, Any]]
) -> int:
    """Publish raw values (dicts as JSON) keyed by their conversation id when they have one."""
    await ensure_topics(settings)
    sent = []
    async with producer(settings) as client:
        for value in values:
            key = None
            if isinstance(value, dict):
                conv = value.get("conversation_id")
                key = str(conv).encode() if conv is not None else None
                value = orjson.dumps(value)
            sent.append(await client.send(settings.topic(topic_name), value, key=key))
        await asyncio.gather(*sent)
    return len(sent)


async def read_topic(settings: Settings, topic_name: str) -> list[tuple[bytes | None, Any]]:
    """Every record now in a topic, as (key, decoded JSON value)."""
    topic = settings.topic(topic_name)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap_servers, enable_auto_commit=False
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in await partitions_of(settings, topic)]
        if not tps:
            return []
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)
        out: list[tuple[bytes | None, Any]] = []
        while [tp for tp in tps if await consumer.position(tp) < end[tp]]:
            batch = await consumer.getmany(*tps, timeout_ms=500)
            for records in batch.values():
                out += [(r.key, orjson.loads(r.value)) for r in records]
        return out
    finally:
        await stop_consumer(consumer)


async def caught_up(settings: Settings, topic_name: str) -> bool:
    """Whether the worker group has committed every record of a topic."""
    topic = settings.topic(topic_name)
    async with admin_client(settings) as admin:
        committed = await admin.list_consumer_group_offsets(settings.app_id)
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in await partitions_of(settings, topic)]
        if not tps:
            return False
        end = await consumer.end_offsets(tps)
    finally:
        await stop_consumer(consumer)
    for tp in tps:
        meta = committed.get(tp)
        if end[tp] > 0 and (meta is None or meta.offset < end[tp]):
            return False
    return True


async def stop_consumer(consumer: AIOKafkaConsumer) -> None:
    """Stop a group-less consumer; aiokafka's stop re-raises its own task's cancellation."""
    try:
        await consumer.stop()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise


def run_cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``memstream ARGS`` as a separate process with ``settings``."""
    return subprocess.run(
        [sys.executable, "-m", "memstream", *args],
        env=settings_env(settings),
        capture_output=True,
        text=True,
        cwd=REPO,
    )


async def proxied_database(base: Settings, **overrides: Any) -> tuple[TcpProxy, Settings]:
    """Settings whose database goes through a proxy the test can cut (an outage) and restore."""
    from sqlalchemy.engine import make_url

    url = make_url(base.database_url)
    proxy = await TcpProxy(url.port or 3306).start()
    through = url.set(host="127.0.0.1", port=proxy.port).render_as_string(False)
    return proxy, isolated_settings(database_url=through, **overrides)


def message(tenant: str, conversation: str, n: int, **fields: Any) -> dict[str, Any]:
    """A valid message-written event."""
    event = {
        "event_id": f"{conversation}-{n}",
        "tenant_id": tenant,
        "user_id": "user-1",
        "agent_id": "agent-1",
        "conversation_id": conversation,
        "role": "user" if n % 2 == 0 else "assistant",
        "content": f"message number {n} of {conversation}",
        "created_at": f"2026-01-01T00:{n // 60 % 60:02d}:{n % 60:02d}.{n:06d}Z",
    }
    event.update(fields)
    return event


@contextmanager
def api_process(settings: Settings) -> Iterator[str]:
    """``memstream api`` as deployed: its own process on ``settings.api_port``; yields its URL."""
    import httpx

    proc = subprocess.Popen(
        [sys.executable, "-m", "memstream", "api"],
        env=settings_env(settings),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{settings.api_port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError("memstream api did not start")
        time.sleep(0.2)
    try:
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Run an ASGI ``app`` under uvicorn on 127.0.0.1 and a free port, in a thread; yields
    its base URL (a local stand-in for an external HTTP service: an LLM, MemOS, Mem0)."""
    import threading

    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the local test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


class TcpProxy:
    """A loopback TCP proxy to a real service; closing it is an outage, reopening a recovery."""

    def __init__(self, target_port: int, port: int | None = None) -> None:
        self.target_port = target_port
        self.port = port or free_port()
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.StreamWriter] = set()

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        return self

    async def stop(self) -> None:
        """Refuse new connections and cut every open one."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._pipes):
            writer.close()
        self._pipes.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self._pipes |= {writer, up_writer}
        await asyncio.gather(
            self._pump(reader, up_writer), self._pump(up_reader, writer), return_exceptions=True
        )

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()
            self._pipes.discard(writer)
