"""An overloaded ``memstream api`` process answers at once, degraded or 503, instead of queueing.

Each test saturates a real process: more concurrent ``/v1/context`` requests than it has
slots, or an event loop held still (the process stopped by a signal, as a CPU-bound burst holds
it) while requests arrive. Outcomes are asserted, never latencies: the client's generous
timeout is only there to turn a request that hangs into a failure.
"""

from __future__ import annotations

import asyncio
import os
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from memstream.api.services import Services
from memstream.launch import Launched, api_url
from memstream.settings import Settings
from memstream_client.contract.api import ContextRequest
from tests.support import REPO
from tests.support.messages import chat
from tests.support.processes import start_memstream, worker_metric
from tests.support.settings import free_port, isolated_settings, unique
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

HANG = 20.0  # a request not answered by then is taken for one that queued without bound
BURST = 40
# A request every 50 ms or so for the first seconds of serving: the first request's route
# building (at once) and the first full collection (some 6 s in) used to hold the loop.
YOUNG_SECONDS = 8.0
OVERLOAD = "memstream_api_overload_total"


async def accepted(port: int, count: int) -> bool:
    """Whether at least ``count`` connections to ``port`` on this host are established."""
    established = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            for line in list(lines)[1:]:
                local, state = line.split()[1], line.split()[3]
                established += state == "01" and int(local.rsplit(":", 1)[1], 16) == port
    return established >= count


@contextmanager
def api(**overrides: Any) -> Iterator[tuple[Launched, Settings]]:
    settings = isolated_settings(api_port=free_port(), log_level="WARNING", **overrides)
    with tempfile.TemporaryDirectory(prefix="memstream-api-") as logs:
        launched = start_memstream("api", settings, log_path=Path(logs) / "api.log", cwd=REPO)
        try:
            yield launched, settings
        finally:
            launched.stop(timeout=10)


def context_body(tenant: str, n: int) -> dict[str, str]:
    return {
        "tenant_id": tenant,
        "user_id": f"u{n}",
        "agent_id": "a1",
        "conversation_id": f"c{n}",
        "query": "where did I say the train to Vienna leaves from?",
    }


def memory_body(tenant: str, n: int) -> dict[str, str]:
    """A memory of ``context_body``'s user ``n`` that its query finds."""
    return {
        "tenant_id": tenant,
        "user_id": f"u{n}",
        "agent_id": "a1",
        "cube_id": "user_profile",
        "memory_type": "pref_mem",
        "content": "The user takes the night train to Vienna from Lisbon.",
    }


