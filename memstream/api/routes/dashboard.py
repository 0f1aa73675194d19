"""``/dashboard``: the operations page over ``/v1/stats``, served from the package's static files.

The page itself asks for the tenant and its API key, so serving it needs neither.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from memstream.errors import ApiError

router = APIRouter()

_STATIC = resources.files("memstream.api") / "static"
_TYPES = {".js": "text/javascript", ".css": "text/css", ".md": "text/plain"}


@router.get("/dashboard", include_in_schema=False)
async def dashboard() -> HTMLResponse:
    return HTMLResponse((_STATIC / "dashboard.html").read_text(encoding="utf-8"))


@router.get("/dashboard/static/{name:path}", include_in_schema=False)
async def dashboard_static(name: str) -> Response:
    allowed = {"dashboard.js", "dashboard.css", "vendor/chart.umd.js", "vendor/chart.js.LICENSE.md"}
    if name not in allowed:
        raise ApiError(404, "not_found", f"no dashboard file {name!r}")
    suffix = name[name.rfind(".") :]
    body = (_STATIC / name).read_bytes()
    return Response(body, media_type=_TYPES[suffix], headers={"cache-control": "no-cache"})
