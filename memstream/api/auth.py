"""API keys bound to tenants: a key may only touch its own tenant's data."""

from __future__ import annotations

import hmac

from fastapi import Request

from memstream.errors import ApiError


def check_tenant(request: Request, tenant_id: str) -> None:
    """401 without a valid key, 403 for another tenant's data; open when no keys are set."""
    keys: dict[str, str] = request.app.state.settings.tenant_of_key
    if not keys:
        return
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise ApiError(401, "unauthorized", "send Authorization: Bearer <api key>")
    tenant = next((t for k, t in keys.items() if hmac.compare_digest(k, token.strip())), None)
    if tenant is None:
        raise ApiError(401, "unauthorized", "unknown API key")
    if tenant != tenant_id:
        raise ApiError(403, "forbidden", "this API key may not access that tenant")
