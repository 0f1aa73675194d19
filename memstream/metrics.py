"""Prometheus metrics; label values are bounded (stages, reasons, outcomes: never ids)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

EVENTS = Counter(
    "memstream_events_total", "Input events handled, by stage and outcome.", ["stage", "outcome"]
)
DEAD_LETTERS = Counter(
    "memstream_dead_letters_total", "Records sent to dead-letter, by reason.", ["stage", "reason"]
)
RETRIES = Counter(
    "memstream_retries_total", "Retried operations, by stage and operation.", ["stage", "op"]
)
CACHE = Counter(
    "memstream_cache_operations_total",
    "Cache operations, by operation and result.",
    ["op", "result"],
)
BATCH_SECONDS = Histogram(
    "memstream_batch_seconds",
    "Time to process one batch, by stage.",
    ["stage"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)

LOAD_SECONDS = Histogram(
    "memstream_load_path_seconds",
    "Load path latency, by path (short_term, long_term, total).",
    ["path"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)
DEGRADED = Counter(
    "memstream_load_path_degraded_total", "Load path fallbacks and failures, by part.", ["part"]
)
MEMORIES = Counter(
    "memstream_memories_total", "Long-term memories stored, skipped and expired.", ["outcome"]
)
