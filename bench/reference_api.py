"""The reference design's short-term load, served like ``memstream api`` (for bench.loadpath).

``POST /v1/context`` takes memstream's request body and answers memstream's response shape,
loading short-term memory the way the reference design does: read the conversation's WHOLE
cached list (``ZRANGE 0 -1`` on memstream's own cache key), decode every entry, tokenise every
message with ``count_tokens`` on every request (nothing stored is trusted), then build the
window with memstream's ``build_window`` on those counts. No long-term memory, no summary.

Run: ``python -m bench.reference_api [PORT]`` with the ``MEMSTREAM_*`` settings in the
environment; the port is the argument, else ``BENCH_REFERENCE_PORT``, else ``MEMSTREAM_API_PORT``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request

from memstream.loadpath.window import Message, build_window
from memstream.settings import Settings
from memstream.store.cache import RedisCache, decode_member
from memstream.text.tokens import count_tokens
from memstream_client.contract import build_models
from memstream_client.contract.api import (
    ContextMessage,
    ContextRequest,
    ContextResponse,
    LongTerm,
    TokenCounts,
)


def create_app(settings: Settings) -> FastAPI:
    build_models()  # as the API does: the route's models built now, not on the first request

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.cache = RedisCache.from_url(
            settings.redis_url,
            timeout=settings.redis_timeout_seconds,
            prefix=settings.cache_prefix,
            max_messages=settings.cache_max_messages,
            ttl_seconds=settings.cache_ttl_seconds,
        )
        try:
            yield
        finally:
            await app.state.cache.close()

    app = FastAPI(title="reference short-term load", lifespan=lifespan)

    @app.post("/v1/context", response_model=ContextResponse)
    async def context(body: ContextRequest, request: Request) -> ContextResponse:
        cache: RedisCache = request.app.state.cache
        raw = await cache.client.zrange(cache.key(body.tenant_id, body.conversation_id), 0, -1)
        history = []
        for member in raw:
            m = decode_member(member)
            # The reference keeps no counts: every message is tokenised on every request.
            history.append(Message(m.role, m.content, count_tokens(m.content), m.message_type))
        window = build_window(
            history,
            None,
            max_tokens=settings.window_max_tokens,
            summary_budget=settings.summary_budget_tokens,
        )
        return ContextResponse(
            conversation_id=body.conversation_id,
            messages=[
                ContextMessage(role=e.role, content=e.content, tokens=e.tokens, summary=e.summary)
                for e in window.messages
            ],
            long_term=LongTerm(provider=None),
            tokens=TokenCounts(messages=window.tokens, user_profile=0, agent_memory=0),
            degraded=[],
        )

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


def main(argv: list[str]) -> int:
    import uvicorn

    settings = Settings()
    port = int(argv[0] if argv else os.environ.get("BENCH_REFERENCE_PORT", settings.api_port))
    uvicorn.run(
        create_app(settings),
        host=settings.api_host,
        port=port,
        log_level=settings.log_level.lower(),
        access_log=False,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
