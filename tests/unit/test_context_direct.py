"""The load path's direct path (``ContextDirect``): what it answers itself, and what it hands
on to the route with the body it read."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from starlette.types import Message, Receive, Scope, Send

from memstream.api.auth import TENANT
from memstream.api.overload import ARRIVED, LAGGING
from memstream.api.routes.context import ContextDirect
from memstream_client.contract.api import ContextRequest, ContextResponse, LongTerm, TokenCounts

VALID = {"tenant_id": "acme", "user_id": "u1", "conversation_id": "c1", "query": "dinner?"}


@dataclass
class LoadPath:
    """Records each request it answers and answers an empty context."""

    asked: list[tuple[ContextRequest, float | None, bool]] = field(default_factory=list)

    async def context(
        self, req: ContextRequest, *, arrived: float | None, with_long_term: bool
    ) -> ContextResponse:
        self.asked.append((req, arrived, with_long_term))
        return ContextResponse(
            conversation_id=req.conversation_id,
            messages=[],
            long_term=LongTerm(provider=None),
            tokens=TokenCounts(messages=0, user_profile=0, agent_memory=0),
            degraded=[],
        )


@dataclass
class Route:
    """The app behind the direct path: records the body it was handed and answers 299."""

    bodies: list[bytes] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        self.bodies.append(message["body"])
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def direct(keys: dict[str, str] | None = None) -> tuple[ContextDirect, Route, LoadPath]:
    route, loadpath = Route(), LoadPath()
    state = SimpleNamespace(
        settings=SimpleNamespace(tenant_of_key=keys or {}),
        services=SimpleNamespace(loadpath=loadpath),
    )
    return ContextDirect(route, state=state), route, loadpath


async def call(
    app: ContextDirect,
    chunks: list[bytes],
    *,
    path: str = "/v1/context",
    method: str = "POST",
    headers: dict[str, str] | None = None,
    scope_extra: dict[str, Any] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    sent_headers = {"content-type": "application/json", **(headers or {})}
    scope: dict[str, Any] = {
        "type": "http",
        "path": path,
        "method": method,
        "headers": [(k.encode(), v.encode()) for k, v in sent_headers.items()],
        **(scope_extra or {}),
    }
    messages: list[Message] = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]
    out: list[Message] = []

    async def receive() -> Message:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        out.append(message)

    await app(scope, receive, send)
    start, body = out
    answer_headers = {k.decode(): v.decode() for k, v in start.get("headers", [])}
    return start["status"], answer_headers, body["body"]


async def test_a_valid_request_is_answered_here_as_the_route_answers_it() -> None:
    app, route, loadpath = direct()
    body = orjson.dumps(VALID)
    status, headers, answer = await call(
        app, [body[:10], body[10:]], scope_extra={ARRIVED: 12.5, LAGGING: False}
    )
    assert status == 200 and not route.bodies
    assert headers == {"content-length": str(len(answer)), "content-type": "application/json"}
    assert orjson.loads(answer)["conversation_id"] == "c1"
    [(req, arrived, with_long_term)] = loadpath.asked
    assert req == ContextRequest.model_validate(VALID)
    assert (arrived, with_long_term) == (12.5, True)


async def test_a_lagging_loop_asks_for_the_short_term_only() -> None:
    app, _, loadpath = direct()
    await call(app, [orjson.dumps(VALID)], scope_extra={LAGGING: True})
    assert loadpath.asked[0][2] is False


@pytest.mark.parametrize(
    ("chunks", "headers"),
    [
        ([b'{"tenant_id": "acme"'], {}),  # not JSON
        ([orjson.dumps({**VALID, "context_rounds": -1})], {}),  # invalid
        ([orjson.dumps({**VALID, "surprise": 1})], {}),  # a field the contract lacks
        ([orjson.dumps(VALID)], {"content-type": "text/plain"}),  # not read as JSON
    ],
)
async def test_what_the_route_would_refuse_goes_to_it_with_its_body(
    chunks: list[bytes], headers: dict[str, str]
) -> None:
    app, route, loadpath = direct()
    status, _, _ = await call(app, chunks, headers=headers)
    assert status == 299 and route.bodies == [b"".join(chunks)]
    assert not loadpath.asked


# With keys, the gate in front puts the key's tenant in the scope, or refuses the request.
@pytest.mark.parametrize("gated", [{TENANT: "other"}, {}])
async def test_a_key_that_is_not_the_tenants_goes_to_the_route(gated: dict[str, str]) -> None:
    app, route, loadpath = direct({"key-acme": "acme", "key-other": "other"})
    status, _, _ = await call(app, [orjson.dumps(VALID)], scope_extra=gated)
    assert status == 299 and len(route.bodies) == 1 and not loadpath.asked


async def test_the_tenants_key_is_answered_here() -> None:
    app, route, loadpath = direct({"key-acme": "acme"})
    status, _, _ = await call(app, [orjson.dumps(VALID)], scope_extra={TENANT: "acme"})
    assert status == 200 and not route.bodies and len(loadpath.asked) == 1


@pytest.mark.parametrize(("path", "method"), [("/v1/context", "GET"), ("/v1/contexts", "POST")])
async def test_other_routes_pass_untouched(path: str, method: str) -> None:
    app, route, loadpath = direct()
    status, _, _ = await call(app, [b"{}"], path=path, method=method)
    assert status == 299 and route.bodies == [b"{}"] and not loadpath.asked
