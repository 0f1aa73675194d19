"""How a LangGraph namespace names a memstream user (no IO): a template of literal labels and
one ``{user_id}`` label, LangMem's ``("memories", "{user_id}")``; what follows the template
is the item's own namespace, kept with it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langgraph.store.base import InvalidNamespaceError, MatchCondition

USER = "{user_id}"


@dataclass(frozen=True, slots=True)
class NamespaceTemplate:
    """``("memories", "{user_id}")``: namespace ``("memories", "u1", "prefs")`` is user
    ``u1``'s namespace ``("prefs",)``."""

    parts: tuple[str, ...] = ("memories", USER)

    def __post_init__(self) -> None:
        if self.parts.count(USER) != 1:
            raise ValueError(f"a namespace template names {USER} exactly once: {self.parts}")

    def split(self, namespace: Sequence[str]) -> tuple[str, tuple[str, ...]]:
        """(user, the item's namespace below the template); ``InvalidNamespaceError`` for a
        namespace that does not name a user."""
        if len(namespace) < len(self.parts):
            raise InvalidNamespaceError(
                f"namespace {tuple(namespace)} names no user: it starts with the template"
                f" {self.parts}"
            )
        user = ""
        for label, part in zip(namespace, self.parts, strict=False):
            if part == USER:
                user = label
            elif label != part:
                raise InvalidNamespaceError(
                    f"namespace {tuple(namespace)} does not match the template {self.parts}"
                )
        return user, tuple(namespace[len(self.parts) :])

    def join(self, user_id: str, below: Sequence[str]) -> tuple[str, ...]:
        """The LangGraph namespace of a user's namespace ``below``."""
        return tuple(user_id if p == USER else p for p in self.parts) + tuple(below)


def _fits(path: Sequence[str], labels: Sequence[str]) -> bool:
    return len(labels) >= len(path) and all(
        p == "*" or p == label for p, label in zip(path, labels, strict=False)
    )


def matches(namespace: Sequence[str], conditions: Sequence[MatchCondition] | None) -> bool:
    """LangGraph's prefix and suffix conditions (``*`` matches any one label)."""
    for condition in conditions or ():
        path = tuple(condition.path)
        if condition.match_type == "prefix":
            if not _fits(path, namespace):
                return False
        elif not _fits(path[::-1], tuple(namespace)[::-1]):
            return False
    return True
