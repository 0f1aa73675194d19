"""A fake OpenAI-compatible chat completions server that answers scripted replies in order."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response


@dataclass
class Reply:
    """One scripted answer: a completion ``content`` (None: an empty one) and why it stopped
    (``finish_reason`` "length": cut off at max_tokens), an HTTP ``status`` error, a ``raw``
    non-JSON body, or a ``delay`` before answering."""

    content: str | None = None
    status: int = 200
    raw: str | None = None
    delay: float = 0.0
    finish_reason: str = "stop"


@dataclass
class Script:
    """Replies the server gives, in order (a string is a completion, an int an HTTP error; with
    none left, HTTP 500), and every request body and headers it received."""

    replies: list[Reply | str | int] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def reset(self) -> None:
        self.replies.clear()
        self.requests.clear()
        self.headers.clear()


def as_reply(reply: Reply | str | int) -> Reply:
    if isinstance(reply, Reply):
        return reply
    return Reply(status=reply) if isinstance(reply, int) else Reply(reply)


def llm_app(script: Script) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> Response:
        body = await request.json()
        script.requests.append(body)
        script.headers.append(dict(request.headers))
        reply = as_reply(script.replies.pop(0) if script.replies else 500)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.status != 200:
            return JSONResponse(
                {"error": {"message": "scripted failure"}}, status_code=reply.status
            )
        if reply.raw is not None:
            return PlainTextResponse(reply.raw)
        return JSONResponse(
            {
                "id": f"cmpl-{len(script.requests)}",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply.content},
                        "finish_reason": reply.finish_reason,
                    }
                ],
            }
        )

    return app
