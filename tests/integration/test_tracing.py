"""Traces on the real services: the publisher's headers, the load path's span tree, and one
trace from a published session to the memory it became, across workers of split stage roles,
exported over OTLP/HTTP to a receiver the test runs."""

from __future__ import annotations

import asyncio
import uuid

import orjson
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream import readiness, tracing
from memstream.broker.clients import producer
from memstream.broker.topics import ensure_topics, records_until_now
from memstream.events.deadletter import SourceRecord, dead_letter
from memstream.settings import Settings
from memstream.store.memory_history import history
from memstream.store.schema import long_term_memory
from memstream.topology import PUBLIC_TOPICS, internal_topics
from memstream_client.publisher import Publisher, SyncPublisher
from tests.fakes.http import serve
from tests.fakes.otlp import Received, otlp_app
from tests.support.api import client_for
from tests.support.processes import run_cli
from tests.support.settings import free_port
from tests.support.tracing import caller, recording, traceparent_of
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


async def test_the_publisher_puts_the_caller_s_trace_on_each_event(
    settings: Settings, tenant: str
) -> None:
    await ensure_topics(settings)
    platform = caller().get_tracer("platform")
    async with Publisher.from_settings(settings, idempotent=True) as publisher:
        with platform.start_as_current_span("turn") as turn:
            await publisher.message(
                tenant_id=tenant, user_id="u1", conversation_id="c1", role="user", content="hi"
            )
        await publisher.session_ended(tenant_id=tenant, user_id="u1", conversation_id="c1")
    theirs = turn.get_span_context()
    records = [r async for r in records_until_now(settings, settings.topic("message-written"))]
    [written] = [r for r in records if tenant.encode() in (r.value or b"")]
    sent = traceparent_of(list(written.headers))
    assert sent is not None and tracing.trace_id_of(sent) == format(theirs.trace_id, "032x")
    ended = [r async for r in records_until_now(settings, settings.topic("session-ended"))]
    [end] = [r for r in ended if tenant.encode() in (r.value or b"")]
    assert traceparent_of(list(end.headers)) is None  # no span of the caller's: none sent

    def from_sync_code() -> str:
        with (
            SyncPublisher.from_settings(settings) as sync,
            platform.start_as_current_span("sync turn") as span,
        ):
            sync.message(
                tenant_id=tenant, user_id="u2", conversation_id="c2", role="user", content="yo"
            )
        return format(span.get_span_context().trace_id, "032x")

    theirs_sync = await asyncio.to_thread(from_sync_code)
    records = [r async for r in records_until_now(settings, settings.topic("message-written"))]
    [written] = [r for r in records if b'"c2"' in (r.value or b"") and tenant.encode() in r.value]
    assert tracing.trace_id_of(traceparent_of(list(written.headers))) == theirs_sync


async def test_the_load_path_s_spans_show_each_part_with_no_text(
    settings: Settings, tenant: str
) -> None:
    body = {"tenant_id": tenant, "user_id": "u-secret", "agent_id": "a1"}
    memory = "The user keeps bees on the roof of the Lisbon flat."
    with recording() as spans:
        async with client_for(settings) as api:
            added = await api.post(
                "/v1/memories",
                json={**body, "cube_id": "user_profile", "memory_type": "text_mem",
                      "content": memory, "importance": 7},
            )  # fmt: skip
            assert added.status_code == 201, added.text
            spans.clear()
            asked = {**body, "conversation_id": "c1", "query": "where are the bees?"}
            answer = await api.post("/v1/context", json=asked)
    assert answer.status_code == 200, answer.text
    finished = spans.get_finished_spans()
    by_name = {s.name: s for s in finished}
    request = by_name["POST /v1/context"]
    assemble = by_name["assemble"]
    search = by_name["long-term search MYSQL"]
    assert assemble.parent is not None and assemble.parent.span_id == request.context.span_id
    for part in ("cache read", "record read", "long-term search MYSQL"):
        parent = by_name[part].parent
        assert parent is not None and parent.span_id == assemble.context.span_id, part
    attributes = dict(assemble.attributes or {})
    tokens = answer.json()["tokens"]
    assert attributes["memstream.tenant_id"] == tenant
    assert attributes["memstream.agent_id"] == "a1"
    assert attributes["memstream.tokens.user_profile"] == tokens["user_profile"] > 0
    assert attributes["memstream.degraded"] == tuple(answer.json()["degraded"])
    assert (search.attributes or {})["memstream.items"] >= 1
    # No user id (not configured), no text of the query or the memory, on any span.
    for span in finished:
        for value in (span.attributes or {}).values():
            assert "u-secret" not in str(value) and "bees" not in str(value), span.name


