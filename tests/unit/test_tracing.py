"""Traces (``memstream.tracing``): the W3C context read from and put on Kafka headers, on and
off, a stage continuing a record's trace onto its retries and dead letters, a memory change's
trace id, the load path's span helpers and the API's request spans."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from aiokafka import ConsumerRecord, TopicPartition
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from memstream import tracing
from memstream.agents.retry import Redelivery
from memstream.changes.model import API, Cause, added, removed
from memstream.events.deadletter import SourceRecord
from memstream.failure.tiers import Failing, RetryRecord
from memstream.longterm.payloads import Session, dumps, loads, session_of
from memstream.memory import MemoryItem
from memstream.streams.app import app, settings
from memstream.streams.stage import Settle
from memstream.streams.topics import dead_letter, lt_judge, retry_tiers
from memstream.testing import RunningStage, running_stage
from memstream_client.contract.changes import value_of
from memstream_client.contract.events import SessionEnded
from memstream_client.contract.schemas import validator
from tests.support.tracing import caller, named, recording, traceparent_of

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE}-{PARENT}-01"
INCOMING = [("traceparent", TRACEPARENT.encode()), ("tracestate", b"vendor=1")]


def test_off_the_context_a_record_came_with_goes_on_unchanged() -> None:
    assert not tracing.enabled()
    with tracing.consumed("probe", INCOMING):
        assert tracing.traceparent() == TRACEPARENT
        sent = dict(tracing.headers([("memstream-retry-attempt", b"1")]))
    assert sent == {
        "memstream-retry-attempt": b"1",
        "traceparent": TRACEPARENT.encode(),
        "tracestate": b"vendor=1",
    }
    assert tracing.headers() == []  # outside any trace nothing is added


def test_on_a_stage_span_continues_the_record_and_is_what_goes_on() -> None:
    with recording() as spans, tracing.consumed("probe", INCOMING) as span:
        ours = span.get_span_context()
        sent = traceparent_of(tracing.headers([("memstream-retry-attempt", b"1")]))
        # Headers with a context of their own (a record's, ``continuing``) keep it.
        assert tracing.headers([("traceparent", b"theirs")]) == [("traceparent", b"theirs")]
    [done] = spans.get_finished_spans()
    assert done.name == "probe process" and done.kind == trace.SpanKind.CONSUMER
    assert done.parent is not None and format(done.parent.span_id, "016x") == PARENT
    assert format(ours.trace_id, "032x") == TRACE
    assert sent == f"00-{TRACE}-{format(ours.span_id, '016x')}-01"


def test_a_record_without_context_starts_a_trace_only_when_on() -> None:
    with tracing.consumed("probe", None):
        assert tracing.traceparent() is None
    with recording() as spans, tracing.consumed("probe", [("other", b"x")]):
        started = tracing.traceparent()
    [done] = spans.get_finished_spans()
    assert done.parent is None
    assert started is not None and tracing.trace_id_of(started) == format(
        done.context.trace_id, "032x"
    )


def test_unreadable_trace_headers_are_ignored() -> None:
    for garbage in ([("traceparent", b"\xff\xfe")], [("traceparent", b"00-zz-yy-01")], {}):
        with tracing.consumed("probe", garbage):
            assert tracing.traceparent() is None
    assert tracing.trace_id_of("nonsense") is None
    assert tracing.trace_id_of(None) is None
    assert tracing.trace_id_of(TRACEPARENT) == TRACE


def test_what_is_made_of_a_record_keeps_its_trace_whatever_is_current() -> None:
    other = caller().get_tracer("platform")
    with other.start_as_current_span("unrelated"):
        # Another trace is current (a batch span): the record's own context goes on.
        assert dict(tracing.continuing(INCOMING)) == dict(INCOMING)
    with tracing.consumed("probe", INCOMING):
        assert dict(tracing.continuing(INCOMING))["traceparent"] == TRACEPARENT.encode()
    with recording(), tracing.consumed("probe", INCOMING):
        current = tracing.traceparent()
        assert current != TRACEPARENT  # the stage's own span, in the same trace
        assert dict(tracing.continuing(INCOMING))["traceparent"] == (current or "").encode()


def test_a_batch_is_the_child_of_its_first_traced_record_and_links_them_all() -> None:
    second = [("traceparent", f"00-{'ab' * 16}-{'cd' * 8}-01".encode())]
    with recording() as spans, tracing.batch("history", [None, INCOMING, second]):
        pass
    [done] = spans.get_finished_spans()
    assert done.parent is not None and format(done.context.trace_id, "032x") == TRACE
    assert [format(link.context.trace_id, "032x") for link in done.links] == [TRACE, "ab" * 16]
    assert done.attributes is not None
    assert done.attributes["messaging.batch.message_count"] == 3


def test_a_queued_session_is_applied_in_its_own_trace() -> None:
    own = tracing.session_headers(TRACEPARENT)
    with recording() as spans:
        with tracing.continued("conflict", own):  # nothing current: a span of its own
            inside = tracing.trace_id_of(tracing.traceparent())
        with tracing.consumed("conflict", INCOMING), tracing.continued("conflict", own):
            pass  # the same trace is current already: no second span
    assert inside == TRACE
    assert [s.name for s in spans.get_finished_spans()] == ["conflict process"] * 2


# --- a stage under Faust's test context ----------------------------------------------------


async def handle(value: bytes, source: SourceRecord) -> None:
    if value == b"outage":
        raise ConnectionRefusedError("the database is down")
    if value == b"bug":
        raise KeyError("session")


def decode(raw: bytes | None) -> bytes:
    return raw or b""


@app.agent(app.channel())
async def traced_probe(stream: Any) -> None:
    await Settle("traced", stream).every_record(decode, handle)


@pytest.fixture
async def stage() -> AsyncIterator[RunningStage]:
    async with running_stage(traced_probe) as started:
        yield started


async def test_a_retry_carries_the_record_s_trace_on_and_off(stage: RunningStage) -> None:
    event = await stage.put(b"outage", headers=INCOMING)
    await stage.settled(event)
    [off] = stage.producer.to(retry_tiers[1])
    assert traceparent_of(off.headers) == TRACEPARENT  # off: passed on as it came
    assert RetryRecord.decode(off.value).failing.attempts == 1
    with recording() as spans:
        event = await stage.put(b"outage", headers=INCOMING)
        await stage.settled(event)
    on = stage.producer.to(retry_tiers[1])[-1]
    done = named(spans.get_finished_spans(), "traced process")
    assert done.status.status_code == trace.StatusCode.ERROR
    assert traceparent_of(on.headers) == (f"00-{TRACE}-{format(done.context.span_id, '016x')}-01")


async def test_a_dead_letter_carries_the_record_s_trace(stage: RunningStage) -> None:
    with recording() as spans:
        event = await stage.put(b"bug", headers=INCOMING)
        await stage.settled(event)
    [letter] = stage.producer.to(dead_letter)
    assert letter.json()["reason"] == "stage_error"
    done = named(spans.get_finished_spans(), "traced process")
    assert tracing.trace_id_of(traceparent_of(letter.headers)) == TRACE
    assert traceparent_of(letter.headers) == (
        f"00-{TRACE}-{format(done.context.span_id, '016x')}-01"
    )


async def test_a_record_handled_sends_nothing_and_its_span_ends_well(stage: RunningStage) -> None:
    with recording() as spans:
        event = await stage.put(b"fine", headers=INCOMING)
        await stage.settled(event)
    assert stage.producer.sent == []
    done = named(spans.get_finished_spans(), "traced process")
    assert done.status.status_code == trace.StatusCode.UNSET


# --- what a memory keeps of its trace ------------------------------------------------------

NOW = datetime(2026, 5, 1, 12, 30, tzinfo=UTC)
ITEM = MemoryItem(
    id="m-1",
    tenant_id="acme",
    user_id="u-1",
    agent_id="helper",
    cube_id="user_profile",
    memory_type="text_mem",
    content="The user lives in Berlin.",
    importance=8,
    source_event_ids=("s2-0",),
    created_at=NOW,
    kind="fact",
    occurred_at=None,
)


def test_a_change_of_a_traced_session_names_its_trace_and_fits_the_schema() -> None:
    schema = validator("memory-changed.v1")
    value = value_of(added(ITEM, "MYSQL", Cause.session("c1", TRACEPARENT), [], NOW))
    assert value["trace_id"] == TRACE
    schema.validate({**value, "content": ITEM.content})
    superseded = removed(ITEM, "MYSQL", Cause.conflict("c1", {"m-1": ["m-2"]}, TRACEPARENT), NOW)
    assert value_of(superseded)["trace_id"] == TRACE
    assert "trace_id" not in value_of(added(ITEM, "MYSQL", API, [], NOW))
    with pytest.raises(Exception, match="does not match"):
        schema.validate({**value, "content": "x", "trace_id": "not-hex"})


def test_a_session_carries_its_trace_through_the_chain_s_records() -> None:
    ended = SessionEnded(
        event_id="e1", tenant_id="t", user_id="u", agent_id="a", conversation_id="c"
    )
    current = Session.of(ended, TRACEPARENT)
    assert session_of(loads(dumps(session=current))) == current
    # Records written before sessions carried a trace still read.
    older = {"tenant_id": "t", "user_id": "u", "agent_id": None, "conversation_id": "c"}
    assert session_of({"session": {**older, "event_id": "e1"}}).trace is None


# --- the load path's spans and the API's --------------------------------------------------


def test_a_hook_costs_nothing_off_and_leaves_out_text_and_users_on() -> None:
    assert tracing.span("assemble") is tracing.span("cache read")  # one shared no-op
    with tracing.parent_span("assemble", **tracing.who("t", "a", "u")) as part:
        part.set(degraded=["cache"])
    with (
        recording() as spans,
        tracing.parent_span("assemble", **tracing.who("t", None, "u")) as part,
    ):
        with tracing.span("cache read", hit=False):
            pass
        part.set(degraded=["cache"], **{"tokens.messages": 12})
    with recording(user_ids=True) as named_users, tracing.span("a", **tracing.who("t", "a", "u")):
        pass
    read, assemble = spans.get_finished_spans()
    assert read.parent is not None and read.parent.span_id == assemble.context.span_id
    assert dict(assemble.attributes or {}) == {
        "memstream.tenant_id": "t",
        "memstream.degraded": ("cache",),
        "memstream.tokens.messages": 12,
    }
    [with_user] = named_users.get_finished_spans()
    assert (with_user.attributes or {})["memstream.user_id"] == "u"


async def test_a_request_span_is_named_by_its_route_and_continues_the_caller() -> None:
    async def item(request: Request) -> JSONResponse:
        with tracing.span("work"):
            return JSONResponse({"id": request.path_params["item_id"]})

    inner = Starlette(routes=[Route("/items/{item_id}", item)])
    with recording() as spans:
        transport = httpx.ASGITransport(app=tracing.RequestSpans(inner))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            answer = await client.get("/items/42", headers={"traceparent": TRACEPARENT})
            missing = await client.get("/nowhere/7")
    assert answer.status_code == 200 and missing.status_code == 404
    work, served, unrouted = spans.get_finished_spans()
    assert served.name == "GET /items/{item_id}" and served.kind == trace.SpanKind.SERVER
    assert format(served.context.trace_id, "032x") == TRACE
    assert work.parent is not None and work.parent.span_id == served.context.span_id
    assert (served.attributes or {})["http.response.status_code"] == 200
    assert unrouted.name == "GET"  # no route: no path with ids in the name


async def test_a_record_sent_back_from_a_tier_continues_its_trace(stage: RunningStage) -> None:
    """The retry stage (``agents/retry.py``) sends a due record back in a span of its own,
    the child of the tier record's context, with the retry state beside the trace headers."""
    waiting = RetryRecord(
        "judge", settings.topic("lt-judge"), b"c1", b"{}", Failing(1, 0.0), 0.0, "outage"
    )
    tier = retry_tiers[1].get_topic_name()
    record = ConsumerRecord(
        tier, 0, 7, 1_000, 0, b"c1", waiting.encode(), None, 0, 0, INCOMING
    )  # fmt: skip
    redelivery = Redelivery(None)  # type: ignore[arg-type]  # a due record needs no consumer
    with recording() as spans:
        handled = await redelivery._partition(TopicPartition(tier, 0), [record])
    assert handled == 8
    [back] = stage.producer.to(lt_judge)
    done = named(spans.get_finished_spans(), "retry process")
    assert done.parent is not None and format(done.parent.span_id, "016x") == PARENT
    assert dict(back.headers)["memstream-retry-attempt"] == b"1"
    assert traceparent_of(back.headers) == f"00-{TRACE}-{format(done.context.span_id, '016x')}-01"


@pytest.mark.parametrize(
    ("environ", "asked"),
    [
        ({}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "otlp"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, "otlp"),
        ({"OTEL_TRACES_EXPORTER": "console"}, "console"),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, None),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, None),
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, None),
    ],
)
def test_traces_are_off_unless_the_standard_variables_ask(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], asked: str | None
) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert tracing.asked_exporter() == asked


def test_the_parts_of_an_unsampled_request_make_no_spans() -> None:
    undo = tracing.install(TracerProvider(sampler=ALWAYS_OFF))
    try:
        with tracing.parent_span("assemble") as part:
            assert part is not tracing.span("unused")  # the root is the sampler's to decide
            assert tracing.span("cache read") is tracing.span("record read")  # the no-op
    finally:
        undo()
