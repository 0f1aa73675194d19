"""The rule-based judge (English and Chinese), the judge prompt and the repair of LLM output."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memstream.errors import JudgeOutputError
from memstream.longterm.judge import (
    NEW_MARK,
    Judge,
    build_prompt,
    cut_content,
    parse_judge_output,
    rule_based_judge,
    split_sentences,
)
from memstream.longterm.models import IMPORTANCE_RANGES, MAX_CONTENT_CHARS, SessionMessage

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def msg(content: str, *, role: str = "user", new: bool = True, id_: str = "e1") -> SessionMessage:
    return SessionMessage(id_, role, content, new, NOW)


def judged(text: str) -> list[tuple[str, str, str]]:
    return [(c.content, c.category, c.scope) for c in rule_based_judge([msg(text)])]


# --- positive cases: exact content, category and scope -----------------------------------------

EXACT = [
    ("I live in Paris.", "The user lives in Paris.", "personal_fact", "user"),
    ("I love spicy food.", "The user loves spicy food.", "preference", "user"),
    ("I really like jazz!", "The user likes jazz.", "preference", "user"),
    ("I hate cilantro.", "The user hates cilantro.", "preference", "user"),
    ("I don't like horror movies.", "The user does not like horror movies.", "preference", "user"),
    ("I'm allergic to peanuts.", "The user is allergic to peanuts.", "personal_fact", "user"),
    ("My favourite color is blue.", "The user's favourite color is blue.", "preference", "user"),
    ("My name is Anna Schmidt.", "The user's name is Anna Schmidt.", "personal_fact", "user"),
    ("I'm a software engineer.", "The user is a software engineer.", "personal_fact", "user"),
    ("I'm 34 years old.", "The user is 34 years old.", "personal_fact", "user"),
    ("I work at Siemens.", "The user works at Siemens.", "personal_fact", "user"),
    ("I'm from Lyon.", "The user is from Lyon.", "personal_fact", "user"),
    ("I was born in 1990.", "The user was born in 1990.", "personal_fact", "user"),
    ("I have two cats.", "The user has two cats.", "relationship", "user"),
    ("I study computer science.", "The user studies computer science.", "personal_fact", "user"),
    ("I don't eat pork.", "The user does not eat pork.", "personal_fact", "user"),
    (
        "I'm going to visit Tokyo next month.",
        "The user plans to visit Tokyo next month.",
        "plan",
        "user",
    ),
    ("Next week, I'm flying to Rome.", "The user is flying to Rome next week.", "plan", "user"),
    ("I plan to learn Spanish.", "The user plans to learn Spanish.", "plan", "user"),
    ("My sister is called Anna.", "The user's sister is called Anna.", "relationship", "user"),
    (
        "My husband works as a nurse.",
        "The user's husband works as a nurse.",
        "relationship",
        "user",
    ),
    (
        "Please always answer in short bullet points.",
        "The user wants the agent to always answer in short bullet points.",
        "instruction",
        "agent",
    ),
    ("Never use emojis.", "The user wants the agent to never use emojis.", "instruction", "agent"),
    ("Call me Bob.", "The user wants to be called Bob.", "instruction", "agent"),
    ("Keep it short.", "The user wants the agent to keep answers short.", "instruction", "agent"),
    (
        "From now on, reply in French.",
        "The user wants the agent to reply in French.",
        "instruction",
        "agent",
    ),
    ("我喜欢喝绿茶。", "用户喜欢喝绿茶。", "preference", "user"),
    ("我不喜欢香菜。", "用户不喜欢香菜。", "preference", "user"),
    ("我对花生过敏。", "用户对花生过敏。", "personal_fact", "user"),
    ("我最喜欢的颜色是蓝色。", "用户最喜欢的颜色是蓝色。", "preference", "user"),
    ("我住在上海。", "用户住在上海。", "personal_fact", "user"),
    ("我叫李雷。", "用户叫李雷。", "personal_fact", "user"),
    ("我是一名医生。", "用户是一名医生。", "personal_fact", "user"),
    ("我今年30岁。", "用户今年30岁。", "personal_fact", "user"),
    ("我在腾讯工作。", "用户在腾讯工作。", "personal_fact", "user"),
    ("我从北京搬到了上海。", "用户从北京搬到了上海。", "personal_fact", "user"),
    ("我来自成都。", "用户来自成都。", "personal_fact", "user"),
    ("我的妹妹叫小美。", "用户的妹妹叫小美。", "relationship", "user"),
    ("我打算下个月去东京。", "用户打算下个月去东京。", "plan", "user"),
    ("我下个月要去东京。", "用户打算下个月去东京。", "plan", "user"),
    ("请用中文回答。", "用户希望助手用中文回答。", "instruction", "agent"),
    ("不要用表情符号。", "用户希望助手不要用表情符号。", "instruction", "agent"),
    ("叫我老王就好。", "用户希望被称为老王。", "instruction", "agent"),
    ("以后请叫我张老师。", "用户希望被称为张老师。", "instruction", "agent"),
    ("总是用要点回答。", "用户希望助手总是用要点回答。", "instruction", "agent"),
    ("回答请尽量简短。", "用户希望回答尽量简短。", "instruction", "agent"),
    ("我周末喜欢去爬山。", "用户周末喜欢去爬山。", "preference", "user"),
    ("我现在在一家创业公司当产品经理。", "用户在一家创业公司当产品经理。", "personal_fact", "user"),
    ("我有糖尿病。", "用户有糖尿病。", "personal_fact", "user"),
    ("我的生日是5月3日。", "用户的生日是5月3日。", "personal_fact", "user"),
    (
        "I've been living in London for five years.",
        "The user lives in London.",
        "personal_fact",
        "user",
    ),
    (
        "My best friend Tom is a pilot.",
        "The user's best friend Tom is a pilot.",
        "relationship",
        "user",
    ),
    (
        "Always cite your sources.",
        "The user wants the agent to always cite its sources.",
        "instruction",
        "agent",
    ),
    ("I prefer short answers.", "The user prefers short answers.", "instruction", "agent"),
    ("I'm learning Japanese.", "The user is learning Japanese.", "personal_fact", "user"),
    (
        "I have a dentist appointment on Monday.",
        "The user has a dentist appointment on Monday.",
        "plan",
        "user",
    ),
]


@pytest.mark.parametrize(("text", "content", "category", "scope"), EXACT)
def test_rule_exact(text: str, content: str, category: str, scope: str) -> None:
    assert judged(text) == [(content, category, scope)]


def test_moved_keeps_both_places() -> None:
    [(content, category, scope)] = judged("I moved from Paris to Berlin.")
    assert "Berlin" in content and "moved" in content and "Paris" in content
    assert (category, scope) == ("personal_fact", "user")


def test_two_clauses_give_two_memories() -> None:
    assert judged("I am vegetarian and I love spicy food.") == [
        ("The user is vegetarian.", "personal_fact", "user"),
        ("The user loves spicy food.", "preference", "user"),
    ]


def test_chinese_subject_carries_over_commas() -> None:
    assert [c for c, _, _ in judged("我叫李雷，今年25岁，住在北京。")] == [
        "用户叫李雷。",
        "用户今年25岁。",
        "用户住在北京。",
    ]


def test_greeting_with_name_and_job() -> None:
    assert [c for c, _, _ in judged("Hi, I'm Sarah and I work as a nurse in Boston.")] == [
        "The user's name is Sarah.",
        "The user works as a nurse in Boston.",
    ]


def test_session_with_context_and_mixed_languages() -> None:
    messages = [
        msg("Where do you live?", role="assistant", new=False, id_="a1"),
        msg("I live in Paris.", new=False, id_="u1"),
        msg("Nice!", role="assistant", id_="a2"),
        msg("Thanks! By the way, I moved to Berlin last month.", id_="u2"),
        msg("另外，请用中文回答。", id_="u3"),
    ]
    out = rule_based_judge(messages)
    assert [(c.content, c.source_event_ids) for c in out] == [
        ("The user moved to Berlin last month.", ("u2",)),
        ("用户希望助手用中文回答。", ("u3",)),
    ]


def test_remember_that_unwraps_the_fact_with_more_importance() -> None:
    [plain] = rule_based_judge([msg("I'm allergic to peanuts.")])
    [remembered] = rule_based_judge([msg("Remember that I'm allergic to peanuts.")])
    assert remembered.content == plain.content
    assert remembered.importance > plain.importance
    [zh] = rule_based_judge([msg("请记住我对海鲜过敏。")])
    assert zh.content == "用户对海鲜过敏。"


def test_first_person_inside_captures_is_rewritten() -> None:
    [c] = rule_based_judge([msg("I will call my mom tomorrow.")])
    assert c.content == "The user plans to call their mom tomorrow."
    assert c.category == "plan"


def test_candidate_fields_follow_the_category() -> None:
    out = rule_based_judge([msg("I love jazz. Never use emojis. I live in Oslo.", id_="e7")])
    by_category = {c.category: c for c in out}
    assert by_category["preference"].memory_type == "pref_mem"
    assert by_category["instruction"].memory_type == "pref_mem"
    assert by_category["instruction"].scope == "agent"
    assert by_category["personal_fact"].memory_type == "text_mem"
    for c in out:
        low, high = IMPORTANCE_RANGES[c.category]
        assert low <= c.importance <= high
        assert c.source_event_ids == ("e7",)


def test_stronger_signal_scores_higher() -> None:
    [like] = rule_based_judge([msg("I like tea.")])
    [love] = rule_based_judge([msg("I really love tea.")])
    assert love.importance > like.importance


def test_no_duplicates_within_a_message_and_sources_merged_across() -> None:
    out = rule_based_judge([msg("I love tea. I love tea!")])
    assert [c.content for c in out] == ["The user loves tea."]
    out = rule_based_judge([msg("I love tea.", id_="a"), msg("I love tea!", id_="b")])
    assert [(c.content, c.source_event_ids) for c in out] == [("The user loves tea.", ("a", "b"))]


def test_content_is_cut_to_the_limit() -> None:
    out = rule_based_judge([msg("I love " + "very long words " * 40)])
    [c] = out
    assert len(c.content) <= MAX_CONTENT_CHARS
    assert c.content.endswith(".")


# --- negative cases -----------------------------------------------------------------------------

NOTHING = [
    "Do you like jazz?",
    "Can you tell me where Paris is",
    "你喜欢爵士乐吗？",
    "你叫什么名字",
    "Hi there!",
    "Thanks!",
    "谢谢！",
    "The weather is nice today.",
    "I'm tired.",
    "I am happy.",
    "I am going home.",
    "I like it.",
    "I love your answer!",
    "I have a question about Python.",
    "If I were rich, I would buy a boat.",
    "I might move to Rome.",
    "如果我有钱，我会买房子。",
    "我有一个问题。",
    "我喜欢你的回答。",
    "Don't worry about it.",
    "Call me back later.",
    "Great, I'll try that.",
    "I'm going to ask you something.",
    "I'm not a doctor.",
    "我要去睡觉了。",
    "帮我写一首诗。",
    "我觉得你说得对。",
    "我是不是应该换工作",
    "我有点累。",
]


@pytest.mark.parametrize("text", NOTHING)
def test_nothing_to_remember(text: str) -> None:
    assert judged(text) == []


def test_only_new_user_messages_are_judged() -> None:
    messages = [
        msg("I live in Paris.", new=False, id_="old"),
        msg("I live in Paris.", role="assistant", id_="bot"),
        msg("我住在上海。", role="assistant", id_="bot2"),
    ]
    assert rule_based_judge(messages) == []


def test_split_sentences() -> None:
    assert split_sentences("I met Dr. Smith. He is nice!\n我住在上海。我喜欢茶") == [
        "I met Dr. Smith.",
        "He is nice!",
        "我住在上海。",
        "我喜欢茶",
    ]


# --- the prompt ---------------------------------------------------------------------------------


def test_prompt_marks_new_messages_and_states_the_rules() -> None:
    messages = [
        msg("Hello", role="assistant", new=False, id_="e1"),
        msg("I live in Paris", id_="e2"),
    ]
    system, user = build_prompt(messages, "travel")
    assert system["role"] == "system" and user["role"] == "user"
    for word in ("preference", "personal_fact", "plan", "relationship", "instruction"):
        assert word in system["content"]
    for word in ("text_mem", "pref_mem", "skill_mem", "tool_mem", '"memories"'):
        assert word in system["content"]
    assert "(e1) assistant: Hello" in user["content"]
    assert f"{NEW_MARK} (e2) user: I live in Paris" in user["content"]
    assert f"{NEW_MARK} (e1)" not in user["content"]
    assert "travel" in user["content"]


# --- repairing LLM output -----------------------------------------------------------------------

NEW = [msg("I live in Paris", id_="e2"), msg("and I like tea", id_="e3")]


def one(content: str = "The user lives in Paris.", **fields: object) -> str:
    return json.dumps({"memories": [{"content": content, **fields}]})


def test_parse_complete_item() -> None:
    text = one(
        category="personal_fact",
        memory_type="text_mem",
        scope="user",
        importance=8,
        source_event_ids=["e2"],
    )
    [c] = parse_judge_output(text, NEW)
    assert (c.content, c.category, c.memory_type, c.scope, c.importance, c.source_event_ids) == (
        "The user lives in Paris.",
        "personal_fact",
        "text_mem",
        "user",
        8,
        ("e2",),
    )


def test_parse_strips_fences_and_accepts_a_bare_list() -> None:
    fenced = "```json\n" + one(category="preference") + "\n```"
    assert parse_judge_output(fenced, NEW)[0].category == "preference"
    bare = json.dumps([{"content": "The user likes tea.", "category": "preference"}])
    assert parse_judge_output(bare, NEW)[0].content == "The user likes tea."
    prose = "Here you go: " + one() + " Hope that helps."
    assert len(parse_judge_output(prose, NEW)) == 1


def test_parse_defaults_for_missing_fields() -> None:
    [c] = parse_judge_output(one(), NEW)
    assert (c.category, c.memory_type, c.scope) == ("personal_fact", "text_mem", "user")
    assert c.importance == 8  # the midpoint of personal_fact 6-9, rounded up
    assert c.source_event_ids == ("e2", "e3")  # every new message
    [i] = parse_judge_output(one("The user wants short answers.", category="instruction"), NEW)
    assert (i.memory_type, i.scope) == ("pref_mem", "agent")
    [p] = parse_judge_output(one("The user likes tea.", category="preference"), NEW)
    assert (p.memory_type, p.scope) == ("pref_mem", "user")


def test_parse_unknown_values_take_defaults() -> None:
    [c] = parse_judge_output(
        one(category="hobby", memory_type="long_mem", scope="world", importance="high"), NEW
    )
    assert (c.category, c.memory_type, c.scope, c.importance) == (
        "personal_fact",
        "text_mem",
        "user",
        8,
    )
    [c] = parse_judge_output(one(category="Relationship", scope="AGENT"), NEW)
    assert (c.category, c.scope) == ("relationship", "agent")


@pytest.mark.parametrize(("given", "expected"), [(42, 10), (-3, 1), (0, 1), ("7", 7), (6.6, 7)])
def test_parse_clamps_importance(given: object, expected: int) -> None:
    [c] = parse_judge_output(one(importance=given), NEW)
    assert c.importance == expected


def test_parse_keeps_only_new_event_ids() -> None:
    [c] = parse_judge_output(one(source_event_ids=["e3", "e1", "zzz"]), NEW)
    assert c.source_event_ids == ("e3",)
    [c] = parse_judge_output(one(source_event_ids=["nope"]), NEW)
    assert c.source_event_ids == ("e2", "e3")
    [c] = parse_judge_output(one(source_event_ids="(e2)"), NEW)
    assert c.source_event_ids == ("e2",)


def test_parse_drops_unusable_items() -> None:
    text = json.dumps(
        {
            "memories": [
                "a string",
                None,
                {"content": ""},
                {"content": "   "},
                {"category": "plan"},
                {"content": 12},
                {"content": "The user likes tea."},
                {"content": "The user likes tea."},
            ]
        }
    )
    assert [c.content for c in parse_judge_output(text, NEW)] == ["The user likes tea."]


def test_parse_empty_list_is_valid() -> None:
    assert parse_judge_output('{"memories": []}', NEW) == []
    assert parse_judge_output("[]", NEW) == []


def test_parse_cuts_long_content_at_a_word() -> None:
    [c] = parse_judge_output(one("The user " + "likes tea " * 40), NEW)
    assert len(c.content) <= MAX_CONTENT_CHARS
    assert c.content.endswith("tea")


@pytest.mark.parametrize(
    "text",
    ["not json at all", "", '{"answer": 42}', '"just a string"', "42", '{"memories": "none"}'],
)
def test_parse_errors(text: str) -> None:
    with pytest.raises(JudgeOutputError):
        parse_judge_output(text, NEW)


def test_cut_content() -> None:
    assert cut_content("a  b\n c") == "a b c"
    assert len(cut_content("word " * 100)) <= MAX_CONTENT_CHARS
    assert cut_content("长" * 300) == "长" * MAX_CONTENT_CHARS


# --- the judge without a model --------------------------------------------------------------------


async def test_judge_without_llm_uses_rules() -> None:
    result = await Judge(None).judge([msg("I live in Paris.")], agent_id="a1")
    assert result.method == "rules" and result.fallback_reason is None
    assert [c.content for c in result.candidates] == ["The user lives in Paris."]


async def test_judge_with_no_new_message_is_empty() -> None:
    result = await Judge(None).judge([msg("I live in Paris.", new=False)], agent_id=None)
    assert (result.candidates, result.method) == ((), "rules")


# --- episodic events and activities ---------------------------------------------------------------

EPISODES = [
    (
        "I went to a LGBTQ support group yesterday and it was so powerful.",
        "The user went to a LGBTQ support group yesterday.",
    ),
    ("I just finished a painting of a sunset.", "The user just finished a painting of a sunset."),
    ("I've been reading 'Charlotte's Web'.", "The user has been reading Charlotte's Web."),
    (
        "We took the kids camping last weekend.",
        "The user and their family took the kids camping last weekend.",
    ),
    ("I started volunteering at the shelter.", "The user started volunteering at the shelter."),
    (
        "Yesterday, I went to a pottery class with my kids.",
        "The user went to a pottery class with their kids yesterday.",
    ),
    (
        "My family and I visited the Grand Canyon last summer.",
        "The user and their family visited the Grand Canyon last summer.",
    ),
    (
        "My husband and I adopted a puppy in June.",
        "The user and their husband adopted a puppy in June.",
    ),
    (
        "Anthony and I went to a charity event.",
        "The user and Anthony went to a charity event.",
    ),
    ("I'm reading a book about mindfulness.", "The user is reading a book about mindfulness."),
    ("I signed up for a pottery class.", "The user signed up for a pottery class."),
    ("I recently ran a half marathon!", "The user recently ran a half marathon."),
    (
        "I won first place in the chess tournament on May 5.",
        "The user won first place in the chess tournament on May 5.",
    ),
    ("I've been to Paris twice.", "The user has been to Paris twice."),
    ("我昨天去了一个支持小组。", "用户昨天去了一个支持小组。"),
    ("我最近读了《三体》。", "用户最近读了《三体》。"),
    ("昨天我参加了一个画画课。", "用户昨天参加了一个画画课。"),
    ("我刚刚完成了一幅日落的画。", "用户刚刚完成了一幅日落的画。"),
    ("我上周末认识了一个新朋友。", "用户上周末认识了一个新朋友。"),
]


@pytest.mark.parametrize(("text", "content"), EPISODES)
def test_episode(text: str, content: str) -> None:
    [c] = rule_based_judge([msg(text)])
    assert (c.content, c.category, c.memory_type, c.scope) == (
        content,
        "personal_fact",
        "text_mem",
        "user",
    )
    assert c.importance == 6


NO_EPISODE = [
    "I did it!",
    "I went there.",
    "I got it.",
    "I went there yesterday.",
    "I made it!",
    "Did you go to the party?",
    "If I went to Paris, I would eat croissants.",
    "I'm doing well.",
    "I've been thinking about you.",
    "I read your message.",
    "I got to say, that's amazing.",
    "We did alright.",
    "我去了那里。",
    "我买了它。",
    "你去了哪里？",
    "如果我去了北京，我会很开心。",
]


@pytest.mark.parametrize("text", NO_EPISODE)
def test_no_episode(text: str) -> None:
    assert judged(text) == []


def test_episode_does_not_duplicate_other_families() -> None:
    # The earlier families keep their sentences: one memory each, none episodic.
    assert judged("I moved to Berlin last year.") == [
        ("The user moved to Berlin last year.", "personal_fact", "user")
    ]
    assert judged("I'm flying to Rome next week.") == [
        ("The user is flying to Rome next week.", "plan", "user")
    ]
    out = rule_based_judge(
        [msg("I went to a yoga class.", id_="e1"), msg("I went to a yoga class!", id_="e2")]
    )
    assert [(c.content, c.source_event_ids) for c in out] == [
        ("The user went to a yoga class.", ("e1", "e2"))
    ]
