"""Long-term memory on the load path: filter and group retrieved items, then fit them to the budget.

Numbers from the reference design: items scoring below 0.3 are dropped, each
item is cut to 1,000 characters, the long-term budget is 4,000 tokens of which the user profile
takes at most 60% and agent memory the rest, both truncated line by line.

Within the user profile's share, facts come first: they are guaranteed ``fact_share`` of it, the
rest goes to episodes by relevance, and whatever one kind leaves unused the other may take, so
both appear when both are relevant. A fact's line starts with its date (``[2023-05-08] ...``);
an episode's line carries its own.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC
from functools import lru_cache

from memstream.loadpath.sensitive import is_sensitive
from memstream.memory import USER_PROFILE, MemoryItem
from memstream.text.tokens import count_tokens

MIN_SCORE = 0.3
MAX_ITEM_CHARS = 1000
LONG_TERM_TOKENS = 4000
PROFILE_SHARE = 0.6
FACT_SHARE = 0.5

# Stored memories rarely change while many requests retrieve the same ones: checking each
# content once instead of on every request takes the regexes off the load path.
_sensitive = lru_cache(maxsize=16384)(is_sensitive)


@dataclass(frozen=True, slots=True)
class MemoryGroups:
    """Retrieved items grouped by cube, each group sorted by score, highest first."""

    user_profile: tuple[MemoryItem, ...]
    agent: tuple[MemoryItem, ...]


@dataclass(frozen=True, slots=True)
class LongTermBudget:
    """The two long-term texts (one item per line) with their exact token counts.

    ``*_items`` is how many of the given items each text holds, and ``user_profile_episodes``
    how many of the given episodes: always the first ones. The profile text is its facts, then
    its episodes.
    """

    user_profile: str
    user_profile_tokens: int
    user_profile_items: int
    agent_memory: str
    agent_memory_tokens: int
    agent_memory_items: int
    user_profile_episodes: int = 0


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
        if filter_sensitive and _sensitive(item.content):
            continue
        if len(item.content) > max_chars:
            item = dataclasses.replace(item, content=item.content[:max_chars])
        (profile if item.cube_id == USER_PROFILE else agent).append(item)
    # A stable sort: equal scores keep the provider's order.
    by_score = sorted(profile, key=_score, reverse=True), sorted(agent, key=_score, reverse=True)
    return MemoryGroups(tuple(by_score[0]), tuple(by_score[1]))


def memory_line(item: MemoryItem) -> str:
    """An item as the long-term text shows it: a fact after its date, an episode as it is."""
    if item.kind == "episode":
        return item.content
    moment = item.occurred_at or item.created_at
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    # What ``%Y-%m-%d`` gives, at a third of strftime's cost (every line of every answer).
    return f"[{moment.year}-{moment.month:02d}-{moment.day:02d}] {item.content}"


def _score(item: MemoryItem) -> float:
    return item.score


def budget_long_term(
    profile: Sequence[str],
    agent: Sequence[str],
    *,
    episodes: Sequence[str] = (),
    total: int = LONG_TERM_TOKENS,
    profile_share: float = PROFILE_SHARE,
    fact_share: float = FACT_SHARE,
    count: Callable[[str], int] = count_tokens,
) -> LongTermBudget:
    """Fit the user profile (its facts ``profile`` and its ``episodes``) into ``profile_share``
    of ``total`` tokens and agent memory into whatever is left, each text one item per line,
    best items first."""
    if total < 0 or not 0 <= profile_share <= 1 or not 0 <= fact_share <= 1:
        raise ValueError("need total >= 0, 0 <= profile_share <= 1 and 0 <= fact_share <= 1")
    counted: dict[str, int] = {}

    def exact(text: str) -> int:
        # The same texts are counted again by the steps below: count each once.
        if text not in counted:
            counted[text] = count(text) if text else 0
        return counted[text]

    share = int(total * profile_share)
    facts = _lines(profile)
    told = _lines(episodes)
    # Facts first, within their guaranteed part; then episodes in the rest of the share; then
    # facts again in whatever the episodes left, placed before them.
    kept_facts = _longest(facts, int(share * fact_share) if told else share, exact)
    kept_told = _longest(told, share, exact, before=facts[:kept_facts])
    kept_facts = _longest(facts, share, exact, after=told[:kept_told])
    profile_text = "\n".join(facts[:kept_facts] + told[:kept_told])
    profile_tokens = exact(profile_text)
    # The profile's unused share goes to agent memory: the cap bounds the profile, it does not
    # reserve tokens nobody uses.
    lines = _lines(agent)
    agent_kept = _longest(lines, total - profile_tokens, exact)
    agent_text = "\n".join(lines[:agent_kept])
    return LongTermBudget(
        profile_text,
        profile_tokens,
        kept_facts,
        agent_text,
        exact(agent_text),
        agent_kept,
        kept_told,
    )


_LINE_BREAKS = re.compile(r"\s*[\r\n\u2028\u2029]+\s*")


def _lines(items: Sequence[str]) -> list[str]:
    # One item, one line: a line break inside an item would read as two items.
    return [_LINE_BREAKS.sub(" ", item).strip() for item in items]


def _longest(
    lines: Sequence[str],
    budget: int,
    count: Callable[[str], int],
    *,
    before: Sequence[str] = (),
    after: Sequence[str] = (),
) -> int:
    """How many of ``lines``, the first ones, fit between ``before`` and ``after`` in
    ``budget`` tokens, the joined text counted exactly (``count("")`` must be 0).

    Truncation, not packing: the text stays the top items by score, and the caller knows
    exactly which items it holds. The joined text is recounted, never estimated as a sum:
    tokens can merge across the newline, so only a recount of the exact text proves it is
    within the budget. Counts never fall as lines are added, so the answer is found by
    bisection, and usually at once: everything fits.
    """

    def fits(n: int) -> bool:
        return count("\n".join([*before, *lines[:n], *after])) <= budget

    if fits(len(lines)):
        return len(lines)
    low, high = 0, len(lines) - 1  # fits(low) is assumed, the answer is at most ``high``
    if not fits(low):
        return 0
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low
