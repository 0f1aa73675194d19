"""The query API in this process, on a live app (its lifespan run), for tests that call it."""

from __future__ import annotations

import httpx

from memstream.api.app import create_app
from memstream.settings import Settings


class client_for:
    """An HTTP client on a live app (lifespan run), in process."""

    def __init__(self, settings: Settings, headers: dict[str, str] | None = None) -> None:
        self.app = create_app(settings)
        self.headers = headers or {}

    async def __aenter__(self) -> httpx.AsyncClient:
        self._lifespan = self.app.router.lifespan_context(self.app)
        await self._lifespan.__aenter__()
        self.client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app),
            base_url="http://localhost",
            headers=self.headers,
        )
        return self.client

    async def __aexit__(self, *exc: object) -> None:
        await self.client.aclose()
        await self._lifespan.__aexit__(None, None, None)
