"""Settings of one test's own on the shared services, and names no other test uses."""

from __future__ import annotations

import uuid
from typing import Any

from memstream import launch
from memstream.settings import Settings

# Small batches and few partitions: tests wait on a handful of events, not on throughput.
TEST_DEFAULTS: dict[str, Any] = {"topic_partitions": 4, "batch_within_seconds": 0.05}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def isolated_settings(**overrides: Any) -> Settings:
    """Settings on the shared services with this test's own topics, group and cache keys."""
    return launch.isolated_settings("test", **{**TEST_DEFAULTS, **overrides})
