"""Dropping the topics a test module made, so that a full run never piles up partitions.

Each test gets topics of its own (``tests.support.settings``), about 76 partitions for a worker
with every stage. Kafka keeps a file open per partition segment, so a suite that never dropped
them would reach a broker's open-file limit (20,000 on the test machines) in about one run and
a half, and the broker then fails its log directory for every test after.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memstream.settings import Settings

log = logging.getLogger(__name__)

_made: set[str] = set()
_lock = threading.Lock()

BATCH = 200


def made(tag: str) -> None:
    """Remember a name that every topic of one test's settings starts with."""
    with _lock:
        _made.add(tag)


def take_made() -> set[str]:
    with _lock:
        tags = set(_made)
        _made.clear()
        return tags


async def drop_topics(settings: Settings, tags: set[str]) -> int:
    """Delete every topic named after one of ``tags``; answers how many."""
    # Here, not with the module: a unit run records names (tests.support.settings) and never
    # drops them, and loads no broker client.
    from aiokafka.admin import AIOKafkaAdminClient

    from memstream.broker.clients import client_options

    admin = AIOKafkaAdminClient(**client_options(settings), request_timeout_ms=15000)
    await admin.start()
    try:
        names = [t for t in await admin.list_topics() if t.startswith(tuple(tags))]
        for start in range(0, len(names), BATCH):
            await admin.delete_topics(names[start : start + BATCH])
        return len(names)
    finally:
        await admin.close()


def drop_made_topics(settings: Settings) -> None:
    """Best effort, in a thread of its own: the test's event loop may be idle but still set."""
    tags = take_made()
    if not tags:
        return

    def run() -> None:
        try:
            dropped = asyncio.run(asyncio.wait_for(drop_topics(settings, tags), 60))
            log.info("dropped %d topics of %d test settings", dropped, len(tags))
        except Exception as exc:  # a broker that is gone has nothing left to drop
            log.warning("could not drop the topics of %d test settings: %r", len(tags), exc)

    worker = threading.Thread(target=run, name="drop-test-topics")
    worker.start()
    worker.join()
