"""OpenTelemetry traces: W3C trace context in Kafka headers from stage to stage, and spans of
the API's requests. Off unless the standard ``OTEL_*`` variables name an exporter; the SDK and
the OTLP/HTTP exporter come with the ``otel`` extra. Off, the stages still carry the context a
record came with onto what they produce, and the load path's hooks cost a flag test.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

HEADERS = ("traceparent", "tracestate")
MAX_LINKS = 64  # records a batch span links to at most
Headers = Iterable[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None

_propagator = TraceContextTextMapPropagator()
_tracer: trace.Tracer = trace.get_tracer("memstream")
_on = False  # an SDK records spans: the load path's hooks are live
_user_ids = False  # MEMSTREAM_TRACE_USER_IDS


class _HeaderGetter(Getter[dict[str, str]]):
    def get(self, carrier: dict[str, str], key: str) -> list[str] | None:
        value = carrier.get(key)
        return None if value is None else [value]

    def keys(self, carrier: dict[str, str]) -> list[str]:
        return list(carrier)


_getter = _HeaderGetter()


def enabled() -> bool:
    """Whether spans are recorded (an SDK is installed and configured)."""
    return _on


def install(provider: trace.TracerProvider, *, user_ids: bool = False) -> Callable[[], None]:
    """Record spans with ``provider`` (tests give one with an in-memory exporter); answers
    what puts the tracer before back."""
    global _tracer, _on, _user_ids
    before = (_tracer, _on, _user_ids)
    _tracer = provider.get_tracer("memstream")
    _on = True
    _user_ids = user_ids

    def undo() -> None:
        global _tracer, _on, _user_ids
        _tracer, _on, _user_ids = before

    return undo


def configure(service: str, *, user_ids: bool = False) -> bool:
    """Set up the SDK from the ``OTEL_*`` variables when they ask for traces: an exporter
    (``OTEL_TRACES_EXPORTER`` ``otlp`` or ``console``) or an OTLP endpoint, and
    ``OTEL_SDK_DISABLED`` not ``true``. A tracer provider installed already (by
    ``opentelemetry-instrument``) is used as it is. ``service`` is the default
    ``service.name``. True when spans are recorded."""
    global _user_ids
    _user_ids = user_ids
    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider):
        install(current, user_ids=user_ids)
        return True
    exporter = asked_exporter()
    if exporter is None:
        return _on  # on only if a provider was installed by hand
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        log.warning("OTEL_* asks for traces but the SDK is missing: pip install 'memstream[otel]'")
        return _on
    if exporter == "console":
        span_exporter: Any = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        span_exporter = OTLPSpanExporter()  # endpoint, headers, timeout: OTEL_EXPORTER_OTLP_*
    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; ours when neither
    # names the service.
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(span_exporter))
    trace.set_tracer_provider(provider)
    install(provider, user_ids=user_ids)
    log.info("traces go to the %s exporter as %s", exporter, service)
    return True


def asked_exporter() -> str | None:
    # The SDK's own variables, read as its auto-configuration does, not MEMSTREAM_ settings.
    env = os.environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter in ("otlp", "console"):
        return exporter
    if exporter:
        if exporter != "none":
            log.warning("OTEL_TRACES_EXPORTER=%s is not supported (otlp, console)", exporter)
        return None
    endpoints = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    return "otlp" if any(env.get(name) for name in endpoints) else None


# --- Kafka headers ---------------------------------------------------------------------------


def _carrier(headers: Headers) -> dict[str, str]:
    items = headers.items() if isinstance(headers, Mapping) else headers or ()
    out: dict[str, str] = {}
    for name, value in items:
        if name in HEADERS and value is not None:
            try:
                out[name] = value.decode("ascii") if isinstance(value, bytes) else str(value)
            except UnicodeDecodeError:
                continue
    return out


def context_of(headers: Headers) -> Context:
    """The trace context a record carries (an empty one when it carries none)."""
    return _propagator.extract(_carrier(headers), context=otel_context.Context(), getter=_getter)


def _parent(traceparent: str | None) -> Context:
    carrier = {"traceparent": traceparent} if traceparent else {}
    return _propagator.extract(carrier, context=otel_context.Context(), getter=_getter)


def _injected(ctx: Context | None = None) -> dict[str, str]:
    carrier: dict[str, str] = {}
    _propagator.inject(carrier, context=ctx)
    return carrier


def headers(base: Sequence[tuple[str, bytes]] | None = None) -> list[tuple[str, bytes]]:
    """``base`` plus the current trace context, for a record sent now; ``base`` with trace
    context of its own (``continuing``) is kept as it is."""
    if any(name == "traceparent" for name, _ in base or ()):
        return list(base or ())
    return [*(base or ()), *((k, v.encode()) for k, v in _injected().items())]


def carried(source: Headers) -> tuple[tuple[str, bytes], ...]:
    """The trace headers among ``source``, as they came."""
    return tuple((k, v.encode()) for k, v in _carrier(source).items())


def continuing(source: Headers) -> tuple[tuple[str, bytes], ...]:
    """Trace headers for what is made of a record: the current span when it belongs to the
    record's trace (or the record has none), else the record's own context as it came."""
    own = trace.get_current_span(context_of(source)).get_span_context()
    current = trace.get_current_span().get_span_context()
    if own.is_valid and own.trace_id != current.trace_id:
        return carried(source)
    return tuple((k, v.encode()) for k, v in _injected().items())


def traceparent() -> str | None:
    """The current trace context as a ``traceparent`` value (None outside any trace)."""
    return _injected().get("traceparent")


def trace_id_of(value: str | None) -> str | None:
    """The trace id (32 hex digits) of a ``traceparent`` value."""
    if not value:
        return None
    ctx = trace.get_current_span(_parent(value)).get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else None


# --- spans ------------------------------------------------------------------------------------


@contextmanager
def consumed(stage: str, source: Headers) -> Iterator[Span]:
    """A stage handling one record: a span continuing the record's trace, current meanwhile,
    so that what the stage sends carries it. A failure is recorded on it and raised."""
    with _tracer.start_as_current_span(
        f"{stage} process", context=context_of(source), kind=SpanKind.CONSUMER,
        attributes={"messaging.system": "kafka", "memstream.stage": stage},
    ) as span:  # fmt: skip
        yield span


def continued(stage: str, source: Headers) -> AbstractContextManager[object]:
    """Within the record's trace: as it is when the current span belongs to it already, else
    a span of ``stage`` continuing it (a queued record applied while another is handled)."""
    own = trace.get_current_span(context_of(source)).get_span_context()
    if not own.is_valid or own.trace_id == trace.get_current_span().get_span_context().trace_id:
        return nullcontext()
    return consumed(stage, source)


def failure(exc: BaseException) -> None:
    """Record ``exc`` on the current span (a failure the caller handles)."""
    current = trace.get_current_span()
    if current.is_recording():
        current.record_exception(exc)
        current.set_status(Status(StatusCode.ERROR, type(exc).__name__))


def session_headers(value: str | None) -> Headers:
    """A stored ``traceparent`` as the headers ``consumed`` and ``continued`` read."""
    return [("traceparent", value.encode())] if value else None


@contextmanager
def batch(stage: str, sources: Sequence[Headers]) -> Iterator[Span]:
    """A stage handling records together: one span, the child of the first traced record,
    linked to each (up to ``MAX_LINKS``)."""
    contexts = [trace.get_current_span(context_of(s)).get_span_context() for s in sources]
    traced = [c for c in contexts if c.is_valid]
    parent = trace.set_span_in_context(trace.NonRecordingSpan(traced[0])) if traced else None
    links = [Link(c) for c in traced[:MAX_LINKS]] if _on else None
    with _tracer.start_as_current_span(
        f"{stage} process", context=parent or otel_context.Context(), kind=SpanKind.CONSUMER,
        links=links,
        attributes={"messaging.system": "kafka", "memstream.stage": stage,
                    "messaging.batch.message_count": len(sources)},
    ) as span:  # fmt: skip
        yield span


@contextmanager
def produced(name: str, traceparent_value: str | None) -> Iterator[Span]:
    """Publishing what a stored change says: a producer span in the trace that made it."""
    with _tracer.start_as_current_span(
        name, context=_parent(traceparent_value), kind=SpanKind.PRODUCER,
        attributes={"messaging.system": "kafka"},
    ) as span:  # fmt: skip
        yield span


class _Off:
    """The span of a hook while tracing is off: every call does nothing."""

    def __enter__(self) -> _Off:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set(self, **attributes: Any) -> None:
        return None


_OFF = _Off()


class _Part:
    """A span of the load path: a child of the current one; current itself while it runs only
    when it has children (attaching a context costs as much as a third of a span)."""

    __slots__ = ("_attributes", "_current", "_name", "_span", "_token")

    def __init__(self, name: str, attributes: dict[str, Any], current: bool) -> None:
        self._name, self._attributes, self._current = name, attributes, current
        self._span: Span | None = None
        self._token: object = None

    def __enter__(self) -> _Part:
        self._span = _tracer.start_span(self._name, attributes=_clean(self._attributes))
        if self._current:
            self._token = otel_context.attach(trace.set_span_in_context(self._span))
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        span = self._span
        assert span is not None
        if self._token is not None:
            otel_context.detach(self._token)  # type: ignore[arg-type]
        if exc is not None:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        span.end()

    def set(self, **attributes: Any) -> None:
        if self._span is not None:
            self._span.set_attributes(_clean(attributes))


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in attributes.items():
        if value is None:
            continue
        out[f"memstream.{key}"] = list(value) if isinstance(value, (list, tuple)) else value
    return out


def span(name: str, **attributes: Any) -> _Off | _Part:
    """A child span of the current one around a part of the work with no spans of its own;
    nothing while tracing is off or the current span is not recorded (not sampled: its
    children would not be either). ``.set(**attributes)`` adds to it. Attributes go under
    ``memstream.``; None ones are left out. Never pass message or memory text."""
    return _Part(name, attributes, False) if _on and _wanted() else _OFF


def parent_span(name: str, **attributes: Any) -> _Off | _Part:
    """As ``span``, and the current span while it runs: the parent of the spans within."""
    return _Part(name, attributes, True) if _on and _wanted() else _OFF


def _wanted() -> bool:
    # A recorded parent, or none (a root span, which the sampler decides on).
    current = trace.get_current_span()
    return current.is_recording() or not current.get_span_context().is_valid


def who(tenant_id: str, agent_id: str | None, user_id: str | None = None) -> dict[str, Any]:
    """Whose request it is, as attributes: the user only with ``MEMSTREAM_TRACE_USER_IDS``
    (traces outlive a forget)."""
    out: dict[str, Any] = {"tenant_id": tenant_id, "agent_id": agent_id}
    if _user_ids and user_id is not None:
        out["user_id"] = user_id
    return out


def tokens(counts: Any) -> dict[str, int]:
    """An answer's token counts (``TokenCounts``) as attributes."""
    return {
        "tokens.messages": counts.messages,
        "tokens.user_profile": counts.user_profile,
        "tokens.agent_memory": counts.agent_memory,
    }


