"""What the benchmarks share: settings of a run's own on the shared services, and workers."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Any

from memstream import launch
from memstream.launch import Launched, start_memstream
from memstream.settings import Settings

REPO = Path(__file__).resolve().parent.parent
# The settings the figures in BENCHMARKS.md were measured with.
BENCH_DEFAULTS: dict[str, Any] = {"topic_partitions": 4, "batch_within_seconds": 0.05}


def isolated_settings(**overrides: Any) -> Settings:
    """Settings on the shared services with this run's own topics, group and cache keys."""
    return launch.isolated_settings("bench", **{**BENCH_DEFAULTS, **overrides})


def log_dir(name: str) -> Path:
    """A fresh folder for the logs of one benchmark's processes (kept after the run)."""
    return Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))


def start_worker(settings: Settings, logs: Path) -> Launched:
    """A ``memstream worker`` process on ``settings``, its output in ``logs``."""
    return start_memstream(
        "worker", settings, log_path=logs / f"worker-{uuid.uuid4().hex[:6]}.log", cwd=REPO
    )
