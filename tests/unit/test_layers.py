"""The layers point down: the client loads the wire contract and nothing of the server, and the
contract loads nothing else of memstream. Each import runs in a fresh interpreter, so what this
test process has imported already cannot hide a module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# What a platform service must not get by importing the client: the server's frameworks and
# drivers.
SERVER_LIBRARIES = (
    "sqlalchemy",
    "faust",
    "fastapi",
    "starlette",
    "uvicorn",
    "aiomysql",
    "aiosqlite",
    "redis",
    "pydantic_settings",
)
CLIENT = "import memstream.client"
CONTRACT = "import memstream.contract.api, memstream.contract.events, memstream.contract.schemas"


def loaded_after(statement: str) -> list[str]:
    """The modules a fresh interpreter holds after running ``statement`` on this checkout."""
    script = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    paths = [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    modules: list[str] = json.loads(done.stdout.splitlines()[-1])
    return modules


def within(modules: list[str], *roots: str) -> list[str]:
    return [m for m in modules if any(m == r or m.startswith(f"{r}.") for r in roots)]


@pytest.mark.parametrize("statement", [CLIENT, CONTRACT])
def test_neither_the_client_nor_the_contract_loads_the_server(statement: str) -> None:
    modules = loaded_after(statement)
    assert within(modules, *SERVER_LIBRARIES) == []
    assert within(modules, "memstream.store", "memstream.api", "memstream.streams") == []
    assert "memstream.settings" not in modules


# The modules of memstream's own besides the contract that the client shares with the server:
# the HTTP retry helper (httpx and the standard library only).
SHARED_WITH_THE_CLIENT = (
    "memstream",
    "memstream.failure",
    "memstream.failure.http",
)


def test_the_client_loads_only_itself_the_contract_and_the_http_retry() -> None:
    ours = within(loaded_after(CLIENT), "memstream")
    assert "memstream.client.api" in ours and "memstream.contract.api" in ours
    assert [m for m in ours if m not in SHARED_WITH_THE_CLIENT] == within(
        ours, "memstream.client", "memstream.contract"
    )


def test_the_contract_loads_nothing_else_of_memstream() -> None:
    ours = within(loaded_after(CONTRACT), "memstream")
    assert [m for m in ours if m != "memstream"] == within(ours, "memstream.contract")
