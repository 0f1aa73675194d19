"""Rule-based conflict resolution of a candidate against the live memories of its cube, slot
extraction in English and Chinese, and the validation of a model's decision."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from memstream.errors import MalformedDecision
from memstream.longterm.conflict import (
    Decision,
    Fact,
    clash,
    facts,
    outdated,
    parse,
    parse_decision,
    resolve,
    shortlist,
)
from memstream.longterm.models import Candidate
from memstream.memory import MemoryItem

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def item(id_: str, content: str) -> MemoryItem:
    return MemoryItem(id_, "t1", "u1", "a1", "user_profile", "text_mem", content, 6, ("e0",), NOW)


def cand(content: str) -> Candidate:
    return Candidate(content, "text_mem", "user", 7, "personal_fact", ("e9",))


def live(*texts: str) -> list[MemoryItem]:
    return [item(f"m{i}", t) for i, t in enumerate(texts, 1)]


# --- slot extraction -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The user lives in Paris.", ["residence=paris"]),
        ("User currently lives in Berlin now", ["residence=berlin"]),
        ("The user moved from Paris to Berlin.", ["residence=berlin", "residence!=paris"]),
        ("The user moved to Berlin from Paris.", ["residence=berlin", "residence!=paris"]),
        ("The user no longer lives in Paris", ["residence!=paris"]),
        ("The user used to live in Paris", ["residence!=paris"]),
        ("The user works at Google.", ["employer=google"]),
        ("The user no longer works for Google", ["employer!=google"]),
        ("The user works as a software engineer", ["job=software engineer"]),
        ("The user's name is Bob.", ["name=bob"]),
        ("The user prefers to be called Bobby", ["name=bobby"]),
        ("The user is 30 years old.", ["age=30"]),
        ("The user's favourite colour is blue", ["favourite:colour=blue"]),
        ("The user's favorite color is green.", ["favourite:colour=green"]),
        ("The user likes cats.", ["likes=cats"]),
        ("The user does not like cats", ["likes!=cats"]),
        ("The user doesn't like cats anymore", ["likes!=cats"]),
        ("The user dislikes cats", ["likes!=cats"]),
        ("The user is vegetarian", ["diet=vegetarian"]),
        ("The user eats meat", ["diet=omnivore"]),
        ("The user lives in Paris and works at Google", ["residence=paris", "employer=google"]),
        ("用户住在北京。", ["residence=北京"]),
        ("用户搬到了上海。", ["residence=上海"]),
        ("用户从北京搬到了上海", ["residence=上海", "residence!=北京"]),
        ("用户以前住在北京", ["residence!=北京"]),
        ("用户在谷歌工作", ["employer=谷歌"]),
        ("用户叫小明", ["name=小明"]),
        ("用户的名字是小明", ["name=小明"]),
        ("用户今年30岁", ["age=30"]),
        ("用户喜欢猫", ["likes=猫"]),
        ("用户不喜欢猫", ["likes!=猫"]),
        ("用户讨厌猫", ["likes!=猫"]),
        ("用户最喜欢的颜色是蓝色", ["favourite:颜色=蓝色"]),
        ("用户住在北京，在谷歌工作", ["residence=北京", "employer=谷歌"]),
        ("用户吃素", ["diet=vegetarian"]),
    ],
)
def test_slot_facts(text: str, expected: list[str]) -> None:
    assert [str(f) for f in facts(text)] == expected


def test_texts_about_someone_else_or_without_a_slot_have_no_facts() -> None:
    assert facts("The user's sister lives in Rome") == ()
    assert facts("The user is allergic to peanuts") == ()
    assert facts("用户的妻子住在上海") == ()


def test_complete_when_the_facts_cover_the_whole_text() -> None:
    assert parse("The user lives in Berlin now.").complete
    assert not parse("The user lives in Berlin with two cats.").complete
    assert not parse("The user is allergic to peanuts").complete  # no facts


def test_clash_rules() -> None:
    paris, berlin = Fact("residence", "paris"), Fact("residence", "berlin")
    assert clash(berlin, paris)
    assert not clash(Fact("residence", "paris france"), paris)  # compatible values
    assert clash(Fact("residence", "paris", positive=False), paris)
    assert clash(paris, Fact("residence", "paris", positive=False))
    assert not clash(Fact("likes", "dogs"), Fact("likes", "cats"))  # many values allowed
    assert clash(Fact("likes", "cat", positive=False), Fact("likes", "cats"))  # stems
    assert not clash(Fact("employer", "google"), paris)  # other slot


# --- resolve -------------------------------------------------------------------------------


def at(minute: int) -> datetime:
    return NOW + timedelta(minutes=minute)


def test_an_older_statement_never_expires_a_newer_one() -> None:
    moved = replace(item("m1", "The user moved from Lisbon to Berlin."), occurred_at=at(10))
    current = [moved, replace(item("m2", "The user likes jazz."), occurred_at=at(0))]
    older = replace(cand("The user lives in Lisbon with their partner."), occurred_at=at(0))
    decision = resolve(older, current)
    assert (decision.action, decision.expire_ids) == ("skip", ())
    assert decision.reason.startswith("outdated: m1 said later")
    # Said after it, the same statement is an update: the order of arrival does not matter.
    newer = replace(older, occurred_at=at(20))
    assert resolve(newer, current).expire_ids == ("m1",)
    # Said at the same time, or with either time unknown, text decides as before.
    assert resolve(replace(older, occurred_at=at(10)), current).expire_ids == ("m1",)
    assert resolve(replace(older, occurred_at=None), current).expire_ids == ("m1",)
    assert resolve(older, [replace(moved, occurred_at=None)]).expire_ids == ("m1",)


def test_an_older_statement_still_updates_what_was_said_before_it() -> None:
    paris = replace(item("m1", "The user lives in Paris."), occurred_at=at(0))
    older = replace(cand("The user moved to Lisbon."), occurred_at=at(5))
    assert resolve(older, [paris]).expire_ids == ("m1",)
    naive = replace(older, occurred_at=at(5).replace(tzinfo=None))  # read back without a zone
    assert resolve(naive, [paris]).expire_ids == ("m1",)


def test_outdated_keeps_skips_and_plain_stores() -> None:
    newer = replace(item("m1", "The user lives in Berlin."), occurred_at=at(10))
    older = replace(cand("The user lives in Paris."), occurred_at=at(0))
    skip = Decision("skip", (), "already known")
    assert outdated(older, skip, [newer]) is skip
    store = Decision("store", (), "new")
    assert outdated(older, store, [newer]) is store
    assert outdated(older, Decision("store", ("m1",), "llm: moved"), [newer]).action == "skip"


@pytest.mark.parametrize(
    "update", ["The user moved from Paris to Berlin.", "The user lives in Berlin."]
)
def test_paris_to_berlin_expires_the_paris_memory(update: str) -> None:
    current = live("The user lives in Paris.", "The user likes jazz.")
    decision = resolve(cand(update), current)
    assert decision.action == "store"
    assert decision.expire_ids == ("m1",)
    assert "residence" in decision.reason


def test_the_same_fact_again_is_skipped() -> None:
    current = live("The user likes jazz.", "The user lives in Paris.")
    decision = resolve(cand("The user lives in Paris"), current)
    assert decision == Decision("skip", (), "already known: m2 (exact)")
    # Restated in other words: the slot value is already held.
    decision = resolve(cand("The user currently lives in Paris now."), current)
    assert decision.action == "skip" and decision.expire_ids == ()
    # "moved from Paris to Berlin" when Berlin is already known.
    decision = resolve(cand("The user moved from Paris to Berlin"), live("User lives in Berlin"))
    assert decision.action == "skip"


def test_a_live_memory_that_says_more_means_skip() -> None:
    current = live("The user lives in Paris with her husband and two cats.")
    assert resolve(cand("The user lives in Paris."), current).action == "skip"
    current = live("The user's favourite colour is blue.")
    decision = resolve(cand("The user's favorite color is blue"), current)
    assert decision == Decision("skip", (), "already known: m1 (jaccard)")


def test_a_fuller_candidate_supersedes_the_shorter_memory() -> None:
    decision = resolve(
        cand("The user lives in Paris with her husband."), live("User lives in Paris")
    )
    assert decision.action == "store"
    assert decision.expire_ids == ("m1",)


def test_polarity_flip_is_a_contradiction() -> None:
    current = live("The user likes cats.", "The user likes dogs.")
    decision = resolve(cand("The user does not like cats anymore."), current)
    assert decision.action == "store"
    assert decision.expire_ids == ("m1",)
    decision = resolve(cand("The user likes cats again."), live("The user dislikes cats."))
    assert (decision.action, decision.expire_ids) == ("store", ("m1",))


def test_chinese_updates_and_contradictions() -> None:
    decision = resolve(cand("用户搬到了上海。"), live("用户住在北京。", "用户喜欢猫"))
    assert (decision.action, decision.expire_ids) == ("store", ("m1",))
    decision = resolve(cand("用户不喜欢猫"), live("用户住在北京。", "用户喜欢猫"))
    assert (decision.action, decision.expire_ids) == ("store", ("m2",))
    assert resolve(cand("用户住在北京"), live("用户住在北京。")).action == "skip"
    decision = resolve(cand("用户在微软工作"), live("用户在谷歌工作"))
    assert (decision.action, decision.expire_ids) == ("store", ("m1",))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The user is 30 years old.", "The user is 31 years old."),
        ("The user's name is Bob.", "The user's name is Robert."),
        ("The user's favourite colour is blue.", "The user's favorite color is green."),
        ("The user works at Google.", "The user no longer works at Google."),
        ("The user works at Google.", "The user works for Microsoft."),
        ("The user is vegetarian.", "The user eats meat."),
        ("用户今年30岁", "用户今年31岁"),
        ("用户叫小明", "用户的名字是小红"),
    ],
)
def test_single_valued_slots_are_updated(old: str, new: str) -> None:
    decision = resolve(cand(new), live(old))
    assert (decision.action, decision.expire_ids) == ("store", ("m1",))


def test_unrelated_facts_are_stored_without_expiry() -> None:
    current = live("The user lives in Paris.", "The user likes cats.", "用户在谷歌工作")
    for text in [
        "The user is allergic to peanuts.",
        "The user likes dogs.",  # likes holds many values
        "The user's sister lives in Rome.",  # not the user's residence
        "用户喜欢喝咖啡",
    ]:
        assert resolve(cand(text), current) == Decision("store", (), "new"), text
    assert resolve(cand("The user likes tea"), []) == Decision("store", (), "new: no live memories")


def test_an_update_also_expires_memories_it_restates() -> None:
    current = live("The user lives in Paris.", "The user is based in Berlin.")
    decision = resolve(cand("The user lives in Berlin."), current)
    assert (decision.action, decision.expire_ids) == ("store", ("m1", "m2"))


# --- the model's decision ------------------------------------------------------------------


def test_parse_decision_accepts_valid_json() -> None:
    raw = '{"action": "store", "expire_ids": ["m1", "m1"], "reason": "moved"}'
    assert parse_decision(raw, ["m1", "m2"]) == Decision("store", ("m1",), "llm: moved")
    fenced = '```json\n{"action": "skip", "expire_ids": [], "reason": "known"}\n```'
    assert parse_decision(fenced, ["m1"]) == Decision("skip", (), "llm: known")
    # A skip never expires anything (the persist stage only expires for stored candidates).
    assert parse_decision('{"action": "skip", "expire_ids": ["m1"]}', ["m1"]).expire_ids == ()
    assert parse_decision('{"action": "store", "expire_ids": [7]}', ["7"]).expire_ids == ("7",)


@pytest.mark.parametrize(
    "raw",
    [
        "not json",
        "[1, 2]",
        '{"action": "delete", "expire_ids": []}',
        '{"action": "store", "expire_ids": "m1"}',
        '{"action": "store", "expire_ids": ["m9"]}',  # not a live memory
        '{"action": "store", "expire_ids": [{"id": "m1"}]}',
        '{"action": "store", "expire_ids": [true]}',
    ],
)
def test_parse_decision_rejects_malformed_answers(raw: str) -> None:
    with pytest.raises(MalformedDecision):
        parse_decision(raw, ["m1", "1"])


def test_shortlist_puts_same_slot_and_similar_memories_first() -> None:
    noise = [item(f"n{i}", f"The user once visited museum number {i}") for i in range(30)]
    current = [*noise, item("p", "The user resides in Paris"), item("j", "The user likes jazz")]
    short = shortlist(cand("The user moved to Berlin"), current, limit=5)
    assert len(short) == 5
    assert short[0].id == "p"  # same slot (residence), although few words are shared
    assert [m.id for m in shortlist(cand("x"), current[:3], limit=20)] == ["n0", "n1", "n2"]
