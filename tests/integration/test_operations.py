"""Operating memstream: migrate, publish and the embedded dev mode."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import orjson
import pytest
from sqlalchemy import inspect

from memstream.cli.dev import listening
from memstream.store.database import create_engine, migrate
from memstream.store.messages import MessageStore
from tests.support.kafka import message, read_topic
from tests.support.processes import run_cli
from tests.support.settings import free_port
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

TABLES = ["agent_config", "conversation_message", "conversation_summary", "long_term_memory"]


async def _shape(url: str) -> dict[str, object]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:

            def read(sync_conn):  # type: ignore[no-untyped-def]
                insp = inspect(sync_conn)
                return {
                    table: (
                        sorted(c["name"] for c in insp.get_columns(table)),
                        sorted(i["name"] for i in insp.get_indexes(table) if i["name"]),
                    )
                    for table in TABLES
                }

            return await conn.run_sync(read)
    finally:
        await engine.dispose()


@pytest.mark.parametrize("backend", ["mysql", "sqlite"])
async def test_migrate_is_idempotent_on_both_backends(services, tmp_path: Path, backend: str):
    url = services.database_url if backend == "mysql" else f"sqlite+aiosqlite:///{tmp_path}/m.db"
    assert set(TABLES) <= set(await migrate(url))
    first = await _shape(url)
    assert set(TABLES) <= set(await migrate(url))
    assert await _shape(url) == first
    columns, indexes = first["conversation_message"]  # type: ignore[misc]
    assert {"tenant_id", "conversation_id", "event_id", "token_count", "created_at"} <= set(columns)
    assert "ix_message_conversation_time" in indexes


def test_migrate_command(services):
    done = run_cli(services, "migrate")
    assert done.returncode == 0, done.stderr
    assert "conversation_message" in done.stdout


async def test_publish_reports_bad_lines_and_sends_the_rest(settings, tenant, tmp_path: Path):
    path = tmp_path / "events.jsonl"
    lines = [
        orjson.dumps(message(tenant, "c", 0)),
        b"{broken",
        orjson.dumps(message(tenant, "c", 1, role="robot")),
        b"",
        orjson.dumps(message(tenant, "c", 2)),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    done = run_cli(settings, "publish", str(path), "--topic", "message-written")
    assert done.returncode == 1
    assert f"{path}:2: invalid_json" in done.stderr
    assert f"{path}:3: schema_violation" in done.stderr
    assert "published 2 events, 2 bad lines skipped" in done.stdout
    # The progress bar counts the lines read, so it ends full although lines were skipped.
    assert "100%" in done.stderr and "5/5" in done.stderr
    records = await read_topic(settings, "message-written")
    assert sorted(v["event_id"] for _, v in records) == ["c-0", "c-2"]
    assert {k for k, _ in records} == {b"c"}


async def test_dev_runs_the_system_on_the_embedded_default(tmp_path: Path, tenant):
    """`memstream dev`: bundled broker, SQLite, no Redis; Ctrl-C stops everything."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")}
    env["MEMSTREAM_WORKER_WEB_PORT"] = "0"
    # A port of its own: other runs on this machine may hold the default one.
    port = free_port()
    env["MEMSTREAM_API_PORT"] = str(port)
    dev = subprocess.Popen(
        [sys.executable, "-m", "memstream", "dev"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    log = tmp_path / "dev.log"
    try:
        lines: list[str] = []

        async def up() -> bool:
            line = await asyncio.to_thread(dev.stdout.readline)  # type: ignore[union-attr]
            lines.append(line.decode(errors="replace"))
            return "memstream dev is up" in lines[-1] or dev.poll() is not None

        await eventually(up, within=150, what="memstream dev")
        assert dev.poll() is None, "".join(lines)
        # "up" means the worker consumes, not only that the API answers.
        async with httpx.AsyncClient(timeout=5) as http:
            ready = await http.get(f"http://127.0.0.1:{port}/readyz?workers=true")
        assert ready.status_code == 200, ready.text
        events = tmp_path / "events.jsonl"
        events.write_bytes(
            b"".join(orjson.dumps(message(tenant, "c", n)) + b"\n" for n in range(5))
        )
        publish_env = {**env, "MEMSTREAM_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:19092"}
        done = subprocess.run(
            [sys.executable, "-m", "memstream", "publish", str(events)]
            + ["--topic", "message-written"],
            env=publish_env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        engine = create_engine(f"sqlite+aiosqlite:///{tmp_path}/var/dev/memstream.db")
        store = MessageStore(engine)
        try:

            async def stored() -> bool:
                try:
                    return await store.count(tenant) == 5
                except Exception:
                    return False

            await eventually(stored, within=120, what="messages in the dev SQLite database")
        finally:
            await engine.dispose()
    finally:
        dev.send_signal(signal.SIGINT)
        try:
            out, _ = dev.communicate(timeout=30)
            log.write_bytes(out)
        except subprocess.TimeoutExpired:
            dev.kill()
            raise
    assert dev.returncode == 0
    assert subprocess.run(["pgrep", "-f", "tansu.*19092"], capture_output=True).returncode == 1


async def test_dev_stops_in_order_on_sigterm_and_keeps_what_was_just_published(
    tmp_path: Path, tenant
):
    """SIGTERM (kill, systemd, an IDE's stop button) stops everything dev started, in a few
    seconds, after the worker has stored what was published just before."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")}
    env["MEMSTREAM_WORKER_WEB_PORT"] = "0"
    port = free_port()
    env["MEMSTREAM_API_PORT"] = str(port)
    dev = subprocess.Popen(
        [sys.executable, "-m", "memstream", "dev"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    lines: list[str] = []
    try:

        async def up() -> bool:
            line = await asyncio.to_thread(dev.stdout.readline)  # type: ignore[union-attr]
            lines.append(line.decode(errors="replace"))
            return "memstream dev is up" in lines[-1] or dev.poll() is not None

        await eventually(up, within=150, what="memstream dev")
        assert dev.poll() is None, "".join(lines)
        assert any("memory only" in line for line in lines)  # says what a stop loses
        events = tmp_path / "events.jsonl"
        events.write_bytes(
            b"".join(orjson.dumps(message(tenant, "c", n)) + b"\n" for n in range(5))
        )
        # The broker as a flag: nothing exported that a later `memstream dev` would obey.
        done = subprocess.run(
            [sys.executable, "-m", "memstream", "publish", "-b", "127.0.0.1:19092", str(events)]
            + ["--topic", "message-written"],
            env=env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
    finally:
        # The deadline to stop is the wait below: past it the test fails.
        dev.send_signal(signal.SIGTERM)
        try:
            out, _ = dev.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            dev.kill()
            raise
    (tmp_path / "dev.log").write_bytes(out)
    assert dev.returncode == 0, out.decode(errors="replace")
    assert subprocess.run(["pgrep", "-f", "tansu.*19092"], capture_output=True).returncode == 1
    assert not listening(f"127.0.0.1:{port}")
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path}/var/dev/memstream.db")
    try:
        assert await MessageStore(engine).count(tenant) == 5
    finally:
        await engine.dispose()
    worker_log = (tmp_path / "var" / "dev" / "worker.log").read_text(errors="replace")
    # A query cut off by the shutdown has its pooled connection closed while its task is being
    # cancelled, and SQLAlchemy logs that with a traceback; nothing is lost (the record was not
    # acknowledged, so it is read again). Any other traceback is a bug.
    tracebacks = [
        block
        for block in worker_log.split("Traceback (most recent call last):")[1:]
        if not ("_close_connection" in block and "CancelledError" in block)
    ]
    assert not tracebacks, worker_log
