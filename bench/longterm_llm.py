"""The long-term chain with a real small model next to the rule-based judge:
``python -m bench longterm-llm`` (needs ``make llm-venv``).

SmolLM2-135M-Instruct behind llama-cpp-python's server (``tests.support.llm``) judges, resolves
conflicts and summarises, at tens of tokens per second on a CPU, so the runs are small:

1. Latency: ``SESSIONS`` sessions of the chain bench's shape (20 messages, six stated facts),
   each user's second session after its first (so the conflict resolver is asked), ended one
   at a time; each one's latency is from publishing its ``session-ended`` to its memories
   being stored. The same sessions with the rule judge, on a worker of their own.
2. LoCoMo: ``SUBSET`` (the first conversation, its first sessions; only the questions whose
   evidence lies in them), through the chain with the model and with the rules.

Each model run ends with what the worker counted: answers clean, repaired or rejected per
stage, their flaws by reason, and the judge's fallbacks to the rules.
"""

from __future__ import annotations

import statistics
import time
import uuid
from typing import Any

from bench.longterm import Subset, locomo_pipeline, session_events, users_with_memories
from bench.support import isolated_settings, log_dir, start_worker
from memstream.broker.topics import publish
from memstream.settings import Settings
from memstream.store.database import create_engine, migrate
from memstream.store.messages import MessageStore
from tests.support.llm import MODEL_NAME, llm_server
from tests.support.processes import worker_metric
from tests.support.settings import free_port
from tests.support.waiting import eventually

SESSIONS = 6
SUBSET = Subset(samples=1, sessions=4)
MAX_TOKENS = 384
"""The cap on every answer (``MEMSTREAM_LLM_MAX_TOKENS``): at about 17 tokens/s a judge asked
for its full 1500 takes 90 s a session."""
STAGES = ("judge", "conflict", "summary")
REASONS = (
    "truncated",
    "invented_field",
    "wrong_type",
    "bad_value",
    "out_of_range",
    "unknown_id",
    "unparseable",
    "wrong_shape",
    "empty",
)


def model_settings(url: str) -> dict[str, Any]:
    return {
        "llm_base_url": url,
        "llm_model": MODEL_NAME,
        "llm_timeout_seconds": 600.0,
        "llm_max_in_flight": 1,
        "llm_max_tokens": MAX_TOKENS,
    }


async def latency(base: Settings, overrides: dict[str, Any], judge: str) -> None:
    """Sessions ended one at a time; each one's time until its memories are stored."""
    tenant = f"ltl-{uuid.uuid4().hex[:8]}"
    port = free_port()
    settings = isolated_settings(worker_web_port=port, log_level="WARNING", **overrides)
    engine = create_engine(base.database_url)
    worker = start_worker(settings, log_dir("longterm-llm"))
    try:
        sessions = []
        for n in range(SESSIONS):
            events, end = session_events(tenant, n)
            # Sessions n and n + SESSIONS // 2 are one user's first and second.
            user = f"user-{n % (SESSIONS // 2)}"
            for event in [*events, end]:
                event["user_id"] = user
            sessions.append((events, end, user))
        await publish(settings, "message-written", [e for events, _, _ in sessions for e in events])
        store = MessageStore(engine)

        async def stored() -> bool:
            return await store.count(tenant) == 20 * SESSIONS

        await eventually(stored, within=300, what="messages stored")
        took = []
        for n, (_, end, user) in enumerate(sessions):
            before = (await users_with_memories(engine, tenant)).get(user)
            began = time.perf_counter()
            await publish(settings, "session-ended", [end])

            async def done(user: str = user, before: Any = before) -> bool:
                latest = (await users_with_memories(engine, tenant)).get(user)
                return latest is not None and latest != before

            await eventually(done, within=1800, what=f"session {n} stored")
            took.append(time.perf_counter() - began)
        print(f"long-term chain ({judge}), {SESSIONS} sessions of 20 messages, one at a time:")
        print(f"  session-ended -> memories stored: p50 {statistics.median(took):.1f} s, ", end="")
        print(f"max {max(took):.1f} s, each: {', '.join(f'{t:.1f}' for t in took)}")
        if overrides:
            await report_model(port)
    finally:
        worker.stop(timeout=30)
        await engine.dispose()


async def report_model(port: int) -> None:
    """What the worker on ``port`` counted of the model's answers."""
    for stage in STAGES:
        outcomes = {
            o: await worker_metric(port, "memstream_llm_answers_total", stage=stage, outcome=o)
            for o in ("clean", "repaired", "rejected")
        }
        failed = await worker_metric(port, "memstream_llm_requests_total", purpose=stage)
        failed -= await worker_metric(
            port, "memstream_llm_requests_total", purpose=stage, outcome="ok"
        )
        flaws = {
            r: await worker_metric(port, "memstream_llm_malformed_total", stage=stage, reason=r)
            for r in REASONS
        }
        answers = sum(outcomes.values())
        malformed = outcomes["repaired"] + outcomes["rejected"]
        print(
            f"  {stage:8s}: {answers:.0f} answers, {outcomes['clean']:.0f} clean, "
            f"{outcomes['repaired']:.0f} repaired, {outcomes['rejected']:.0f} rejected "
            f"(malformed {100 * malformed / max(1, answers):.0f}%); requests failed "
            f"{failed:.0f}; flaws: "
            + (", ".join(f"{r} {v:.0f}" for r, v in flaws.items() if v) or "none")
        )
    fallbacks = {
        r: await worker_metric(port, "memstream_judge_fallbacks_total", reason=r)
        for r in ("malformed", "timeout", "error", "empty")
    }
    print(
        "  judge fallbacks to the rules: " + ", ".join(f"{r} {v:.0f}" for r, v in fallbacks.items())
    )


async def main() -> None:
    base = Settings()
    await migrate(base.database_url)
    with llm_server(log=log_dir("llm-server") / "server.log") as url:
        await latency(base, model_settings(url), f"{MODEL_NAME} judge")
        await latency(base, {}, "rule-based judge")
        await locomo_pipeline(
            base,
            None,
            subset=SUBSET,
            overrides=model_settings(url),
            judge=f"{MODEL_NAME} judge",
            after=report_model,
        )
    await locomo_pipeline(base, None, subset=SUBSET)
