"""Stage tests without a broker: one of memstream's stream stages (a Faust agent) run in this
process under Faust's test context, handed records as if read from its topic, with a producer
that keeps what it sends (its outputs, retries and dead letters) in memory. What the stage
reads and writes besides (the database, the cache) is the real one its settings name.

    async with running_stage(judge) as stage:
        event = await stage.put(payload, key=b"c1")
        await stage.settled(event)
        assert stage.producer.to(lt_dedupe)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import faust
import orjson
from aiokafka.errors import KafkaConnectionError
from faust.transport.producer import Producer
from faust.types import TP, AgentT, RecordMetadata
from faust.types.agents import AgentTestWrapperT


@dataclass(frozen=True)
class Sent:
    """One record a stage sent."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)

    def json(self) -> Any:
        return orjson.loads(self.value or b"")


class MemoryProducer(Producer):
    """Faust's producer, keeping each record in ``sent`` instead of sending it to a broker; while
    ``down`` is above zero each send fails as an unreachable broker does (and counts down)."""

    def __init__(self, app: faust.App) -> None:
        super().__init__(app.transport)
        self.sent: list[Sent] = []
        self.down = 0
        self.refused = 0  # sends that failed

    async def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp: float | None,
        headers: Any,
        *,
        transactional_id: str | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        if self.down > 0:
            self.down -= 1
            self.refused += 1
            raise KafkaConnectionError("the broker is down")
        items = headers.items() if isinstance(headers, dict) else headers or []
        self.sent.append(Sent(topic, key, value, list(items)))
        done: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        done.set_result(RecordMetadata(topic, 0, TP(topic, 0), len(self.sent) - 1, timestamp))
        return done

    async def send_and_wait(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp: float | None,
        headers: Any,
        *,
        transactional_id: str | None = None,
    ) -> RecordMetadata:
        return await (await self.send(topic, key, value, partition, timestamp, headers))

    async def flush(self) -> None:
        pass

    def key_partition(self, topic: str, key: bytes) -> TP:
        return TP(topic, 0)

    def supports_headers(self) -> bool:
        return True

    def to(self, topic: faust.TopicT) -> list[Sent]:
        """What was sent to ``topic``."""
        name = topic.get_topic_name()
        return [record for record in self.sent if record.topic == name]


@dataclass
class RunningStage:
    """An agent under Faust's test context and the producer its stage sends with."""

    agent: AgentTestWrapperT
    producer: MemoryProducer

    async def put(
        self, value: bytes, key: bytes | None = b"k", headers: list[tuple[str, bytes]] | None = None
    ) -> faust.EventT[Any]:
        """Hand the stage one record, as if read from its topic (without waiting for it)."""
        return await self.agent.put(value, key=key, headers=headers, wait=False)

    async def settled(self, *events: faust.EventT[Any], within: float = 10) -> None:
        """Wait until the stage has acknowledged every one of ``events`` (TimeoutError after
        ``within`` seconds)."""
        deadline = time.monotonic() + within
        while not all(event.message.acked for event in events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the records were not acknowledged within {within}s")
            await asyncio.sleep(0.05)


@asynccontextmanager
async def running_stage(agent: AgentT[Any]) -> AsyncIterator[RunningStage]:
    """Run ``agent`` under Faust's test context, its sends kept by a ``MemoryProducer``."""
    app = cast(faust.App, agent.app)
    app.finalize()
    producer = MemoryProducer(app)
    app.producer = producer  # faust.App's producer is settable; its AppT declares it read-only
    async with agent.test_context() as tested:
        yield RunningStage(tested, producer)
    await producer.stop()
