"""``/dashboard`` and ``/docs`` in a real headless Chromium (Debian's ``chromium``, driven by
Playwright's Python package without any browser download) against ``memstream api`` on known
data."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson
import pytest

from memstream.broker.topics import publish
from memstream.settings import Settings
from memstream.store.messages import MessageStore
from tests.support import REPO
from tests.support.kafka import message
from tests.support.processes import api_process, worker_metric
from tests.support.settings import free_port, isolated_settings, unique
from tests.support.stats import message as stored_message
from tests.support.stats import seed

pytestmark = pytest.mark.integration

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = REPO / "artifacts"
# Functions, not expressions: Playwright evaluates an expression with eval, which the
# dashboard's Content-Security-Policy forbids.
LOADED = "() => window.dashboard.ready && window.dashboard.loads >= %d"


@pytest.fixture(scope="module")
def served_settings(services) -> Settings:  # type: ignore[no-untyped-def]
    tenant, other = unique("dash"), unique("other")
    return isolated_settings(
        api_port=free_port(),
        log_level="WARNING",
        api_keys=f"k-{tenant}:{tenant},k-{other}:{other}",
        api_admin_keys=f"op-{tenant}:operator",
    )


@pytest.fixture(scope="module")
def served(served_settings: Settings) -> Iterator[tuple[str, str, str]]:
    """``memstream api`` in its own process with keys for a fresh tenant and another."""
    tenant = next(iter(served_settings.tenant_of_key.values()))
    with api_process(served_settings) as base:
        yield base, tenant, f"k-{tenant}"


@pytest.fixture(scope="module")
def open_settings(services) -> Settings:  # type: ignore[no-untyped-def]
    return isolated_settings(api_port=free_port(), log_level="WARNING")


@pytest.fixture(scope="module")
def served_open(open_settings: Settings) -> Iterator[str]:
    """``memstream api`` in open mode (no API keys, loopback), as ``memstream dev`` runs it."""
    with api_process(open_settings) as base:
        yield base


@asynccontextmanager
async def browser_page(errors: list[str]) -> AsyncIterator[Any]:
    """A page of a fresh headless Chromium profile that records every error it meets."""
    playwright = pytest.importorskip("playwright.async_api")
    with tempfile.TemporaryDirectory() as profile:
        async with playwright.async_playwright() as pw:
            browser = await pw.chromium.launch_persistent_context(
                profile,
                executable_path=CHROMIUM,
                args=FLAGS,
                viewport={"width": 1400, "height": 1700},
            )
            try:
                page = await browser.new_page()
                page.on("console", lambda m: m.type == "error" and errors.append(m.text))
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.on(
                    "response",
                    lambda r: r.status >= 400 and errors.append(f"{r.status} {r.url}"),
                )
                yield page
            finally:
                await browser.close()


def besides_the_pipeline_refusal(errors: list[str]) -> list[str]:
    """The errors a page met other than the 403 a tenant's key gets from the pipeline view (the
    response and Chromium's log of it), which the page shows as a note."""
    refusals = [e for e in errors if e.endswith("/dashboard/pipeline") and e.startswith("403 ")]
    logged = [e for e in errors if "status of 403" in e]
    return [e for e in errors if e not in refusals and e not in logged[: len(refusals)]]


async def charts_of(page: Any) -> Any:
    """Labels and datasets of every Chart.js instance the page drew, by name."""
    return await page.evaluate(
        """() => Object.fromEntries(Object.entries(window.dashboard.charts).map(([k, c]) => [
            k, {labels: c.data.labels, datasets: c.data.datasets.map(d => ({
                label: d.label ?? null, data: d.data}))}]))"""
    )


