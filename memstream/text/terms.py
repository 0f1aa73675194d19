"""The terms of a text: what retrieval indexes and the stages count as content.

Text is NFKC-normalised and lower-cased. Latin-script words (letters and digits) drop a small
English stop-word list and pass through the Porter stemmer ("painted", "painting" -> "paint").
Chinese, Japanese and Korean runs have no spaces: they become overlapping character bigrams
plus the single characters ("四川菜" -> 四 川 菜 四川 川菜). Mixed text works, each run is
tokenized by its own rule.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

from memstream.text.scripts import CJK_EXTENDED, CJK_EXTENDED_START
from memstream.text.stem import stem

# Articles, pronouns, auxiliaries, prepositions and question words: they carry no topic.
STOP_WORDS = frozenset(
    """
    a an the and or but if then so than that this these those there here
    i me my mine myself we us our ours you your yours he him his she her hers it its
    they them their theirs who whom whose which what when where why how
    am is are was were be been being do does did doing have has had having
    will would shall should can could might must
    of in on at to for from by with about as into onto over under up down out off
    again further once just very too also not no nor only own same such
    s t d ll m re ve don didn doesn isn wasn aren weren wouldn couldn shouldn
    any all both each few more most other some
    """.split()  # noqa: SIM905 - a word list reads better as text
)

# Common Chinese function characters; bigrams that contain them are kept.
CJK_STOP_CHARS = frozenset("的了是在和与也就都而及着过吗呢吧啊呀嘛么之其或")

_TOKEN = re.compile(rf"([{CJK_EXTENDED}]+)|([^\W_{CJK_EXTENDED}]+)")  # (CJK run, word)
_CJK_CHAR = re.compile(f"[{CJK_EXTENDED}]")
_POSSESSIVE = re.compile(r"['’]s\b")


def tokenize(text: str) -> list[str]:
    """Index terms of ``text`` in order: stemmed words and CJK character bigrams/unigrams."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    out: list[str] = []
    for run, word in _TOKEN.findall(_POSSESSIVE.sub("", text.lower())):
        if word:
            term = _word_term(word)
            if term:
                out.append(term)
        else:
            out.extend(ch for ch in run if ch not in CJK_STOP_CHARS)
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
    return out


@lru_cache(maxsize=65536)
def _word_term(word: str) -> str:
    """The index term of one lower-case word; empty for stop words and single letters."""
    if word in STOP_WORDS or (len(word) == 1 and not word.isdigit()):
        return ""
    return stem(word)


def phrases(tokens: Sequence[str]) -> list[str]:
    """Adjacent word pairs of a token list (the phrase field); CJK terms are skipped, their
    bigrams already are phrases."""
    return [f"{a} {b}" for a, b in itertools.pairwise(tokens) if not (_cjk(a) or _cjk(b))]


def _cjk(term: str) -> bool:
    return term[0] >= CJK_EXTENDED_START and _CJK_CHAR.match(term) is not None
