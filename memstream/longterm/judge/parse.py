"""The candidates of a judge model's answer, repaired where possible, its flaws noted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memstream.errors import JudgeOutputError
from memstream.llm_output import Flaws, Unparseable, loads, unknown_fields
from memstream.longterm.judge.candidates import (
    CATEGORIES,
    SCOPES,
    cut_content,
    default_memory_type,
    default_scope,
)
from memstream.longterm.models import IMPORTANCE_RANGES, Candidate, Category, Scope, SessionMessage
from memstream.memory import MEMORY_TYPES, MemoryType

_LIST_KEYS = ("memories", "candidates", "items", "results", "facts")
ITEM_FIELDS = frozenset(
    {
        "content",
        "memory",
        "text",
        "category",
        "memory_type",
        "type",
        "scope",
        "importance",
        "source_event_ids",
        "event_ids",
    }
)


def _midpoint(category: Category) -> int:
    low, high = IMPORTANCE_RANGES[category]
    return (low + high + 1) // 2


def _loads(text: str, flaws: Flaws) -> Any:
    try:
        return loads(text, flaws)
    except Unparseable as exc:
        flaws.add("unparseable")
        raise JudgeOutputError(f"the judge answered no JSON ({exc})") from None


def _items_of(data: Any, flaws: Flaws) -> list[Any]:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in _LIST_KEYS:
            if key in data:
                if any(k != key for k in data):
                    flaws.add("invented_field")
                value = data[key]
                if value is None:
                    return []
                if isinstance(value, list):
                    return value
                if isinstance(value, dict):
                    return [value]
                flaws.add("wrong_type")
                raise JudgeOutputError(f"the judge's {key!r} is a {type(value).__name__}")
        if any(k in data for k in ("content", "memory", "text")):
            return [data]
    flaws.add("wrong_shape")
    raise JudgeOutputError(
        f"the judge answered JSON without a memories list ({type(data).__name__})"
    )


def _choice(value: Any, allowed: Sequence[str], flaws: Flaws) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        flaws.add("wrong_type")
        return None
    key = value.strip().lower().replace("-", "_").replace(" ", "_")
    if key in allowed:
        return key
    flaws.add("bad_value")
    return None


def _importance(value: Any, default: int, flaws: Flaws) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        flaws.add("wrong_type")
        return default
    if isinstance(value, str):
        flaws.add("wrong_type")
        try:
            value = float(value.strip())
        except ValueError:
            return default
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        flaws.add("out_of_range")
        return default
    if not 1 <= number <= 10:
        flaws.add("out_of_range")
    return max(1, min(10, round(number)))


def _event_ids(value: Any, allowed: Sequence[str], flaws: Flaws) -> tuple[str, ...]:
    raw: list[Any]
    if isinstance(value, list | tuple):
        raw = list(value)
    elif isinstance(value, str | int) and not isinstance(value, bool):
        raw = [value]
    else:
        if value is not None:
            flaws.add("wrong_type")
        raw = []
    known = set(allowed)
    out: list[str] = []
    for item in raw:
        if isinstance(item, bool) or not isinstance(item, str | int):
            flaws.add("wrong_type")
            continue
        key = str(item).strip().strip("()[]").strip()
        if key.startswith("[NEW]"):
            key = key[5:].strip().strip("()").strip()
        if key not in known:
            flaws.add("unknown_id")
        elif key not in out:
            out.append(key)
    return tuple(out) if out else tuple(allowed)


def parse_judge_output(
    text: str, new_messages: Sequence[SessionMessage], flaws: Flaws | None = None
) -> list[Candidate]:
    """The candidates of a judge model's answer; raises ``JudgeOutputError`` when it is not
    JSON, has no usable shape, or was cut off or had items and none of them is usable. Items
    that cannot be used are dropped, missing or unknown fields take their defaults; each flaw
    is added to ``flaws`` (an answer already known to be cut off has ``truncated`` there)."""
    flaws = Flaws() if flaws is None else flaws
    data = _loads(text, flaws)
    items = _items_of(data, flaws)
    new_ids = [m.event_id for m in new_messages if m.new] or [m.event_id for m in new_messages]
    out: list[Candidate] = []
    seen: set[str] = set()
    for item in items:
        candidate = _candidate(item, new_ids, flaws)
        if candidate is None or candidate.content.casefold() in seen:
            continue
        seen.add(candidate.content.casefold())
        out.append(candidate)
    if not out and "truncated" in flaws.found:
        raise JudgeOutputError("the judge's answer was cut off before its first usable memory")
    if not out and items:
        raise JudgeOutputError(f"none of the judge's {len(items)} items is a usable memory")
    return out


def _candidate(item: Any, new_ids: Sequence[str], flaws: Flaws) -> Candidate | None:
    if not isinstance(item, dict):
        flaws.add("wrong_type")
        return None
    if unknown_fields(item, ITEM_FIELDS):
        flaws.add("invented_field")
    raw = item.get("content", item.get("memory", item.get("text")))
    if not isinstance(raw, str):
        flaws.add("wrong_type")
        return None
    content = cut_content(raw)
    if not content:
        flaws.add("bad_value")
        return None
    category: Category = _choice(item.get("category"), CATEGORIES, flaws) or "personal_fact"  # type: ignore[assignment]
    memory_type: MemoryType = _choice(
        item.get("memory_type", item.get("type")), MEMORY_TYPES, flaws
    ) or default_memory_type(category)  # type: ignore[assignment]
    scope: Scope = _choice(item.get("scope"), SCOPES, flaws) or default_scope(category)  # type: ignore[assignment]
    importance = _importance(item.get("importance"), _midpoint(category), flaws)
    sources = _event_ids(item.get("source_event_ids", item.get("event_ids")), new_ids, flaws)
    return Candidate(content, memory_type, scope, importance, category, sources)
