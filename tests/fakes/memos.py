"""A fake MemOS server: MemOS's ``/product`` API over in-memory state, with knobs for every
misbehaviour the provider must survive (error envelopes, slow replies, code-200 delete
failures, async temporary ids, lost replies)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from tests.fakes.http import MemoryServerState, Seen, relevance

MEMOS_KEY = "memos-secret-key-123"
BUCKETS = ("text_mem", "pref_mem", "skill_mem", "tool_mem")


@dataclass
class MemOSState(MemoryServerState):
    """In-memory MemOS, with MemOS's own ways to fail besides."""

    envelope_error: dict[str, int] = field(default_factory=dict)  # path -> code (HTTP 200)
    relativity: dict[str, float] = field(default_factory=dict)  # id -> forced relativity
    delete_failure: bool = False  # delete_memory answers code 200, status failure
    add_async: str = ""  # "moved": temporary ids, stored under others; "lost": never stored
    no_get_memory: bool = False  # an older server without /product/get_memory

    def seed(
        self,
        cube: str,
        text: str,
        *,
        bucket: str = "text_mem",
        info: dict[str, Any] | None = None,
        age_seconds: int = 0,
    ) -> str:
        return self.store("mem", text, age_seconds, cube=cube, bucket=bucket, info=info or {})

    def calls(self, path: str) -> list[Seen]:
        return [r for r in self.requests if r.path == path]

    def texts(self, cube: str) -> list[str]:
        return sorted(m["memory"] for m in self.memories.values() if m["cube"] == cube)


def ok(data: Any, message: str = "ok") -> JSONResponse:
    return JSONResponse({"code": 200, "message": message, "data": data})


def memos_app(state: MemOSState) -> FastAPI:
    app = FastAPI()

    def node(memory: dict[str, Any], score: float | None) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "memory_type": "LongTermMemory",
            "created_at": memory["created_at"],
            "info": memory["info"],
            "status": "activated",
        }
        if score is not None:
            metadata["relativity"] = score
        return {"id": memory["id"], "memory": memory["memory"], "metadata": metadata}

    @app.middleware("http")
    async def prelude(request: Request, call_next: Any) -> Response:
        raw = await request.body()
        body = json.loads(raw) if raw else None
        path = request.url.path
        state.requests.append(Seen(request.method, path, body, dict(request.headers)))
        if request.headers.get("authorization") != f"Bearer {MEMOS_KEY}":
            return JSONResponse({"code": 401, "message": "bad key", "data": None}, 401)
        if (forced := await state.misbehave(path)) is not None:
            return forced
        if path in state.envelope_error:
            code = state.envelope_error[path]
            return JSONResponse({"code": code, "message": "backend failure", "data": None})
        if path in state.malformed:
            return ok(["not", "an", "object"])
        if path == "/product/get_memory" and state.no_get_memory:
            return JSONResponse({"detail": "Not Found"}, 404)
        response: Response = await call_next(request)
        return response

    @app.post("/product/search")
    async def search(request: Request) -> JSONResponse:
        body = await request.json()
        data: dict[str, Any] = {b: [] for b in BUCKETS}
        data["pref_note"] = ""
        for cube in body["readable_cube_ids"]:
            for bucket in BUCKETS:
                scored = []
                for memory in state.memories.values():
                    if memory["cube"] != cube or memory["bucket"] != bucket:
                        continue
                    score = state.relativity.get(
                        memory["id"], relevance(body["query"], memory["memory"])
                    )
                    if score >= body["relativity"]:
                        scored.append((score, memory))
                scored.sort(key=lambda pair: -pair[0])
                limit = body["pref_top_k"] if bucket == "pref_mem" else body["top_k"]
                nodes = [node(m, s) for s, m in scored[:limit]]
                data[bucket].append({"cube_id": cube, "memories": nodes})
        return ok(data)

    @app.post("/product/add")
    async def add(request: Request) -> JSONResponse:
        body = await request.json()
        (cube,) = body["writable_cube_ids"]
        out = []
        for message in body["messages"]:
            temporary = f"tmp-{next(state.counter)}"
            if state.add_async == "lost":
                memory_id = temporary
            else:
                memory_id = state.seed(cube, message["content"], info=body.get("info"))
                state.memories[memory_id]["created_at"] = datetime.now(UTC).isoformat()
            answered = temporary if state.add_async else memory_id
            out.append(
                {
                    "memory": message["content"],
                    "memory_id": answered,
                    "memory_type": "LongTermMemory",
                    "cube_id": cube,
                }
            )
        if state.store_then_fail:
            state.store_then_fail = False
            return JSONResponse({"detail": "gateway timeout"}, 503)
        return ok(out, "Memory added successfully")

    @app.post("/product/get_user_names_by_memory_ids")
    async def owners(request: Request) -> JSONResponse:
        body = await request.json()
        found = {
            i: state.memories[i]["cube"] if i in state.memories else None
            for i in body["memory_ids"]
        }
        return ok(found)

    @app.post("/product/delete_memory")
    async def delete(request: Request) -> JSONResponse:
        body = await request.json()
        if state.delete_failure:
            return ok({"status": "failure"}, "Failed to delete memories")
        for memory_id in body["memory_ids"]:
            memory = state.memories.get(memory_id)
            if memory is not None and memory["cube"] in body["writable_cube_ids"]:
                del state.memories[memory_id]
        return ok({"status": "success"}, "Memories deleted successfully")

    @app.post("/product/get_memory")
    async def get_memory(request: Request) -> JSONResponse:
        body = await request.json()
        cube = body["mem_cube_id"]
        mine = [m for m in state.memories.values() if m["cube"] == cube]
        text = [node(m, None) for m in mine if m["bucket"] == "text_mem"]
        pref = [node(m, None) for m in mine if m["bucket"] == "pref_mem"]
        return ok(
            {
                "text_mem": [
                    {
                        "cube_id": cube,
                        "memories": {"nodes": text, "edges": []},
                        "total_nodes": len(text),
                        "total_edges": 0,
                    }
                ],
                "pref_mem": [{"cube_id": cube, "memories": pref, "total_nodes": len(pref)}],
            }
        )

    return app