async def test_dashboard_renders_the_api_data(served, engine):  # type: ignore[no-untyped-def]
    playwright = pytest.importorskip("playwright.async_api")
    base, tenant, key = served
    await seed(engine, tenant)
    auth = {"authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base, headers=auth) as http:
        overview = (await http.get("/v1/stats/overview", params={"tenant_id": tenant})).json()
        window = {"from": "2026-03-01T08:00:00Z", "to": "2026-03-01T14:00:00Z", "bucket": "hour"}
        trends = (await http.get("/v1/stats/trends", params={"tenant_id": tenant, **window})).json()
        daily = {"from": "2026-02-28T00:00:00Z", "to": "2026-03-03T00:00:00Z", "bucket": "day"}
        trends_daily = (
            await http.get("/v1/stats/trends", params={"tenant_id": tenant, **daily})
        ).json()
        cube = (await http.get("/v1/stats/cubes/agent_a1", params={"tenant_id": tenant})).json()
        page_html = await http.get("/dashboard")
    assert page_html.status_code == 200 and "chart.umd.js" in page_html.text

    errors: list[str] = []
    with tempfile.TemporaryDirectory() as profile:
        async with playwright.async_playwright() as pw:
            browser = await pw.chromium.launch_persistent_context(
                profile,
                executable_path=CHROMIUM,
                args=FLAGS,
                viewport={"width": 1400, "height": 1700},
            )
            try:
                page = await browser.new_page()
                page.on("console", lambda m: m.type == "error" and errors.append(m.text))
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.on(
                    "response",
                    lambda r: r.status >= 400 and errors.append(f"{r.status} {r.url}"),
                )
                await page.goto(f"{base}/dashboard")
                await page.fill("#tenant", tenant)
                await page.fill("#apikey", key)
                await page.click("#connect")
                await page.wait_for_function(
                    "() => window.dashboard.ready && window.dashboard.loads >= 1"
                )
                assert await page.evaluate("sessionStorage.getItem('memstream.tenant')") == tenant
                assert await page.text_content("#error") == ""
                assert await page.text_content("#messages") == str(overview["messages"])
                assert await page.text_content("#memories") == str(overview["memories"]["total"])

                charts = await charts_of(page)
                by_type = overview["memories"]["by_type"]
                assert charts["types"]["labels"] == list(by_type)
                assert charts["types"]["datasets"][0]["data"] == list(by_type.values())
                assert charts["cube"]["datasets"][0]["data"] == cube["importance"]
                agents = await page.locator("#agents tbody tr td:first-child").all_text_contents()
                assert agents == [a["agent_id"] for a in overview["top_agents"]]
                newest = await page.locator("#newest tbody tr").count()
                assert newest == len(cube["newest"])

                # A memory of the list opens its history.
                first = cube["newest"][0]
                await page.click(f"#newest tbody tr[data-key='{first['id']}']")
                await page.wait_for_function(
                    "(id) => window.dashboard.ready"
                    " && (window.dashboard.data.history || {}).memory_id === id",
                    arg=first["id"],
                )
                assert await page.is_visible("#history-panel")
                cells = await page.locator("#history tbody tr td").all_text_contents()
                assert cells[1] == "live" and cells[4] == first["content"]

                # The range picker: hourly around the seeded hours, then daily.
                await page.fill("#from", "2026-03-01T08:00")
                await page.fill("#to", "2026-03-01T14:00")
                await page.select_option("#bucket", "hour")
                await page.click("#apply")
                await page.wait_for_function(
                    "() => window.dashboard.ready && window.dashboard.loads >= 2"
                )
                charts = await charts_of(page)
                shown = {d["label"]: d["data"] for d in charts["trends"]["datasets"]}
                assert len(charts["trends"]["labels"]) == len(trends["buckets"]) == 6
                assert shown["messages"] == trends["messages"] == [0, 0, 4, 0, 3, 0]
                for kind, series in trends["memories"].items():
                    assert shown[f"memories: {kind}"] == series
                ARTIFACTS.mkdir(exist_ok=True)
                await page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)

                await page.fill("#from", "2026-02-28T00:00")
                await page.fill("#to", "2026-03-03T00:00")
                await page.select_option("#bucket", "day")
                await page.click("#apply")
                await page.wait_for_function(
                    "() => window.dashboard.ready && window.dashboard.loads >= 3"
                )
                labels = await page.evaluate("window.dashboard.charts.trends.data.labels")
                assert labels == ["2026-02-28", "2026-03-01", "2026-03-02"]
                messages = await page.evaluate(
                    "window.dashboard.charts.trends.data.datasets.at(-1).data"
                )
                assert messages == trends_daily["messages"] == [0, 7, 0]

                # Drill down into another cube by clicking it.
                await page.click("#cubes tbody tr[data-key='agent_a2']")
                await page.wait_for_function(
                    "() => (window.dashboard.data.cube || {}).cube_id === 'agent_a2'"
                )
                assert await page.locator("#newest tbody tr").count() == 2
            finally:
                await browser.close()
    assert besides_the_pipeline_refusal(errors) == []


