"""What the dashboard's pipeline panel shows operators first: each stage's lag and records per
second, retries waiting, dead letters by reason, and the error rates of the long-term
providers and the LLM.

Lag, throughput, retries and dead letters come from the broker (the groups' committed offsets
and the topics), so they cover every worker whichever API replica answers; a stage's progress
is that of the groups that can run its role (``memstream.roles``). Error rates come from the
workers' own Prometheus metrics: each member of every worker group is scraped on
``MEMSTREAM_WORKER_WEB_PORT`` at the host the broker saw it connect from, and this API's own
load-path provider calls are added. Rates are taken between this snapshot and one of this
process a little older; the first snapshot has totals only.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from prometheus_client import REGISTRY, Metric
from prometheus_client.parser import text_string_to_metric_families

from memstream import topology
from memstream.broker import offsets
from memstream.broker.clients import admin_client, group_less_consumer, stop_consumer
from memstream.broker.groups import Group, committed_by_role, describe_groups
from memstream.broker.topics import partitions
from memstream.settings import Settings
from memstream_client.contract.topics import DEAD_LETTER

# Each stage and the topic it reads, in the order records flow.
STAGES = tuple((stage.name, stage.input) for stage in topology.STAGES)
# Dead letters read per partition, the newest, to count by reason.
NEWEST_DEAD_LETTERS = 500
# Rates are taken against the newest earlier snapshot at least this old, and at most the other.
RATE_MIN_SECONDS = 4.0
RATE_MAX_SECONDS = 300.0
SCRAPE_SECONDS = 1.5
# The worker counters the panel reads: name -> the label that splits them.
WORKER_COUNTERS = {
    "memstream_provider_seconds": "provider",  # its _count: calls
    "memstream_provider_failures": "provider",
    "memstream_llm_requests": "outcome",
}


@dataclass
class Sample:
    """Cumulative figures at one moment: committed offsets per stage, error counters."""

    at: float
    committed: dict[str, int]
    counters: dict[str, float] = field(default_factory=dict)


def parse_counters(texts: Iterable[str]) -> dict[str, float]:
    """Sum the panel's counters over Prometheus text expositions, keyed ``name{label}``."""
    out: dict[str, float] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            _add_family(out, family)
    return out


def _add_family(out: dict[str, float], family: Metric) -> None:
    label = WORKER_COUNTERS.get(family.name)
    if label is None:
        return
    wanted = f"{family.name}_count" if family.type == "histogram" else f"{family.name}_total"
    for sample in family.samples:
        if sample.name == wanted:
            key = f"{family.name}{{{sample.labels.get(label, '')}}}"
            out[key] = out.get(key, 0.0) + sample.value


def error_rates(counters: Mapping[str, float]) -> dict[str, Any]:
    """Calls, failures and the failed share, per provider and for the LLM."""
    providers: dict[str, dict[str, float]] = {}
    llm = {"requests": 0.0, "failures": 0.0}
    for key, value in counters.items():
        name, _, label = key.partition("{")
        label = label.rstrip("}")
        if name == "memstream_provider_seconds":
            providers.setdefault(label, {"calls": 0.0, "failures": 0.0})["calls"] += value
        elif name == "memstream_provider_failures":
            providers.setdefault(label, {"calls": 0.0, "failures": 0.0})["failures"] += value
        elif name == "memstream_llm_requests":
            llm["requests"] += value
            if label != "ok":
                llm["failures"] += value
    return {
        "providers": {name: _rated(c["calls"], c["failures"]) for name, c in providers.items()},
        "llm": _rated(llm["requests"], llm["failures"]),
    }


def _rated(calls: float, failures: float) -> dict[str, Any]:
    share = failures / calls if calls > 0 else None
    return {"calls": round(calls), "failures": round(failures), "error_rate": share}


def since(current: Sample, earlier: Sample | None) -> tuple[float | None, Sample]:
    """Seconds between ``earlier`` and ``current``, and the figures that changed in between
    (a counter that went down belongs to a restarted worker: its whole value is new)."""
    if earlier is None:
        return None, current
    committed = {k: max(0, v - earlier.committed.get(k, 0)) for k, v in current.committed.items()}
    counters = {}
    for key, value in current.counters.items():
        before = earlier.counters.get(key, 0.0)
        counters[key] = value - before if value >= before else value
    return current.at - earlier.at, Sample(current.at, committed, counters)


