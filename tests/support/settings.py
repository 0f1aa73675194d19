"""Settings of one test's own on the shared services, names no other test uses, and ports."""

from __future__ import annotations

import socket
import uuid
from typing import Any

from memstream.settings import Settings
from tests.support.topics import made

# Small batches and few partitions: tests wait on a handful of events, not on throughput.
TEST_DEFAULTS: dict[str, Any] = {"topic_partitions": 4, "batch_within_seconds": 0.05}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def own_settings(label: str, **overrides: Any) -> Settings:
    """Settings on the shared services with topics, consumer group, cache keys and worker port
    of their own, so that runs side by side never see each other's data."""
    tag = f"{label}-{uuid.uuid4().hex[:10]}"
    made(tag)
    values: dict[str, Any] = {
        "app_id": tag,
        "topic_prefix": f"{tag}.",
        "cache_prefix": f"{tag}:",
        "worker_web_port": free_port(),
    }
    values.update(overrides)
    return Settings(**values)


def isolated_settings(**overrides: Any) -> Settings:
    """Settings on the shared services with this test's own topics, group and cache keys."""
    return own_settings("test", **{**TEST_DEFAULTS, **overrides})
