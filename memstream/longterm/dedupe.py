"""Local de-duplication of candidate memories within one batch (one session's judge output):
exact, contained, Jaccard and Levenshtein duplicates, guarded so that fuzzy rules never merge
different facts (docs/design/dedupe.md)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from rapidfuzz.distance import Levenshtein

from memstream.longterm.models import IMPORTANCE_RANGES, Candidate
from memstream.text.normalise import comparison_form, comparison_units, is_cjk_unit
from memstream.text.similarity import bigram_jaccard
from memstream.text.stem import stem
from memstream.text.terms import CJK_STOP_CHARS, STOP_WORDS

JACCARD_THRESHOLD = 0.7
"""Character-bigram Jaccard similarity at or above which two texts are duplicates."""

LEVENSHTEIN_THRESHOLD = 0.8
"""Normalised Levenshtein similarity at or above which two short texts are duplicates."""

SHORT_TEXT_CHARS = 50
"""Texts up to this many normalised characters (both of them) get the Levenshtein test."""

VARIANT_MIN_CHARS = 4
"""Words shorter than this are never spelling variants of each other ("Jon" / "Jo")."""

Rule = Literal["exact", "contains", "contained", "jaccard", "levenshtein"]
"""Why two texts are duplicates; ``contains``: the first contains the second, ``contained``:
the second contains the first."""

_DIGIT = re.compile(r"\d")

NEGATION_WORDS = frozenset(
    """
    not no never nor neither none nobody nothing nowhere without cannot
    cant dont doesnt didnt isnt arent wasnt werent wont wouldnt hasnt havent hadnt
    shouldnt couldnt mustnt neednt aint
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""English negation markers (normalised: apostrophes removed)."""

# 不 没 未 无 勿, and 非 unless in 非常 ("very"). 别 is left out: 特别 ("especially").
_CJK_NEGATION = re.compile(r"[不没未无勿]|非(?!常)")

_CONTENT_STOP_WORDS = STOP_WORDS | NEGATION_WORDS | {"user", "users"}
_CJK_CONTENT_STOP = CJK_STOP_CHARS | frozenset("用户很非常")


@dataclass(frozen=True, slots=True)
class _Text:
    plain: str
    padded: str  # units joined by single spaces, with a space at each end (containment)
    compact: str  # units without spaces
    content: frozenset[str]  # stems
    words: dict[str, str]  # stem -> the word it came from (spelling variants)
    numbers: frozenset[str]
    negated: bool


@lru_cache(maxsize=8192)
def _prepare(text: str) -> _Text:
    units = comparison_units(text)
    compact = "".join(units)
    content: set[str] = set()
    words: dict[str, str] = {}
    numbers: set[str] = set()
    negated = False
    for unit in units:
        if _DIGIT.search(unit):
            numbers.add(unit)
            content.add(unit)
        elif is_cjk_unit(unit):
            if unit not in _CJK_CONTENT_STOP:
                content.add(unit)
        elif unit in NEGATION_WORDS:
            negated = True
        elif unit not in _CONTENT_STOP_WORDS and (len(unit) > 1 or not unit.isalpha()):
            term = stem(unit) if unit.isalpha() else unit
            content.add(term)
            words.setdefault(term, unit)
    # On the joined characters: 非常 ("very") is not a negation.
    negated = negated or _CJK_NEGATION.search(compact) is not None
    return _Text(
        plain=comparison_form(text),
        padded=f" {' '.join(units)} ",
        compact=compact,
        content=frozenset(content),
        words=words,
        numbers=frozenset(numbers),
        negated=negated,
    )


def _variant(x: str, y: str) -> bool:
    """Whether two words are spelling variants ("colour" / "color", "morning" / "mornnig")."""
    if _DIGIT.search(x) or _DIGIT.search(y):
        return False
    if min(len(x), len(y)) < VARIANT_MIN_CHARS:
        return False
    return bool(Levenshtein.normalized_similarity(x, y) >= LEVENSHTEIN_THRESHOLD)


def _substituted(a: _Text, b: _Text) -> bool:
    """Whether each text has a content word the other lacks (no spelling variant either)."""
    only_a = a.content - b.content
    only_b = b.content - a.content
    if not only_a or not only_b:
        return False

    def variant(x: str, y: str) -> bool:  # stems, or the words they came from
        return _variant(x, y) or _variant(a.words.get(x, x), b.words.get(y, y))

    lonely_a = any(not any(variant(x, y) for y in only_b) for x in only_a)
    lonely_b = any(not any(variant(x, y) for x in only_a) for y in only_b)
    return lonely_a and lonely_b


def match(a: str, b: str) -> Rule | None:
    """The rule by which ``a`` and ``b`` are duplicates, or None when they are not."""
    x, y = _prepare(a), _prepare(b)
    if x.plain == y.plain:
        return "exact"
    if x.negated != y.negated or not x.compact or not y.compact:
        return None
    if len(x.padded) > len(y.padded) and y.padded in x.padded:
        return "contains"
    if len(y.padded) > len(x.padded) and x.padded in y.padded:
        return "contained"
    if x.numbers != y.numbers or _substituted(x, y):
        return None
    if bigram_jaccard(a, b) >= JACCARD_THRESHOLD:
        return "jaccard"
    if (
        max(len(x.plain), len(y.plain)) <= SHORT_TEXT_CHARS
        and Levenshtein.normalized_similarity(x.plain, y.plain) >= LEVENSHTEIN_THRESHOLD
    ):
        return "levenshtein"
    return None


def similarity(a: str, b: str) -> float:
    """A [0, 1] closeness of two texts (for ranking, not for deciding): the larger of the
    bigram Jaccard and, for short texts, the Levenshtein similarity."""
    x, y = _prepare(a), _prepare(b)
    score = bigram_jaccard(a, b)
    if max(len(x.plain), len(y.plain)) <= SHORT_TEXT_CHARS:
        score = max(score, float(Levenshtein.normalized_similarity(x.plain, y.plain)))
    return score


def merge_ids(*groups: Sequence[str]) -> tuple[str, ...]:
    """Order-preserving union of event id lists."""
    return tuple(dict.fromkeys(i for group in groups for i in group))


def _merge(first: Candidate, second: Candidate, rule: Rule) -> Candidate:
    """The survivor of two duplicates; ``first`` came earlier in the batch."""
    ids = merge_ids(first.source_event_ids, second.source_event_ids)
    if rule in ("contains", "contained"):
        winner, loser = (first, second) if rule == "contains" else (second, first)
        high = IMPORTANCE_RANGES.get(winner.category, (1, 10))[1]
        importance = max(winner.importance, min(high, loser.importance))
        return dataclasses.replace(winner, importance=importance, source_event_ids=ids)
    winner = max(
        (first, second),
        key=lambda c: (c.importance, len(c.content.strip()), c is first),
    )
    return dataclasses.replace(winner, source_event_ids=ids)


def dedupe(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Merge duplicate facts of the same scope (see the module documentation); episodes, which
    record what was said on a day, only lose exact repeats and never absorb a fact."""
    facts = _dedupe_facts([c for c in candidates if c.kind == "fact"])
    episodes = {c.content: c for c in reversed(candidates) if c.kind == "episode"}
    return facts + sorted(episodes.values(), key=candidates.index)


def _dedupe_facts(candidates: Sequence[Candidate]) -> list[Candidate]:
    survivors: list[Candidate] = []  # in the input order of each group's first member
    for candidate in candidates:
        current: Candidate | None = None  # ``candidate`` merged into earlier groups
        at = len(survivors)
        for g in range(len(survivors) - 1, -1, -1):
            survivor = survivors[g]
            if survivor.scope != candidate.scope:
                continue
            # Walking backwards, ``survivor`` is earlier than whatever ``current`` holds.
            rule = match(survivor.content, (current or candidate).content)
            if rule is None:
                continue
            current = _merge(survivor, current or candidate, rule)
            del survivors[g]
            at = g
        survivors.insert(at, current or candidate)
    return survivors
