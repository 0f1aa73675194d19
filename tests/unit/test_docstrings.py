"""A module's docstring says what the module is for in a few lines and points to its page in
docs/ for the rest; it never cites a document the repository does not hold."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIBRARY = ("memstream", "agents", "streams", "tables", "clients/python/memstream_client")
# The benchmarks and scripts hold to the same: their method is told in BENCHMARKS.md.
TOOLS = ("bench", "scripts")
MAX_LINES = 12
# The public interface's spec lives outside the repository: the code cites docs/ instead.
OUTSIDE = re.compile(r"\bCONTRACT(?:\.md)?\s+(?:section\s+)?\d")


def library_modules(roots: tuple[str, ...] = LIBRARY) -> list[Path]:
    return sorted(p for root in roots for p in (REPO / root).rglob("*.py") if p.is_file())


def module_docstring(path: Path) -> str | None:
    """The literal of the module's docstring, read from its tokens (not ``ast.parse``: on
    Python 3.11 parsing while another thread does fails with "AST constructor recursion depth
    mismatch")."""
    source = io.StringIO(path.read_text(encoding="utf-8"))
    skipped = (tokenize.ENCODING, tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE)
    for token in tokenize.generate_tokens(source.readline):
        if token.type not in skipped:
            return token.string if token.type == tokenize.STRING else None
    return None


def test_the_library_has_modules_to_check() -> None:
    assert len(library_modules()) > 100


def test_no_module_docstring_runs_past_a_few_lines() -> None:
    long = {}
    for path in library_modules(LIBRARY + TOOLS):
        doc = module_docstring(path)
        if doc and doc.count("\n") + 1 > MAX_LINES:
            long[str(path.relative_to(REPO))] = doc.count("\n") + 1
    assert long == {}


def test_no_comment_or_page_cites_a_document_outside_the_repository() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    cited = [
        f"{path.relative_to(REPO)}:{n}"
        for path in [*library_modules(), *pages]
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert cited == []