async def test_one_trace_joins_a_published_session_to_its_memory_across_roles(
    settings: Settings,
    tenant: str,
    engine: AsyncEngine,
    start_worker,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    received = Received()
    with serve(otlp_app(received)) as url:
        # The workers' own SDK, from the standard variables alone.
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "200")
        start_worker(settings, "history", stages="history")
        memory = settings.model_copy(update={"worker_web_port": free_port()})
        start_worker(memory, "memory", stages="summary,longterm")

        async def all_consume() -> bool:
            return (await readiness.workers(settings)).consuming

        await eventually(all_consume, within=60, what="every role consuming, in two groups")
        platform = TracerProvider()
        platform.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(f"{url}/v1/traces")))
        async with Publisher.from_settings(settings) as publisher:
            with platform.get_tracer("platform").start_as_current_span("conversation") as turn:
                for n in range(4):
                    await publisher.message(
                        tenant_id=tenant, user_id="u1", agent_id="agent-1", conversation_id="c1",
                        role="user" if n % 2 == 0 else "assistant",
                        content="I live in Lisbon and my dog is called Rex." if n % 2 == 0
                        else "Noted.",
                    )  # fmt: skip
                await publisher.session_ended(
                    tenant_id=tenant, user_id="u1", agent_id="agent-1", conversation_id="c1"
                )
        platform.shutdown()
        trace_id = format(turn.get_span_context().trace_id, "032x")

        rows: list[tuple[str, str | None]] = []

        async def remembered() -> bool:
            query = select(long_term_memory.c.id, long_term_memory.c.trace_id).where(
                long_term_memory.c.tenant_id == tenant
            )
            async with engine.connect() as conn:
                rows[:] = [(r.id, r.trace_id) for r in (await conn.execute(query)).all()]
            return bool(rows)

        await eventually(remembered, within=120, what="memories of the session")
        assert {trace for _, trace in rows} == {trace_id}
        wanted = {
            "history process", "session process", "judge process", "dedupe process",
            "conflict process", "memory-changed publish",
        }  # fmt: skip

        async def exported() -> bool:
            return wanted <= {s.name for s in received.of_trace(trace_id)}

        await eventually(exported, within=60, what=f"the stages' spans in trace {trace_id}")
        spans = received.of_trace(trace_id)
        assert {s.service for s in spans} >= {"memstream-worker"}
        ids = {s.span_id for s in spans}
        # One tree: every span but the platform's has its parent in the trace.
        assert all(s.parent_span_id in ids for s in spans if s.name != "conversation")

    memory_id = rows[0][0]
    found = await history(engine, tenant, memory_id)
    assert found is not None
    [item] = [i for i in found.items if i.id == memory_id]
    assert item.trace_id == trace_id
    assert item.added is not None and item.added.trace_id == trace_id

    changes: list[tuple[dict[str, object], str | None]] = []

    async def published() -> bool:
        changes.clear()
        async for record in records_until_now(settings, settings.topic("memory-changed")):
            value = orjson.loads(record.value or b"{}")
            if value.get("tenant_id") == tenant:
                changes.append((value, traceparent_of(list(record.headers))))
        return len(changes) >= len(rows)

    await eventually(published, within=30, what="memory-changed records")
    for value, header in changes:
        assert value["trace_id"] == trace_id
        assert tracing.trace_id_of(header) == trace_id


async def test_a_redriven_letter_goes_back_in_the_trace_it_failed_in(
    settings: Settings, tenant: str
) -> None:
    await ensure_topics(settings, PUBLIC_TOPICS + internal_topics(settings))
    failed = SourceRecord(settings.topic("lt-judge"), 0, 3, 1.0, b"c1", b'{"garbage": 1}')
    letter = dead_letter("invalid_payload", "The record cannot be read.", "judge", failed)
    traceparent = f"00-{uuid.uuid4().hex}-00f067aa0ba902b7-01"
    async with producer(settings) as client:
        headers = [("traceparent", traceparent.encode()), ("other", b"x")]
        await client.send_and_wait(
            settings.topic("dead-letter"), letter.value, key=letter.key, headers=headers
        )
    redriven = run_cli(settings, "redrive")
    assert redriven.returncode == 0, redriven.stderr
    back = [r async for r in records_until_now(settings, settings.topic("lt-judge"))]
    [record] = [r for r in back if r.value == b'{"garbage": 1}']
    sent = dict(record.headers)
    assert sent["traceparent"] == traceparent.encode()
    assert "other" not in sent  # only the trace goes on, beside redrive's own mark
