"""The topology, declared once: each stream stage, the topic it reads, the topics it writes and
the stage role that runs it (``memstream.roles``), and the topic lists read from that table.

Topic names here are unprefixed (``Settings.topic`` adds the prefix). The public topics are
the contract's (``memstream_client.contract.topics``, docs/api.md); the others are between the
stages and neither their names nor their shapes are public. Records that met an outage also
wait on one topic per retry tier (``memstream.failure.tiers``), which every stage that retries
writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memstream.failure.tiers import RetryPolicy, tier_topic
from memstream_client.contract import topics

if TYPE_CHECKING:
    from memstream.settings import RetrySettings

ROLES = ("history", "summary", "longterm")
# The public topics (the contract's), and those memstream writes and no stage of its own reads.
PUBLIC_TOPICS = topics.PUBLIC_TOPICS
OUTPUT_TOPICS = topics.OUTPUT_TOPICS


@dataclass(frozen=True, slots=True)
class Stage:
    """One stream stage: what it reads, what it writes besides dead-letter, and its role."""

    name: str
    input: str
    outputs: tuple[str, ...]
    role: str


# In the order records flow. The conflict stage applies its own plans; the persist stage reads
# what earlier versions handed over on lt-persist, and redriven dead letters.
STAGES = (
    Stage("history", topics.MESSAGE_WRITTEN, ("summary-check",), "history"),
    Stage("session", topics.SESSION_ENDED, ("summary-check", "lt-judge"), "longterm"),
    Stage("judge", "lt-judge", ("lt-dedupe",), "longterm"),
    Stage("dedupe", "lt-dedupe", ("lt-conflict",), "longterm"),  # keyed by (tenant, user)
    Stage("conflict", "lt-conflict", (), "longterm"),
    Stage("persist", "lt-persist", (), "longterm"),
    Stage("summary", "summary-check", (), "summary"),
)

# Every topic a stage reads: where a dead letter may be sent back to.
REDRIVE_TOPICS = tuple(stage.input for stage in STAGES)
# Between the stages.
STAGE_TOPICS = tuple(topic for topic in REDRIVE_TOPICS if topic not in PUBLIC_TOPICS)


def internal_topics(settings: RetrySettings) -> tuple[str, ...]:
    """The internal topics: stage to stage, then one per retry tier."""
    return STAGE_TOPICS + tier_topics(settings)


def tier_topics(settings: RetrySettings) -> tuple[str, ...]:
    """One topic per retry tier, the first tier first."""
    tiers = RetryPolicy.from_settings(settings).tiers
    return tuple(tier_topic(tier) for tier in range(1, tiers + 1))


def inputs_of(*roles: str) -> tuple[str, ...]:
    """The topics the stages of ``roles`` read, role by role in ``ROLES`` order."""
    return tuple(stage.input for role in ROLES if role in roles for stage in _of_role(role))


def role_of_topic(topic: str) -> str | None:
    """The role that reads ``topic``; None for a topic no stage reads."""
    return next((stage.role for stage in STAGES if stage.input == topic), None)


def _of_role(role: str) -> tuple[Stage, ...]:
    return tuple(stage for stage in STAGES if stage.role == role)
