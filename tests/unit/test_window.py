"""The short-term token window: hand-worked cases over the stored token counts."""

from __future__ import annotations

import pytest

from memstream.loadpath.window import Message, Summary, Window, WindowEntry, build_window
from memstream.store.cache import CachedMessage
from memstream.text.tokens import count_tokens


def msg(role: str, content: str, tokens: int | None = None, kind: str = "chat") -> Message:
    """A stored message; the stored count defaults to the real cl100k_base count."""
    return Message(role, content, count_tokens(content) if tokens is None else tokens, kind)


def entries(*items: tuple[str, str, int]) -> tuple[WindowEntry, ...]:
    return tuple(WindowEntry(role, content, tokens) for role, content, tokens in items)


def summary_entry(summary: Summary) -> WindowEntry:
    return WindowEntry("system", summary.text, summary.tokens, summary=True)


# max 100, summary budget 20: messages get a window of 80 tokens.
SMALL = {"max_tokens": 100, "summary_budget": 20}
SUMMARY = Summary("Earlier: the user planned a trip.", 15)


def test_empty_history_is_an_empty_window() -> None:
    assert build_window([]) == Window((), 0, truncated=False)
    # Nothing is over the limit, so the summary is not used either.
    assert build_window([], SUMMARY) == Window((), 0, truncated=False)


def test_everything_fits_keeps_all_in_order_without_summary() -> None:
    history = [
        msg("system", "Be brief.", 3),
        msg("user", "Hi", 1),
        msg("assistant", "Hello!", 2),
        msg("user", "Book a flight", 3),
        msg("assistant", "Where to?", 3),
    ]
    window = build_window(history, SUMMARY, **SMALL)
    assert window == Window(
        entries(
            ("system", "Be brief.", 3),
            ("user", "Hi", 1),
            ("assistant", "Hello!", 2),
            ("user", "Book a flight", 3),
            ("assistant", "Where to?", 3),
        ),
        12,
        truncated=False,
    )


def test_exactly_the_window_still_fits() -> None:
    history = [msg("user", "q", 40), msg("assistant", "a", 40)]
    window = build_window(history, SUMMARY, **SMALL)
    assert window.tokens == 80 and not window.truncated
    assert [e.content for e in window.messages] == ["q", "a"]


def test_leading_assistant_is_removed_and_system_stays_in_place() -> None:
    history = [
        msg("assistant", "Welcome! How can I help?", 6),
        msg("system", "Be brief.", 3),
        msg("assistant", "(a second greeting part)", 5),
        msg("user", "Hi", 1),
        msg("assistant", "Hello!", 2),
    ]
    window = build_window(history, **SMALL)
    assert window.messages == entries(
        ("system", "Be brief.", 3), ("user", "Hi", 1), ("assistant", "Hello!", 2)
    )
    assert window.tokens == 6


def test_trailing_user_messages_are_dropped() -> None:
    # The last one is the current query, published before the context was asked for; the one
    # before it went unanswered.
    history = [
        msg("user", "Hi", 1),
        msg("assistant", "Hello!", 2),
        msg("user", "Are you there?", 4),
        msg("user", "Book a flight", 3),
    ]
    window = build_window(history, **SMALL)
    assert window.messages == entries(("user", "Hi", 1), ("assistant", "Hello!", 2))
    assert window.tokens == 3


def test_only_user_messages_give_an_empty_chat() -> None:
    history = [msg("system", "Be brief.", 3), msg("user", "Hi", 1), msg("user", "Hello?", 2)]
    assert build_window(history, **SMALL) == Window(
        entries(("system", "Be brief.", 3)), 3, truncated=False
    )


def test_a_system_message_after_the_last_answer_is_kept_in_place() -> None:
    history = [
        msg("user", "Hi", 1),
        msg("assistant", "Hello!", 2),
        msg("system", "The user switched to French.", 6),
        msg("user", "Bonjour", 2),
    ]
    assert build_window(history, **SMALL).messages == entries(
        ("user", "Hi", 1),
        ("assistant", "Hello!", 2),
        ("system", "The user switched to French.", 6),
    )


def test_consecutive_assistant_parts_are_kept() -> None:
    history = [msg("user", "q", 1), msg("assistant", "part 1", 2), msg("assistant", "part 2", 2)]
    assert [e.content for e in build_window(history, **SMALL).messages] == [
        "q",
        "part 1",
        "part 2",
    ]


