"""Long-term memory on the load path: filtering, grouping, sensitive content, the token budget."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import pytest

from memstream.loadpath.budget import (
    LongTermBudget,
    budget_long_term,
    memory_line,
    prepare_items,
)
from memstream.loadpath.sensitive import is_sensitive
from memstream.memory import USER_PROFILE, MemoryItem
from memstream.text.tokens import count_tokens


def item(content: str, score: float, cube_id: str = USER_PROFILE, id: str = "") -> MemoryItem:
    return MemoryItem(
        id=id or content[:20],
        tenant_id="t1",
        user_id="u1",
        agent_id="a1",
        cube_id=cube_id,
        memory_type="text_mem",
        content=content,
        importance=5,
        source_event_ids=("e1",),
        created_at=datetime(2026, 1, 1),
        score=score,
    )


def chars(text: str) -> int:
    """A hand-countable stand-in for the tokenizer: one token per character."""
    return len(text)


# ----------------------------------------------------------------------------- prepare_items


def test_items_below_the_minimum_score_are_dropped() -> None:
    items = [item("kept at the threshold", 0.3), item("dropped", 0.29), item("nan", math.nan)]
    groups = prepare_items(items)
    assert [i.content for i in groups.user_profile] == ["kept at the threshold"]
    assert groups.agent == ()


def test_items_are_grouped_by_cube_and_sorted_by_score() -> None:
    items = [
        item("agent low", 0.4, "agent_a1"),
        item("profile low", 0.5),
        item("agent high", 0.9, "agent_a1"),
        item("profile high", 0.8),
        item("profile tie first", 0.6),
        item("profile tie second", 0.6),
    ]
    groups = prepare_items(items)
    assert [i.content for i in groups.user_profile] == [
        "profile high",
        "profile tie first",
        "profile tie second",
        "profile low",
    ]
    assert [i.content for i in groups.agent] == ["agent high", "agent low"]


def test_content_is_cut_to_max_chars_and_the_rest_of_the_item_kept() -> None:
    long = "靠窗" * 600  # 1,200 characters
    (cut,) = prepare_items([item(long, 0.7, id="m1")]).user_profile
    assert cut.content == "靠窗" * 500 and len(cut.content) == 1000
    assert (cut.id, cut.score, cut.cube_id) == ("m1", 0.7, USER_PROFILE)
    (short,) = prepare_items([item("abcdef", 0.7)], max_chars=4).user_profile
    assert short.content == "abcd"


def test_blank_items_are_dropped() -> None:
    assert prepare_items([item("  \n", 0.9)]).user_profile == ()


def test_sensitive_items_are_dropped_unless_filtering_is_off() -> None:
    items = [
        item("The user prefers window seats", 0.9),
        item("The user's password: hunter2", 0.8),
        item("Card 4111 1111 1111 1111 for bookings", 0.7, "agent_a1"),
    ]
    filtered = prepare_items(items)
    assert [i.content for i in filtered.user_profile] == ["The user prefers window seats"]
    assert filtered.agent == ()
    kept = prepare_items(items, filter_sensitive=False)
    assert len(kept.user_profile) == 2 and len(kept.agent) == 1


def test_a_secret_past_the_cut_is_still_caught() -> None:
    content = "x" * 995 + " password: hunter2"
    assert prepare_items([item(content, 0.9)]).user_profile == ()


# ----------------------------------------------------------------------------- is_sensitive


@pytest.mark.parametrize(
    "text",
    [
        # passwords
        "password: hunter2",
        "My password is hunter2!",
        "Password: correcthorse",
        "PWD=Tr0ub4dor&3",
        "我的密码是123456",
        "密码：abcd",
        "银行卡密码 888888",
        # API keys and tokens
        "key sk-proj-abcdefghijklmnopqrstuvwx1234",
        "AKIAIOSFODNN7EXAMPLE",
        "Authorization: Bearer 0123456789abcdefABCDEF",
        "ghp_" + "a1" * 18,
        "api_key = 'a1b2c3d4e5f6g7h8i9j0'",
        "token: 9f8e7d6c5b4a39281706",
        "密钥是 AbCdEf1234567890xyz",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0TH",
        # private keys
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        "-----BEGIN PRIVATE KEY-----",
        # payment cards (Luhn-valid)
        "card 4111 1111 1111 1111",
        "card 4111-1111-1111-1111 exp 12/27",
        "4111111111111111",
        "Amex 3782 822463 10005",
        "银行卡号6222021234567890128",
        "paid on 2024-01-15 4111 1111 1111 1111",
        # national id numbers
        "身份证号11010519491231002X。",
        "ID 11010519491231002x",
        "SSN 123-45-6789",
        # IBAN
        "IBAN DE89 3704 0044 0532 0130 00",
        "GB82WEST12345698765432",
        "NO93 8601 1117 947",
    ],
)
def test_sensitive(text: str) -> None:
    assert is_sensitive(text)


@pytest.mark.parametrize(
    "text",
    [
        # talk about passwords without one
        "I forgot my password",
        "the password is required",
        "Password: ****",
        "PIN: none",
        "忘记密码了",
        "忘记密码 reset 了",
        "密码是生日",
        # key-like words that are not keys
        "uses scikit sk-learn",
        "The bearer of bad news",
        "a secret: the_family_recipe_for_bread",
        "token count 12345",
        "Tokens: 4000",
        # ordinary numbers, dates and phone numbers
        "between 2024-01-15 and 2024-02-20",
        "2024-01-15 10:30",
        "+86 138 0013 8000",
        "13800138000",
        "(555) 123-4567",
        "555-123-4567",
        "call +1 415 555 2671",
        "order 20240115123456",
        "timestamp 1700000000000",
        "ISBN 978-3-16-148410-0",
        "price 1,299.00 yuan",
        "Python 3.11 and Node 20",
        "user id 12345678901234567890",
        # near misses: failed checksums and reserved numbers
        "4111 1111 1111 1112",
        "110105194912310021",
        "SSN 000-12-3456",
        "666-12-3456",
        "GB82 WEST 1234 5698 7654 33",
        # plain memories
        "The user prefers window seats",
        "用户住在上海",
        "",
    ],
)
def test_not_sensitive(text: str) -> None:
    assert not is_sensitive(text)


# ----------------------------------------------------------------------------- budget_long_term


def test_profile_under_its_share_leaves_the_rest_to_agent_memory() -> None:
    # total 100, profile at most 60; "aaaa\nbb" is 7, so agent memory gets 93.
    agent = ["x" * 40, "y" * 40, "z" * 40]
    out = budget_long_term(["aaaa", "bb"], agent, total=100, count=chars)
    assert out == LongTermBudget("aaaa\nbb", 7, 2, "x" * 40 + "\n" + "y" * 40, 81, 2)


def test_profile_over_its_share_is_truncated_line_by_line() -> None:
    profile = ["p" * 25, "q" * 25, "r" * 25]
    # 25, then 51; a third line would make 77 > 60. Agent memory gets 100 - 51 = 49.
    out = budget_long_term(profile, ["a" * 30, "b" * 18, "c"], total=100, count=chars)
    assert out == LongTermBudget(
        "p" * 25 + "\n" + "q" * 25, 51, 2, "a" * 30 + "\n" + "b" * 18, 49, 2
    )


def test_an_item_is_never_split_and_ends_the_text() -> None:
    # The second item does not fit whole: it is not cut, and the smaller one after it is not
    # taken either, so the text stays the best items in score order.
    out = budget_long_term(["a" * 10, "b" * 60, "c"], [], total=100, count=chars)
    assert (out.user_profile, out.user_profile_tokens, out.user_profile_items) == ("a" * 10, 10, 1)
    first_too_big = budget_long_term(["b" * 61, "c"], [], total=100, count=chars)
    assert (first_too_big.user_profile, first_too_big.user_profile_tokens) == ("", 0)


def test_line_breaks_inside_an_item_keep_it_on_one_line() -> None:
    out = budget_long_term(["likes tea\n  and coffee", "lives in Paris"], [], count=chars)
    assert out.user_profile == "likes tea and coffee\nlives in Paris"
    assert out.user_profile_items == 2


def test_the_joined_text_is_recounted() -> None:
    def costly_newlines(text: str) -> int:
        return len(text) + 5 * text.count("\n")

    # By item sums "aaaa" + "bbbb" = 8 fits 10; joined, it costs 4 + 4 + 1 + 5 = 14 > 10.
    out = budget_long_term(
        ["aaaa", "bbbb"], ["cc"], total=10, profile_share=1.0, count=costly_newlines
    )
    assert out == LongTermBudget("aaaa", 4, 1, "cc", 2, 1)


def test_real_token_counts_of_chinese_memories() -> None:
    profile = ["用户喜欢靠窗的座位", "用户住在上海", "回答要简洁"]  # 13, 6, 7 tokens alone
    agent = ["使用中文回答", "写简洁的回答"]  # 6, 8
    # Profile share int(40 * 0.6) = 24: two lines join to 20 tokens, three to 28 > 24.
    out = budget_long_term(profile, agent, total=40)
    assert out == LongTermBudget(
        "用户喜欢靠窗的座位\n用户住在上海", 20, 2, "使用中文回答\n写简洁的回答", 15, 2
    )
    assert count_tokens(out.user_profile) == 20 and count_tokens(out.agent_memory) == 15
    # Agent memory gets 40 - 20 = 20 of which it uses 15.


def test_defaults_are_the_reference_numbers() -> None:
    line = "用户喜欢靠窗的座位"  # 13 tokens; each joined line adds 14 (its newline is 1)
    out = budget_long_term([line] * 400, [line] * 400)
    # Profile cap 2,400: 1 + 171 lines = 13 + 171 * 14 = 2,407 > 2,400, so 171 lines, 2,393.
    assert (out.user_profile_items, out.user_profile_tokens) == (171, 2393)
    assert count_tokens(out.user_profile) == 2393
    # Agent memory gets 4,000 - 2,393 = 1,607: 114 lines are 13 + 113 * 14 = 1,595.
    assert (out.agent_memory_items, out.agent_memory_tokens) == (114, 1595)
    assert count_tokens(out.agent_memory) == 1595


def test_empty_and_zero_budgets() -> None:
    assert budget_long_term([], []) == LongTermBudget("", 0, 0, "", 0, 0)
    assert budget_long_term(["a"], ["b"], total=0, count=chars) == LongTermBudget(
        "", 0, 0, "", 0, 0
    )
    # A zero profile share hands the whole budget to agent memory.
    out = budget_long_term(["a"], ["b"], total=5, profile_share=0.0, count=chars)
    assert out == LongTermBudget("", 0, 0, "b", 1, 1)


@pytest.mark.parametrize(("total", "share"), [(-1, 0.6), (100, 1.5), (100, -0.1)])
def test_invalid_budgets_are_rejected(total: int, share: float) -> None:
    with pytest.raises(ValueError, match="profile_share"):
        budget_long_term([], [], total=total, profile_share=share)


# ----------------------------------------------------------------------------- facts and episodes


def test_facts_show_their_date_and_episodes_their_own_line() -> None:
    fact = item("The user lives in Berlin.", 0.9)
    assert memory_line(fact) == "[2026-01-01] The user lives in Berlin."
    dated = replace(fact, occurred_at=datetime(2023, 5, 8, 23, 30, tzinfo=UTC))
    assert memory_line(dated) == "[2023-05-08] The user lives in Berlin."
    # An aware time is shown on its UTC date.
    late = replace(
        fact, occurred_at=datetime(2023, 5, 9, 1, 0, tzinfo=timezone(timedelta(hours=2)))
    )
    assert memory_line(late) == "[2023-05-08] The user lives in Berlin."
    told = replace(fact, kind="episode", content="Caroline (8 May 2023): I went to a parade.")
    assert memory_line(told) == "Caroline (8 May 2023): I went to a parade."


def test_facts_are_guaranteed_their_part_and_come_first() -> None:
    # Share 60 of 100, facts guaranteed 30: f1 + f2 is 20 + 1 + 20 = 41 > 30, so one fact;
    # episodes fill the rest (e1 + e2 = 41 with the fact: 20 + 1 + 20 + 1 + 20 = 62 > 60, so
    # one); the fact side then takes what the episodes left: nothing more fits.
    facts = ["f" * 20, "g" * 20]
    episodes = ["e" * 20, "d" * 20]
    out = budget_long_term(facts, [], episodes=episodes, total=100, count=chars)
    assert out.user_profile == "f" * 20 + "\n" + "e" * 20
    assert (out.user_profile_items, out.user_profile_episodes, out.user_profile_tokens) == (
        1,
        1,
        41,
    )


def test_episodes_take_what_facts_leave_and_facts_what_episodes_leave() -> None:
    # No facts: the episodes take the whole share.
    out = budget_long_term([], [], episodes=["e" * 20, "d" * 20, "c" * 30], total=100, count=chars)
    assert (out.user_profile_episodes, out.user_profile_tokens) == (2, 41)
    # One short episode: the facts take the rest of the share, before it.
    facts = ["f" * 20, "g" * 20, "h" * 20]
    out = budget_long_term(facts, [], episodes=["e" * 5], total=100, count=chars)
    assert out.user_profile == "f" * 20 + "\n" + "g" * 20 + "\n" + "e" * 5
    assert (out.user_profile_items, out.user_profile_episodes) == (2, 1)


def test_without_episodes_facts_have_the_whole_share() -> None:
    profile = ["p" * 25, "q" * 25]
    with_kinds = budget_long_term(profile, ["a"], episodes=[], total=100, count=chars)
    assert with_kinds == budget_long_term(profile, ["a"], total=100, count=chars)
    assert with_kinds.user_profile_items == 2 and with_kinds.user_profile_tokens == 51


def test_the_fact_share_is_configurable() -> None:
    facts, episodes = ["f" * 20, "g" * 20], ["e" * 20, "d" * 20]
    all_facts = budget_long_term(
        facts, [], episodes=episodes, total=100, fact_share=1.0, count=chars
    )
    assert (all_facts.user_profile_items, all_facts.user_profile_episodes) == (2, 0)
    no_part = budget_long_term(facts, [], episodes=episodes, total=100, fact_share=0.0, count=chars)
    assert (no_part.user_profile_items, no_part.user_profile_episodes) == (0, 2)
    with pytest.raises(ValueError, match="fact_share"):
        budget_long_term(facts, [], episodes=episodes, fact_share=1.5)
