"""What every candidate memory of the judge looks like, whoever proposed it: the model or the
rules."""

from __future__ import annotations

from memstream.longterm.models import MAX_CONTENT_CHARS, Category, Scope
from memstream.memory import MemoryType
from memstream.text.normalise import collapse_whitespace

CATEGORIES: tuple[Category, ...] = (
    "preference",
    "personal_fact",
    "plan",
    "relationship",
    "instruction",
)
SCOPES: tuple[Scope, ...] = ("user", "agent")


def default_memory_type(category: Category) -> MemoryType:
    return "pref_mem" if category in ("preference", "instruction") else "text_mem"


def default_scope(category: Category) -> Scope:
    return "agent" if category == "instruction" else "user"


def cut_content(text: str, limit: int = MAX_CONTENT_CHARS) -> str:
    """``text`` with collapsed whitespace, cut to ``limit`` characters at a word boundary
    when there is one in the second half."""
    text = collapse_whitespace(text)
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-")