# --- the API ----------------------------------------------------------------------------------


class RequestSpans:
    """ASGI middleware: a server span per HTTP request, continuing a ``traceparent`` the
    request carries; named by its route once routed."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        carrier = {}
        for name, value in scope.get("headers", ()):
            if name in (b"traceparent", b"tracestate"):
                carrier[name.decode()] = value.decode("latin-1")
        parent = _propagator.extract(carrier, context=otel_context.Context(), getter=_getter)
        method = scope.get("method", "")
        # Not the path: some hold a user id (/v1/users/{user_id}/...); the route is enough.
        attributes = {"http.request.method": method}
        with _tracer.start_as_current_span(
            method, context=parent, kind=SpanKind.SERVER, attributes=attributes
        ) as current:
            answered = [0]

            async def sending(message: Message) -> None:
                if message["type"] == "http.response.start":
                    answered[0] = int(message["status"])
                await send(message)

            try:
                await self.app(scope, receive, sending)
            finally:
                status = answered[0]
                # Unrouted but answered: the load path's direct answer, whose path is fixed.
                path = getattr(scope.get("route"), "path", None)
                if path is None and status not in (0, 404):
                    path = scope.get("path")
                if current.is_recording():
                    done: dict[str, Any] = {"http.response.status_code": status}
                    if path:
                        done["http.route"] = path
                        current.update_name(f"{method} {path}")
                    current.set_attributes(done)
                    if status >= 500:
                        current.set_status(Status(StatusCode.ERROR))
