"""The one way memstream builds a client for a remote HTTP service (an LLM, an embeddings
endpoint, a long-term provider): JSON accepted, a bearer key when given, a timeout, a bounded
pool of connections."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from memstream.errors import ConfigurationError


def endpoint(base_url: str, path: str, service: str) -> str:
    """``base_url`` ending in ``path``: the usual ``.../v1`` base, or the full endpoint URL
    as it is; ``ConfigurationError`` for anything but http(s)."""
    base = base_url.strip().rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise ConfigurationError(f"the {service} base URL must be http(s)://..., got {base_url!r}")
    return base if base.endswith(path) else f"{base}{path}"


def pooled_client(
    *,
    timeout: httpx.Timeout,
    max_connections: int,
    keepalive: int,
    api_key: str = "",
    headers: Mapping[str, str] | None = None,
    base_url: str = "",
    transport: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncClient:
    """A client of at most ``max_connections`` connections, ``keepalive`` of them kept idle."""
    sent = {"Accept": "application/json", **(headers or {})}
    if api_key:
        sent["Authorization"] = f"Bearer {api_key}"
    return httpx.AsyncClient(
        base_url=base_url,
        headers=sent,
        timeout=timeout,
        limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=keepalive),
        transport=transport,
    )
