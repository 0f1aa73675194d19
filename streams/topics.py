"""Topic declarations, one Faust topic per topic of the topology (``memstream.topology``).
Values stay raw bytes: validation is the stages' job, so that bad input reaches dead-letter
with its reason instead of crashing a deserializer."""

from __future__ import annotations

from faust import TopicT

from memstream.failure.tiers import RetryPolicy, tier_topic
from memstream.streams.app import app, settings
from memstream.topology import PUBLIC_TOPICS, REDRIVE_TOPICS, STAGE_TOPICS
from memstream_client.contract.topics import DEAD_LETTER, MESSAGE_WRITTEN, SESSION_ENDED


def _topic(name: str) -> TopicT:
    return app.topic(settings.topic(name), key_serializer="raw", value_serializer="raw")


# By unprefixed name: the public topics (the contract's), then those between the stages.
by_name = {name: _topic(name) for name in (*PUBLIC_TOPICS, *STAGE_TOPICS)}
message_written = by_name[MESSAGE_WRITTEN]
session_ended = by_name[SESSION_ENDED]
dead_letter = by_name[DEAD_LETTER]
lt_judge = by_name["lt-judge"]
lt_dedupe = by_name["lt-dedupe"]
lt_conflict = by_name["lt-conflict"]
lt_persist = by_name["lt-persist"]
summary_check = by_name["summary-check"]

# Records that met an outage wait on the tier topic of their attempt (memstream.failure.tiers).
retry_policy = RetryPolicy.from_settings(settings)
retry_tiers = {tier: _topic(tier_topic(tier)) for tier in range(1, retry_policy.tiers + 1)}

# Where a waiting record goes back to, by full topic name: every topic a stage reads.
stage_inputs = {by_name[name].get_topic_name(): by_name[name] for name in REDRIVE_TOPICS}
