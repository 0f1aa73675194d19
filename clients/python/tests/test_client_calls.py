"""``memstream_client`` without services: events checked as the worker reads them, the requests
the API calls make and how their answers are read, and retrying."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import httpx
import orjson
import pytest

from memstream_client import ApiError, InvalidEvent, ServiceUnavailable
from memstream_client.api import (
    _pause,
    add_memory_call,
    agent_config_call,
    context_call,
    messages_call,
)
from memstream_client.contract.events import parse_message
from memstream_client.events import checked, rfc3339
from memstream_client.retry import HttpRetry, RetryLater

MESSAGE = {
    "tenant_id": "acme", "user_id": "u1", "agent_id": None, "conversation_id": "agent:c1",
    "role": "user", "content": "hello",
}  # fmt: skip


def test_an_event_gets_an_id_and_the_conversation_as_its_key() -> None:
    event = checked("message-written", MESSAGE, 100)
    value = orjson.loads(event.value)
    assert event.key == b"agent:c1" and len(event.event_id) == 32
    assert value["event_id"] == event.event_id and "agent_id" not in value
    assert parse_message(event.value, 100).conversation_id == "agent:c1"
    assert checked("message-written", {**MESSAGE, "event_id": "e1"}, 100).event_id == "e1"
    assert checked("message-written", MESSAGE, 100).event_id != event.event_id


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"content": "x" * 101}, "content_too_large"),
        ({"created_at": "2026-01-01 10:00"}, "invalid_timestamp"),
        ({"created_at": "0001-01-01T00:00:00+01:00"}, "invalid_timestamp"),
        ({"message_type": "note"}, "schema_violation"),
        ({"tenant_id": " "}, "schema_violation"),
        ({"metadata": {"at": {1, 2}}}, "schema_violation"),
    ],
)
def test_a_refused_event_names_the_dead_letter_reason(
    change: dict[str, object], reason: str
) -> None:
    with pytest.raises(InvalidEvent) as refused:
        checked("message-written", {**MESSAGE, **change}, 100)
    assert refused.value.reason == reason


def test_times_need_an_offset() -> None:
    assert rfc3339(datetime(2026, 3, 1, 12, tzinfo=UTC)) == "2026-03-01T12:00:00+00:00"
    with pytest.raises(InvalidEvent) as naive:
        rfc3339(datetime(2026, 3, 1, 12))
    assert naive.value.reason == "invalid_timestamp"
    end = {k: MESSAGE[k] for k in ("tenant_id", "user_id", "conversation_id")}
    event = checked("session-ended", {**end, "ended_at": rfc3339(datetime.now(UTC))}, 100)
    assert orjson.loads(event.value)["ended_at"].endswith("+00:00")


def test_calls_are_requests_with_quoted_paths_and_json_bodies() -> None:
    with httpx.Client(base_url="http://api") as http:
        request = context_call(tenant_id="t", user_id="u", conversation_id="c", query="q").request(
            http
        )
        assert (request.method, request.url.path) == ("POST", "/v1/context")
        body = orjson.loads(request.content)
        assert body["query"] == "q" and body["filter_sensitive"] is True
        odd = messages_call(tenant_id="t", conversation_id="a/b c", limit=5).request(http)
        assert odd.url.raw_path == b"/v1/conversations/a%2Fb%20c/messages?tenant_id=t&limit=5"
    with pytest.raises(ValueError):  # checked by the API's own model before anything is sent
        add_memory_call(
            tenant_id="t", user_id="u", cube_id="user_profile", memory_type="pref_mem",
            content="x", importance=11,
        )  # fmt: skip


def test_retries_pause_longer_each_time_or_as_the_server_says() -> None:
    assert [_pause(n, None) for n in range(3)] == [0.2, 0.4, 0.8]
    assert _pause(10, None) == 5.0
    answer = httpx.Response(503, headers={"retry-after": "2"})
    assert _pause(0, answer) == 2.0


def _answer(status: int, body: bytes, content_type: str = "application/json") -> httpx.Response:
    return httpx.Response(status, content=body, headers={"content-type": content_type})


def test_an_error_answer_raises_the_apis_code_and_message() -> None:
    call = messages_call(tenant_id="t", conversation_id="c")
    with pytest.raises(ApiError) as refused:
        call.read(_answer(403, b'{"error": {"code": "forbidden", "message": "not yours"}}'))
    assert (refused.value.status, refused.value.code, refused.value.message) == (
        403,
        "forbidden",
        "not yours",
    )
    with pytest.raises(ApiError) as proxy:
        call.read(_answer(502, b"Bad gateway from the proxy", "text/plain"))
    assert (proxy.value.code, proxy.value.message) == ("http_error", "Bad gateway from the proxy")


def test_a_missing_config_is_none_and_a_wrong_body_is_no_answer() -> None:
    missing = _answer(404, b'{"error": {"code": "not_found", "message": "no config"}}')
    assert agent_config_call(tenant_id="t", agent_id="a").read(missing) is None
    with pytest.raises(ApiError):  # only the calls that say so take a 404 for None
        messages_call(tenant_id="t", conversation_id="c").read(missing)
    with pytest.raises(ServiceUnavailable):
        messages_call(tenant_id="t", conversation_id="c").read(_answer(200, b'{"items": []}'))


def test_a_retry_tries_what_is_worth_it_as_often_as_allowed() -> None:
    tries: list[int] = []

    def flaky() -> str:
        tries.append(len(tries))
        if len(tries) < 3:
            raise RetryLater("not yet")
        return "done"

    assert HttpRetry(3, 0.001).run_sync(flaky) == "done" and len(tries) == 3
    tries.clear()
    with pytest.raises(RetryLater):
        HttpRetry(2, 0.001).run_sync(flaky)
    assert len(tries) == 2
    tries.clear()
    with pytest.raises(RetryLater):  # not worth another try: raised at once
        HttpRetry(5, 0.001).run_sync(flaky, worth=lambda exc: False)
    assert len(tries) == 1


async def test_the_async_retry_pauses_at_least_as_long_as_the_server_asks() -> None:
    heard: list[float] = []

    async def busy() -> str:
        if not heard:
            raise RetryLater("busy", after=0.05)
        return "done"

    started = time.monotonic()
    answer = await HttpRetry(2, 0.001, cap=1.0).run(busy, lambda n, exc, p: heard.append(p))
    assert answer == "done" and heard == [0.05] and time.monotonic() - started >= 0.05
