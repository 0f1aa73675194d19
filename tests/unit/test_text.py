"""The shared text helpers: script ranges, normal forms and the two Jaccard similarities."""

from __future__ import annotations

import re

import pytest

from memstream.text.normalise import (
    collapse_whitespace,
    comparison_form,
    comparison_units,
    fold,
    fold_spaces_and_case,
)
from memstream.text.scripts import CJK, CJK_EXTENDED, HAN, WIDE, has_han, is_mostly_cjk
from memstream.text.similarity import bigram_jaccard, char_bigrams, token_jaccard


@pytest.mark.parametrize(
    ("char", "han", "cjk", "extended", "wide"),
    [
        ("猫", True, True, True, True),  # CJK unified ideograph
        ("㐀", True, True, True, True),  # extension A
        ("の", False, True, True, True),  # hiragana
        ("한", False, True, True, True),  # Hangul syllable
        ("ㅋ", False, False, True, False),  # Hangul compatibility jamo
        ("ㇰ", False, False, True, False),  # Katakana phonetic extension
        ("。", False, False, False, True),  # CJK punctuation
        ("，", False, False, False, True),  # full-width comma
        ("a", False, False, False, False),
    ],
)
def test_each_range_has_its_width(
    char: str, han: bool, cjk: bool, extended: bool, wide: bool
) -> None:
    found = [re.fullmatch(f"[{r}]", char) is not None for r in (HAN, CJK, CJK_EXTENDED, WIDE)]
    assert found == [han, cjk, extended, wide]


def test_has_han_looks_for_chinese_characters_only() -> None:
    assert has_han("I live in 北京")
    assert not has_han("とうきょう")
    assert not has_han("서울에 살아요")


def test_mostly_cjk_weighs_a_character_like_a_word() -> None:
    assert is_mostly_cjk("我住在上海")
    assert is_mostly_cjk("我住在Berlin")
    assert not is_mostly_cjk("I love 北京")
    assert not is_mostly_cjk("plain English")
    assert not is_mostly_cjk("")


def test_the_normal_forms_go_from_light_to_forgiving() -> None:
    text = "  The USER's  ＡＢＣ\tlikes Tea!! "
    assert collapse_whitespace(text) == "The USER's ＡＢＣ likes Tea!!"
    assert fold("ＡＢＣ Straße") == "abc strasse"
    assert fold_spaces_and_case(text) == "the user's abc likes tea!!"
    assert comparison_form(text) == "the users abc likes tea"


def test_comparison_units_keep_numbers_and_split_cjk() -> None:
    assert comparison_units("用户身高1.85米。") == ("用", "户", "身", "高", "1.85", "米")
    assert comparison_form("用户 喜欢 ABC") == "用户喜欢 abc"


def test_token_jaccard_compares_sets() -> None:
    assert token_jaccard(["tea", "green"], ("green", "tea", "tea")) == 1.0
    assert token_jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    assert token_jaccard([], []) == 1.0
    assert token_jaccard(["a"], []) == 0.0


def test_bigram_jaccard_compares_wording() -> None:
    assert char_bigrams("用户喜欢猫") == {"用户", "户喜", "喜欢", "欢猫"}
    assert char_bigrams("A") == {"a"}
    assert bigram_jaccard("The user likes tea.", "the USER likes tea") == 1.0
    assert bigram_jaccard("", "") == 1.0
    assert bigram_jaccard("likes tea", "does not like tea") < 0.7
