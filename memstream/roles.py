"""Stage roles: the stream stages a worker runs (``memstream worker --stages``), the topics each
role reads, and the consumer group of each set of roles.

- ``history``: ``message-written`` into the record and the cache; needs the database and
  Redis, and is the one role ingest waits on.
- ``summary``: conversation summaries (``summary-check``); CPU (extractive) or the LLM.
- ``longterm``: session end, judge, dedupe, conflict, persist and the embedding backfill; CPU
  (rule judge), the LLM and the long-term providers.

A worker running every role is in the group ``MEMSTREAM_APP_ID``, as before roles existed; a
worker running some of them is in ``<app id>-<role>[-<role>]`` (``memstream-history``,
``memstream-summary-longterm``). Each group reads only its roles' topics, so each role scales
on its own; a role should run in one kind of worker at a time, or it runs twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import combinations

ROLES = ("history", "summary", "longterm")
_INPUTS = {
    "history": ("message-written",),
    "summary": ("summary-check",),
    "longterm": ("session-ended", "lt-judge", "lt-dedupe", "lt-conflict", "lt-persist"),
}


def parse_stages(text: str) -> tuple[str, ...]:
    """``history,summary`` as roles in their canonical order; ValueError names what is wrong."""
    named = [part.strip().lower() for part in text.split(",") if part.strip()]
    unknown = [name for name in named if name not in ROLES]
    if unknown:
        raise ValueError(f"unknown stage role(s) {', '.join(unknown)}; known: {', '.join(ROLES)}")
    if not named:
        raise ValueError(f"name at least one stage role of {', '.join(ROLES)}")
    return tuple(role for role in ROLES if role in named)


def group_id(app_id: str, roles: Iterable[str]) -> str:
    """The consumer group of the workers running ``roles``."""
    chosen = [role for role in ROLES if role in set(roles)]
    if len(chosen) == len(ROLES):
        return app_id
    return "-".join([app_id, *chosen])


def groups_running(app_id: str, role: str) -> list[str]:
    """Every consumer group a worker running ``role`` can be in: the all-roles group first."""
    others = [r for r in ROLES if r != role]
    sets = [(role, *extra) for n in range(len(others) + 1) for extra in combinations(others, n)]
    return sorted({group_id(app_id, roles) for roles in sets}, key=lambda g: (g != app_id, g))


def inputs_of(*roles: str) -> tuple[str, ...]:
    """The topics (without prefix) the stages of ``roles`` read."""
    return tuple(topic for role in ROLES if role in roles for topic in _INPUTS[role])


def role_of_topic(topic: str) -> str | None:
    """The role that reads ``topic`` (without prefix); None for a topic no stage reads."""
    return next((role for role, topics in _INPUTS.items() if topic in topics), None)
