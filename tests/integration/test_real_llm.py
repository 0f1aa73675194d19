"""The long-term chain and the summary with a real small model (opt-in): llama-cpp-python's
server with SmolLM2-135M-Instruct, started here, behind ``MEMSTREAM_LLM_BASE_URL``.

Skipped unless ``MEMSTREAM_TEST_LLM_VENV`` names the server's venv (``make llm-venv`` makes
``var/llm-venv``); ``MEMSTREAM_TEST_LLM_MODEL`` may name another GGUF. CI has no model.
Every session must end in valid memories, the model's or the rules', and every answer the
model gave must be counted once, clean, repaired or rejected, with its flaws.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.broker.topics import publish
from memstream.memory import MEMORY_TYPES
from memstream.settings import Settings
from memstream.store.schema import conversation_summary, long_term_memory
from tests.support.kafka import chain_idle, message, session_end
from tests.support.llm import MODEL_NAME, llm_server
from tests.support.processes import WorkerProcess, worker_metric
from tests.support.settings import free_port, isolated_settings
from tests.support.waiting import eventually

# Minutes per answer on a shared CPU: far past the suite's per-test timeout.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]

VENV = os.environ.get("MEMSTREAM_TEST_LLM_VENV", "")
MODEL = os.environ.get("MEMSTREAM_TEST_LLM_MODEL", "")

if not VENV:
    pytest.skip(
        "opt-in: MEMSTREAM_TEST_LLM_VENV names llama-cpp-python's venv (make llm-venv)",
        allow_module_level=True,
    )

SESSIONS = {
    # user: sessions, each a list of what the user says (the assistant acknowledges each)
    "ana": [
        ["Hi!", "I live in Lisbon with my partner.", "I am allergic to peanuts."],
        ["I moved from Lisbon to Oslo last month.", "Please always answer in short bullets."],
    ],
    "ben": [["Hello.", "My sister is called Mei and she is a pilot.", "I love ramen."]],
}
SUMMARISED = [f"Point {n}: I keep a garden with tomatoes and basil." for n in range(11)]


@pytest.fixture(scope="module")
def model_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("llm") / "server.log"
    with llm_server(Path(VENV), Path(MODEL) if MODEL else None, log=log) as url:
        yield url


def conversation(tenant: str, user: str, conv: str, lines: list[str]) -> list[dict[str, Any]]:
    events = []
    for i, line in enumerate(lines):
        common = {"user_id": user, "agent_id": "agent-1"}
        events.append(message(tenant, conv, 2 * i, role="user", content=line, **common))
        events.append(
            message(tenant, conv, 2 * i + 1, role="assistant", content="Noted.", **common)
        )
    return events


async def metric(port: int, name: str, **labels: str) -> float:
    return await worker_metric(port, name, **labels)


async def test_every_session_ends_in_memories_and_every_answer_is_counted(
    model_url: str, tenant: str, engine: AsyncEngine, tmp_path: Path
) -> None:
    port = free_port()
    settings: Settings = isolated_settings(
        llm_base_url=model_url,
        llm_model=MODEL_NAME,
        # A 135M model on a shared CPU: a judge's answer has taken minutes.
        llm_timeout_seconds=900,
        llm_max_in_flight=1,
        llm_max_tokens=256,
        worker_web_port=port,
    )
    worker = WorkerProcess(settings, tmp_path).start()
    try:
        await run_sessions(settings, tenant, engine, port)
    finally:
        worker.stop()


async def run_sessions(settings: Settings, tenant: str, engine: AsyncEngine, port: int) -> None:
    ended = 0
    for user, sessions in SESSIONS.items():
        for n, lines in enumerate(sessions):
            conv = f"{user}-{n}"
            await publish(settings, "message-written", conversation(tenant, user, conv, lines))
    await publish(settings, "message-written", conversation(tenant, "dora", "dora-0", SUMMARISED))
    # A user's sessions one after the other: the second finds the first's memories live, so
    # the conflict resolver is asked.
    for n in range(2):
        batch = [
            session_end(tenant, f"{u}-{n}", user_id=u) for u, s in SESSIONS.items() if n < len(s)
        ]
        await publish(settings, "session-ended", batch)
        ended += len(batch)

        async def judged(target: int = ended) -> bool:
            try:
                done = await metric(port, "memstream_events_total", stage="judge")
            except httpx.HTTPError:
                return False  # the worker is not serving its metrics yet
            return done >= target

        await eventually(judged, within=1800, what=f"{ended} sessions judged")

    async def summarised() -> bool:
        query = select(conversation_summary.c.summary).where(
            conversation_summary.c.tenant_id == tenant
        )
        async with engine.connect() as conn:
            return (await conn.execute(query)).first() is not None

    await eventually(summarised, within=600, what="the conversation summarised")

    await eventually(lambda: chain_idle(settings), within=900, what="the long-term chain idle")
    await check_memories(tenant, engine)
    await check_counts(port, ended)


async def check_memories(tenant: str, engine: AsyncEngine) -> None:
    query = select(long_term_memory).where(
        long_term_memory.c.tenant_id == tenant, long_term_memory.c.deleted_at.is_(None)
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).mappings().all()
    by_user: dict[str, list[Any]] = {}
    for row in rows:
        by_user.setdefault(row["user_id"], []).append(row)
    assert set(by_user) == set(SESSIONS), by_user.keys()
    for row in rows:
        assert row["content"].strip() and len(row["content"]) <= 200, row
        assert 1 <= row["importance"] <= 10, row
        assert row["memory_type"] in MEMORY_TYPES, row
        assert row["kind"] in ("fact", "episode"), row
        assert row["source_event_ids"], row


async def check_counts(port: int, sessions: int) -> None:
    async def count(name: str, **labels: str) -> float:
        return await metric(port, name, **labels)

    judged = await count("memstream_events_total", stage="judge")
    by_model = await count("memstream_events_total", stage="judge", outcome="llm")
    by_rules = await count("memstream_events_total", stage="judge", outcome="rules")
    assert judged == sessions == by_model + by_rules
    fallbacks = await count("memstream_judge_fallbacks_total")
    assert by_rules == fallbacks
    for stage in ("judge", "conflict", "summary"):
        clean, repaired, rejected = [
            await count("memstream_llm_answers_total", stage=stage, outcome=outcome)
            for outcome in ("clean", "repaired", "rejected")
        ]
        answered = await count("memstream_llm_requests_total", purpose=stage, outcome="ok")
        empty = await count("memstream_llm_requests_total", purpose=stage, outcome="empty")
        # Every completion was read once, an empty one rejected as such.
        assert clean + repaired + rejected == answered + empty, stage
        flaws = await count("memstream_llm_malformed_total", stage=stage)
        # A repaired or rejected answer has one flaw at least, at most one of each reason.
        assert repaired + rejected <= flaws <= 9 * (repaired + rejected), stage
        if stage == "judge":
            used = clean + repaired
            assert used == by_model
            # Rejected: unusable, or blank (counted as an empty completion too).
            malformed = await count("memstream_judge_fallbacks_total", reason="malformed")
            blank = await count("memstream_judge_fallbacks_total", reason="empty")
            assert rejected == malformed + blank
        print(f"{stage}: {clean:.0f} clean, {repaired:.0f} repaired, {rejected:.0f} rejected")
