"""Rewriting an English clause about the user: the first person into the third, names, verbs."""

from __future__ import annotations

import re

from memstream.longterm.judge.rules.common import clean
from memstream.longterm.judge.rules.en.lexicon import (
    _FIRST_PERSON,
    _PRONOUN_ONLY,
    _THIRD,
    _THIRD_INSTRUCTION,
)


def _third_en(text: str, *, instruction: bool = False) -> str:
    """``text`` with the first person (and, for instructions, the second) rewritten."""
    table = _THIRD_INSTRUCTION if instruction else _THIRD

    def swap(m: re.Match[str]) -> str:
        word = m.group(0)
        key = " ".join(word.lower().split())
        return table.get(key, word)

    return _FIRST_PERSON.sub(swap, clean(text))


def _useful(text: str) -> bool:
    text = clean(text)
    return len(text) >= 2 and not _PRONOUN_ONLY.match(text)


_NAME_STOP = re.compile(
    r"^(?:back|later|tomorrow|when|if|at|on|anytime|now|again|please|asap|sometime|soon|"
    r"tonight|in|after|before|whenever|maybe|a|an|the|not|so|too|to|from|by|it|that)\b",
    re.I,
)


def _name(text: str) -> str | None:
    """A person's name at the start of ``text`` (up to four words)."""
    text = re.split(r",|;|\s+(?:and|but|because|since|from|who|which)\s+|\s+-\s+", text)[0]
    words = clean(text).split()[:4]
    if not words or _NAME_STOP.match(words[0]):
        return None
    name = " ".join(words)
    return name if re.search(r"\w", name) else None


def _conjugate(verb: str) -> str | None:
    """The third-person singular of a present-tense verb; None for a past form."""
    low = verb.lower()
    irregular = {"have": "has", "am": "is", "be": "is", "do": "does", "go": "goes"}
    past = {
        "are",
        "think",
        "guess",
        "mean",
        "believe",
        "feel",
        "hope",
        "know",
        "see",
        "was",
        "were",
        "went",
        "had",
        "did",
        "saw",
        "got",
        "made",
        "took",
        "came",
        "flew",
        "bought",
        "met",
        "left",
        "ate",
        "drank",
        "spent",
        "began",
        "gave",
        "told",
        "said",
        "thought",
        "found",
        "felt",
        "knew",
        "ran",
        "wrote",
        "read",
    }
    if low in irregular:
        return irregular[low]
    if low in past or low.endswith("ed") or not low.isalpha():
        return None
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(low) > 1 and low.endswith("y") and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _en(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I)