def test_tool_traffic_and_non_chat_types_are_left_out() -> None:
    history = [
        msg("user", "Weather in Paris?", 5),
        msg("assistant", '{"name": "weather", "city": "Paris"}', 12, "tool_call"),
        msg("tool", '{"temp": 21}', 6, "tool_result"),
        msg("tool", "plain tool chat", 3),
        msg("system", "typing…", 2, "status"),
        msg("assistant", "21 °C and sunny.", 6),
    ]
    window = build_window(history, **SMALL)
    assert window.messages == entries(
        ("user", "Weather in Paris?", 5), ("assistant", "21 °C and sunny.", 6)
    )
    assert window.tokens == 11


def test_tool_traffic_does_not_count_against_the_window() -> None:
    history = [
        msg("user", "q", 40),
        msg("tool", "huge result", 5000, "tool_result"),
        msg("assistant", "a", 40),
    ]
    window = build_window(history, SUMMARY, **SMALL)
    assert not window.truncated and window.tokens == 80


def test_between_the_message_window_and_the_whole_window_nothing_is_cut() -> None:
    # 90 tokens: over max - summary budget (80) but within max (100), so everything is kept
    # and no summary is needed (the reference's rule; the summary budget is for cuts).
    history = [msg("user", "u1", 30), msg("assistant", "a1", 30), msg("user", "u2", 10)]
    history += [msg("assistant", "a2", 20)]
    window = build_window(history, SUMMARY, **SMALL)
    assert window.tokens == 90 and not window.truncated
    assert [e.content for e in window.messages] == ["u1", "a1", "u2", "a2"]


def test_older_history_left_out_by_the_rounds_bound_brings_the_summary() -> None:
    history = [msg("user", "u9", 5), msg("assistant", "a9", 5)]
    window = build_window(history, SUMMARY, earlier=True, **SMALL)
    assert window == Window(
        (summary_entry(SUMMARY), *entries(("user", "u9", 5), ("assistant", "a9", 5))),
        25,
        truncated=True,
    )
    # Without a summary, the window is the same messages and says that history was left out.
    assert build_window(history, None, earlier=True, **SMALL) == Window(
        entries(("user", "u9", 5), ("assistant", "a9", 5)), 10, truncated=True
    )


def test_the_summary_takes_from_fitting_messages_only_what_it_needs() -> None:
    # 90 tokens fit in 100, but with the summary (15) only 85 may remain: a4 20, u4 30, a3 50,
    # u3 70; a2 would make 90 > 85.
    history = [msg("user", "u2", 10), msg("assistant", "a2", 10), msg("user", "u3", 20)]
    history += [msg("assistant", "a3", 20), msg("user", "u4", 10), msg("assistant", "a4", 20)]
    window = build_window(history, SUMMARY, earlier=True, **SMALL)
    assert window == Window(
        (
            summary_entry(SUMMARY),
            *entries(("user", "u3", 20), ("assistant", "a3", 20)),
            *entries(("user", "u4", 10), ("assistant", "a4", 20)),
        ),
        85,
        truncated=True,
    )


def test_no_rounds_is_the_summary_alone() -> None:
    assert build_window([], SUMMARY, earlier=True, **SMALL) == Window(
        (summary_entry(SUMMARY),), 15, truncated=True
    )
    assert build_window([], None, earlier=True, **SMALL) == Window((), 0, truncated=True)


def test_a_greeting_before_the_first_question_is_not_history_left_out() -> None:
    # The messages reach the conversation's start; only its opening assistant turn is not
    # shown (it has no question), which is no reason for a summary.
    history = [msg("assistant", "Hello!", 2), msg("user", "q", 3), msg("assistant", "a", 3)]
    window = build_window(history, SUMMARY, **SMALL)
    assert window == Window(entries(("user", "q", 3), ("assistant", "a", 3)), 6, False)


def test_a_cut_of_system_messages_alone_needs_no_summary() -> None:
    # Over the limit because of system messages; the chat still reaches the start.
    history = [msg("system", "S1", 70), msg("system", "S2", 40), msg("user", "q", 5)]
    history += [msg("assistant", "a", 5)]
    window = build_window(history, SUMMARY, **SMALL)
    assert window == Window(
        entries(("system", "S2", 40), ("user", "q", 5), ("assistant", "a", 5)), 50, True
    )


