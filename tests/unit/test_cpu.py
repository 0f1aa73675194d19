"""CPU work in a child process: answers come back, errors are raised, and a call that runs too
long or kills its process fails alone while the next call gets a fresh process; the judge's
rules run there, on a capped share of each message."""

from __future__ import annotations

import asyncio
import os
import time
from datetime import datetime

import pytest

from memstream.cpu import CpuPool
from memstream.errors import CpuWorkFailed
from memstream.longterm.judge import Judge
from memstream.longterm.judge.orchestrator import MAX_RULE_FACTS, RULE_INPUT_CHARS
from memstream.longterm.models import SessionMessage


def spin(seconds: float) -> int:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return os.getpid()


def explode(message: str) -> None:
    raise ValueError(message)


def die() -> None:
    os._exit(3)


async def test_work_runs_in_another_process_while_the_loop_goes_on() -> None:
    pool = CpuPool("test")
    try:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        await pool.run(spin, 0.0)  # the child's start-up is not what is measured
        ticks = 0
        child = await pool.run(spin, 1.0)
        ticker.cancel()
        assert child != os.getpid()
        assert ticks > 20  # the loop kept turning (about 100 ticks a second); blocked, none
    finally:
        pool.close()


async def test_errors_come_back() -> None:
    pool = CpuPool("test")
    try:
        with pytest.raises(ValueError, match="bad input"):
            await pool.run(explode, "bad input")
        assert await pool.run(spin, 0.0) > 0
    finally:
        pool.close()


async def test_a_call_past_its_time_limit_fails_and_the_next_one_runs() -> None:
    pool = CpuPool("test")
    try:
        first = await pool.run(spin, 0.0)  # started: the limit counts the call alone
        pool.time_limit = 0.5
        with pytest.raises(CpuWorkFailed, match="ran past"):
            await pool.run(spin, 30.0)
        pool.time_limit = 60
        assert await pool.run(spin, 0.0) != first  # a fresh child
    finally:
        pool.close()


async def test_a_dead_child_fails_its_call_only() -> None:
    pool = CpuPool("test")
    try:
        with pytest.raises(CpuWorkFailed, match="died"):
            await pool.run(die)
        assert await pool.run(spin, 0.0) > 0
    finally:
        pool.close()


def said(event_id: str, content: str) -> SessionMessage:
    return SessionMessage(event_id, "user", content, True, datetime(2024, 3, 1, 9, 30))


async def test_the_judge_gives_the_same_answer_from_its_process() -> None:
    session = [said("m1", "I moved to Berlin last month. I love jazz."), said("m2", "Thanks!")]
    pool = CpuPool("judge")
    try:
        assert await Judge(None, pool).judge(session, agent_id="a1") == await Judge(None).judge(
            session, agent_id="a1"
        )
    finally:
        pool.close()


async def test_the_rules_read_the_start_of_a_huge_message_only() -> None:
    filler = "Nothing to see here. " * 2000  # 42,000 characters
    message = said("m1", f"I live in Lisbon. {filler} I live in Oslo.")
    assert len(message.content) > 4 * RULE_INPUT_CHARS
    facts = " ".join(
        c.content for c in (await Judge(None).judge([message], agent_id=None)).candidates
    )
    assert "Lisbon" in facts and "Oslo" not in facts


def worker_with_a_child(pid_file: str) -> None:
    """A process that starts a CPU child, writes its pid, then waits to be killed."""

    async def run() -> None:
        pool = CpuPool("orphan")
        child = await pool.run(spin, 0.0)
        with open(pid_file, "w") as fh:
            fh.write(str(child))
        await asyncio.sleep(60)

    asyncio.run(run())


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_a_killed_worker_takes_its_child_along(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import multiprocessing
    import signal

    pid_file = tmp_path / "child.pid"
    worker = multiprocessing.get_context("spawn").Process(
        target=worker_with_a_child, args=(str(pid_file),)
    )
    worker.start()
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the child never started"
        await asyncio.sleep(0.1)
    child = int(pid_file.read_text())
    assert alive(child)
    os.kill(worker.pid, signal.SIGKILL)  # type: ignore[arg-type]
    worker.join()
    while alive(child):
        assert time.monotonic() < deadline + 10, "the child outlived its worker"
        await asyncio.sleep(0.1)


async def test_a_session_of_crafted_statements_gives_a_bounded_number_of_facts() -> None:
    messages = [
        said(f"m{n}", " ".join(f"I live in city {n}-{i}." for i in range(300))) for n in range(10)
    ]
    result = await Judge(None).judge(messages, agent_id=None)
    assert len(result.candidates) == MAX_RULE_FACTS
    assert len(result.episodes) == 10
