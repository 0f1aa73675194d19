"""Spans recorded in this process: memstream's tracer on an SDK provider with the in-memory
exporter, for as long as a test needs it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memstream import tracing


@contextmanager
def recording(*, user_ids: bool = False) -> Iterator[InMemorySpanExporter]:
    """memstream's spans go to the exporter yielded, then tracing is as it was."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    undo = tracing.install(provider, user_ids=user_ids)
    try:
        yield exporter
    finally:
        undo()
        provider.shutdown()


def caller() -> TracerProvider:
    """A platform service's own tracer provider (not memstream's, not the global one)."""
    return TracerProvider()


def named(spans: tuple[ReadableSpan, ...] | list[ReadableSpan], name: str) -> ReadableSpan:
    """The one span called ``name``."""
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, f"{len(found)} spans called {name!r} in {[s.name for s in spans]}"
    return found[0]


def traceparent_of(headers: list[tuple[str, bytes]] | None) -> str | None:
    return next((v.decode() for k, v in headers or () if k == "traceparent"), None)
