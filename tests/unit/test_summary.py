"""Extractive conversation summaries: what is kept, attribution and order, the previous
summary, Chinese, and the token budget; folds that cost what their new messages cost; the LLM
summary's fallback when the model is down."""

from __future__ import annotations

import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstream.llm import LLMClient
from memstream.shortterm import fold as summary_module
from memstream.shortterm.fold import (
    extractive_summary,
    fit_budget,
    fold,
    is_filler,
    score_sentence,
    sentences,
    truncate_tokens,
)
from memstream.shortterm.llm_summary import llm_summary
from memstream.store.summaries import Summary
from memstream.text.tokens import count_tokens

TRIP = [
    ("user", "Hi!"),
    ("assistant", "Hello! How can I help you today?"),
    ("user", "I'm planning a trip to Japan in April with my wife. Our budget is 3000 dollars."),
    (
        "assistant",
        "Great choice! April is cherry blossom season. I recommend Kyoto and Tokyo, "
        "and the JR Pass for the trains.",
    ),
    ("user", "Thanks! Should we book the hotels now?"),
    ("assistant", "Yes, book early because April is busy."),
    ("user", "ok thanks, bye"),
    ("assistant", "You're welcome! Have a great day!"),
]


def test_sentences_split_english_and_chinese() -> None:
    assert sentences("I live in Berlin. My wife is Anna! Is it far?\nYes") == [
        "I live in Berlin.",
        "My wife is Anna!",
        "Is it far?",
        "Yes",
    ]
    assert sentences("我住在上海。下个月搬到北京！你觉得呢？") == [
        "我住在上海。",
        "下个月搬到北京！",
        "你觉得呢？",
    ]
    assert sentences("The price is 3.5 dollars, e.g. cheap.") == [
        "The price is 3.5 dollars, e.g. cheap."
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Hi!",
        "Hello there!",
        "Thanks a lot!",
        "ok thanks, bye",
        "How can I help you today?",
        "Is there anything else I can help you with?",
        "You're welcome! Have a great day!",
        "Great question!",
        "你好！",
        "好的，谢谢",
        "不客气，有什么可以帮您的吗？",
        "嗯嗯",
    ],
)
def test_greetings_and_filler_have_no_content(text: str) -> None:
    assert is_filler(text)
    assert score_sentence(text, "user") == 0.0


def test_facts_decisions_and_questions_outscore_small_talk() -> None:
    fact = score_sentence("I live in Berlin and my budget is 500 euros.", "user")
    question = score_sentence("Which museums in Berlin are open on Monday?", "user")
    chat = score_sentence("That sounds really lovely to me.", "user")
    assert fact > chat and question > chat
    assert score_sentence("我住在上海，预算是5000元。", "user") > score_sentence(
        "这个听起来不错。", "user"
    )


def test_summary_keeps_the_informative_sentences_attributed_in_order() -> None:
    summary = extractive_summary(None, TRIP)
    assert summary.splitlines() == [
        "User: I'm planning a trip to Japan in April with my wife. Our budget is 3000 dollars.",
        "Assistant: April is cherry blossom season. I recommend Kyoto and Tokyo, and the JR Pass"
        " for the trains.",
        "User: Should we book the hotels now?",
        "Assistant: Yes, book early because April is busy.",
    ]


def test_previous_summary_is_kept_and_new_lines_follow() -> None:
    previous = extractive_summary(None, TRIP)
    more = [
        ("user", "Hello again."),
        ("user", "We booked the Hotel Gracery in Tokyo for April 3 to 7."),
        ("assistant", "Noted: Hotel Gracery, Tokyo, April 3-7."),
    ]
    summary = extractive_summary(previous, more)
    assert summary.startswith(previous + "\n")
    assert summary.splitlines()[-2:] == [
        "User: We booked the Hotel Gracery in Tokyo for April 3 to 7.",
        "Assistant: Noted: Hotel Gracery, Tokyo, April 3-7.",
    ]
    # A sentence already in the summary is not repeated.
    assert extractive_summary(summary, TRIP) == summary


def test_previous_summary_that_is_not_line_based_is_kept() -> None:
    previous = "The user is planning a Japan trip in April. Budget: 3000 dollars."
    summary = extractive_summary(previous, [("user", "My wife is vegetarian.")])
    assert summary == previous + "\nUser: My wife is vegetarian."


def test_chinese_conversation() -> None:
    messages = [
        ("user", "你好"),
        ("assistant", "您好！有什么可以帮您的吗？"),
        ("user", "我住在上海，下个月要搬到北京。我的预算是每月8000元。"),
        ("assistant", "好的。建议您在朝阳区或海淀区找房子，交通比较方便。"),
        ("user", "谢谢！"),
        ("assistant", "不客气！"),
    ]
    summary = extractive_summary(None, messages)
    assert summary.splitlines() == [
        "User: 我住在上海，下个月要搬到北京。我的预算是每月8000元。",
        "Assistant: 建议您在朝阳区或海淀区找房子，交通比较方便。",
    ]


def long_conversation(turns: int) -> list[tuple[str, str]]:
    cities = ["Berlin", "Paris", "Tokyo", "Lima", "Oslo", "Cairo", "Hanoi", "Quito"]
    out: list[tuple[str, str]] = []
    for i in range(turns):
        city = cities[i % len(cities)]
        out.append(("user", f"Hi! Day {i}: I want to visit {city} and spend {100 + i} euros."))
        out.append(
            (
                "assistant",
                f"Sure. For {city} I recommend the old town and museum {i}. Thanks for asking! "
                f"今天第{i}天，建议您预订{city}的酒店。",
            )
        )
    return out


