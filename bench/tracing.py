"""What tracing costs one ``/v1/context`` request in CPU, in this process: the request span
(``RequestSpans``) around the load path's hooks as ``memstream/loadpath/assemble.py`` calls
them (assemble, cache read, record read, long-term search); off (no SDK, no request span: the
API without ``OTEL_*``), on (the SDK, every trace sampled), the spans encoded for OTLP/HTTP in
batches of 512 as the batch exporter sends them, and one trace in ten sampled. CPU time of
this thread; the whole server is ``BENCH_CPU_TRACING=both python -m bench loadcpu``.
``python -m bench tracing``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from memstream import tracing

REQUESTS = 3000
BATCH = 512  # the batch span processor's default export size
SAMPLED = 0.1


async def _load_path(scope: Any, receive: Any, send: Any) -> None:
    with tracing.parent_span("assemble", **tracing.who("tenant-1", "agent-1", "user-1")) as part:
        with tracing.span("cache read") as read:
            read.set(hit=False)
        with tracing.span("record read", limit=30) as read:
            read.set(turns=30)
        with tracing.span("long-term search MYSQL", provider="MYSQL") as search:
            search.set(items=8, degraded=None)
        tokens = {"tokens.messages": 900, "tokens.user_profile": 300, "tokens.agent_memory": 0}
        part.set(degraded=[], **tokens)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


async def _requests(n: int) -> float:
    """CPU microseconds per request through the request span and the hooks."""
    # As the API runs: the request span's middleware only when tracing is on.
    app = tracing.RequestSpans(_load_path) if tracing.enabled() else _load_path
    scope = {"type": "http", "method": "POST", "path": "/v1/context", "headers": []}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        return None

    started = time.thread_time()
    for _ in range(n):
        await app(scope, receive, send)
    return 1e6 * (time.thread_time() - started) / n


class _Kept(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


async def main() -> None:
    await _requests(200)
    off = await _requests(REQUESTS)
    kept = _Kept()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    undo = tracing.install(provider)
    try:
        await _requests(200)
        kept.spans.clear()
        on = await _requests(REQUESTS)
    finally:
        undo()
    spans = kept.spans
    sampled = TracerProvider(sampler=ParentBased(TraceIdRatioBased(SAMPLED)))
    sampled.add_span_processor(SimpleSpanProcessor(_Kept()))
    undo = tracing.install(sampled)
    try:
        await _requests(200)
        tenth = await _requests(REQUESTS)
    finally:
        undo()
    per_request = len(spans) / REQUESTS
    started = time.thread_time()
    for start in range(0, len(spans), BATCH):
        encode_spans(spans[start : start + BATCH]).SerializeToString()
    encoded = 1e6 * (time.thread_time() - started) / REQUESTS
    # SimpleSpanProcessor hands each span to the exporter at once; the batch processor queues
    # it instead, which costs about the same on the request's thread.
    print(f"tracing: {REQUESTS:,} requests, {per_request:.0f} spans each")
    print(f"  off (no SDK): {off:.1f} us/request")
    print(f"  on, spans made: {on:.1f} us/request (+{on - off:.1f})")
    print(f"  on, spans encoded for OTLP/HTTP: {encoded:.1f} us/request")
    print(f"  on, in all: {on + encoded:.1f} us/request, {(on + encoded) / max(off, 0.1):.0f}x off")
    print(
        f"  on, {SAMPLED:.0%} of traces sampled (OTEL_TRACES_SAMPLER=parentbased_traceidratio):"
        f" {tenth + SAMPLED * encoded:.1f} us/request"
    )


if __name__ == "__main__":
    asyncio.run(main())
