"""The library names the tables it queries by their own names, never by one-letter aliases:
``conversation_message.c.tenant_id`` reads at once where ``t.c.tenant_id`` needs its import."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIBRARY = ("memstream", "agents", "streams", "tables")


def test_no_table_is_imported_under_a_one_letter_name() -> None:
    aliased = []
    for root in LIBRARY:
        for path in sorted((REPO / root).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module == "memstream.store.schema":
                    aliased += [
                        f"{path.relative_to(REPO)}: {name.name} as {name.asname}"
                        for name in node.names
                        if name.asname is not None and len(name.asname) == 1
                    ]
    assert aliased == []
