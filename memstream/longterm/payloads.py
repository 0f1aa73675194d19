"""The JSON records the long-term stages pass along their internal topics."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import orjson

from memstream.events.origin import Origin
from memstream.longterm.models import Candidate, SessionMessage
from memstream.longterm.user_queue import Arrival
from memstream.memory import USER_PROFILE, NewMemory, agent_cube
from memstream_client.contract.events import SessionEnded


@dataclass(frozen=True, slots=True)
class Session:
    """Who a session belongs to, and the ``session-ended`` event that closed it."""

    tenant_id: str
    user_id: str
    agent_id: str | None
    conversation_id: str
    event_id: str
    # The session stage's trace context (``traceparent``): the memories it becomes carry it.
    trace: str | None = None
    # Where its ``session-ended`` record sits (None from earlier versions): a forget of the
    # user that began after it drops the session at every stage (memstream.store.forgets).
    origin_topic: str | None = None
    origin_partition: int | None = None
    origin_offset: int | None = None

    @classmethod
    def of(
        cls, event: SessionEnded, trace: str | None = None, origin: Origin | None = None
    ) -> Session:
        return cls(
            event.tenant_id, event.user_id, event.agent_id, event.conversation_id, event.event_id,
            trace, origin.topic if origin else None, origin.partition if origin else None,
            origin.offset if origin else None,
        )  # fmt: skip

    @property
    def origin(self) -> Origin | None:
        if self.origin_topic is None or self.origin_partition is None:
            return None
        if self.origin_offset is None:
            return None
        return Origin(self.origin_topic, self.origin_partition, self.origin_offset)

    @property
    def owner_key(self) -> bytes:
        """The repartition key of the conflict and persist stages: one (tenant, user)."""
        return orjson.dumps([self.tenant_id, self.user_id])

    def cube_of(self, candidate: Candidate) -> str:
        if candidate.scope == "agent" and self.agent_id:
            return agent_cube(self.agent_id)
        return USER_PROFILE

    def memory(self, candidate: Candidate) -> NewMemory:
        return NewMemory(
            tenant_id=self.tenant_id,
            user_id=self.user_id,
            agent_id=self.agent_id,
            cube_id=self.cube_of(candidate),
            memory_type=candidate.memory_type,
            content=candidate.content,
            importance=candidate.importance,
            source_event_ids=candidate.source_event_ids,
            kind=candidate.kind,
            occurred_at=candidate.occurred_at,
        )


def dumps(**fields: Any) -> bytes:
    """Encode a record; dataclasses and datetimes are handled by orjson."""
    return orjson.dumps(fields)


def loads(raw: bytes) -> dict[str, Any]:
    value = orjson.loads(raw)
    assert isinstance(value, dict)
    return value


def session_of(record: dict[str, Any]) -> Session:
    return Session(**record["session"])


def messages_of(record: dict[str, Any]) -> list[SessionMessage]:
    return [
        SessionMessage(
            event_id=m["event_id"],
            role=m["role"],
            content=m["content"],
            new=m["new"],
            created_at=datetime.fromisoformat(m["created_at"]),
            speaker=m.get("speaker"),
        )
        for m in record["messages"]
    ]


def _decoded(fields: dict[str, Any]) -> dict[str, Any]:
    """A dataclass's fields as they came back from JSON: tuples and datetimes restored."""
    occurred = fields.get("occurred_at")
    return {
        **fields,
        "source_event_ids": tuple(fields["source_event_ids"]),
        "occurred_at": datetime.fromisoformat(occurred) if occurred else None,
    }


def candidates_of(record: dict[str, Any]) -> list[Candidate]:
    return [Candidate(**_decoded(c)) for c in record["candidates"]]


def memories_of(record: dict[str, Any]) -> list[NewMemory]:
    # Plans kept by earlier versions name no superseded memories.
    return [
        NewMemory(**{**_decoded(m), "supersedes": tuple(m.get("supersedes", ()))})
        for m in record["store"]
    ]


def ended_at(event: SessionEnded, timestamp: float | None) -> float | None:
    """When a session ended, in epoch seconds: its ``ended_at``, else its record's Kafka time.
    It orders a user's sessions in the conflict stage (``memstream.longterm.user_queue``)."""
    if event.ended_at is not None:
        return event.ended_at.timestamp()
    return timestamp if timestamp is not None and timestamp >= 0 else None


def at_of(record: dict[str, Any]) -> float | None:
    """The session's end time a record carries (None from versions that carried none)."""
    at = record.get("at")
    return None if at is None else _seconds(at)


def placeholder(session: Session, at: float | None, until: float) -> bytes:
    """The conflict stage's placeholder for a session on its way, dropped at ``until``."""
    return dumps(order="placeholder", session=session, at=at, until=until)


def release(session: Session, why: str) -> bytes:
    """The session ends with nothing for the conflict stage (``why``): its placeholder goes."""
    return dumps(order="release", session=session, why=why)


def wake(when: float) -> bytes:
    """A wake of the conflict stage for a user's queue, asked for ``when``."""
    return dumps(order="wake", until=when)


def arrival_of(record: dict[str, Any]) -> Arrival:
    """What an ``lt-conflict`` record means for its user's queue; raises on a malformed one."""
    kind = record.get("order", "record")
    if kind == "wake":
        return Arrival("wake", until=_seconds(record["until"]))
    session = session_of(record)
    if kind == "placeholder":
        return Arrival("placeholder", session.event_id, at_of(record), _seconds(record["until"]))
    if kind == "release":
        # With nothing new, the session may have been read before, its candidates on their way.
        return Arrival("release", session.event_id, soft=record.get("why") == "nothing_new")
    if kind == "record":
        return Arrival("record", session.event_id, at_of(record))
    raise ValueError(f"unknown order record {kind!r}")


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a time in seconds, got {value!r}")
    return float(value)


def as_dict(value: Any) -> dict[str, Any]:
    return asdict(value)
