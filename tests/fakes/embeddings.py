"""A fake OpenAI-compatible embeddings server: deterministic vectors, scripted faults, and
scripted meanings (texts given vectors close to each other)."""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response


def fake_vector(text: str, dimension: int) -> list[float]:
    """The same text always gets the same vector (not unit length: the client normalises)."""
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
    return (np.random.default_rng(seed).normal(size=dimension) * 3.0).tolist()


@dataclass
class Fault:
    """One scripted answer instead of a good one: an HTTP ``status`` (with ``retry_after``),
    a ``delay`` first, a ``raw`` non-JSON body, vectors of another ``dimension``, ``missing``
    vectors left out, ``reversed`` data order (indices still right), or ``body`` as is."""

    status: int = 200
    retry_after: str | None = None
    delay: float = 0.0
    raw: str | None = None
    dimension: int | None = None
    missing: int = 0
    reversed: bool = False
    body: Any = None


@dataclass
class EmbeddingScript:
    """What the server answers: ``faults`` in order, then good answers of ``dimension``
    (the vector ``meanings`` gives a text, else a pseudo-random one); every request body and
    its headers are kept."""

    dimension: int = 8
    faults: list[Fault | int] = field(default_factory=list)
    meanings: dict[str, list[float]] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    @property
    def batches(self) -> list[list[str]]:
        return [list(r["input"]) for r in self.requests]


def embeddings_app(script: EmbeddingScript) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> Response:
        body = await request.json()
        script.requests.append(body)
        script.headers.append(dict(request.headers))
        fault = script.faults.pop(0) if script.faults else Fault()
        if isinstance(fault, int):
            fault = Fault(status=fault)
        if fault.delay:
            await asyncio.sleep(fault.delay)
        if fault.status != 200:
            headers = {"Retry-After": fault.retry_after} if fault.retry_after else None
            return JSONResponse(
                {"error": {"message": f"scripted {fault.status}"}},
                status_code=fault.status,
                headers=headers,
            )
        if fault.raw is not None:
            return PlainTextResponse(fault.raw)
        if fault.body is not None:
            return JSONResponse(fault.body)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dimension = fault.dimension or script.dimension
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": script.meanings.get(text) or fake_vector(text, dimension),
            }
            for i, text in enumerate(texts)
        ]
        data = data[: len(data) - fault.missing]
        if fault.reversed:
            data.reverse()
        return JSONResponse({"object": "list", "model": body.get("model"), "data": data})

    return app
