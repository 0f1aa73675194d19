"""What a source file imports, read from its tokens (not ``ast.parse``: on Python 3.11 parsing
while another thread does fails with "AST constructor recursion depth mismatch")."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path


def import_lines(path: Path) -> list[list[str]]:
    """Each ``import ...`` and ``from ... import ...`` statement of ``path`` (at its top or
    inside a function) as its words and dots, parentheses and commas left out."""
    source = io.StringIO(path.read_text(encoding="utf-8"))
    lines: list[list[str]] = [[]]
    for token in tokenize.generate_tokens(source.readline):
        if token.type == tokenize.NEWLINE:
            lines.append([])
        elif token.type in (tokenize.NAME, tokenize.OP) and token.string not in "(),":
            lines[-1].append(token.string)
    return [line for line in lines if line[:1] in (["from"], ["import"])]


def imported_from(line: list[str]) -> tuple[str, list[str]]:
    """A ``from`` statement's module and the names it imports (``as`` aliases kept)."""
    at = line.index("import")
    return "".join(line[1:at]), line[at + 1 :]
