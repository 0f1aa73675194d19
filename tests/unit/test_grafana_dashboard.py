"""The Grafana dashboard in ``deploy/grafana`` asks only for metrics memstream exposes, by
labels they have, and its panels do not overlap."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.metrics import MetricWrapperBase

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD: dict[str, Any] = json.loads(
    (ROOT / "deploy" / "grafana" / "memstream.json").read_text(encoding="utf-8")
)
PANELS: list[dict[str, Any]] = DASHBOARD["panels"]
METRIC_MODULES = sorted(
    ".".join(path.relative_to(ROOT).with_suffix("").parts)
    for path in (ROOT / "memstream").rglob("*.py")
    if "from prometheus_client import" in path.read_text(encoding="utf-8")
)
"""Every module that may define a metric: found by its import, so a new one is not missed."""
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}
SERIES = re.compile(r"\b(memstream_[a-z_]+)(\{[^}]*\})?")
GROUPING = re.compile(r"\bby \(([^)]*)\)")
MATCHER = re.compile(r"([a-z_]+)\s*(?:=|!=|=~|!~)")


def metrics() -> list[MetricWrapperBase]:
    return [
        value
        for name in METRIC_MODULES
        for value in vars(importlib.import_module(name)).values()
        if isinstance(value, MetricWrapperBase)
    ]


def exposed() -> dict[str, set[str]]:
    """Every series name memstream's metrics expose, with the labels it may carry."""
    series: dict[str, set[str]] = {}
    for metric in metrics():
        extra = {"le"} if metric._type == "histogram" else set()
        for suffix in SUFFIXES[metric._type]:
            series[metric._name + suffix] = set(metric._labelnames) | extra
    return series


EXPOSED = exposed()


def test_the_modules_define_the_metrics_the_operations_guide_lists() -> None:
    listed = set(
        re.findall(
            r"^\| `(memstream_[a-z_]+)`",
            (ROOT / "docs" / "operations.md").read_text(encoding="utf-8"),
            re.MULTILINE,
        )
    )
    # The guide names a histogram by its family, a counter by its series.
    assert listed <= set(EXPOSED) | {m._name for m in metrics()}


@pytest.mark.parametrize("panel", PANELS, ids=lambda p: str(p["title"]))
def test_each_query_names_exposed_series_by_their_labels(panel: dict[str, Any]) -> None:
    assert panel["targets"]
    for target in panel["targets"]:
        expr = target["expr"]
        found = SERIES.findall(expr)
        assert found, expr
        labels: set[str] = set()
        for name, matchers in found:
            assert name in EXPOSED, f"{panel['title']}: {name} is not a memstream metric"
            labels |= EXPOSED[name]
            unknown = set(MATCHER.findall(matchers)) - EXPOSED[name]
            assert not unknown, f"{panel['title']}: {name} has no label {unknown}"
        for group in GROUPING.findall(expr):
            grouped = {label.strip() for label in group.split(",")}
            assert grouped <= labels, f"{panel['title']}: grouped by {grouped - labels}"
        for label in re.findall(r"\{\{(\w+)\}\}", target.get("legendFormat", "")):
            assert label in labels, f"{panel['title']}: legend names {label}"


def test_panels_have_distinct_ids_and_do_not_overlap() -> None:
    assert len({p["id"] for p in PANELS}) == len(PANELS)
    cells: dict[tuple[int, int], str] = {}
    for panel in PANELS:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]


@pytest.mark.parametrize(
    "series",
    [
        "memstream_session_order_total",
        "memstream_session_order_waiting",
        "memstream_llm_malformed_total",
        "memstream_llm_answers_total",
    ],
)
def test_the_session_order_and_llm_answer_metrics_have_panels(series: str) -> None:
    assert any(series in t["expr"] for p in PANELS for t in p["targets"])
