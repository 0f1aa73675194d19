"""Topic declarations. Values stay raw bytes: validation is the stages' job, so that bad input
reaches dead-letter with its reason instead of crashing a deserializer."""

from __future__ import annotations

from faust import TopicT

from memstream.longterm.backoff import RetryPolicy, tier_topic
from memstream.streams.app import app, settings


def _topic(name: str) -> TopicT:
    return app.topic(settings.topic(name), key_serializer="raw", value_serializer="raw")


# Public topics (CONTRACT section 2).
message_written = _topic("message-written")
session_ended = _topic("session-ended")
dead_letter = _topic("dead-letter")

# Internal topics between the stages; names and shapes are not public.
lt_judge = _topic("lt-judge")
lt_dedupe = _topic("lt-dedupe")
lt_conflict = _topic("lt-conflict")  # keyed by (tenant, user) from here on
lt_persist = _topic("lt-persist")
summary_check = _topic("summary-check")

# Records that met an outage wait on the tier topic of their attempt (memstream.longterm.backoff).
retry_policy = RetryPolicy.from_settings(settings)
retry_tiers = {tier: _topic(tier_topic(tier)) for tier in range(1, retry_policy.tiers + 1)}

# Where a waiting record goes back to, by full topic name: every topic a stage reads (the same
# as memstream.kafka.REDRIVE_TOPICS, which the command line uses without Faust).
stage_inputs = {
    topic.get_topic_name(): topic
    for topic in (
        message_written,
        session_ended,
        lt_judge,
        lt_dedupe,
        lt_conflict,
        lt_persist,
        summary_check,
    )
}
