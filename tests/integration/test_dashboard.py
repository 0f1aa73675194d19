"""``/dashboard`` in a real headless Chromium (Debian's ``chromium``, driven by Playwright's
Python package without any browser download) against ``memstream api`` on known data."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from memstream.launch import free_port
from tests.support import REPO
from tests.support.processes import api_process
from tests.support.settings import isolated_settings, unique
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
LOADED = "window.dashboard.ready && window.dashboard.loads >= %d"


@pytest.fixture(scope="module")
def served(services) -> Iterator[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    """``memstream api`` in its own process with keys for a fresh tenant and another."""
    tenant, other = unique("dash"), unique("other")
    config = isolated_settings(
        api_port=free_port(), log_level="WARNING", api_keys=f"k-{tenant}:{tenant},k-{other}:{other}"
    )
    with api_process(config) as base:
        yield base, tenant, f"k-{tenant}"


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
                    "window.dashboard.ready && window.dashboard.loads >= 1"
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

                # The range picker: hourly around the seeded hours, then daily.
                await page.fill("#from", "2026-03-01T08:00")
                await page.fill("#to", "2026-03-01T14:00")
                await page.select_option("#bucket", "hour")
                await page.click("#apply")
                await page.wait_for_function(
                    "window.dashboard.ready && window.dashboard.loads >= 2"
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
                    "window.dashboard.ready && window.dashboard.loads >= 3"
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
                    "(window.dashboard.data.cube || {}).cube_id === 'agent_a2'"
                )
                assert await page.locator("#newest tbody tr").count() == 2
            finally:
                await browser.close()
    assert errors == []
