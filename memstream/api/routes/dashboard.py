"""``/dashboard``: the operations page over ``/v1/stats``, served from the package's static files,
with the pipeline panel's figures (``/dashboard/pipeline``) and, in open mode, the tenants that
have data (``/dashboard/tenants``), so the page can start on one.

The page asks for the tenant and its API key (or takes ``?tenant=``), so serving it needs
neither; the pipeline's figures cover every tenant (lag, dead letters and error rates do not
split by tenant), so with keys set they need an operator key, and they are computed at most
once every ``MEMSTREAM_API_SNAPSHOT_SECONDS`` per process (``memstream.snapshot``).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from memstream.api.auth import check_operator
from memstream.api.services import ServicesDep
from memstream.errors import ApiError
from memstream.pipeline_panel import Pipeline
from memstream.snapshot import process_snapshot

router = APIRouter()

_STATIC = resources.files("memstream.api") / "static"
_TYPES = {".js": "text/javascript", ".css": "text/css", ".md": "text/plain"}
_FILES = {"dashboard.js", "dashboard.css", "vendor/chart.umd.js", "vendor/chart.js.LICENSE.md"}
_TENANTS_SHOWN = 20


@router.get("/dashboard", include_in_schema=False)
async def dashboard() -> HTMLResponse:
    return HTMLResponse((_STATIC / "dashboard.html").read_text(encoding="utf-8"))


@router.get("/dashboard/static/{name:path}", include_in_schema=False)
async def dashboard_static(name: str) -> Response:
    if name not in _FILES:
        raise ApiError(404, "not_found", f"no dashboard file {name!r}")
    suffix = name[name.rfind(".") :]
    body = (_STATIC / name).read_bytes()
    return Response(body, media_type=_TYPES[suffix], headers={"cache-control": "no-cache"})


@router.get("/dashboard/pipeline", include_in_schema=False)
async def pipeline(request: Request, services: ServicesDep) -> dict[str, Any]:
    """Lag and records per second by stage, retries waiting, dead letters by reason, provider
    and LLM error rates (see ``memstream.pipeline_panel``)."""
    check_operator(request)
    settings = services.settings
    panel = process_snapshot(
        request.app.state, "pipeline", Pipeline(settings).snapshot, settings.api_snapshot_seconds
    )
    return await panel.get()


@router.get("/dashboard/tenants", include_in_schema=False)
async def tenants(services: ServicesDep) -> dict[str, Any]:
    """In open mode, the tenants with stored messages, the most recently active first; with
    API keys set, none (a key names its own tenant)."""
    if not services.settings.api_open:
        return {"open": False, "tenants": []}
    found = await services.messages.active_tenants(_TENANTS_SHOWN)
    return {"open": True, "tenants": found}
