"""The JSON records the long-term stages pass along their internal topics."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import orjson

from memstream.longterm.models import Candidate, SessionMessage
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

    @classmethod
    def of(cls, event: SessionEnded) -> Session:
        return cls(
            event.tenant_id, event.user_id, event.agent_id, event.conversation_id, event.event_id
        )

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
    return [NewMemory(**_decoded(m)) for m in record["store"]]


def as_dict(value: Any) -> dict[str, Any]:
    return asdict(value)
