"""Local de-duplication of one batch of candidate memories: each rule, its guards, the
survivor, provenance and order."""

from __future__ import annotations

import pytest

from memstream.longterm.dedupe import (
    JACCARD_THRESHOLD,
    LEVENSHTEIN_THRESHOLD,
    SHORT_TEXT_CHARS,
    dedupe,
    match,
    merge_ids,
)
from memstream.longterm.models import Candidate, Category, Scope
from memstream.text.normalise import comparison_form as normalise
from memstream.text.similarity import bigram_jaccard as jaccard


def cand(
    content: str,
    *ids: str,
    importance: int = 6,
    scope: Scope = "user",
    category: Category = "personal_fact",
) -> Candidate:
    return Candidate(content, "text_mem", scope, importance, category, ids or ("e0",))


# --- normalisation -------------------------------------------------------------------------


def test_normalise_folds_case_space_punctuation_and_width() -> None:
    assert normalise("  The USER   likes\tTea!!! ") == "the user likes tea"
    assert normalise("ＴＨＥ　ＵＳＥＲ　ＬＩＫＥＳ　ＴＥＡ") == "the user likes tea"  # full width
    assert normalise("The user's dog doesn't bark.") == "the users dog doesnt bark"
    assert normalise("用户 喜欢 咖啡。") == "用户喜欢咖啡"  # no space between CJK characters
    assert normalise("用户喜欢ＡＢＣ，很好！") == "用户喜欢 abc 很好"
    assert normalise("He is 1.85 m tall. OK.") == "he is 1.85 m tall ok"  # decimal point kept


def test_thresholds_are_the_contract_numbers() -> None:
    assert JACCARD_THRESHOLD == 0.7
    assert LEVENSHTEIN_THRESHOLD == 0.8
    assert SHORT_TEXT_CHARS == 50


# --- the four rules ------------------------------------------------------------------------


def test_exact_after_normalisation() -> None:
    assert match("The user likes tea.", "the user likes TEA") == "exact"
    assert match("用户喜欢喝咖啡。", "用户 喜欢 喝 咖啡") == "exact"
    assert match("用户喜欢ＪＡＺＺ！", "用户喜欢jazz!") == "exact"


def test_containment_whole_words_and_direction() -> None:
    assert match("The user likes tea and coffee", "The user likes tea") == "contains"
    assert match("The user likes tea", "The user likes tea and coffee") == "contained"
    assert match("用户喜欢猫", "用户喜欢猫和狗") == "contained"
    # Whole words only: "tea" is not in "teapots".
    assert match("The user collects teapots", "The user collects tea") is None


def test_character_bigram_jaccard() -> None:
    # theusersfavouritecolourisblue / theusersfavoritecolorisblue: 23 shared bigrams of 26
    # (only the first has "ou" and "ur", only the second "or").
    a, b = "The user's favourite colour is blue.", "The user's favorite color is blue"
    assert jaccard(a, b) == pytest.approx(23 / 26)
    assert match(a, b) == "jaccard"
    long_a = "The user plays the guitar in a small jazz band every Saturday evening with friends"
    long_b = "The user plays guitar in a small jazz band every Saturday evening with friends"
    assert len(normalise(long_b)) > SHORT_TEXT_CHARS
    assert match(long_a, long_b) == "jaccard"


def test_short_text_levenshtein() -> None:
    # 用户喜欢喝咖啡 / 用户很喜欢喝咖啡: bigrams 5 shared of 8 (户喜 vs 户很 很喜) = 0.625,
    # edit similarity 1 - 1/8 = 0.875.
    a, b = "用户喜欢喝咖啡", "用户很喜欢喝咖啡"
    assert jaccard(a, b) == pytest.approx(5 / 8)
    assert match(a, b) == "levenshtein"
    assert match("The user enjoys hiking", "The user enjoys hikes") in ("jaccard", "levenshtein")


def test_levenshtein_only_for_short_texts() -> None:
    # Misspellings: high edit similarity, few shared bigrams.
    short_a = "The user practises calligraphy at dawn"
    short_b = "The usar practizes calligrafy at dawn"
    assert len(normalise(short_a)) <= SHORT_TEXT_CHARS
    assert jaccard(short_a, short_b) < JACCARD_THRESHOLD
    assert match(short_a, short_b) == "levenshtein"
    long_a = (
        "The user practises calligraphy with traditional brushes every morning before breakfast"
    )
    long_b = "The usar practizes calligrafy wiht tradicional brashes evry mornin befor brekfast"
    assert len(normalise(long_a)) > SHORT_TEXT_CHARS
    assert jaccard(long_a, long_b) < JACCARD_THRESHOLD
    assert match(long_a, long_b) is None  # edit similarity 0.86, but not a short text


