"""``/v1/stats``: operational figures of one tenant for the dashboard (``/dashboard``), counted
in the database by ``memstream.store.stats`` and answered here zero-filled, in UTC."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request

from memstream.api.auth import check_tenant
from memstream.api.services import ServicesDep
from memstream.errors import ApiError
from memstream.memory import MEMORY_TYPES, USER_PROFILE
from memstream.store import stats
from memstream.store.messages import utc_naive
from memstream.store.searchstats import LATENCY_BUCKETS, latency_quantile
from memstream.store.stats import Bucket
from memstream_client.contract.api import Id

router = APIRouter()

_STEP = {"hour": timedelta(hours=1), "day": timedelta(days=1)}
_DEFAULT_RANGE = {"hour": timedelta(hours=24), "day": timedelta(days=30)}
MAX_BUCKETS = 1000
TOP_AGENTS = 10
NEWEST = 20
_CUBE = re.compile(r"^(user_profile|agent_.{1,128})$")


def _parse_bucket(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value.replace(minute=0, second=0, microsecond=0)
    return datetime.strptime(str(value)[:19], "%Y-%m-%d %H:%M:%S")


def _iso(moment: datetime) -> str:
    return moment.replace(tzinfo=UTC).isoformat().replace("+00:00", "Z")


def _floor(moment: datetime, bucket: Bucket) -> datetime:
    moment = moment.replace(minute=0, second=0, microsecond=0)
    return moment.replace(hour=0) if bucket == "day" else moment


class _Range:
    """A validated ``[from, to)`` range and its buckets (naive UTC)."""

    def __init__(self, start: datetime | None, end: datetime | None, bucket: Bucket) -> None:
        now = datetime.now(UTC).replace(tzinfo=None)
        try:
            self.end = utc_naive(end) if end else now
            self.start = utc_naive(start) if start else self.end - _DEFAULT_RANGE[bucket]
        except OverflowError:
            # Times at the calendar's edges: converting to UTC or stepping back leaves it.
            raise ApiError(
                422, "invalid_range", "from and to must be times within years 1-9999"
            ) from None
        self.bucket = bucket
        if self.start >= self.end:
            raise ApiError(422, "invalid_range", "from must be before to")
        first = _floor(self.start, bucket)
        count = (self.end - first) // _STEP[bucket] + 1
        if count > MAX_BUCKETS:
            raise ApiError(
                422,
                "invalid_range",
                f"the range spans {count} {bucket} buckets; at most {MAX_BUCKETS}",
            )
        self.buckets: list[datetime] = []
        at = first
        while at < self.end:
            self.buckets.append(at)
            if self.end - at <= _STEP[bucket]:
                break  # stepping past the last bucket could leave the calendar
            at += _STEP[bucket]

    def index(self) -> dict[datetime, int]:
        return {b: i for i, b in enumerate(self.buckets)}

    def head(self) -> dict[str, Any]:
        return {
            "from": _iso(self.start),
            "to": _iso(self.end),
            "bucket": self.bucket,
            "buckets": [_iso(b) for b in self.buckets],
        }


From = Annotated[datetime | None, Query(alias="from", description="RFC 3339; inclusive")]
To = Annotated[datetime | None, Query(alias="to", description="RFC 3339; exclusive")]
BucketQuery = Annotated[Bucket, Query()]


@router.get("/v1/stats/overview", tags=["stats"])
async def overview(
    tenant_id: Annotated[Id, Query()], request: Request, services: ServicesDep
) -> dict[str, Any]:
    """Messages, conversations, live memories by type, cube and provider, top agents."""
    check_tenant(request, tenant_id)
    messages, conversations, groups = await stats.overview(services.reads.current(), tenant_id)
    by_type = dict.fromkeys(MEMORY_TYPES, 0)
    by_cube: dict[str, int] = {}
    by_agent: dict[str, int] = {}
    by_provider: dict[str, int] = {}
    for provider, cube_id, memory_type, agent_id, count in groups:
        by_provider[provider] = by_provider.get(provider, 0) + count
        by_type[memory_type] = by_type.get(memory_type, 0) + count
        by_cube[cube_id] = by_cube.get(cube_id, 0) + count
        if agent_id is not None:
            by_agent[agent_id] = by_agent.get(agent_id, 0) + count
    top = sorted(by_agent.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_AGENTS]
    return {
        "tenant_id": tenant_id,
        "messages": messages,
        "conversations": conversations,
        "memories": {
            "total": sum(by_type.values()),
            "by_type": by_type,
            "by_cube": dict(sorted(by_cube.items(), key=lambda kv: (-kv[1], kv[0]))),
        },
        "top_agents": [{"agent_id": a, "memories": n} for a, n in top],
        # Live memories per provider: the built-in store, and the ledger's MemOS and Mem0.
        "providers": dict(sorted(by_provider.items())),
    }


@router.get("/v1/stats/trends", tags=["stats"])
async def trends(
    tenant_id: Annotated[Id, Query()],
    request: Request,
    services: ServicesDep,
    start: From = None,
    end: To = None,
    bucket: BucketQuery = "hour",
) -> dict[str, Any]:
    """Memories created per type and messages stored, per bucket of ``[from, to)``."""
    check_tenant(request, tenant_id)
    span = _Range(start, end, bucket)
    engine = services.reads.current()
    index = span.index()
    by_type = {m: [0] * len(span.buckets) for m in MEMORY_TYPES}
    per_bucket = [0] * len(span.buckets)
    created, stored = await stats.created(engine, tenant_id, span.start, span.end, bucket)
    for at, memory_type, count in created:
        i = index.get(_parse_bucket(at))
        if i is not None:
            by_type.setdefault(memory_type, [0] * len(span.buckets))[i] += count
    for at, count in stored:
        i = index.get(_parse_bucket(at))
        if i is not None:
            per_bucket[i] += count
    return {"tenant_id": tenant_id, **span.head(), "memories": by_type, "messages": per_bucket}


@router.get("/v1/stats/cubes/{cube_id}", tags=["stats"])
async def cube(
    cube_id: Annotated[str, Path(min_length=1, max_length=140)],
    tenant_id: Annotated[Id, Query()],
    request: Request,
    services: ServicesDep,
) -> dict[str, Any]:
    """One cube's live memories: counts by type, importance histogram (1-10), newest 20."""
    check_tenant(request, tenant_id)
    if not _CUBE.match(cube_id):
        raise ApiError(422, "invalid_cube", f"cube_id must be {USER_PROFILE!r} or 'agent_<id>'")
    engine = services.reads.current()
    groups, newest = await stats.cube(engine, tenant_id, cube_id, NEWEST)
    by_type = dict.fromkeys(MEMORY_TYPES, 0)
    importance = [0] * 10
    for memory_type, level, count in groups:
        by_type[memory_type] = by_type.get(memory_type, 0) + count
        importance[min(10, max(1, int(level))) - 1] += count
    return {
        "tenant_id": tenant_id,
        "cube_id": cube_id,
        "total": sum(by_type.values()),
        "by_type": by_type,
        "importance": importance,
        "newest": [
            {
                "id": r.id,
                "provider": r.provider,
                "user_id": r.user_id,
                "agent_id": r.agent_id,
                "memory_type": r.memory_type,
                "content": r.content,
                "importance": int(r.importance),
                "created_at": _iso(r.created_at),
            }
            for r in newest
        ],
    }


