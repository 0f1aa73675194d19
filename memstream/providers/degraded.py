"""Parts of a provider call that fell back but still answered, for the load path's ``degraded``.

A search that loses its embeddings answers lexically instead of failing, so nothing reaches
the caller through the return value or an exception. The caller opens ``collect()`` around the
call; the provider names what fell back with ``note()``. A context variable carries the
collector down through every await without widening the provider interface, and a call with
no collector open (the API's own search, the worker) notes into nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_NOTED: ContextVar[list[str] | None] = ContextVar("memstream_provider_degraded", default=None)


@contextmanager
def collect() -> Iterator[list[str]]:
    """The parts noted by provider calls made inside the block, in the order noted, once each."""
    noted: list[str] = []
    token = _NOTED.set(noted)
    try:
        yield noted
    finally:
        _NOTED.reset(token)


def note(part: str) -> None:
    """Name a part that fell back (e.g. ``"embeddings"``) for whoever collects."""
    noted = _NOTED.get()
    if noted is not None and part not in noted:
        noted.append(part)
