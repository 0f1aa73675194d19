"""Publishing ``message-written`` and ``session-ended`` from a platform service: each event
checked before it is sent, keyed by its conversation, through an idempotent producer, in a
producer span whose trace context goes in the record's headers. ``Publisher`` is for asyncio
code, ``SyncPublisher`` for code that is not. Why: docs/design/client-package.md."""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, Self, TypeVar

from memstream_client.contract.errors import ServiceUnavailable
from memstream_client.contract.events import MessageType, Role
from memstream_client.contract.security import BrokerSecurity
from memstream_client.contract.topics import MESSAGE_WRITTEN, SESSION_ENDED
from memstream_client.events import Event, Topic, checked, rfc3339

if TYPE_CHECKING:
    from aiokafka import AIOKafkaProducer

T = TypeVar("T")
P = ParamSpec("P")

# aiokafka's producer as memstream_client sets it up; the same in confluent-kafka (librdkafka)
# is in docs/api.md. murmur2 is aiokafka's (and Java's) partitioner: every producer of a topic
# must hash keys alike, or one conversation's events land on two partitions.
PRODUCER_SETTINGS: dict[str, Any] = {
    "enable_idempotence": True,  # implies acks="all"
    "acks": "all",
    "linger_ms": 5,
    "request_timeout_ms": 30000,
}


class BrokerSettings(Protocol):
    """What ``from_settings`` reads; ``memstream.settings.Settings`` has it (the client does not
    import the server's settings)."""

    @property
    def kafka_bootstrap_servers(self) -> str: ...
    @property
    def topic_prefix(self) -> str: ...
    @property
    def max_content_chars(self) -> int: ...
    @property
    def kafka_security(self) -> BrokerSecurity: ...


def _from_settings(settings: BrokerSettings, options: dict[str, Any]) -> dict[str, Any]:
    security = settings.kafka_security
    defaults = {
        "topic_prefix": settings.topic_prefix,
        "max_content_chars": settings.max_content_chars,
        "security_protocol": security.protocol,
        "sasl_mechanism": security.sasl_mechanism,
        "sasl_username": security.sasl_username,
        "sasl_password": security.sasl_password,
        "ssl_cafile": security.ssl_cafile,
        "ssl_certfile": security.ssl_certfile,
        "ssl_keyfile": security.ssl_keyfile,
    }
    return {**defaults, **options}


@dataclass(frozen=True, slots=True)
class Published:
    """Where the broker stored an event."""

    event_id: str
    topic: str
    partition: int
    offset: int


