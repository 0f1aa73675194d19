"""What a change to long-term memory says (memstream.changes.model), checked against the public
schema ``memory-changed.v1``."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from memstream.changes.model import API, FORGET, RETENTION, Cause, added, removed
from memstream.cli.changes import Filter, line
from memstream.memory import MemoryItem
from memstream_client.contract.changes import Change, change_id, key_of, value_of, with_content
from memstream_client.contract.schemas import validator

NOW = datetime(2026, 5, 1, 12, 30, tzinfo=UTC)
ITEM = MemoryItem(
    id="m-new",
    tenant_id="acme",
    user_id="u-1",
    agent_id="helper",
    cube_id="user_profile",
    memory_type="text_mem",
    content="The user lives in Berlin.",
    importance=8,
    source_event_ids=("s2-0",),
    created_at=NOW,
    kind="fact",
    occurred_at=datetime(2026, 4, 30, tzinfo=UTC),
)


def published(change: Change) -> dict[str, Any]:
    value = with_content(value_of(change), change.content)
    validator("memory-changed.v1").validate(value)
    return value


def test_a_change_id_is_the_same_for_the_same_change_and_differs_otherwise() -> None:
    first = added(ITEM, "MYSQL", Cause.session("s2"), (), NOW)
    again = added(ITEM, "MYSQL", Cause.session("s2"), (), datetime.now(UTC))
    assert first.change_id == again.change_id == change_id("acme", "MYSQL", "m-new", "added")
    others = {
        removed(ITEM, "MYSQL", API, NOW).change_id,
        added(ITEM, "MEM0", Cause.session("s2"), (), NOW).change_id,
        change_id("other", "MYSQL", "m-new", "added"),
    }
    assert first.change_id not in others and len(others) == 3


def test_an_added_change_carries_the_text_and_what_it_supersedes() -> None:
    value = published(added(ITEM, "MYSQL", Cause.session("s2"), ["m-old"], NOW))
    assert value["change"] == "added" and value["content"] == "The user lives in Berlin."
    assert value["supersedes"] == ["m-old"] and value["superseded_by"] == []
    assert value["cause"] == "session" and value["conversation_id"] == "s2"
    assert value["source_event_ids"] == ["s2-0"]
    assert value["changed_at"] == "2026-05-01T12:30:00.000000Z"


def test_removals_are_named_by_their_cause_and_carry_no_text() -> None:
    old = replace(ITEM, id="m-old", content="The user lives in Paris.")
    superseded = published(removed(old, "MYSQL", Cause.conflict("s2", {"m-old": ["m-new"]}), NOW))
    assert superseded["change"] == "superseded" and superseded["superseded_by"] == ["m-new"]
    assert superseded["cause"] == "conflict" and "content" not in superseded
    assert published(removed(old, "MYSQL", API, NOW))["change"] == "deleted"
    assert published(removed(old, "MYSQL", RETENTION, NOW))["change"] == "expired"
    forgotten = published(removed(old, "MYSQL", FORGET, NOW))
    assert forgotten["change"] == "forgotten" and "content" not in forgotten
    assert forgotten["source_event_ids"] == [] and forgotten["occurred_at"] is None


def test_the_schema_refuses_text_on_anything_but_an_added_change() -> None:
    value = value_of(removed(ITEM, "MYSQL", FORGET, NOW))
    assert not validator("memory-changed.v1").is_valid({**value, "content": "leaked"})
    bare = value_of(added(ITEM, "MYSQL", API, (), NOW))
    assert not validator("memory-changed.v1").is_valid(bare)  # an added change needs its text


def test_an_erased_memory_is_announced_without_its_text() -> None:
    change = added(ITEM, "MYSQL", API, (), NOW)
    assert published(change)["content"]
    assert with_content(value_of(change), None)["content"] == ""


@pytest.mark.parametrize("tenant,user", [("acme", "u-1"), ('we"ird', "a/b")])
def test_the_key_is_the_tenant_and_the_user(tenant: str, user: str) -> None:
    assert orjson.loads(key_of(tenant, user)) == [tenant, user]


def test_an_operator_reads_one_line_per_change() -> None:
    value = with_content(value_of(added(ITEM, "MYSQL", Cause.session("s2"), ["m-old"], NOW)), "x")
    shown = line({**value, "content": "The user lives in Berlin."})
    assert shown.startswith("2026-05-01T12:30:00.000000Z  added")
    assert "acme/u-1" in shown and "user_profile:m-new" in shown and "session s2" in shown
    assert "'The user lives in Berlin.' supersedes m-old" in shown
    old = replace(ITEM, id="m-old")
    gone = line(value_of(removed(old, "MYSQL", Cause.conflict("s2", {"m-old": ["m-new"]}), NOW)))
    assert "superseded" in gone and gone.endswith("conflict s2  by m-new")


def test_the_operator_filter_picks_a_tenant_and_a_user() -> None:
    value = value_of(removed(ITEM, "MYSQL", API, NOW))
    assert Filter().wants(value) and Filter("acme", "u-1").wants(value)
    assert not Filter("acme", "u-2").wants(value) and not Filter("other").wants(value)
    assert not Filter().wants(["not", "a", "change"])
