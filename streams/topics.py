"""Topic declarations. Values stay raw bytes: validation is the stages' job, so that bad input
reaches dead-letter with its reason instead of crashing a deserializer."""

from __future__ import annotations

from streams.app import app, settings

message_written = app.topic(
    settings.topic("message-written"), key_serializer="raw", value_serializer="raw"
)
session_ended = app.topic(
    settings.topic("session-ended"), key_serializer="raw", value_serializer="raw"
)
dead_letter = app.topic(settings.topic("dead-letter"), key_serializer="raw", value_serializer="raw")

PUBLIC_TOPICS = (message_written, session_ended, dead_letter)
