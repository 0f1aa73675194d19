"""Topic declarations. Values stay raw bytes: validation is the stages' job, so that bad input
reaches dead-letter with its reason instead of crashing a deserializer."""

from __future__ import annotations

from faust import TopicT

from memstream.streams.app import app, settings


def _topic(name: str) -> TopicT:
    return app.topic(settings.topic(name), key_serializer="raw", value_serializer="raw")


# Public topics (CONTRACT section 2).
message_written = _topic("message-written")
session_ended = _topic("session-ended")
dead_letter = _topic("dead-letter")

# Internal topics between the long-term stages; names and shapes are not public.
lt_judge = _topic("lt-judge")
lt_dedupe = _topic("lt-dedupe")
lt_conflict = _topic("lt-conflict")  # keyed by (tenant, user) from here on
lt_persist = _topic("lt-persist")
lt_retry = _topic("lt-retry")
summary_check = _topic("summary-check")
