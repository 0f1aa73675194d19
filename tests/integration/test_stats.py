"""``/v1/stats`` on the real MariaDB with known data: exact counts, buckets and isolation."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from memstream.settings import Settings
from memstream.store.searchstats import SearchStats
from tests.support.api import client_for
from tests.support.settings import isolated_settings, unique
from tests.support.stats import seed

pytestmark = pytest.mark.integration


def keyed(tenant: str) -> tuple[Settings, dict[str, str]]:
    other = unique("other")
    settings = isolated_settings(api_keys=f"key-{tenant}:{tenant},key-{other}:{other}")
    return settings, {"authorization": f"Bearer key-{tenant}"}


async def test_overview_counts_exactly(services, engine, tenant):
    await seed(engine, tenant)
    settings, headers = keyed(tenant)
    async with client_for(settings, headers) as api:
        response = await api.get("/v1/stats/overview", params={"tenant_id": tenant})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["messages"] == 7
    assert body["conversations"] == 3
    assert body["memories"] == {
        "total": 8,
        "by_type": {"text_mem": 3, "pref_mem": 3, "skill_mem": 1, "tool_mem": 1},
        "by_cube": {"agent_a1": 4, "agent_a2": 2, "user_profile": 2},
    }
    assert body["top_agents"] == [
        {"agent_id": "a1", "memories": 5},
        {"agent_id": "a2", "memories": 2},
    ]


async def test_trends_by_hour_and_day(services, engine, tenant):
    await seed(engine, tenant)
    settings, headers = keyed(tenant)
    async with client_for(settings, headers) as api:
        hourly = await api.get(
            "/v1/stats/trends",
            params={
                "tenant_id": tenant,
                "from": "2026-03-01T10:00:00Z",
                "to": "2026-03-01T13:00:00Z",
                "bucket": "hour",
            },
        )
        daily = await api.get(
            "/v1/stats/trends",
            params={
                "tenant_id": tenant,
                "from": "2026-03-01T00:00:00Z",
                "to": "2026-03-03T00:00:00Z",
                "bucket": "day",
            },
        )
    assert hourly.status_code == 200, hourly.text
    h = hourly.json()
    assert h["buckets"] == [
        "2026-03-01T10:00:00Z",
        "2026-03-01T11:00:00Z",
        "2026-03-01T12:00:00Z",
    ]
    assert h["messages"] == [4, 0, 3]
    # Created, deleted or not: the expired tool_mem at 12:02 counts.
    assert h["memories"] == {
        "text_mem": [2, 0, 0],
        "pref_mem": [1, 0, 1],
        "skill_mem": [0, 1, 0],
        "tool_mem": [0, 0, 2],
    }
    d = daily.json()
    assert d["buckets"] == ["2026-03-01T00:00:00Z", "2026-03-02T00:00:00Z"]
    assert d["messages"] == [7, 0]
    assert d["memories"] == {
        "text_mem": [2, 1],
        "pref_mem": [2, 1],
        "skill_mem": [1, 0],
        "tool_mem": [2, 0],
    }


async def test_cube_drill_down(services, engine, tenant):
    await seed(engine, tenant)
    settings, headers = keyed(tenant)
    async with client_for(settings, headers) as api:
        response = await api.get("/v1/stats/cubes/agent_a1", params={"tenant_id": tenant})
        empty = await api.get("/v1/stats/cubes/agent_nobody", params={"tenant_id": tenant})
        bad = await api.get("/v1/stats/cubes/nonsense", params={"tenant_id": tenant})
    body = response.json()
    assert body["total"] == 4
    assert body["by_type"] == {"text_mem": 2, "pref_mem": 0, "skill_mem": 1, "tool_mem": 1}
    assert body["importance"] == [0, 1, 0, 0, 1, 0, 2, 0, 0, 0]
    assert [m["created_at"] for m in body["newest"]] == [
        "2026-03-01T12:01:00Z",
        "2026-03-01T11:01:00Z",
        "2026-03-01T10:06:00Z",
        "2026-03-01T10:05:00Z",
    ]
    assert empty.json()["total"] == 0 and empty.json()["newest"] == []
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_cube"


async def test_search_trends_from_the_recorder(services, engine, tenant):
    now = [datetime(2026, 3, 1, 10, 15).timestamp()]
    stats = SearchStats(engine, clock=lambda: now[0])
    stats.record(tenant, 0.004, 3)  # le_5ms
    stats.record(tenant, 0.004, 0)
    stats.record(tenant, 0.2, 2)  # le_250ms
    now[0] += 60  # the next minute, same hour
    stats.record(tenant, 0.0009, 1)  # le_1ms
    await stats.flush()
    now[0] = datetime(2026, 3, 1, 12, 59).timestamp()
    stats.record(tenant, 3.0, 5)  # slower than 1 s
    await stats.flush()
    # A second process (or flush) adds to the same minute row.
    now[0] = datetime(2026, 3, 1, 10, 15, 30).timestamp()
    stats.record(tenant, 0.004, 1)
    await stats.close()

    settings, headers = keyed(tenant)
    params: dict[str, Any] = {
        "tenant_id": tenant,
        "from": "2026-03-01T10:00:00Z",
        "to": "2026-03-01T13:00:00Z",
        "bucket": "hour",
    }
    async with client_for(settings, headers) as api:
        body = (await api.get("/v1/stats/search-trends", params=params)).json()
    assert body["searches"] == [5, 0, 1]
    assert body["hits"] == [7, 0, 5]
    assert body["p50_ms"] == [5.0, None, 1000.0]
    assert body["p99_ms"] == [250.0, None, 1000.0]
    assert body["total"] == {"searches": 6, "hits": 12, "p50_ms": 5.0, "p99_ms": 1000.0}


async def test_context_records_long_term_searches(services, engine, tenant):
    settings = isolated_settings()
    body = {
        "tenant_id": tenant,
        "user_id": "u1",
        "agent_id": "a1",
        "conversation_id": "c1",
        "query": "what do I like?",
    }
    async with client_for(settings) as api:
        for _ in range(3):
            assert (await api.post("/v1/context", json=body)).status_code == 200
        # Closing the app flushes what is pending.
    async with client_for(settings) as api:
        got = (await api.get("/v1/stats/search-trends", params={"tenant_id": tenant})).json()
    assert got["total"]["searches"] == 3
    assert got["total"]["hits"] == 0


async def test_tenant_isolation_and_bad_params(services, engine, tenant):
    settings, headers = keyed(tenant)
    other = next(t for t in settings.tenant_of_key.values() if t != tenant)
    paths = [
        "/v1/stats/overview",
        "/v1/stats/trends",
        "/v1/stats/search-trends",
        "/v1/stats/cubes/user_profile",
    ]
    async with client_for(settings, headers) as api:
        for path in paths:
            forbidden = await api.get(path, params={"tenant_id": other})
            assert forbidden.status_code == 403, path
            assert forbidden.json()["error"]["code"] == "forbidden"
        async with client_for(settings) as bare:
            assert (await bare.get(paths[0], params={"tenant_id": tenant})).status_code == 401
        bad = [
            {"bucket": "week"},
            {"from": "yesterday"},
            {"from": "2026-03-02T00:00:00Z", "to": "2026-03-01T00:00:00Z"},
            {"from": "2020-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z", "bucket": "hour"},
            # At the calendar's edges: no 500 from date arithmetic.
            {"to": "0001-01-01T00:00:00Z", "bucket": "day"},
            {"from": "9999-12-31T23:59:59-01:00"},
            {"from": "0001-01-01T00:00:00+01:00", "to": "0001-01-02T00:00:00Z"},
        ]
        for params in bad:
            for path in paths[1:3]:
                response = await api.get(path, params={"tenant_id": tenant, **params})
                assert response.status_code == 422, (path, params, response.text)
                assert set(response.json()["error"]) == {"code", "message"}