def test_over_the_limit_keeps_the_newest_that_fit_and_prepends_the_summary() -> None:
    history = [
        msg("user", "u1", 30),
        msg("assistant", "a1", 30),
        msg("user", "u2", 20),
        msg("assistant", "a2", 20),
        msg("user", "u3", 10),
        msg("assistant", "a3", 20),
    ]
    # Newest first: a3 20, u3 30, a2 50, u2 70; a1 would make 100 > 80.
    window = build_window(history, SUMMARY, **SMALL)
    assert window == Window(
        (
            summary_entry(SUMMARY),
            *entries(("user", "u2", 20), ("assistant", "a2", 20)),
            *entries(("user", "u3", 10), ("assistant", "a3", 20)),
        ),
        85,
        truncated=True,
    )


def test_over_the_limit_without_summary() -> None:
    history = [
        msg("user", "u1", 30),
        msg("assistant", "a1", 30),
        msg("user", "u2", 20),
        msg("assistant", "a2", 20),
        msg("user", "u3", 10),
        msg("assistant", "a3", 20),
    ]
    window = build_window(history, None, **SMALL)
    assert window == Window(
        entries(
            ("user", "u2", 20), ("assistant", "a2", 20), ("user", "u3", 10), ("assistant", "a3", 20)
        ),
        70,
        truncated=True,
    )


def test_a_cut_before_an_answer_removes_the_leading_assistant() -> None:
    history = [
        msg("user", "u1", 30),
        msg("assistant", "a1", 30),
        msg("user", "u2", 30),
        msg("assistant", "a2", 25),
        msg("user", "u3", 5),
        msg("assistant", "a3", 25),
    ]
    # Newest first: a3 25, u3 30, a2 55; u2 would make 85 > 80, so the window starts at a2,
    # whose question is missing: it goes, and its tokens are not refilled.
    window = build_window(history, SUMMARY, **SMALL)
    assert window == Window(
        (summary_entry(SUMMARY), *entries(("user", "u3", 5), ("assistant", "a3", 25))),
        45,
        truncated=True,
    )


def test_a_leading_assistant_does_not_push_the_history_over_the_limit() -> None:
    history = [msg("assistant", "greeting", 30), msg("user", "q", 40), msg("assistant", "a", 40)]
    window = build_window(history, SUMMARY, **SMALL)
    assert window == Window(entries(("user", "q", 40), ("assistant", "a", 40)), 80, False)


def test_over_the_limit_system_messages_are_kept_and_counted() -> None:
    history = [
        msg("system", "S1", 10),
        msg("user", "u1", 40),
        msg("assistant", "a1", 40),
        msg("system", "S2", 5),
        msg("user", "u2", 20),
        msg("assistant", "a2", 20),
    ]
    # System first: 15 tokens. Then a2 35, u2 55; a1 would make 95 > 80.
    window = build_window(history, SUMMARY, **SMALL)
    assert window == Window(
        (
            summary_entry(SUMMARY),
            *entries(("system", "S1", 10), ("system", "S2", 5)),
            *entries(("user", "u2", 20), ("assistant", "a2", 20)),
        ),
        70,
        truncated=True,
    )


def test_system_messages_alone_over_the_window_newest_first() -> None:
    history = [
        msg("system", "S1 oldest", 5),
        msg("system", "S2 long", 70),
        msg("system", "S3 newest", 30),
        msg("user", "q", 10),
        msg("assistant", "a", 10),
    ]
    # S3 30; S2 would make 100 > 80 and is skipped; S1 makes 35. Then a 45, q 55.
    window = build_window(history, None, **SMALL)
    assert window == Window(
        entries(
            ("system", "S1 oldest", 5),
            ("system", "S3 newest", 30),
            ("user", "q", 10),
            ("assistant", "a", 10),
        ),
        55,
        truncated=True,
    )


def test_system_messages_can_leave_no_room_for_chat() -> None:
    history = [
        msg("system", "S1", 50),
        msg("system", "S2", 40),
        msg("system", "S3", 30),
        msg("user", "q", 10),
        msg("assistant", "a", 10),
    ]
    # S3 30, S2 70, S1 skipped; a makes 80 but u would make 90: the window is [a], which
    # starts with an assistant turn and goes.
    window = build_window(history, SUMMARY, **SMALL)
    assert window == Window(
        (summary_entry(SUMMARY), *entries(("system", "S2", 40), ("system", "S3", 30))),
        85,
        truncated=True,
    )


def test_a_single_message_bigger_than_the_window() -> None:
    history = [
        msg("user", "u1", 10),
        msg("assistant", "a1", 10),
        msg("user", "u2", 10),
        msg("assistant", "a huge answer", 500),
    ]
    # The newest message alone does not fit: the walk stops at once, and older messages are
    # not taken past it (the window stays contiguous).
    assert build_window(history, SUMMARY, **SMALL) == Window(
        (summary_entry(SUMMARY),), 15, truncated=True
    )
    assert build_window(history, None, **SMALL) == Window((), 0, truncated=True)


