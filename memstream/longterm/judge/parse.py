"""The candidates of a judge model's answer, repaired where possible."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from memstream.errors import JudgeOutputError
from memstream.longterm.judge.candidates import (
    CATEGORIES,
    SCOPES,
    cut_content,
    default_memory_type,
    default_scope,
)
from memstream.longterm.models import IMPORTANCE_RANGES, Candidate, Category, Scope, SessionMessage
from memstream.memory import MEMORY_TYPES, MemoryType

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.S)
_LIST_KEYS = ("memories", "candidates", "items", "results", "facts")


def _midpoint(category: Category) -> int:
    low, high = IMPORTANCE_RANGES[category]
    return (low + high + 1) // 2


def _loads(text: str) -> Any:
    stripped = text.strip().lstrip("\ufeff")
    fenced = _FENCE.search(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    elif stripped.startswith("```"):
        # An unterminated fence.
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    # Prose around the JSON: try the outermost object, then the outermost list.
    for open_, close in (("{", "}"), ("[", "]")):
        start, end = stripped.find(open_), stripped.rfind(close)
        if 0 <= start < end:
            try:
                return json.loads(stripped[start : end + 1])
            except ValueError:
                continue
    raise JudgeOutputError("the judge answered no JSON")


def _items_of(data: Any) -> list[Any]:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in _LIST_KEYS:
            if key in data:
                value = data[key]
                if value is None:
                    return []
                if isinstance(value, list):
                    return value
                if isinstance(value, dict):
                    return [value]
                raise JudgeOutputError(f"the judge's {key!r} is a {type(value).__name__}")
        if any(k in data for k in ("content", "memory", "text")):
            return [data]
    raise JudgeOutputError(f"the judge answered JSON without a memories list: {type(data)}")


def _choice(value: Any, allowed: Sequence[str]) -> str | None:
    if not isinstance(value, str):
        return None
    key = value.strip().lower().replace("-", "_").replace(" ", "_")
    return key if key in allowed else None


def _importance(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return default
    else:
        return default
    if number != number:  # NaN
        return default
    return max(1, min(10, round(number)))


def _event_ids(value: Any, allowed: Sequence[str]) -> tuple[str, ...]:
    raw: list[Any]
    if isinstance(value, list | tuple):
        raw = list(value)
    elif isinstance(value, str | int) and not isinstance(value, bool):
        raw = [value]
    else:
        raw = []
    known = set(allowed)
    out: list[str] = []
    for item in raw:
        if isinstance(item, bool) or not isinstance(item, str | int):
            continue
        key = str(item).strip().strip("()[]").strip()
        if key.startswith("[NEW]"):
            key = key[5:].strip().strip("()").strip()
        if key in known and key not in out:
            out.append(key)
    return tuple(out) if out else tuple(allowed)


def parse_judge_output(text: str, new_messages: Sequence[SessionMessage]) -> list[Candidate]:
    """The candidates of a judge model's answer; raises ``JudgeOutputError`` when it is not
    JSON or has no usable shape. Items that cannot be used are dropped, missing or unknown
    fields take their defaults."""
    data = _loads(text)
    items = _items_of(data)
    new_ids = [m.event_id for m in new_messages if m.new] or [m.event_id for m in new_messages]
    out: list[Candidate] = []
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, dict):
            continue
        raw = item.get("content", item.get("memory", item.get("text")))
        if not isinstance(raw, str):
            continue
        content = cut_content(raw)
        if not content or content.casefold() in seen:
            continue
        category: Category = _choice(item.get("category"), CATEGORIES) or "personal_fact"  # type: ignore[assignment]
        memory_type: MemoryType = _choice(
            item.get("memory_type", item.get("type")), MEMORY_TYPES
        ) or default_memory_type(category)  # type: ignore[assignment]
        scope: Scope = _choice(item.get("scope"), SCOPES) or default_scope(category)  # type: ignore[assignment]
        importance = _importance(item.get("importance"), _midpoint(category))
        sources = _event_ids(item.get("source_event_ids", item.get("event_ids")), new_ids)
        seen.add(content.casefold())
        out.append(Candidate(content, memory_type, scope, importance, category, sources))
    return out
