"""Stage roles: the stream stages a worker runs (``memstream worker --stages``), the topics each
role reads, and the consumer groups they read them in.

The stages of each role are in ``memstream.topology``.

- ``history``: ``message-written`` into the record and the cache; needs the database and
  Redis, and is the one role ingest waits on.
- ``summary``: conversation summaries (``summary-check``); CPU (extractive) or the LLM.
- ``longterm``: session end, judge, dedupe, conflict, persist and the embedding backfill; CPU
  (rule judge), the LLM and the long-term providers.

The history stage reads with a plain Kafka consumer in the group ``MEMSTREAM_APP_ID``, in every
worker that runs it, whatever its other roles: workers with the same app id share the
``message-written`` partitions. The other stages are Faust agents, in a group named after the
roles they run: ``<app id>-summary-longterm`` for a worker of every role or of those two,
``<app id>-summary`` or ``<app id>-longterm`` for one of them. Each group reads only its roles'
topics, so each role scales on its own; summary and long-term should each run in one kind of
worker at a time (all-roles and ``summary,longterm`` workers are one kind), or they run twice.
Before the history stage had a consumer of its own, the group ``MEMSTREAM_APP_ID`` read every
topic: a new group takes over the offsets it committed (memstream.streams.worker).
"""

from __future__ import annotations

from collections.abc import Iterable

# Which role runs which stage, and so reads which topic, is declared with the topology.
from memstream.topology import ROLES, inputs_of, role_of_topic

__all__ = [
    "ROLES",
    "group_id",
    "groups_running",
    "history_group",
    "inputs_of",
    "parse_stages",
    "reading_group",
    "role_of_topic",
]


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
    """The Faust app id, and consumer group, of the workers running ``roles``: named after its
    summary and long-term roles (the history stage reads in ``history_group``)."""
    chosen = [role for role in ROLES if role in set(roles) and role != "history"]
    return "-".join([app_id, *(chosen or ["history"])])


def history_group(app_id: str) -> str:
    """The consumer group of the history stage, in every worker that runs it."""
    return app_id


def reading_group(app_id: str, roles: Iterable[str], topic: str) -> str:
    """The group in which a worker running ``roles`` reads ``topic`` (without prefix)."""
    if role_of_topic(topic) == "history":
        return history_group(app_id)
    return group_id(app_id, roles)


def groups_running(app_id: str, role: str) -> list[str]:
    """Every consumer group that reads, or has read, the topics of ``role``: the groups of the
    workers that run it, then the app id's group, which read every topic before the history
    stage had a consumer of its own (offsets that a new group takes over)."""
    if role == "history":
        return [history_group(app_id)]
    other = next(r for r in ROLES if r not in ("history", role))
    return [group_id(app_id, (role,)), group_id(app_id, (role, other)), app_id]
