"""CPU-heavy stage work in a process of its own, so that the worker's event loop (ingest, the
consumer group's heartbeats, every other stage) keeps going while it runs.

Extractive summaries, the rule judge and the regular expressions they run over user text are
pure functions of their input: ``CpuPool.run`` sends one call to a child process and awaits
its answer, and the loop serves everything else meanwhile. A thread would not do: these are
pure-Python loops and regexes that hold the GIL. The children run at a lower priority, so on
a busy machine ingest gets the CPU first and this work catches up after. Inputs are capped by
the callers; a call that still runs past ``time_limit`` (an input no cap foresaw), or that
kills its child, fails with ``CpuWorkFailed`` and the next call gets a fresh child.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import ParamSpec, TypeVar

from memstream.errors import CpuWorkFailed

log = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")

TIME_LIMIT_SECONDS = 120.0
"""Longer than any capped input takes, short enough that a stuck child is replaced."""


NICENESS = 5
"""The children yield the CPU to the worker: ingest first, this work when a core is free."""


def _start_child(parent: int) -> None:
    # Ctrl-C reaches the whole process group; the worker stops its children itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.nice(NICENESS)
    threading.Thread(target=_exit_with, args=(parent,), name="parent", daemon=True).start()


def _exit_with(parent: int) -> None:
    """End this child once its worker is gone: a killed worker cannot stop it, and it would
    wait for work forever (it holds its own end of the call queue)."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


class CpuPool:
    """Child processes (started on first use, ``spawn``ed: nothing of the worker's loop or
    sockets is inherited) that run pure functions for the event loop."""

    def __init__(self, name: str, *, processes: int = 1, time_limit: float = TIME_LIMIT_SECONDS):
        self.name = name
        self.processes = processes
        self.time_limit = time_limit
        self._executor: ProcessPoolExecutor | None = None

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            self._executor = ProcessPoolExecutor(
                max_workers=self.processes,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_child,
                initargs=(os.getpid(),),
            )
        return self._executor

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(*args, **kwargs)`` in a child process; its exceptions are raised here."""
        if kwargs:
            raise TypeError("CpuPool.run passes positional arguments only")
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(
                loop.run_in_executor(self._pool(), fn, *args), self.time_limit
            )
        except TimeoutError:
            self.restart()
            raise CpuWorkFailed(
                f"{self.name}: {getattr(fn, '__name__', fn)} ran past {self.time_limit:g} s"
            ) from None
        except BrokenProcessPool as exc:
            self.restart()
            raise CpuWorkFailed(f"{self.name}: the child process died ({exc})") from None

    def restart(self) -> None:
        """Stop the children now (a stuck one included); the next call starts new ones."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        log.warning("%s: restarting its CPU process", self.name)
        for process in list(getattr(executor, "_processes", {}).values()):
            process.kill()
        executor.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
