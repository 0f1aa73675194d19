"""Values passed between the long-term stages."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from memstream.memory import MemoryKind, MemoryType

Scope = Literal["user", "agent"]
# The five kinds of facts worth remembering, plus episodes (what was said, dated), and their
# importance ranges (1-10).
Category = Literal["preference", "personal_fact", "plan", "relationship", "instruction", "episode"]
IMPORTANCE_RANGES: dict[Category, tuple[int, int]] = {
    "instruction": (7, 10),
    "personal_fact": (6, 9),
    "relationship": (5, 8),
    "preference": (4, 8),
    "plan": (3, 7),
    "episode": (1, 5),
}
MAX_CONTENT_CHARS = 200


@dataclass(frozen=True, slots=True)
class SessionMessage:
    """One message of an ended session; ``new`` when not judged before (no MD5 mark yet)."""

    event_id: str
    role: str
    content: str
    new: bool
    created_at: datetime
    speaker: str | None = None  # the name the platform gave in ``metadata``, if any


@dataclass(frozen=True, slots=True)
class Candidate:
    """A memory the judge proposes; ``user`` scope goes to ``user_profile``, ``agent`` to the
    agent's cube."""

    content: str
    memory_type: MemoryType
    scope: Scope
    importance: int
    category: Category
    source_event_ids: tuple[str, ...]
    kind: MemoryKind = "fact"
    occurred_at: datetime | None = None  # when it was said; episodes always have it
