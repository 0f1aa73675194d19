"""API keys bound to tenants: a key may only touch its own tenant's data."""

from __future__ import annotations

import hmac

from fastapi import Request

from memstream.errors import ApiError

TENANT = "memstream.tenant"
"""Scope key: the tenant of the request's API key, put there by the gate that checked it."""


def authenticate(keys: dict[str, str], authorization: str) -> str:
    """The tenant of the ``Bearer`` key in an Authorization header; 401 without a valid one."""
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise ApiError(401, "unauthorized", "send Authorization: Bearer <api key>")
    # Bytes, not str: ``compare_digest`` refuses non-ASCII strings, and a header may hold them
    # (decoded as Latin-1, so this gives back the bytes sent).
    sent = token.encode("latin-1", "replace")
    tenant = next((t for k, t in keys.items() if hmac.compare_digest(k.encode(), sent)), None)
    if tenant is None:
        raise ApiError(401, "unauthorized", "unknown API key")
    return tenant


def check_tenant(request: Request, tenant_id: str) -> None:
    """401 without a valid key, 403 for another tenant's data; open when no keys (of tenants
    or operators) are set."""
    settings = request.app.state.settings
    if settings.api_open:
        return
    keys: dict[str, str] = settings.tenant_of_key
    tenant = request.scope.get(TENANT)
    if tenant is None:  # a request that did not come through the gate
        tenant = authenticate(keys, request.headers.get("authorization", ""))
    if tenant != tenant_id:
        raise ApiError(403, "forbidden", "this API key may not access that tenant")


def check_operator(request: Request) -> None:
    """Views of every tenant: an operator key (``MEMSTREAM_API_ADMIN_KEYS``) when any keys are
    set, 403 for a tenant's key, 401 for none; open when no keys are set."""
    settings = request.app.state.settings
    tenants: dict[str, str] = settings.tenant_of_key
    operators: dict[str, str] = settings.operator_of_key
    if not tenants and not operators:
        return
    header = request.headers.get("authorization", "")
    try:
        authenticate(operators, header)
        return
    except ApiError:
        authenticate(tenants, header)  # 401 for a key of neither
    raise ApiError(
        403,
        "forbidden",
        "this view covers every tenant: it needs an operator key (MEMSTREAM_API_ADMIN_KEYS)",
    )
