"""The exported line of a memory and its checks; the text and slots of keyed items; the
LangGraph namespace template (no services)."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest
from langgraph.store.base import InvalidNamespaceError, MatchCondition

from memstream.keyed import (
    check_filter,
    check_text,
    matches,
    path_of,
    slot_of,
    text_of,
    value_text,
)
from memstream.memory import MemoryItem
from memstream.transfer.lines import BadLine, line_of, new_memory, parse_line
from memstream_client.langgraph.namespaces import NamespaceTemplate
from memstream_client.langgraph.namespaces import matches as namespace_matches

WHEN = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)


def item(**changes: object) -> MemoryItem:
    values: dict[str, object] = {
        "id": "m1",
        "tenant_id": "t",
        "user_id": "u",
        "agent_id": "a",
        "cube_id": "agent_a",
        "memory_type": "text_mem",
        "content": "The user said they fly to Lisbon",
        "importance": 6,
        "source_event_ids": ("e1",),
        "created_at": WHEN,
        "kind": "episode",
        "occurred_at": WHEN.replace(day=2),
    }
    values.update(changes)
    return MemoryItem(**values)  # type: ignore[arg-type]


def test_a_line_reads_back_as_the_memory_it_was_with_its_times() -> None:
    raw = line_of(item(), "MYSQL", supersedes=["m0"])
    assert raw.endswith(b"\n")
    line = parse_line(raw.rstrip(b"\n"))
    assert orjson.loads(raw)["created_at"] == "2025-03-01T09:30:00Z"
    assert (line.state, line.supersedes, line.provider) == ("live", ["m0"], "MYSQL")
    memory = new_memory(line, "other-tenant")
    assert memory.tenant_id == "other-tenant"
    assert (memory.created_at, memory.occurred_at) == (WHEN, WHEN.replace(day=2))
    assert (memory.kind, memory.cube_id, memory.source_event_ids) == ("episode", "agent_a", ("e1",))


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "a JSON list, not an object"),
        (line_of(item(content="   "), "MYSQL"), "content"),
        (line_of(item(content="x" * 2001), "MYSQL"), "content"),
        (line_of(item(cube_id="somewhere"), "MYSQL"), "cube_id"),
        (line_of(item(memory_type="opinion_mem"), "MYSQL"), "memory_type"),
        (line_of(item(importance=11), "MYSQL"), "importance"),
    ],
)
def test_a_bad_line_says_why(raw: bytes, why: str) -> None:
    with pytest.raises(BadLine, match=why):
        parse_line(raw.rstrip(b"\n"))


def test_a_values_text_is_its_strings_content_first() -> None:
    assert text_of({"kind": "Memory", "content": {"content": "Likes tea", "tags": ["drinks"]}}) == (
        "Likes tea\ndrinks\nMemory"
    )
    assert text_of({"n": 3}) == '{"n":3}'
    assert len(text_of({"content": "x" * 5000})) == 2000


def test_a_namespace_path_has_its_parents_as_prefixes_only() -> None:
    assert path_of(("a", "b")).startswith(path_of(("a",)))
    assert not path_of(("ab",)).startswith(path_of(("a",)))
    assert not path_of(("a/b",)).startswith(path_of(("a",)))
    assert path_of(()) == ""
    assert slot_of(("a", "b"), "k") != slot_of(("a",), "b/k")


def test_filters_compare_as_langgraph_says() -> None:
    value = {"kind": "trip", "nights": 3}
    assert matches(value, {"kind": "trip"})
    assert not matches(value, {"kind": "hotel"})
    assert matches(value, {"nights": {"$gte": 3, "$lt": 4}})
    assert not matches(value, {"nights": {"$gt": 3}})
    assert matches(value, {"kind": {"$ne": "hotel"}})
    assert not matches(value, {"nights": {"$gt": "a string"}})
    check_filter({"nights": {"$gte": 3}, "kind": "trip"})
    with pytest.raises(ValueError, match="unknown filter operator '\\$near'"):
        check_filter({"nights": {"$near": 3}})


def test_the_template_names_the_user_and_keeps_the_rest() -> None:
    template = NamespaceTemplate()
    assert template.split(("memories", "u1", "trips")) == ("u1", ("trips",))
    assert template.join("u1", ("trips",)) == ("memories", "u1", "trips")
    assert NamespaceTemplate(("{user_id}",)).split(("u1",)) == ("u1", ())
    with pytest.raises(InvalidNamespaceError):
        template.split(("memories",))
    with pytest.raises(InvalidNamespaceError):
        template.split(("notes", "u1"))
    with pytest.raises(ValueError, match="exactly once"):
        NamespaceTemplate(("memories",))


def test_namespace_conditions_with_wildcards() -> None:
    name = ("memories", "u1", "trips")
    assert namespace_matches(name, [MatchCondition("prefix", ("memories", "*"))])
    assert namespace_matches(name, [MatchCondition("suffix", ("*", "trips"))])
    assert not namespace_matches(name, [MatchCondition("suffix", ("hotels",))])
    assert not namespace_matches(name, [MatchCondition("prefix", ("memories", "u2"))])


def test_what_no_column_can_hold_is_refused_before_any_write() -> None:
    assert value_text({"n": 3}) == '{"n":3}'
    with pytest.raises(ValueError, match="64-bit"):
        value_text({"n": 10**30})
    with pytest.raises(ValueError, match="surrogates"):
        value_text({"text": "\ud800"})
    check_text("trips", "next")
    with pytest.raises(ValueError, match="not valid Unicode"):
        check_text("ok", "\udc00")