async def test_the_pipeline_view_needs_an_operator_key(served_settings, served):  # type: ignore[no-untyped-def]
    base, tenant, key = served
    admin = next(iter(served_settings.operator_of_key))
    async with httpx.AsyncClient(base_url=base) as http:
        assert (await http.get("/dashboard/pipeline")).status_code == 401
        wrong = {"authorization": "Bearer nobody"}
        assert (await http.get("/dashboard/pipeline", headers=wrong)).status_code == 401
        refused = await http.get("/dashboard/pipeline", headers={"authorization": f"Bearer {key}"})
        assert refused.status_code == 403
        assert "operator key" in refused.json()["error"]["message"]
        panel = await http.get("/dashboard/pipeline", headers={"authorization": f"Bearer {admin}"})
        assert panel.status_code == 200 and "stages" in panel.json()
        # An operator's key is not a tenant's: it reads no tenant's data.
        stats = {"tenant_id": tenant}
        overview = await http.get(
            "/v1/stats/overview", params=stats, headers={"authorization": f"Bearer {admin}"}
        )
        assert overview.status_code == 401

    errors: list[str] = []
    async with browser_page(errors) as page:
        # A link to the tenant fills it in; with API keys set, the key is still asked for.
        await page.goto(f"{base}/dashboard?tenant={tenant}")
        await page.wait_for_selector("#hint:not([hidden])")
        assert await page.input_value("#tenant") == tenant
        await page.fill("#apikey", key)
        await page.click("#connect")
        await page.wait_for_function(
            "() => window.dashboard.ready && window.dashboard.loads >= 1"
            " && window.dashboard.pipelineLoads >= 1"
        )
        assert f"tenant={tenant}" in page.url
        assert "operator key" in (await page.text_content("#pipeline-error") or "")
        assert await page.is_hidden("#pipeline .pipeline")
        assert await page.text_content("#error") == ""
    assert errors and besides_the_pipeline_refusal(errors) == []


async def test_the_pipeline_panel_shows_lag_and_dead_letters_by_reason(open_settings, served_open):  # type: ignore[no-untyped-def]
    base, tenant = served_open, unique("piped")
    await publish(open_settings, "message-written", [message(tenant, "p1", n) for n in range(3)])
    letters: list[bytes | dict[str, Any]] = [
        {"reason": "schema_violation", "detail": "x", "stage": "history"},
        {"reason": "schema_violation", "detail": "y", "stage": "history"},
        {"reason": "invalid_json", "detail": "z", "stage": "history"},
        b"not a dead letter",
    ]
    await publish(open_settings, "dead-letter", letters)
    async with httpx.AsyncClient(base_url=base) as http:
        panel = (await http.get("/dashboard/pipeline")).json()
    lag = {s["stage"]: s["lag"] for s in panel["stages"]}
    assert lag["history"] == 3 and lag["session"] == 0
    assert panel["dead_letters"] == {
        "total": 4,
        "newest": 4,
        "by_reason": {"schema_violation": 2, "invalid_json": 1, "unreadable": 1},
    }
    assert panel["retries_pending"] == 0
    assert panel["workers"] == {"members": 0, "groups": []}

    errors: list[str] = []
    async with browser_page(errors) as page:
        await page.goto(f"{base}/dashboard")
        await page.wait_for_function(
            "() => window.dashboard.ready && window.dashboard.pipelineLoads >= 1"
        )
        rows = await page.locator("#stages tbody tr").all_inner_texts()
        assert rows[0].split("\t")[:3] == ["history", "message-written", "3"]
        assert len(rows) == len(panel["stages"])
        assert await page.text_content("#dead-total") == "4"
        reasons = await page.locator("#dead-reasons tbody tr").all_inner_texts()
        assert [r.split("\t") for r in reasons] == [
            ["schema_violation", "2"],
            ["invalid_json", "1"],
            ["unreadable", "1"],
        ]
        assert await page.text_content("#retries-pending") == "0"
        assert await page.is_hidden("#pipeline-error")
        ARTIFACTS.mkdir(exist_ok=True)
        await page.screenshot(path=str(ARTIFACTS / "dashboard-pipeline.png"), full_page=True)
    assert errors == []


