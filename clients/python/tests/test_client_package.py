"""The distribution holds what a client needs and nothing of the server: the JSON Schemas of the
public events, dependencies that cover every import, and none of the server's frameworks."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import memstream_client
from memstream_client.contract.schemas import SCHEMAS_DIR, schema_names, validator

DISTRIBUTION = Path(__file__).resolve().parents[1]
PACKAGE = DISTRIBUTION / "memstream_client"
PROJECT = tomllib.loads((DISTRIBUTION / "pyproject.toml").read_text(encoding="utf-8"))["project"]
DEPENDENCIES = {canonicalize_name(Requirement(r).name) for r in PROJECT["dependencies"]}
# An integration's subpackage (memstream_client.agentscope) may import its extra's packages too.
EXTRAS = {
    extra: {canonicalize_name(Requirement(r).name) for r in requirements}
    for extra, requirements in PROJECT.get("optional-dependencies", {}).items()
}
# The import name of each dependency that is imported under another name.
IMPORTED_AS = {
    "rfc3339-validator": "rfc3339_validator",
    "langgraph-checkpoint": "langgraph",
    "opentelemetry-api": "opentelemetry",
}
SERVER = {"faust-streaming", "sqlalchemy", "fastapi", "uvicorn", "aiomysql", "redis", "aiosqlite"}


def test_the_package_ships_the_public_schemas() -> None:
    # In a checkout the validators read the repository's schemas/, the source of truth;
    # installed, the package's copy of it, made when the wheel was built.
    source = DISTRIBUTION.parents[1] / "schemas"
    if source.is_dir():
        assert source == SCHEMAS_DIR
        assert schema_names() == sorted(p.stem for p in source.glob("*.json"))
    else:
        assert SCHEMAS_DIR.parent == Path(memstream_client.__file__).parent
    assert {"message-written.v1", "session-ended.v1", "dead-letter.v1"} <= set(schema_names())
    assert validator("session-ended.v1").is_valid(
        {"event_id": "e1", "tenant_id": "t", "user_id": "u", "conversation_id": "c"}
    )


def test_the_dependencies_are_a_clients_not_the_servers() -> None:
    assert set() == DEPENDENCIES & SERVER
    assert {"httpx", "aiokafka", "pydantic"} <= DEPENDENCIES


def _third_party_imports() -> dict[str, set[str]]:
    """Top-level module -> the files of the package that import it (outside the standard
    library and the package itself)."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "memstream_client":
                    found.setdefault(top, set()).add(str(path.relative_to(PACKAGE)))
    return found


def _import_names(requirements: set[str]) -> set[str]:
    return {IMPORTED_AS.get(name, name.replace("-", "_")) for name in requirements}


def test_every_import_is_a_declared_dependency() -> None:
    declared = _import_names(DEPENDENCIES)
    undeclared = {
        top: files
        for top, files in _third_party_imports().items()
        if top not in declared
        and not all(top in _import_names(EXTRAS.get(Path(file).parts[0], set())) for file in files)
    }
    assert undeclared == {}, "add these to clients/python/pyproject.toml or drop the imports"
