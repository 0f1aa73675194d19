"""A fake Mem0 server: the Mem0 REST API over in-memory state, with knobs for failures, slow
replies, distance scores and lost replies."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from tests.fakes.http import MemoryServerState, Seen, relevance

MEM0_KEY = "mem0-secret-key-456"


@dataclass
class Mem0State(MemoryServerState):
    """In-memory Mem0, which may score by distance."""

    score_kind: str = "similarity"  # "distance": answer 1 - similarity, lower is better
    score: dict[str, float] = field(default_factory=dict)  # id -> forced raw score

    def seed(
        self,
        user_id: str,
        text: str,
        *,
        agent_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        age_seconds: int = 0,
    ) -> str:
        return self.store(
            "m0",
            text,
            age_seconds,
            hash=str(hash(text)),
            metadata=metadata,
            updated_at=None,
            user_id=user_id,
            **({"agent_id": agent_id} if agent_id else {}),
        )

    def calls(self, method: str, prefix: str) -> list[Seen]:
        return [r for r in self.requests if r.method == method and r.path.startswith(prefix)]

    def texts(self, user_id: str) -> list[str]:
        return sorted(m["memory"] for m in self.memories.values() if m["user_id"] == user_id)


def mem0_app(state: Mem0State) -> FastAPI:
    app = FastAPI()

    def route(method: str, path: str) -> str:
        return f"{method} {'/memories/{id}' if path.startswith('/memories/') else path}"

    @app.middleware("http")
    async def prelude(request: Request, call_next: Any) -> Response:
        raw = await request.body()
        body = json.loads(raw) if raw else None
        key = route(request.method, request.url.path)
        query = dict(request.query_params)
        seen = Seen(request.method, request.url.path, body or query or None, dict(request.headers))
        state.requests.append(seen)
        if request.headers.get("x-api-key") != MEM0_KEY:
            return JSONResponse({"detail": "Invalid API key"}, 401)
        if (forced := await state.misbehave(key)) is not None:
            return forced
        if key in state.malformed:
            return JSONResponse({"results": "not a list"})
        response: Response = await call_next(request)
        return response

    def matches(memory: dict[str, Any], filters: dict[str, Any]) -> bool:
        return all(memory.get(k) == v for k, v in filters.items())

    @app.post("/memories")
    async def add(request: Request) -> JSONResponse:
        body = await request.json()
        if not any(body.get(k) for k in ("user_id", "agent_id", "run_id")):
            return JSONResponse({"detail": "At least one identifier is required."}, 400)
        results = []
        for message in body["messages"]:
            if message["role"] == "system":
                continue
            memory_id = state.seed(
                body["user_id"],
                message["content"],
                agent_id=body.get("agent_id"),
                metadata=body.get("metadata"),
            )
            state.memories[memory_id]["created_at"] = datetime.now(UTC).isoformat()
            results.append({"id": memory_id, "memory": message["content"], "event": "ADD"})
        if state.store_then_fail:
            state.store_then_fail = False
            return JSONResponse({"detail": "gateway timeout"}, 503)
        return JSONResponse({"results": results})

    @app.post("/search")
    async def search(request: Request) -> JSONResponse:
        body = await request.json()
        threshold = body.get("threshold")
        scored = []
        for memory in state.memories.values():
            if not matches(memory, body["filters"]):
                continue
            similarity = state.score.get(memory["id"], relevance(body["query"], memory["memory"]))
            raw = 1.0 - similarity if state.score_kind == "distance" else similarity
            if threshold is not None and raw < threshold:
                continue
            scored.append((similarity, {**memory, "score": raw}))
        scored.sort(key=lambda pair: -pair[0])
        return JSONResponse({"results": [m for _, m in scored[: body["top_k"]]]})

    @app.get("/memories")
    async def get_all(request: Request) -> JSONResponse:
        filters = {k: v for k, v in request.query_params.items() if k in ("user_id", "agent_id")}
        if not filters:
            return JSONResponse({"detail": "At least one identifier is required."}, 400)
        found = [m for m in state.memories.values() if matches(m, filters)]
        return JSONResponse({"results": found[: int(request.query_params.get("limit", 100))]})

    @app.get("/memories/{memory_id}")
    async def get_one(memory_id: str) -> JSONResponse:
        return JSONResponse(state.memories.get(memory_id))

    @app.delete("/memories/{memory_id}")
    async def delete(memory_id: str) -> JSONResponse:
        if state.memories.pop(memory_id, None) is None:
            return JSONResponse({"detail": f"Memory with id {memory_id} not found"}, 500)
        return JSONResponse({"message": "Memory deleted successfully"})

    return app