@pytest.mark.parametrize("budget", [2000, 500, 37, 5, 1])
def test_budget_is_never_exceeded(budget: int) -> None:
    messages = long_conversation(200)
    summary = extractive_summary(None, messages, budget_tokens=budget)
    assert count_tokens(summary) <= budget
    if budget >= 37:
        assert count_tokens(summary) >= budget * 0.8  # the budget is used, not wasted
        assert all(line.startswith(("User: ", "Assistant: ")) for line in summary.splitlines())
    assert extractive_summary(None, messages, budget_tokens=0) == ""


def test_a_full_previous_summary_is_compressed_to_make_room() -> None:
    previous = extractive_summary(None, long_conversation(150), budget_tokens=2000)
    assert count_tokens(previous) > 1900
    new = [("user", "Important: my passport expires on 2025-03-01, so I must renew it first.")]
    summary = extractive_summary(previous, new, budget_tokens=2000)
    assert count_tokens(summary) <= 2000
    assert summary.endswith(
        "User: Important: my passport expires on 2025-03-01, so I must renew it first."
    )
    kept = summary.splitlines()[:-1]
    assert len(kept) > 10 and all(line in previous for line in kept)  # old lines, in order
    assert [previous.index(line) for line in kept] == sorted(previous.index(line) for line in kept)


def test_a_huge_unpunctuated_message_is_cut() -> None:
    message = " ".join(f"word{i}" for i in range(5000))
    summary = extractive_summary(None, [("user", message)], budget_tokens=2000)
    assert summary.startswith("User: word0 word1")
    assert summary.endswith("…")
    assert count_tokens(summary) <= 2000


def test_truncate_and_fit_budget() -> None:
    text = "用户住在北京，喜欢喝咖啡。" * 50
    cut = truncate_tokens(text, 20)
    assert count_tokens(cut) <= 20 and cut.endswith("…") and "\ufffd" not in cut
    assert truncate_tokens("short", 20) == "short"
    assert truncate_tokens("anything", 0) == ""
    lines = "\n".join(f"Line {i} says something about topic {i}." for i in range(100))
    fitted = fit_budget(lines, 50)
    assert count_tokens(fitted) <= 50
    assert fitted.splitlines()[0] == "Line 0 says something about topic 0."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_llm_summary_falls_back_to_extractive_when_the_model_is_down() -> None:
    client = LLMClient(f"http://127.0.0.1:{free_port()}/v1", "any-model", timeout=5)
    try:
        summary = await llm_summary(client, None, TRIP, budget_tokens=2000)
    finally:
        await client.aclose()
    assert summary == extractive_summary(None, TRIP)


def scored_sentences(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sentences ``fold`` scores from now on, recorded as it scores them."""
    seen: list[str] = []
    score = summary_module._base_score

    def recording(sentence: str, plain: str, role: str | None, tokens: int) -> float | None:
        seen.append(sentence)
        return score(sentence, plain, role, tokens)

    monkeypatch.setattr(summary_module, "_base_score", recording)
    return seen


def test_a_fold_scores_only_the_new_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    conversation = long_conversation(600)  # 1,200 messages
    summary: Summary | None = None
    scored = scored_sentences(monkeypatch)
    per_fold = []
    for start in range(0, len(conversation), 20):
        new = conversation[start : start + 20]
        scored.clear()
        summary = fold(summary, new, budget_tokens=2000)
        per_fold.append(len(scored))
        assert len(scored) == sum(len(sentences(content)) for _, content in new)
        assert summary.token_count == count_tokens(summary.text) <= 2000
    # The summary is full after a few folds; the 60th fold costs what the 5th did.
    assert count_tokens(summary.text) > 1900
    assert per_fold[4] == per_fold[-1]


def test_a_fold_from_the_kept_sentences_equals_one_from_the_text() -> None:
    # English only: re-read from the text, a Chinese sentence joined to an English one without
    # a space is one sentence; the kept sentences keep them apart, as they were written.
    conversation = [(role, text.split("今天")[0].strip()) for role, text in long_conversation(120)]
    carried: Summary | None = None
    for start in range(0, len(conversation), 20):
        new = conversation[start : start + 20]
        text_only = Summary(carried.text, carried.token_count) if carried else None
        folded = fold(carried, new, budget_tokens=2000)
        assert folded.text == fold(text_only, new, budget_tokens=2000).text
        carried = folded


def test_kept_sentences_that_do_not_match_the_text_are_read_again() -> None:
    folded = fold(None, TRIP)
    assert folded.sentences is not None
    broken = Summary(folded.text + " edited by hand", folded.token_count, "[[9, 6, 40, 1, 1, 1]]")
    assert fold(broken, []).text == fold(folded.text + " edited by hand", []).text


# Pieces of lines a summary can hold: words, digits, punctuation (ASCII and CJK), apostrophes
# that open contractions, emoji and the white space Python and tiktoken treat differently.
PIECES = [*"ab Z9.,!?:;()'-\t。！？，你好\u3000😀\r\u2028\x85", "'s", "'ll", " 12", "...", "User: "]


@given(
    st.lists(
        st.lists(st.sampled_from(PIECES), min_size=1, max_size=12)
        .map(lambda parts: "".join(parts).strip())
        .filter(bool),
        min_size=1,
        max_size=8,
    )
)
def test_the_token_count_of_lines_is_the_sum_of_their_counts(lines: list[str]) -> None:
    text = "\n".join(lines)
    counted = sum(count_tokens(line + "\n") for line in lines[:-1]) + count_tokens(lines[-1])
    assert counted == count_tokens(text)