def test_a_summary_over_its_budget_shrinks_the_message_window() -> None:
    history = [
        msg("user", "u1", 30),
        msg("assistant", "a1", 30),
        msg("user", "u2", 30),
        msg("assistant", "a2", 30),
    ]
    big = Summary("a long summary", 40)
    # Messages get 100 - 40 = 60: a2 30, u2 60; the total stays within max_tokens.
    assert build_window(history, big, **SMALL) == Window(
        (summary_entry(big), *entries(("user", "u2", 30), ("assistant", "a2", 30))),
        100,
        truncated=True,
    )


def test_a_summary_over_max_tokens_is_not_used() -> None:
    history = [
        msg("user", "u1", 30),
        msg("assistant", "a1", 30),
        msg("user", "u2", 30),
        msg("assistant", "a2", 30),
    ]
    window = build_window(history, Summary("enormous", 101), **SMALL)
    assert window == Window(
        entries(("user", "u2", 30), ("assistant", "a2", 30)), 60, truncated=True
    )


def test_a_blank_summary_is_not_used() -> None:
    # 120 > 100: the window of 80 takes a1 alone, which starts with an answer and goes.
    history = [msg("user", "u1", 60), msg("assistant", "a1", 60)]
    assert build_window(history, Summary("  ", 0), **SMALL) == Window((), 0, truncated=True)
    assert build_window(history, Summary("  ", 0), earlier=True, **SMALL) == Window(
        (), 0, truncated=True
    )


def test_chinese_conversation_with_stored_counts() -> None:
    history = [
        msg("system", "你是一个旅行助手。"),  # 10 tokens
        msg("user", "你好，我想订一张去北京的机票。"),  # 16
        msg("assistant", "好的，请问您哪天出发？"),  # 11
        msg("user", "下周一上午。"),  # 6
        msg("assistant", "为您找到三个航班。"),  # 11
        msg("user", "选第一个。"),  # 4: the current query, dropped by the tail rule
    ]
    under = build_window(history)
    assert under == Window(
        entries(
            ("system", "你是一个旅行助手。", 10),
            ("user", "你好，我想订一张去北京的机票。", 16),
            ("assistant", "好的，请问您哪天出发？", 11),
            ("user", "下周一上午。", 6),
            ("assistant", "为您找到三个航班。", 11),
        ),
        54,
        truncated=False,
    )

    summary = Summary(
        "用户在北京出差，订过去上海的机票。", count_tokens("用户在北京出差，订过去上海的机票。")
    )
    # Window 50 - 20 = 30: the system message 10, a2 21, u2 27; a1 would make 38.
    over = build_window(history, summary, max_tokens=50, summary_budget=20)
    assert over == Window(
        (
            WindowEntry("system", "用户在北京出差，订过去上海的机票。", 17, summary=True),
            *entries(
                ("system", "你是一个旅行助手。", 10),
                ("user", "下周一上午。", 6),
                ("assistant", "为您找到三个航班。", 11),
            ),
        ),
        44,
        truncated=True,
    )


def test_cached_messages_fit_the_input_protocol() -> None:
    history = [
        CachedMessage("e1", "user", "chat", "Hi", 1, "2026-01-01T00:00:00"),
        CachedMessage("e2", "assistant", "chat", "Hello!", 2, "2026-01-01T00:00:01"),
    ]
    assert build_window(history).messages == entries(("user", "Hi", 1), ("assistant", "Hello!", 2))


def test_defaults_are_the_reference_numbers() -> None:
    # Everything fits when the total is within the whole window (8,000), as in the reference.
    history = [msg("user", "q", 4000), msg("assistant", "a", 4000)]
    assert not build_window(history).truncated
    history = [msg("user", "q", 4000), msg("assistant", "a", 4001)]
    assert build_window(history).truncated
    # Over it, the messages get 8,000 - 2,000: the newest answer alone.
    history = [msg("user", "q", 2000), msg("assistant", "a", 6000), msg("user", "q2", 1)]
    history += [msg("assistant", "a2", 1)]
    assert [e.content for e in build_window(history).messages] == ["q2", "a2"]


@pytest.mark.parametrize(("max_tokens", "summary_budget"), [(100, 101), (100, -1), (-1, 0)])
def test_invalid_limits_are_rejected(max_tokens: int, summary_budget: int) -> None:
    with pytest.raises(ValueError, match="summary_budget"):
        build_window([], max_tokens=max_tokens, summary_budget=summary_budget)
