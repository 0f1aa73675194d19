"""Prometheus metrics; label values are bounded (stages, reasons, outcomes: never ids)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

EVENTS = Counter(
    "memstream_events_total", "Input events handled, by stage and outcome.", ["stage", "outcome"]
)
DEAD_LETTERS = Counter(
    "memstream_dead_letters_total", "Records sent to dead-letter, by reason.", ["stage", "reason"]
)
RECORDS = Counter(
    "memstream_records_total",
    "Records each stage settled: finished, retried later (an outage) or dead-lettered.",
    ["stage", "outcome"],
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
SNAPSHOTS = Counter(
    "memstream_api_snapshots_total",
    "Snapshots of the cluster this API process computed (the other calls were answered from the"
    " one kept for MEMSTREAM_API_SNAPSHOT_SECONDS), by view (readiness, pipeline).",
    ["view"],
)
OVERLOAD = Counter(
    "memstream_api_overload_total",
    "API requests an overloaded process refused (503) or answered degraded, by action"
    " (refused, degraded) and reason (in_flight: no slot in time; lag: the event loop was late).",
    ["action", "reason"],
)
TENANT_REQUESTS = Counter(
    "memstream_api_tenant_requests_total",
    "/v1 requests by tenant (the API key's; at most MEMSTREAM_API_TENANT_METRICS of them, the"
    " rest as other) and outcome: admitted, degraded (short-term only while the loop lagged),"
    " rate and in_flight (429: over the tenant's share), body_bytes (429 or 503: too many body"
    " bytes in flight), process (503: no slot in time) and late (503: seen too late to answer).",
    ["tenant", "outcome"],
)
TENANT_IN_FLIGHT = Gauge(
    "memstream_api_tenant_in_flight", "/v1 requests of each tenant in flight now.", ["tenant"]
)
API_CONNECTIONS_CUT = Counter(
    "memstream_api_connections_cut_total",
    "Connections the API's server answered and closed before the application saw the request,"
    " by reason (header_timeout, body_timeout, headers_too_large, too_many_headers, idle).",
    ["reason"],
)
API_RUNNING_LIMIT = Gauge(
    "memstream_api_running_limit",
    "/v1 requests an API process runs at once now: fewer while its event loop is late.",
)
LOOP_LAG = Gauge(
    "memstream_api_loop_lag_seconds",
    "How late the API's event loop has woken up lately (the worst of the last second or two).",
)
SESSION_ORDER = Counter(
    "memstream_session_order_total",
    "What kept a user's sessions in order in the conflict stage, by event: announced (a session"
    " end's placeholder), filled (its candidates arrived), released (it ended with nothing to"
    " apply), expired (dropped unfilled past the retry horizon), waited (a record held behind an"
    " earlier session of its user), unannounced (a record with no placeholder), wake.",
    ["event"],
)
SESSION_ORDER_WAITING = Gauge(
    "memstream_session_order_waiting",
    "Users of this worker's conflict partitions whose later sessions wait for an earlier one"
    " (blocked: on a placeholder not filled yet) or for an earlier record's retry (retrying),"
    " as of the last record of each user the worker handled.",
    ["state"],
)
MEMORIES = Counter(
    "memstream_memories_total", "Long-term memories stored, skipped and expired.", ["outcome"]
)

CONSUMER_LAG = Gauge(
    "memstream_consumer_lag",
    "Records behind the partition's high watermark not yet committed by this worker, per "
    "assigned topic and partition (the worker updates it every few seconds).",
    ["topic", "partition"],
)
_lag_labels: set[tuple[str, str]] = set()
RETRY_WAITING = Gauge(
    "memstream_retry_waiting",
    "Records waiting on a retry tier for their stage to try them again, per tier topic and "
    "partition this worker reads (what an outage has piled up).",
    ["topic", "partition"],
)


Lag = tuple[str, int, int]  # (topic, partition, records not committed yet)


def faust_lag(consumer: Any) -> list[Lag]:
    """The lag of a Faust consumer's assigned partitions, from its high watermarks and
    committed offsets (Faust keeps the last committed offset, the next one to read is +1)."""
    committed_offsets = getattr(consumer, "_committed_offset", {})
    out: list[Lag] = []
    for tp in consumer.assignment():
        try:
            highwater = consumer.highwater(tp)
        except Exception:
            continue
        if highwater is None:
            continue
        committed = committed_offsets.get(tp)
        position = 0 if committed is None else committed + 1
        out.append((str(tp.topic), tp.partition, max(0, int(highwater) - position)))
    return out


def update_consumer_lag(lags: Iterable[Lag]) -> None:
    """Set ``memstream_consumer_lag`` to ``lags`` (every consumer of the worker at once);
    partitions no longer assigned lose their series."""
    current: set[tuple[str, str]] = set()
    for topic, partition, lag in lags:
        labels = (topic, str(partition))
        CONSUMER_LAG.labels(*labels).set(lag)
        current.add(labels)
    for labels in _lag_labels - current:
        with contextlib.suppress(KeyError):
            CONSUMER_LAG.remove(*labels)
    _lag_labels.clear()
    _lag_labels.update(current)
