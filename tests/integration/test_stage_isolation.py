"""Crafted input cannot stall a worker: while a session of huge, sentence-dense messages is
summarised and judged, the worker's event loop (which also keeps it in its consumer group)
answers at once, other conversations are stored as they come, and the group keeps its member."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select

from memstream.broker.groups import live_members
from memstream.broker.topics import publish
from memstream.settings import Settings
from memstream.store.schema import long_term_memory
from memstream.store.summaries import SummaryStore
from tests.support.kafka import message, session_end
from tests.support.processes import worker_metric
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

# Messages of 20,000 characters: seconds of CPU to summarise and judge, and a session that
# still fits the broker's 1 MB record on its way to the judge.
CRAFTED = 40


def crafted(n: int) -> str:
    """Thousands of distinct short sentences, each a first-person fact: none is filler, none a
    duplicate, so every one is split, scored and read by the rules; and runs of white space
    and fillers at the ends of clauses, the shapes regular expressions backtrack on."""
    sentences = [
        f"I live in city {n}-{i} and my budget is {i} euros,   too   lol." for i in range(450)
    ]
    return " ".join(sentences)[:20_000]


async def written(port: int) -> float:
    """Summaries the worker wrote; what its event loop answers, so no answer within 5 s fails."""
    return await worker_metric(port, "memstream_events_total", stage="summary", outcome="written")


async def test_crafted_messages_never_stall_ingest_or_the_group_heartbeat(
    settings: Settings, tenant, store, engine, start_worker
):
    start_worker(settings)
    port = settings.worker_web_port
    await publish(settings, "message-written", [message(tenant, "warm", 0)])

    async def ready() -> bool:
        return await store.count(tenant, "warm") == 1

    await eventually(ready, within=60, what="the worker")
    group = settings.app_id
    members = await live_members(settings, group)
    assert len(members) == 1

    heavy = [message(tenant, "crafted", n, content=crafted(n)) for n in range(CRAFTED)]
    await publish(settings, "message-written", heavy)
    await publish(settings, "session-ended", [session_end(tenant, "crafted")])

    async def heavy_stored() -> bool:
        return await store.count(tenant, "crafted") == CRAFTED

    await eventually(heavy_stored, within=60, what="the crafted messages")

    # While the summary and the long-term chain work through them, the loop answers and
    # ingest goes on.
    summaries = SummaryStore(engine)

    async def busy() -> bool:
        """Until the crafted conversation is summarised and its session judged and stored."""
        if await summaries.get(tenant, "crafted") is None:
            return True
        query = select(func.count()).where(long_term_memory.c.tenant_id == tenant)
        async with engine.connect() as conn:
            return not (await conn.execute(query)).scalar_one()

    answers = 0
    sent = 0

    async def watch_the_loop() -> None:
        nonlocal answers
        while True:
            await written(port)  # a loop that does not answer within its timeout fails
            answers += 1
            await asyncio.sleep(0.05)

    async def probe_ingest() -> None:
        nonlocal sent
        while True:
            await publish(settings, "message-written", [message(tenant, "light", sent)])
            sent += 1

            async def light_stored(n: int = sent) -> bool:
                return await store.count(tenant, "light") == n

            await eventually(light_stored, within=5, what=f"light message {sent} while busy")

    watching = [asyncio.create_task(watch_the_loop()), asyncio.create_task(probe_ingest())]

    async def handled() -> bool:
        for task in watching:
            if task.done():
                task.result()  # a failed probe fails the test here
        return not await busy()

    try:
        await eventually(handled, within=150, what="the crafted session handled")
    finally:
        for task in watching:
            task.cancel()
    assert sent >= 3 and answers >= 10, "the crafted work was over before it was watched"
    assert await written(port) >= 1
    # The same single member: never evicted, never rejoined.
    assert await live_members(settings, group) == members