@router.get("/v1/stats/search-trends", tags=["stats"])
async def search_trends(
    tenant_id: Annotated[Id, Query()],
    request: Request,
    services: ServicesDep,
    start: From = None,
    end: To = None,
    bucket: BucketQuery = "hour",
) -> dict[str, Any]:
    """Load-path long-term searches per bucket: count, hits, latency p50/p99 (ms, the upper
    bound of the histogram bucket). Recorded per minute and flushed every few seconds."""
    check_tenant(request, tenant_id)
    span = _Range(start, end, bucket)
    engine = services.reads.current()
    index = span.index()
    n = len(span.buckets)
    searches, hits = [0] * n, [0] * n
    histograms = [[0] * len(LATENCY_BUCKETS) for _ in range(n)]
    for row in await stats.searches(engine, tenant_id, span.start, span.end, bucket):
        i = index.get(_parse_bucket(row[0]))
        if i is None:
            continue
        searches[i] += int(row[1])
        hits[i] += int(row[2])
        histograms[i] = [a + int(b) for a, b in zip(histograms[i], row[3:], strict=True)]
    total = [sum(col) for col in zip(*histograms, strict=True)] if n else []

    def ms(q: float, counts: list[int]) -> float | None:
        seconds = latency_quantile(counts, q)
        return None if seconds is None else round(seconds * 1000, 3)

    return {
        "tenant_id": tenant_id,
        **span.head(),
        "searches": searches,
        "hits": hits,
        "p50_ms": [ms(0.5, h) for h in histograms],
        "p99_ms": [ms(0.99, h) for h in histograms],
        "total": {
            "searches": sum(searches),
            "hits": sum(hits),
            "p50_ms": ms(0.5, total),
            "p99_ms": ms(0.99, total),
        },
    }
