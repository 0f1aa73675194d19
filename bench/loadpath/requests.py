"""Requests of the load path benchmark: context bodies, agent configuration, and one pass over
them that checks what the answers hold."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from bench.loadpath.data import AGENTS, agent_of, user_of
from bench.loadpath.servers import Server

TIMEOUT_SECONDS = 5.0


def body(tenant: str, i: int, query: str, *, long_term: bool) -> dict[str, Any]:
    return {
        "tenant_id": tenant,
        "user_id": user_of(i),
        "agent_id": agent_of(i, long_term=long_term),
        "conversation_id": f"conv-{i}",
        "query": query,
    }


async def configure_agents(
    server: Server, tenant: str, headers: dict[str, str] | None = None
) -> None:
    """Short-term agents with long-term memory off, long-term agents on the built-in store."""
    async with httpx.AsyncClient(base_url=server.base, headers=headers) as client:
        for a in range(AGENTS):
            for long_term in (False, True):
                r = await client.put(
                    f"/v1/agents/{agent_of(a, long_term=long_term)}/config",
                    params={"tenant_id": tenant},
                    json={
                        "long_memory_provider": "MYSQL",
                        "open_long_memory": long_term,
                        "model_target_id": "bench-model",
                    },
                )
                r.raise_for_status()


@dataclass
class Pass:
    """What one request per conversation answered (a priming and checking pass)."""

    responses: int
    mean_messages: float
    mean_message_tokens: float
    mean_bytes: float
    with_items: int
    mean_items: float
    degraded: Counter[str]
    providers: Counter[str]


async def one_pass(server: Server, bodies: Sequence[dict[str, Any]], workers: int = 16) -> Pass:
    """Every body once, ``workers`` at a time; a non-200 answer is an error."""
    todo = list(bodies)
    answers: list[tuple[int, dict[str, Any]]] = []

    async def worker(client: httpx.AsyncClient) -> None:
        while todo:
            r = await client.post("/v1/context", json=todo.pop())
            if r.status_code != 200:
                raise RuntimeError(f"{server.name}: HTTP {r.status_code}: {r.text[:300]}")
            answers.append((len(r.content), r.json()))

    limits = httpx.Limits(max_connections=workers)
    timeout = httpx.Timeout(30)
    async with httpx.AsyncClient(base_url=server.base, limits=limits, timeout=timeout) as client:
        await asyncio.gather(*(worker(client) for _ in range(workers)))
    n = len(answers)
    return Pass(
        responses=n,
        mean_messages=sum(len(a["messages"]) for _, a in answers) / n,
        mean_message_tokens=sum(a["tokens"]["messages"] for _, a in answers) / n,
        mean_bytes=sum(size for size, _ in answers) / n,
        with_items=sum(1 for _, a in answers if a["long_term"]["items"]),
        mean_items=sum(len(a["long_term"]["items"]) for _, a in answers) / n,
        degraded=Counter(part for _, a in answers for part in a["degraded"]),
        providers=Counter(str(a["long_term"]["provider"]) for _, a in answers),
    )
