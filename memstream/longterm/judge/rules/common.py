"""What the English and Chinese grammars of the rule-based judge share: the hit a rule yields,
cleaning a capture, and importance within its category's range."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memstream.longterm.judge.candidates import cut_content
from memstream.longterm.models import IMPORTANCE_RANGES, MAX_CONTENT_CHARS, Category
from memstream.text.normalise import collapse_whitespace


@dataclass(frozen=True, slots=True)
class Hit:
    core: str  # the memory without its final punctuation
    category: Category
    importance: int
    zh: bool = False


Handler = Callable[[re.Match[str], int], "Hit | None"]
"""What a rule does with its match: (match, depth) -> hit or None; ``depth`` counts the
clauses the rules re-read inside one ("remember that ...")."""
Rule = tuple[re.Pattern[str], Handler]
"""A pattern matched at the start of a clause, and its handler."""

# Endings are stripped by matching the reversed text at its start: a ``$``-anchored search
# would try every position and scan to the end from each, quadratic on a long run of the
# characters or words it strips, while a match at one position reads the ending once.
# Each pattern below is therefore written backwards, and its alternatives never overlap.
_TRAILING_REV = re.compile(r"[\s.,;:!?…~\"'”“)\]}*_。！？，；：、）】」』-]+")
# Emoticons such as ":-)", ";P", "<3" and "^_^" (reversed: ")-:", "P;", "3<", "^_^"), with
# the white space around them.
_EMOTICON_REV = re.compile(r"\s*(?:[)(DPp]-?[:;=]|3<|\^_?\^)+\s*")
# Filler words after a comma or a space ("..., too", "... lol"), reversed word by word; the
# ``\b`` before each keeps the word whole, as the one after it did forwards.
_EN_TAIL_REV = re.compile(
    r"(?:\b(?:oot|llew\s+sa|lol|a+hah|eheh|hguoht|wtb|yawyna|syawyna|tol\s+a|"
    r"hcum\s+os|hcum\s+yrev|yaw\s+eht\s+yb|yllautca|erus\s+rof)\s+,?)+",
    re.I,
)
_ZH_TAIL_REV = re.compile(r"[啊呀哦啦哈嘛喔噢呐哟咯~～]+")


def strip_ending(reversed_pattern: re.Pattern[str], text: str) -> str:
    """``text`` without the ending ``reversed_pattern`` matches when read backwards."""
    m = reversed_pattern.match(text[::-1])
    return text[: len(text) - m.end()] if m else text


def clean(text: str) -> str:
    """A capture without trailing punctuation, emoticons and filler words."""
    text = collapse_whitespace(text)
    for _ in range(3):
        before = text
        for ending in (_EMOTICON_REV, _TRAILING_REV, _EN_TAIL_REV, _ZH_TAIL_REV):
            text = strip_ending(ending, text)
        if text == before:
            break
    return text.strip()


def finish(found: Hit) -> str:
    core = clean(found.core)
    if found.zh:
        return cut_content(core, MAX_CONTENT_CHARS - 1) + "。"
    core = core[:1].upper() + core[1:]
    return cut_content(core, MAX_CONTENT_CHARS - 1) + "."


def clamp(category: Category, importance: int) -> int:
    low, high = IMPORTANCE_RANGES[category]
    return max(low, min(high, importance))


def hit(core: str, category: Category, importance: int, *, zh: bool = False) -> Hit:
    return Hit(core, category, clamp(category, importance), zh)


def boost(found: Hit | None, by: int = 1) -> Hit | None:
    if found is None:
        return None
    return Hit(found.core, found.category, clamp(found.category, found.importance + by), found.zh)


def first_hit(rules: Sequence[Rule], clause: str, depth: int) -> Hit | None:
    """The hit of the first rule that matches ``clause`` and yields one."""
    for pattern, handler in rules:
        m = pattern.match(clause)
        if m:
            found = handler(m, depth)
            if found is not None:
                return found
    return None
