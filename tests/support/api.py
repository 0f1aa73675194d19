"""The query API in this process, on a live app (its lifespan run), for tests that call it; an
empty answer for a load path that stands in for the real one."""

from __future__ import annotations

import httpx

from memstream.api.app import create_app
from memstream.settings import Settings
from memstream_client.contract.api import ContextResponse, LongTerm, TokenCounts


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


def empty_context(conversation_id: str) -> ContextResponse:
    """An answer of ``POST /v1/context`` with nothing in it: what a load path standing in for
    the real one answers when only the HTTP stack is under test."""
    return ContextResponse(
        conversation_id=conversation_id,
        messages=[],
        long_term=LongTerm(provider=None),
        tokens=TokenCounts(messages=0, user_profile=0, agent_memory=0),
        degraded=[],
    )
