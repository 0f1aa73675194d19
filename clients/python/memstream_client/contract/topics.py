"""The public topics' names, unprefixed (a deployment's ``MEMSTREAM_TOPIC_PREFIX`` goes before
them): the two a platform publishes and the two memstream publishes."""

from __future__ import annotations

from typing import Final, Literal

InputTopic = Literal["message-written", "session-ended"]
MESSAGE_WRITTEN: Final = "message-written"
SESSION_ENDED: Final = "session-ended"
DEAD_LETTER: Final = "dead-letter"
MEMORY_CHANGED: Final = "memory-changed"
INPUT_TOPICS: tuple[InputTopic, ...] = (MESSAGE_WRITTEN, SESSION_ENDED)
# What memstream writes and none of its stages reads.
OUTPUT_TOPICS = (DEAD_LETTER, MEMORY_CHANGED)
PUBLIC_TOPICS = (*INPUT_TOPICS, *OUTPUT_TOPICS)
