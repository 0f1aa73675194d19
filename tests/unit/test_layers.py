"""The layers point down: the client (``memstream_client``) loads the wire contract and nothing
of the server, the contract nothing else of the client, and the server's ``memstream.client`` is
the client itself. Each import runs in a fresh interpreter, so what this
test process has imported already cannot hide a module."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLIENT_ROOT = REPO / "clients" / "python"
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
CLIENT = "import memstream_client"
# The server's own import path of the client, a re-export of memstream_client.
SERVER_PATH = "import memstream.client"
CONTRACT = (
    "import memstream_client.contract.api, memstream_client.contract.events, "
    "memstream_client.contract.schemas"
)
# Loaded on use, not on import: the publisher's broker client, the schemas' validator and the
# API client's HTTP library.
ON_USE = ("aiokafka", "kafka", "jsonschema", "httpx")


def loaded_after(statement: str) -> list[str]:
    """The modules a fresh interpreter holds after running ``statement`` on this checkout."""
    script = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    paths = [
        str(REPO),
        str(CLIENT_ROOT),
        *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)),
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    modules: list[str] = json.loads(done.stdout.splitlines()[-1])
    return modules


def within(modules: list[str], *roots: str) -> list[str]:
    return [m for m in modules if any(m == r or m.startswith(f"{r}.") for r in roots)]


@pytest.mark.parametrize("statement", [CLIENT, SERVER_PATH, CONTRACT])
def test_neither_the_client_nor_the_contract_loads_the_server(statement: str) -> None:
    modules = loaded_after(statement)
    assert within(modules, *SERVER_LIBRARIES) == []
    assert within(modules, "memstream.store", "memstream.api", "memstream.streams") == []
    assert "memstream.settings" not in modules


def test_the_client_loads_nothing_of_the_server() -> None:
    modules = loaded_after(CLIENT)
    assert "memstream_client.api" in modules and "memstream_client.contract.api" in modules
    assert within(modules, "memstream", "agents", "streams", "tables") == []


def test_the_servers_path_of_the_client_is_the_client_itself() -> None:
    modules = loaded_after(SERVER_PATH)
    assert within(modules, "memstream") == ["memstream", "memstream.client"]
    assert "memstream_client.publisher" in modules
    assert within(modules, *ON_USE) == []


def test_the_broker_client_and_the_validator_load_on_use_only() -> None:
    assert within(loaded_after(CLIENT), *ON_USE) == []
    used = loaded_after(
        "from memstream_client import checked\n"
        "checked('session-ended', {'tenant_id': 't', 'user_id': 'u', 'conversation_id': 'c'}, 10)"
    )
    assert "jsonschema" in used and within(used, "aiokafka") == []


def _imported(path: Path) -> set[str]:
    """The modules a source file imports (at its top or inside a function)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


@pytest.mark.parametrize(
    "path", sorted((CLIENT_ROOT / "memstream_client" / "contract").glob("*.py")), ids=str
)
def test_the_contract_imports_nothing_else_of_the_client(path: Path) -> None:
    # Importing a contract module runs the client package's __init__ first, so this is read
    # from the source: the contract must stand without the API client and the publisher.
    ours = within(sorted(_imported(path)), "memstream", "memstream_client")
    assert ours == within(ours, "memstream_client.contract"), path


@pytest.mark.parametrize(
    "statement",
    [
        "import memstream_client.mcp.command",
        "import memstream.cli.main",
        "import memstream.api.app",
    ],
)
def test_the_mcp_sdk_loads_on_use_only(statement: str) -> None:
    # A second of CPU: `memstream --help` and an API that serves no /mcp request never pay it.
    assert within(loaded_after(statement), "mcp", "mcp_types") == []
