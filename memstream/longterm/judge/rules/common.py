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

_TRAILING = re.compile(r"[\s.,;:!?…~\"'”“)\]}*_。！？，；：、）】」』-]+$")
_EMOTICON = re.compile(r"\s*(?:[:;=]-?[)(DPp]|<3|\^_?\^)+\s*$")
_EN_TAIL = re.compile(
    r"(?:,?\s+(?:too|as\s+well|lol|haha+|hehe|though|btw|anyway|anyways|a\s+lot|"
    r"so\s+much|very\s+much|by\s+the\s+way|actually|for\s+sure|:\))\b)+$",
    re.I,
)
_ZH_TAIL = re.compile(r"[啊呀哦啦哈嘛喔噢呐哟咯~～]+$")


def clean(text: str) -> str:
    """A capture without trailing punctuation, emoticons and filler words."""
    text = collapse_whitespace(text)
    for _ in range(3):
        before = text
        text = _EMOTICON.sub("", text)
        text = _TRAILING.sub("", text)
        text = _EN_TAIL.sub("", text)
        text = _ZH_TAIL.sub("", text)
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
