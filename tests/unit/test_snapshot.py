"""The single-flight cache in front of the cluster-wide views (``memstream.snapshot``)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from memstream.snapshot import Snapshot, process_snapshot


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Slow:
    """A computation that waits for ``release`` and counts its runs; ``fail`` makes it raise."""

    def __init__(self) -> None:
        self.runs = 0
        self.release = asyncio.Event()
        self.fail = False

    async def __call__(self) -> int:
        self.runs += 1
        await self.release.wait()
        if self.fail:
            raise RuntimeError("broker down")
        return self.runs


async def together(snap: Snapshot[int], slow: Slow, callers: int) -> list[object]:
    """What ``callers`` concurrent gets answer, all asking before the computation ends."""
    asking = [asyncio.ensure_future(snap.get()) for _ in range(callers)]
    await asyncio.sleep(0)
    slow.release.set()
    return await asyncio.gather(*asking, return_exceptions=True)


async def test_concurrent_callers_await_one_refresh() -> None:
    slow = Slow()
    snap = Snapshot("test", slow, seconds=5, clock=Clock())
    assert await together(snap, slow, 10) == [1] * 10
    assert slow.runs == 1 and snap.computed == 1


async def test_the_value_is_kept_for_its_seconds_then_refreshed() -> None:
    slow, clock = Slow(), Clock()
    slow.release.set()
    snap = Snapshot("test", slow, seconds=5, clock=clock)
    assert await snap.get() == 1
    clock.now += 4.9
    assert await snap.get() == 1
    clock.now += 0.1
    assert await snap.get() == 2
    assert snap.computed == 2


async def test_zero_seconds_keeps_nothing_but_still_shares_a_refresh() -> None:
    slow = Slow()
    snap = Snapshot("test", slow, seconds=0, clock=Clock())
    assert await together(snap, slow, 3) == [1, 1, 1]
    assert await snap.get() == 2


async def test_a_failed_refresh_reaches_every_caller_and_is_not_kept() -> None:
    slow = Slow()
    slow.fail = True
    snap = Snapshot("test", slow, seconds=5, clock=Clock())
    results = await together(snap, slow, 3)
    assert all(isinstance(r, RuntimeError) for r in results)
    slow.fail = False
    assert await snap.get() == 2


async def test_a_caller_cancelled_does_not_cancel_the_others() -> None:
    slow = Slow()
    snap = Snapshot("test", slow, seconds=5, clock=Clock())
    leaving, staying = asyncio.ensure_future(snap.get()), asyncio.ensure_future(snap.get())
    await asyncio.sleep(0)
    leaving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    slow.release.set()
    assert await staying == 1
    assert await snap.get() == 1 and slow.runs == 1


async def test_kept_makes_one_snapshot_per_view_and_state() -> None:
    state = SimpleNamespace()
    slow = Slow()
    first = process_snapshot(state, "pipeline", slow, 5)
    assert process_snapshot(state, "pipeline", Slow(), 5) is first
    assert process_snapshot(state, "readiness", slow, 5) is not first
    assert process_snapshot(SimpleNamespace(), "pipeline", slow, 5) is not first
