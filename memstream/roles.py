"""Stage roles: the stream stages a worker runs (``memstream worker --stages``), the topics each
role reads, and the consumer groups they read them in.
Why it works this way: docs/design/roles.md."""

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