class Publisher:
    """Publishes the public events with aiokafka; ``async with Publisher(...) as p:``."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        topic_prefix: str = "memory.",
        max_content_chars: int = 32768,
        idempotent: bool = True,
        security_protocol: str = "PLAINTEXT",
        sasl_mechanism: str = "",
        sasl_username: str = "",
        sasl_password: str = "",
        ssl_cafile: str = "",
        ssl_certfile: str = "",
        ssl_keyfile: str = "",
        **producer_options: Any,
    ) -> None:
        """``idempotent=False`` for a broker without idempotent producers (the bundled broker
        of ``memstream dev``): event ids still keep what is stored free of duplicates.

        A secured broker: ``security_protocol`` ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``;
        SASL needs ``sasl_mechanism`` (``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``),
        ``sasl_username`` and ``sasl_password``; TLS takes a CA file (the system's CAs when
        none) and a client certificate and key. ``ValueError`` when they do not fit together.
        """
        self.bootstrap_servers = bootstrap_servers
        self.topic_prefix = topic_prefix
        self.max_content_chars = max_content_chars
        self.security = BrokerSecurity(
            protocol=security_protocol,
            sasl_mechanism=sasl_mechanism,
            sasl_username=sasl_username,
            sasl_password=sasl_password,
            ssl_cafile=ssl_cafile,
            ssl_certfile=ssl_certfile,
            ssl_keyfile=ssl_keyfile,
        )
        self._options = {**PRODUCER_SETTINGS, "enable_idempotence": idempotent, **producer_options}
        self._producer: AIOKafkaProducer | None = None

    @classmethod
    def from_settings(cls, settings: BrokerSettings, **options: Any) -> Publisher:
        """A publisher for the broker, topic prefix and content limit of ``settings`` (each
        may be overridden in ``options``)."""
        return cls(settings.kafka_bootstrap_servers, **_from_settings(settings, options))

    async def start(self) -> None:
        from aiokafka import AIOKafkaProducer
        from aiokafka.errors import KafkaConnectionError, KafkaError

        producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap_servers,
            **self.security.client_options(),
            **self._options,
        )
        try:
            await producer.start()
        except KafkaConnectionError as exc:
            await producer.stop()
            # A refused password or TLS handshake looks like no answer to aiokafka.
            refusal = await self.security.refusal(self.bootstrap_servers)
            why = f"Kafka at {self.bootstrap_servers} does not answer ({exc})"
            raise ServiceUnavailable(f"Kafka: {refusal}" if refusal else why) from exc
        except KafkaError as exc:
            await producer.stop()
            hint = (
                "; a broker without idempotent producers (the bundled broker of memstream dev) "
                "needs idempotent=False"
                if self._options["enable_idempotence"]
                else ""
            )
            raise ServiceUnavailable(
                f"Kafka at {self.bootstrap_servers} refused the producer ({exc!r}){hint}"
            ) from exc
        self._producer = producer

    async def stop(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def message(
        self,
        *,
        tenant_id: str,
        user_id: str,
        conversation_id: str,
        role: Role,
        content: str,
        agent_id: str | None = None,
        message_type: MessageType = "chat",
        created_at: datetime | str | None = None,
        metadata: Mapping[str, Any] | None = None,
        event_id: str | None = None,
    ) -> Published:
        """Publish one ``message-written`` event and wait for the broker to store it."""
        fields = {
            "event_id": event_id,
            "tenant_id": tenant_id,
            "user_id": user_id,
            "agent_id": agent_id,
            "conversation_id": conversation_id,
            "role": role,
            "message_type": message_type,
            "content": content,
            "created_at": rfc3339(created_at),
            "metadata": None if metadata is None else dict(metadata),
        }
        return await self.send(checked(MESSAGE_WRITTEN, fields, self.max_content_chars))

    async def session_ended(
        self,
        *,
        tenant_id: str,
        user_id: str,
        conversation_id: str,
        agent_id: str | None = None,
        ended_at: datetime | str | None = None,
        event_id: str | None = None,
    ) -> Published:
        """Publish one ``session-ended`` event (after the session's messages) and wait for the
        broker to store it."""
        fields = {
            "event_id": event_id,
            "tenant_id": tenant_id,
            "user_id": user_id,
            "agent_id": agent_id,
            "conversation_id": conversation_id,
            "ended_at": rfc3339(ended_at),
        }
        return await self.send(checked(SESSION_ENDED, fields, self.max_content_chars))

    async def send(self, event: Event) -> Published:
        """Send an event built by ``memstream_client.events.checked``."""
        if self._producer is None:
            raise RuntimeError("the publisher is not started: use `async with` or start()")
        from aiokafka.errors import KafkaError
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        topic = f"{self.topic_prefix}{event.topic}"
        attributes = {"messaging.system": "kafka", "messaging.destination.name": topic}
        with trace.get_tracer("memstream_client").start_as_current_span(
            f"{event.topic} publish", kind=trace.SpanKind.PRODUCER, attributes=attributes
        ) as span:
            carrier: dict[str, str] = {}
            TraceContextTextMapPropagator().inject(carrier)
            headers = [(name, value.encode()) for name, value in carrier.items()] or None
            try:
                stored = await self._producer.send_and_wait(
                    topic, event.value, key=event.key, headers=headers
                )
            except KafkaError as exc:
                raise ServiceUnavailable(
                    f"{topic}: the broker did not store the event ({exc!r})"
                ) from exc
            span.set_attribute("messaging.kafka.offset", stored.offset)
        return Published(event.event_id, topic, stored.partition, stored.offset)


def _waited(
    method: Callable[Concatenate[Publisher, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[SyncPublisher, P], T]:
    """``method`` of the publisher, run in its thread and waited for."""

    def run(self: SyncPublisher, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(method(self._publisher, *args, **kwargs))

    run.__doc__ = method.__doc__
    run.__name__ = method.__name__
    return run


class SyncPublisher:
    """A :class:`Publisher` for code without an event loop: it runs in a thread of its own, and
    each call waits for the broker. ``with SyncPublisher(...) as p: p.message(...)``."""

    def __init__(self, bootstrap_servers: str, *, timeout: float = 60.0, **options: Any) -> None:
        import asyncio

        self.timeout = timeout
        self._publisher = Publisher(bootstrap_servers, **options)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="memstream-publisher", daemon=True
        )
        self._thread.start()
        try:
            self._run(self._publisher.start())
        except BaseException:
            self._close_loop()
            raise

    @classmethod
    def from_settings(cls, settings: BrokerSettings, **options: Any) -> SyncPublisher:
        return cls(settings.kafka_bootstrap_servers, **_from_settings(settings, options))

    message = _waited(Publisher.message)
    session_ended = _waited(Publisher.session_ended)

    def close(self) -> None:
        if self._thread.is_alive():
            try:
                self._run(self._publisher.stop())
            finally:
                self._close_loop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _run(self, work: Coroutine[Any, Any, T]) -> T:
        import asyncio

        return asyncio.run_coroutine_threadsafe(work, self._loop).result(self.timeout)

    def _close_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


__all__ = ["PRODUCER_SETTINGS", "Published", "Publisher", "SyncPublisher", "Topic"]
