"""What the benchmarks share: settings of a run's own on the shared services, and workers."""

from __future__ import annotations

import tempfile
import uuid
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from memstream.launch import Launched
from memstream.settings import Settings
from tests.support.processes import start_memstream
from tests.support.settings import own_settings

REPO = Path(__file__).resolve().parent.parent
# The settings the figures in BENCHMARKS.md were measured with.
BENCH_DEFAULTS: dict[str, Any] = {"topic_partitions": 4, "batch_within_seconds": 0.05}


def isolated_settings(**overrides: Any) -> Settings:
    """Settings on the shared services with this run's own topics, group and cache keys."""
    return own_settings("bench", **{**BENCH_DEFAULTS, **overrides})


def log_dir(name: str) -> Path:
    """A fresh folder for the logs of one benchmark's processes (kept after the run)."""
    return Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))


def start_worker(settings: Settings, logs: Path) -> Launched:
    """A ``memstream worker`` process on ``settings``, its output in ``logs``."""
    return start_memstream(
        "worker", settings, log_path=logs / f"worker-{uuid.uuid4().hex[:6]}.log", cwd=REPO
    )


def print_top(inclusive: Counter[str], total: int, top: int, hidden: Iterable[str]) -> None:
    """The ``top`` most sampled functions of a profile, as shares of ``total`` samples,
    leaving out those whose name contains one of ``hidden`` (frames every sample passes)."""
    hidden = tuple(hidden)
    shown = [(n, c) for n, c in inclusive.most_common() if not any(h in n for h in hidden)]
    for name, share in shown[:top]:
        print(f"      {100 * share / max(1, total):5.1f}%  {name}")
