"""Long-term memory on the load path: filter and group retrieved items, then fit them to the budget.

Numbers from the reference design (CONTRACT section 5): items scoring below 0.3 are dropped, each
item is cut to 1,000 characters, the long-term budget is 4,000 tokens of which the user profile
takes at most 60% and agent memory the rest, both truncated line by line.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memstream.loadpath.sensitive import is_sensitive
from memstream.memory import USER_PROFILE, MemoryItem
from memstream.text.tokens import count_tokens

MIN_SCORE = 0.3
MAX_ITEM_CHARS = 1000
LONG_TERM_TOKENS = 4000
PROFILE_SHARE = 0.6


@dataclass(frozen=True, slots=True)
class MemoryGroups:
    """Retrieved items grouped by cube, each group sorted by score, highest first."""

    user_profile: tuple[MemoryItem, ...]
    agent: tuple[MemoryItem, ...]


@dataclass(frozen=True, slots=True)
class LongTermBudget:
    """The two long-term texts (one item per line) with their exact token counts.

    ``*_items`` is how many of the given items each text holds: always the first ones.
    """

    user_profile: str
    user_profile_tokens: int
    user_profile_items: int
    agent_memory: str
    agent_memory_tokens: int
    agent_memory_items: int


def prepare_items(
    items: Sequence[MemoryItem],
    *,
    min_score: float = MIN_SCORE,
    max_chars: int = MAX_ITEM_CHARS,
    filter_sensitive: bool = True,
) -> MemoryGroups:
    """Drop weak, empty and (optionally) sensitive items, cut the rest, group them by cube."""
    profile: list[MemoryItem] = []
    agent: list[MemoryItem] = []
    for item in items:
        # ``not >=`` also drops a NaN score.
        if not item.score >= min_score or not item.content.strip():
            continue
        # The whole content is checked before the cut, so a secret straddling character
        # ``max_chars`` is still caught.
        if filter_sensitive and is_sensitive(item.content):
            continue
        if len(item.content) > max_chars:
            item = dataclasses.replace(item, content=item.content[:max_chars])
        (profile if item.cube_id == USER_PROFILE else agent).append(item)
    # A stable sort: equal scores keep the provider's order.
    by_score = sorted(profile, key=_score, reverse=True), sorted(agent, key=_score, reverse=True)
    return MemoryGroups(tuple(by_score[0]), tuple(by_score[1]))


def _score(item: MemoryItem) -> float:
    return item.score


def budget_long_term(
    profile: Sequence[str],
    agent: Sequence[str],
    *,
    total: int = LONG_TERM_TOKENS,
    profile_share: float = PROFILE_SHARE,
    count: Callable[[str], int] = count_tokens,
) -> LongTermBudget:
    """Fit the user profile into ``profile_share`` of ``total`` tokens and agent memory into
    whatever is left, each text one item per line, best items first."""
    if total < 0 or not 0 <= profile_share <= 1:
        raise ValueError("need total >= 0 and 0 <= profile_share <= 1")
    profile_text, profile_tokens, profile_kept = _fit_lines(
        profile, int(total * profile_share), count
    )
    # The profile's unused share goes to agent memory: the cap bounds the profile, it does not
    # reserve tokens nobody uses.
    agent_text, agent_tokens, agent_kept = _fit_lines(agent, total - profile_tokens, count)
    return LongTermBudget(
        profile_text, profile_tokens, profile_kept, agent_text, agent_tokens, agent_kept
    )


_LINE_BREAKS = re.compile(r"\s*[\r\n\u2028\u2029]+\s*")


def _fit_lines(
    items: Sequence[str], budget: int, count: Callable[[str], int]
) -> tuple[str, int, int]:
    """The longest prefix of ``items`` whose newline-joined text counts at most ``budget``."""
    text, tokens, kept = "", 0, 0
    for item in items:
        # One item, one line: a line break inside an item would read as two items.
        line = _LINE_BREAKS.sub(" ", item).strip()
        candidate = f"{text}\n{line}" if kept else line
        # The joined text is recounted, never estimated as a sum: tokens can merge across the
        # newline (trailing spaces plus "\n" is one token), so only a recount of the exact text
        # proves it is within the budget.
        candidate_tokens = count(candidate)
        if candidate_tokens > budget:
            # Truncation, not packing: the text stays the top items by score, and the caller
            # knows exactly which items it holds (the first ``kept``).
            break
        text, tokens, kept = candidate, candidate_tokens, kept + 1
    return text, tokens, kept