async def test_concurrent_calls_share_one_snapshot_of_the_cluster(services):  # type: ignore[no-untyped-def]
    settings = isolated_settings(
        api_port=free_port(),
        log_level="WARNING",
        api_keys=f"k-{unique('t')}:t",
        api_admin_keys="op-snap:operator",
        api_snapshot_seconds=60,
    )
    auth = {"authorization": "Bearer op-snap"}
    with api_process(settings) as base:
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            calls = [http.get("/readyz") for _ in range(8)]
            calls += [http.get("/dashboard/pipeline", headers=auth) for _ in range(8)]
            answers = await asyncio.gather(*calls)
            # Within the window, later calls are answered from the snapshot kept.
            again = await http.get("/dashboard/pipeline", headers=auth)
        computed = {
            view: await worker_metric(settings.api_port, "memstream_api_snapshots_total", view=view)
            for view in ("readiness", "pipeline")
        }
    assert [a.status_code for a in answers[8:]] == [200] * 8
    assert len({a.content for a in answers[8:]} | {again.content}) == 1
    assert len({orjson.dumps(a.json()["workers"]) for a in answers[:8]}) == 1
    assert computed == {"readiness": 1.0, "pipeline": 1.0}


async def test_in_open_mode_the_dashboard_starts_on_the_latest_tenant(served_open, engine):  # type: ignore[no-untyped-def]
    tenant = unique("recent")
    now = datetime.now(UTC).replace(tzinfo=None)
    await MessageStore(engine).insert_many([stored_message(tenant, "c1", 0, now)])
    async with httpx.AsyncClient(base_url=served_open) as http:
        found = (await http.get("/dashboard/tenants")).json()
    assert found["open"] is True and tenant in found["tenants"]

    errors: list[str] = []
    async with browser_page(errors) as page:
        await page.goto(f"{served_open}/dashboard")
        await page.wait_for_function("() => window.dashboard.ready && window.dashboard.loads >= 1")
        first = await page.input_value("#tenant")
        assert first in found["tenants"]
        assert f"tenant={first}" in page.url
        options = await page.eval_on_selector_all("#tenants option", "os => os.map(o => o.value)")
        assert tenant in options
        assert await page.text_content("#error") == ""
    assert errors == []


async def test_the_api_docs_work_without_the_internet(served_open):  # type: ignore[no-untyped-def]
    left: list[tuple[str, str]] = []

    async def local_only(route: Any) -> None:
        if route.request.url.startswith(served_open):
            await route.continue_()
        else:
            left.append((route.request.resource_type, route.request.url))
            # As offline, without a console error for a picture that stays blank.
            if route.request.resource_type == "image":
                await route.fulfill(status=204, body=b"")
            else:
                await route.abort()

    errors: list[str] = []
    async with browser_page(errors) as page:
        await page.route("**/*", local_only)
        await page.goto(f"{served_open}/docs")
        title = await page.wait_for_selector(".swagger-ui .info .title", timeout=15000)
        assert "memstream query API" in (await title.text_content() or "")
        await page.wait_for_selector("#operations-default-context_v1_context_post, .opblock")
        await page.goto(f"{served_open}/redoc")
        heading = await page.wait_for_selector("h1", timeout=15000)
        assert "memstream query API" in (await heading.text_content() or "")
    # ReDoc's sidebar shows its maker's logo from their site: the one thing that stays away.
    assert [url for kind, url in left if kind != "image"] == []
    assert errors == []
