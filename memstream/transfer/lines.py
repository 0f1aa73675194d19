"""One exported memory, one JSON line: what ``memstream export`` and
``GET /v1/users/{id}/export`` write and ``memstream import`` reads, and its checks (no IO)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from memstream.memory import USER_PROFILE, MemoryItem, MemoryKind, NewMemory
from memstream_client.contract.api import Id, MemoryType

State = Literal["live", "superseded", "deleted", "expired", "forgotten"]
# The text of a memory, checked as the API checks one added by hand (``AddMemoryRequest``).
Content = Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=r"\S")]
Cube = Annotated[str, StringConstraints(pattern=rf"^({USER_PROFILE}|agent_\S.*)$", max_length=140)]


class MemoryLine(BaseModel):
    """A memory as exported: its record, where it lived (``provider``), its history links, and
    for an item stored under a key its namespace, key and value."""

    model_config = ConfigDict(extra="ignore")

    id: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    tenant_id: Id
    user_id: Id
    agent_id: Id | None = None
    cube_id: Cube
    memory_type: MemoryType
    kind: MemoryKind = "fact"
    content: Content
    importance: int = Field(default=5, ge=1, le=10)
    occurred_at: datetime | None = None
    created_at: datetime
    source_event_ids: list[Annotated[str, StringConstraints(max_length=128)]] = []
    provider: Literal["MYSQL", "MEMOS", "MEM0"] = "MYSQL"
    state: State = "live"
    deleted_at: datetime | None = None
    supersedes: list[str] = []
    superseded_by: list[str] = []
    namespace: list[str] | None = None
    key: str | None = None
    value: dict[str, Any] | None = None


def _utc(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def line_of(
    item: MemoryItem,
    provider: str,
    *,
    state: State = "live",
    deleted_at: datetime | None = None,
    supersedes: list[str] | None = None,
    superseded_by: list[str] | None = None,
    keyed: tuple[list[str], str, dict[str, Any]] | None = None,
) -> bytes:
    """The JSON line of one memory (with its newline)."""
    value: dict[str, Any] = {
        "id": item.id,
        "tenant_id": item.tenant_id,
        "user_id": item.user_id,
        "agent_id": item.agent_id,
        "cube_id": item.cube_id,
        "memory_type": item.memory_type,
        "kind": item.kind,
        "content": item.content,
        "importance": item.importance,
        "occurred_at": _utc(item.occurred_at),
        "created_at": _utc(item.created_at),
        "source_event_ids": list(item.source_event_ids),
        "provider": provider,
        "state": state,
        "supersedes": supersedes or [],
        "superseded_by": superseded_by or [],
    }
    if deleted_at is not None:
        value["deleted_at"] = _utc(deleted_at)
    if keyed is not None:
        value["namespace"], value["key"], value["value"] = keyed
    return orjson.dumps(value, option=orjson.OPT_UTC_Z) + b"\n"


class BadLine(ValueError):
    """A line that is no memory; the message says why, in one sentence."""


def parse_line(raw: bytes) -> MemoryLine:
    """The memory of one line, or ``BadLine``."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadLine(f"not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise BadLine(f"a JSON {type(value).__name__}, not an object")
    try:
        return MemoryLine.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'line'}: {e['msg']}" for e in exc.errors()
        )
        raise BadLine(problems) from None


def new_memory(line: MemoryLine, tenant_id: str) -> NewMemory:
    """What importing ``line`` into ``tenant_id`` stores: the memory with its times kept."""
    return NewMemory(
        tenant_id=tenant_id,
        user_id=line.user_id,
        agent_id=line.agent_id,
        cube_id=line.cube_id,
        memory_type=line.memory_type,
        content=line.content,
        importance=line.importance,
        source_event_ids=tuple(line.source_event_ids),
        kind=line.kind,
        occurred_at=_utc(line.occurred_at),
        created_at=_utc(line.created_at),
    )
