"""The library names the tables it queries by their own names, never by one-letter aliases:
``conversation_message.c.tenant_id`` reads at once where ``t.c.tenant_id`` needs its import."""

from __future__ import annotations

from pathlib import Path

from tests.support.sources import import_lines, imported_from

REPO = Path(__file__).resolve().parents[2]
LIBRARY = ("memstream", "agents", "streams", "tables")


def schema_imports(path: Path) -> list[list[str]]:
    """The names after ``import`` of each ``from memstream.store.schema import ...``."""
    found = [imported_from(line) for line in import_lines(path) if line[0] == "from"]
    return [names for module, names in found if module == "memstream.store.schema"]


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