# --- guards: different facts are never merged ---------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("The user likes tea", "The user dislikes tea"),  # edit similarity 0.86
        ("The user likes tea", "The user does not like tea"),
        ("The user lives in Rome", "The user lives in Nice"),  # edit similarity 0.86
        ("The user is 30 years old", "The user is 31 years old"),  # bigram Jaccard 0.8
        ("The user's sister is named Anna", "The user's sister is named Anne"),
        ("用户喜欢猫", "用户不喜欢猫"),
        ("用户住在北京", "用户住在上海"),
        ("用户有2只猫", "用户有3只猫"),
        ("The user drinks coffee with sugar", "The user drinks coffee without sugar"),
    ],
)
def test_different_facts_are_not_duplicates(a: str, b: str) -> None:
    assert match(a, b) is None
    assert match(b, a) is None


def test_very_is_not_a_chinese_negation() -> None:
    assert match("用户非常喜欢猫", "用户非常喜欢猫。") == "exact"
    assert match("用户非常喜欢猫", "用户非常喜欢猫和狗") == "contained"


# --- the batch -----------------------------------------------------------------------------


def test_exact_duplicates_keep_the_more_important_and_merge_provenance() -> None:
    out = dedupe(
        [
            cand("The user likes tea.", "e1", importance=5, category="preference"),
            cand("the user likes TEA", "e2", "e3", importance=7, category="preference"),
        ]
    )
    assert len(out) == 1
    assert out[0].content == "the user likes TEA"
    assert out[0].importance == 7
    assert out[0].source_event_ids == ("e1", "e2", "e3")  # first seen first


def test_tie_on_importance_keeps_the_longer_then_the_earlier() -> None:
    out = dedupe([cand("用户喜欢喝咖啡", "e1"), cand("用户很喜欢喝咖啡", "e2")])
    assert [c.content for c in out] == ["用户很喜欢喝咖啡"]
    assert out[0].source_event_ids == ("e1", "e2")
    out = dedupe([cand("The user likes tea!", "e1"), cand("the user likes tea", "e2")])
    assert [c.content for c in out] == ["The user likes tea!"]  # longer raw text
    out = dedupe([cand("the user likes tea", "e1"), cand("The user likes tea", "e2")])
    assert [c.content for c in out] == ["the user likes tea"]  # earlier


def test_containment_keeps_the_longer_with_the_higher_importance() -> None:
    out = dedupe(
        [
            cand("The user is allergic to peanuts", "e1", importance=9),
            cand("The user is allergic to peanuts and shellfish", "e2", importance=7),
        ]
    )
    assert len(out) == 1
    assert out[0].content == "The user is allergic to peanuts and shellfish"
    assert out[0].importance == 9  # within personal_fact's 6-9
    assert out[0].source_event_ids == ("e1", "e2")


def test_containment_importance_is_capped_to_the_survivors_category() -> None:
    out = dedupe(
        [
            cand("Always answer in French", "e1", importance=10, category="instruction"),
            cand("The user likes it when you always answer in French", "e2", importance=5,
                 category="preference"),
        ]
    )  # fmt: skip
    assert len(out) == 1
    assert out[0].category == "preference"
    assert out[0].importance == 8  # preference tops out at 8


def test_scopes_are_deduplicated_separately() -> None:
    out = dedupe(
        [
            cand("Prefers short answers", "e1", scope="user"),
            cand("Prefers short answers", "e2", scope="agent"),
            cand("prefers short answers!", "e3", scope="user"),
        ]
    )
    assert [(c.scope, c.source_event_ids) for c in out] == [
        ("user", ("e1", "e3")),
        ("agent", ("e2",)),
    ]


def test_output_order_is_the_input_order_of_each_groups_first_member() -> None:
    out = dedupe(
        [
            cand("The user lives in Rome", "e1"),
            cand("The user has two cats", "e2"),
            cand("The user lives in Rome with her partner", "e3"),
            cand("用户喜欢猫", "e4"),
            cand("The user has two cats.", "e5"),
            cand("The user lives in Nice", "e6"),
        ]
    )
    assert [(c.content, c.source_event_ids) for c in out] == [
        ("The user lives in Rome with her partner", ("e1", "e3")),
        ("The user has two cats.", ("e2", "e5")),  # same importance: the longer
        ("用户喜欢猫", ("e4",)),
        ("The user lives in Nice", ("e6",)),
    ]
    # Deterministic: the same input gives the same output.
    assert dedupe(list(reversed(out))) == list(reversed(out))


def test_a_later_candidate_can_join_two_groups() -> None:
    out = dedupe(
        [
            cand("The user likes tea", "e1"),
            cand("The user likes coffee", "e2"),
            cand("The user likes tea and the user likes coffee", "e3"),
        ]
    )
    assert len(out) == 1
    assert out[0].content == "The user likes tea and the user likes coffee"
    assert out[0].source_event_ids == ("e1", "e2", "e3")


def test_nothing_to_merge_and_empty_input() -> None:
    batch = [cand("The user likes tea", "e1"), cand("The user does not like tea", "e2")]
    assert dedupe(batch) == batch
    assert dedupe([]) == []


def test_merge_ids_is_an_order_preserving_union() -> None:
    assert merge_ids(("a", "b"), ("b", "c"), ("a", "d")) == ("a", "b", "c", "d")
