"""The library names the tables it queries by their own names, never by one-letter aliases:
``conversation_message.c.tenant_id`` reads at once where ``t.c.tenant_id`` needs its import."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIBRARY = ("memstream", "agents", "streams", "tables")


def schema_imports(path: Path) -> list[list[str]]:
    """The names after ``import`` of each ``from memstream.store.schema import ...`` of
    ``path``, read from its tokens (not ``ast.parse``: on Python 3.11 parsing while another
    thread does fails with "AST constructor recursion depth mismatch")."""
    source = io.StringIO(path.read_text(encoding="utf-8"))
    lines: list[list[str]] = [[]]
    for token in tokenize.generate_tokens(source.readline):
        if token.type == tokenize.NEWLINE:
            lines.append([])
        elif token.type in (tokenize.NAME, tokenize.OP) and token.string not in "(),":
            lines[-1].append(token.string)
    head = ["from", "memstream", ".", "store", ".", "schema", "import"]
    return [line[len(head) :] for line in lines if line[: len(head)] == head]


def test_no_table_is_imported_under_a_one_letter_name() -> None:
    aliased = []
    for root in LIBRARY:
        for path in sorted((REPO / root).rglob("*.py")):
            for names in schema_imports(path):
                aliased += [
                    f"{path.relative_to(REPO)}: {names[at - 1]} as {names[at + 1]}"
                    for at, word in enumerate(names[1:-1], 1)
                    if word == "as" and len(names[at + 1]) == 1
                ]
    assert aliased == []