class Pipeline:
    """Snapshots of the pipeline for one API process, the recent ones kept for rates."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._samples: deque[Sample] = deque(maxlen=256)

    async def snapshot(self) -> dict[str, Any]:
        s = self.settings
        tiers = topology.tier_topics(s)
        consumer = group_less_consumer(s)
        async with admin_client(s) as admin:
            groups = await describe_groups(admin, s.app_id)
            live = [g for g in groups if g.members]
            hosts = sorted({host for g in live for host in g.members})
            stage_tps = {stage: await partitions(admin, s.topic(t)) for stage, t in STAGES}
            staged = [tp for tps in stage_tps.values() for tp in tps]
            tier_tps = [tp for t in tiers for tp in await partitions(admin, s.topic(t))]
            letter_tps = await partitions(admin, s.topic(DEAD_LETTER))
            await consumer.start()
            try:
                ends = await offsets.high_watermarks(consumer, staged + tier_tps + letter_tps)
                starts: dict[TopicPartition, int] = await consumer.beginning_offsets(letter_tps)
            finally:
                await stop_consumer(consumer)
            letters = await _dead_letters(s, letter_tps, starts, ends)
            done: dict[TopicPartition, int] = {}
            for stage, topic in STAGES:
                done |= await committed_by_role(admin, s.app_id, topic, stage_tps[stage])
            retried = await _retried(admin, s.app_id, live, tier_tps)
        scraped = await _scrape(hosts, s.worker_web_port)
        local = parse_counters([_local_metrics()])
        counters = parse_counters(scraped)
        for key, value in local.items():
            counters[key] = counters.get(key, 0.0) + value
        now = time.monotonic()
        sample = Sample(
            now,
            {stage: sum(done[tp] for tp in tps) for stage, tps in stage_tps.items()},
            counters,
        )
        seconds, changed = since(sample, self._earlier(now))
        self._samples.append(sample)
        stages = []
        for stage, topic in STAGES:
            lag = sum(max(0, ends[tp] - done[tp]) for tp in stage_tps[stage])
            rate = None if seconds is None else changed.committed[stage] / seconds
            stages.append({"stage": stage, "topic": topic, "lag": lag, "per_second": rate})
        return {
            "workers": {
                "members": sum(len(g.members) for g in live),
                "groups": [
                    {"group": g.group, "state": g.state, "members": len(g.members)} for g in live
                ],
            },
            "stages": stages,
            "retries_pending": sum(max(0, ends[tp] - retried[tp]) for tp in tier_tps),
            "dead_letters": letters,
            "errors": {
                **error_rates(changed.counters),
                "window_seconds": seconds,
                "workers_scraped": len(scraped),
                "workers": len(hosts),
            },
        }

    def _earlier(self, now: float) -> Sample | None:
        for sample in reversed(self._samples):
            if RATE_MIN_SECONDS <= now - sample.at <= RATE_MAX_SECONDS:
                return sample
        return None


async def _retried(
    admin: AIOKafkaAdminClient, app_id: str, live: list[Group], tps: list[TopicPartition]
) -> dict[TopicPartition, int]:
    """Per retry tier partition, how far every live retry stage has come: each group that runs
    summary or long-term stages reads the tiers in ``<group>.retry`` (agents/retry.py) and
    sends back its own roles' records, so a record waits until the slowest has passed it."""
    readers = [f"{g.group}.retry" for g in live if {"summary", "longterm"} & set(g.roles)]
    found = await asyncio.gather(
        *(offsets.committed(admin, r, tps) for r in readers or [f"{app_id}.retry"])
    )
    return {tp: min(done[tp] for done in found) for tp in tps}


async def _dead_letters(
    settings: Settings,
    tps: list[TopicPartition],
    starts: dict[TopicPartition, int],
    ends: dict[TopicPartition, int],
) -> dict[str, Any]:
    """How many dead letters the topic holds, and the newest of each partition by reason."""
    total = sum(max(0, ends[tp] - starts[tp]) for tp in tps)
    begin = {tp: max(starts[tp], ends[tp] - NEWEST_DEAD_LETTERS) for tp in tps}
    remaining = [tp for tp in tps if begin[tp] < ends[tp]]
    reasons: dict[str, int] = {}
    read = 0
    if remaining:
        # A consumer of its own, assigned once: reading on the one that fetched the ends, after
        # a new assignment, can leave its stop waiting on the bundled broker.
        consumer = group_less_consumer(settings)
        await consumer.start()
        try:
            consumer.assign(remaining)
            for tp in remaining:
                consumer.seek(tp, begin[tp])
            while remaining:
                batch = await consumer.getmany(*remaining, timeout_ms=500)
                for tp, records in batch.items():
                    for record in records:
                        if record.offset < ends[tp]:
                            reason = _reason(record.value)
                            reasons[reason] = reasons.get(reason, 0) + 1
                            read += 1
                remaining = [tp for tp in remaining if await consumer.position(tp) < ends[tp]]
        finally:
            await stop_consumer(consumer)
    by_reason = dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
    return {"total": total, "newest": read, "by_reason": by_reason}


def _reason(value: bytes | None) -> str:
    try:
        reason = orjson.loads(value or b"").get("reason")
    except (orjson.JSONDecodeError, AttributeError):
        return "unreadable"
    return reason if isinstance(reason, str) and reason else "unreadable"


async def _scrape(hosts: list[str], port: int) -> list[str]:
    """The metrics text of every worker that answers, within ``SCRAPE_SECONDS``."""
    if not port or not hosts:
        return []
    async with httpx.AsyncClient(timeout=SCRAPE_SECONDS) as http:

        async def one(host: str) -> str | None:
            shown = f"[{host}]" if ":" in host else host
            try:
                response = await http.get(f"http://{shown}:{port}/metrics")
            except httpx.HTTPError:
                return None
            return response.text if response.status_code == 200 else None

        texts = await asyncio.gather(*(one(h) for h in hosts))
    return [t for t in texts if t is not None]


def _local_metrics() -> str:
    """This process's own provider metrics (the load path's calls)."""
    from prometheus_client import generate_latest

    return generate_latest(REGISTRY).decode()