def assert_refusal(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert int(response.headers["retry-after"]) >= 1
    assert response.json()["error"]["code"] == "overloaded"


async def test_requests_past_the_slots_are_refused_at_once_and_health_is_never_shed(
    services: Settings,
) -> None:
    tenant = unique("overload")
    with api(api_max_in_flight=1, api_queue_seconds=0) as (_, settings):
        url = api_url(settings)
        async with httpx.AsyncClient(base_url=url, timeout=HANG) as client:
            # A first request opens the database pool, so the burst meets a process at work.
            first = await client.post("/v1/context", json=context_body(tenant, 0))
            assert first.status_code == 200, first.text
            answers = await asyncio.gather(
                *(client.post("/v1/context", json=context_body(tenant, n)) for n in range(BURST)),
                *(client.get("/healthz") for _ in range(5)),
                client.get("/metrics"),
            )
            context, probes = answers[:BURST], answers[BURST:]
            refused = [r for r in context if r.status_code == 503]
            served = [r for r in context if r.status_code == 200]
            assert len(refused) + len(served) == BURST, [r.text for r in context]
            assert refused and served
            for response in refused:
                assert_refusal(response)
            assert all(r.status_code == 200 for r in probes)
            shed = await worker_metric(
                settings.api_port, OVERLOAD, action="refused", reason="in_flight"
            )
            assert shed >= len(refused)


async def test_while_the_loop_lags_the_load_path_answers_short_term_only(
    services: Settings,
) -> None:
    tenant = unique("overload")
    with api(api_max_in_flight=64) as (launched, settings):
        url = api_url(settings)
        async with httpx.AsyncClient(base_url=url, timeout=HANG) as client:

            async def searched() -> bool:
                answer = await client.post("/v1/context", json=context_body(tenant, 0))
                return answer.status_code == 200 and answer.json()["degraded"] == []

            # Starting up may lag the loop itself: wait for a full answer before the stall.
            await eventually(searched, within=30, what="an answer with long-term memory")
            os.kill(launched.pid, signal.SIGSTOP)
            try:
                pending = [
                    asyncio.create_task(client.post("/v1/context", json=context_body(tenant, n)))
                    for n in range(1, 6)
                ]
                # The kernel accepts the connections for the stopped process.
                await eventually(
                    lambda: accepted(settings.api_port, 5),
                    within=10,
                    what="the requests reaching the stopped process's socket",
                )
            finally:
                os.kill(launched.pid, signal.SIGCONT)
            answers = await asyncio.gather(*pending)
            for response in answers:
                if response.status_code == 503:
                    assert_refusal(response)
                    continue
                assert response.status_code == 200, response.text
                assert "long_term" in response.json()["degraded"]
            degraded = await worker_metric(
                settings.api_port, OVERLOAD, action="degraded", reason="lag"
            )
            assert degraded >= sum(r.status_code == 200 for r in answers) > 0
            # Once the loop has caught up, long-term memory is searched again.
            await eventually(searched, within=30, what="long-term memory searched again")


async def test_a_young_process_answers_its_first_requests_in_full(services: Settings) -> None:
    """Right after ``/healthz`` first answers, with the rule for a late loop at its default:
    the one-time work that held a young process's loop is done before it serves."""
    tenant = unique("overload")
    # Long limits: only the rule for a late loop may shed long-term memory here.
    limits = {"short_term_timeout_seconds": 10, "long_term_timeout_seconds": 10}
    with api(**limits) as (_, settings):
        async with httpx.AsyncClient(base_url=api_url(settings), timeout=HANG) as client:
            for n in range(4):
                # Memories to find, so that answers are budgeted (their tokens counted).
                added = await client.post("/v1/memories", json=memory_body(tenant, n))
                assert added.status_code == 201, added.text
            loop = asyncio.get_running_loop()
            until = loop.time() + YOUNG_SECONDS
            answers = []
            while loop.time() < until:
                body = context_body(tenant, len(answers) % 4)
                answers.append(await client.post("/v1/context", json=body))
                await asyncio.sleep(0.05)
            shed = await worker_metric(settings.api_port, OVERLOAD, action="degraded", reason="lag")
    assert {r.status_code for r in answers} == {200}
    degraded = [(n, r.json()["degraded"]) for n, r in enumerate(answers) if r.json()["degraded"]]
    assert degraded == [] and shed == 0, f"{len(degraded)} of {len(answers)} shed: {degraded[:5]}"
    assert all(r.json()["long_term"]["items"] for r in answers)


async def test_the_load_paths_limits_count_from_the_requests_arrival(services: Settings) -> None:
    tenant = unique("overload")
    # Without the cache the turns come from the record, whose reads honour a time limit from
    # their first await (a Redis command begun past its deadline still completes).
    opened = Services.open(isolated_settings(redis_url=""))
    try:
        said = [
            ("user", "when does the night train to Vienna leave?"),
            ("assistant", "it leaves from Lisbon at nine"),
        ]
        await opened.messages.insert_many(chat(tenant, "c0", said))
        request = ContextRequest.model_validate(context_body(tenant, 0))
        loop = asyncio.get_running_loop()

        async def full() -> bool:
            answer = await opened.loadpath.context(request, arrived=loop.time())
            return answer.degraded == [] and [m.content for m in answer.messages] == [
                c for _, c in said
            ]

        await eventually(full, within=30, what="a full answer")
        # Arrived long ago (waiting for a slot, say): no time is left to read the turns.
        late = await opened.loadpath.context(request, arrived=loop.time() - 5)
        assert "short_term" in late.degraded and late.messages == []
    finally:
        await opened.close()
