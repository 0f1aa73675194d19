"""The rule-based resolver: a candidate memory against the live memories of its cube.
Why it works this way: docs/design/conflict-rules.md."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from memstream.longterm.conflict.facts import Fact, parse
from memstream.longterm.dedupe import match
from memstream.longterm.models import Candidate
from memstream.memory import MemoryItem

Action = Literal["store", "skip"]


@dataclass(frozen=True)
class Decision:
    """What to do with a candidate: ``store`` it (and expire ``expire_ids``) or ``skip`` it
    (``expire_ids`` is then empty)."""

    action: Action
    expire_ids: tuple[str, ...]
    reason: str


def _within(inner: str, outer: str) -> bool:
    """Whether value key ``inner`` is ``outer`` or part of it (whole words)."""
    if inner == outer:
        return True
    if inner.isascii() and outer.isascii():
        return f" {inner} " in f" {outer} "
    return inner in outer


def _compatible(a: Fact, b: Fact) -> bool:
    ka, kb = a.key, b.key
    if not a.single_valued:
        return ka == kb
    return _within(ka, kb) or _within(kb, ka)


def clash(new: Fact, old: Fact) -> bool:
    """Whether ``new`` makes ``old`` false (same slot, another value or polarity)."""
    if new.slot != old.slot:
        return False
    if new.positive and old.positive:
        return new.single_valued and not _compatible(new, old)
    if new.positive != old.positive:
        return _compatible(new, old)
    return False


def _known(fact: Fact, held: Sequence[Fact]) -> bool:
    """Whether ``held`` facts already say ``fact`` (at least as specifically)."""
    for g in held:
        if g.slot != fact.slot:
            continue
        if fact.positive and g.positive and _within(fact.key, g.key):
            return True
        if not fact.positive:
            if not g.positive and g.key == fact.key:
                return True
            if g.positive and g.single_valued and not _compatible(fact, g):
                return True
    return False


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def said_later(item: MemoryItem, candidate: Candidate) -> bool:
    """Whether the live memory was said after the candidate (both times known)."""
    if item.occurred_at is None or candidate.occurred_at is None:
        return False
    return _aware(item.occurred_at) > _aware(candidate.occurred_at)


def outdated(candidate: Candidate, decision: Decision, live: Sequence[MemoryItem]) -> Decision:
    """``decision``, unless it expires a memory said after the candidate: then a skip, and the
    newer memory stays live (whoever decided, rules or a model, compared texts, not times)."""
    if decision.action != "store" or not decision.expire_ids:
        return decision
    wanted = set(decision.expire_ids)
    newer = [m.id for m in live if m.id in wanted and said_later(m, candidate)]
    if not newer:
        return decision
    return Decision("skip", (), f"outdated: {', '.join(newer)} said later; {decision.reason}")


def resolve(candidate: Candidate, live: Sequence[MemoryItem]) -> Decision:
    """Store, skip or supersede: the rules of the module documentation."""
    return outdated(candidate, _by_content(candidate, live), live)


def _by_content(candidate: Candidate, live: Sequence[MemoryItem]) -> Decision:
    if not live:
        return Decision("store", (), "new: no live memories")
    mine = parse(candidate.content)
    held: list[Fact] = []
    known: str | None = None
    updated: list[str] = []  # live items the candidate contradicts
    redundant: list[str] = []  # live items the candidate says more fully
    why: list[str] = []
    for item in live:
        rule = match(candidate.content, item.content)
        if rule == "exact":
            return Decision("skip", (), f"already known: {item.id} (exact)")
        theirs = parse(item.content)
        held += theirs.facts
        clashes = [(f, g) for f in mine.facts for g in theirs.facts if clash(f, g)]
        if clashes:
            f, g = clashes[0]
            updated.append(item.id)
            why.append(f"{item.id} ({g} -> {f})")
        elif rule in ("contained", "jaccard", "levenshtein"):
            known = known or f"already known: {item.id} ({rule})"
        elif rule == "contains" or (
            theirs.complete and all(_known(g, mine.facts) for g in theirs.facts)
        ):
            redundant.append(item.id)
            why.append(f"{item.id} (said more fully)")
    if known:
        return Decision("skip", (), known)
    if not updated and mine.complete and all(_known(f, held) for f in mine.facts):
        return Decision("skip", (), "already known: " + ", ".join(map(str, mine.facts)))
    if updated or redundant:
        expire = tuple(i for i in (item.id for item in live) if i in {*updated, *redundant})
        return Decision("store", expire, "supersedes " + "; ".join(why))
    return Decision("store", (), "new")
