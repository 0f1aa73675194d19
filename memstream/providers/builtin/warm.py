"""The warm layer of the built-in store: the memories of this process's hot users, held with
their terms so that a lexical search of one of them is ranked here, the same ranking as the
statement's, after one primary-key read of the user's stamp (``store/stamps.py``) instead of
the search's statement. A user becomes warm after ``hot_after`` searches within ``WINDOW``
seconds, loaded off the request's path; until then, and whenever the stamp says the table
changed (a write through any process, a forget), the search runs its statement as a cold
one does. Bounded by the memories held, least recently searched users dropped first
(docs/design/builtin-store.md, "The warm layer")."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from prometheus_client import Counter, Gauge

from memstream.memory import MemoryItem
from memstream.providers.builtin.ranking import lexical_pools, pick_lexical
from memstream.retrieval import document_terms, length_norms, relevance
from memstream.store.memory_rows import unpacked
from memstream.store.schema import TERM_CHARS

UserKey = tuple[str, str]

WINDOW = 60.0
"""Seconds within which a user's searches count towards making the user warm, and a warm
user's searches towards keeping it."""
LOADS_PER_SECOND = 1.0
LOAD_BURST = 20.0
"""Loads started at most: a load costs about as much as a few searches' statements, so many
users each searched a few times (random users of many, more than the layer holds) must not
turn the layer into a stream of loads that are dropped before they pay off."""

SEARCHES = Counter(
    "memstream_warm_searches_total",
    "Lexical searches of the built-in store by how the warm layer served them: hit (ranked "
    "in the process), stale (the user's memories changed: the statement), cold (the user is "
    "not warm: the statement).",
    ["outcome"],
)
HIT, STALE, COLD = (SEARCHES.labels(outcome) for outcome in ("hit", "stale", "cold"))
LOADS = Counter("memstream_warm_loads_total", "Users loaded into the warm layer.")
HELD = Gauge("memstream_warm_memories", "Memories the warm layer holds in this process.")


@dataclass(slots=True)
class WarmUser:
    """One user's live memories (every cube) with what ranking them needs, as of ``stamp``:
    the postings a search would read (terms longer than the stored ones left out), each
    memory's stored length, its distinct words for MMR, and the live count (N of the idf,
    memories still without postings included, as the statement counts them)."""

    stamp: int
    items: dict[str, MemoryItem] = field(default_factory=dict)
    words: dict[str, dict[str, int]] = field(default_factory=dict)
    pairs: dict[str, dict[str, int]] = field(default_factory=dict)
    norms: dict[str, float] = field(default_factory=dict)
    token_sets: dict[str, frozenset[str]] = field(default_factory=dict)
    postings: int = 0
    # Searches served since ``window_start`` (``WarmUsers.hit``): what a newcomer must beat.
    hits: int = 0
    window_start: float = 0.0

    def search(
        self,
        terms: Sequence[str],
        cubes: Sequence[str],
        top_k: int,
        relativity: float,
        mmr_lambda: float,
    ) -> list[MemoryItem]:
        """The search's answer as the statement and ``pick_lexical`` give it."""
        scores = relevance(terms, len(self.items), self.words, self.pairs, self.norms)
        items = self.items
        pools = lexical_pools(scores, lambda i: items[i].cube_id, cubes, top_k, relativity)
        return pick_lexical(pools, items, self.token_sets.__getitem__, top_k, mmr_lambda)


def build(stamp: int, rows: Sequence[tuple[MemoryItem, int | None]]) -> WarmUser:
    """A user's entry from the user's live rows and their stored lengths (None: no postings
    yet, counted in N but never found, as by the statement)."""
    user = WarmUser(stamp)
    lengths: dict[str, int] = {}
    _add(user, lengths, rows)
    user.norms = length_norms(lengths)
    return user


async def load(
    stamp: int, tenant_id: str, user_id: str, rows: Sequence[tuple[str, int | None]]
) -> WarmUser:
    """``build`` from packed rows (``memory_rows.searchable``), ``SLICE`` rows at a time
    with the loop let go between them: a load tokenizes every memory of the user (about
    20 µs each), and held at once, or in a thread that holds the interpreter, it would make
    the loop late for every request waiting on it."""
    user = WarmUser(stamp)
    lengths: dict[str, int] = {}
    for start in range(0, len(rows), SLICE):
        batch = rows[start : start + SLICE]
        _add(user, lengths, [(unpacked(tenant_id, user_id, p), n) for p, n in batch])
        await asyncio.sleep(0)
    user.norms = length_norms(lengths)
    return user


SLICE = 16


def _add(
    user: WarmUser, lengths: dict[str, int], rows: Sequence[tuple[MemoryItem, int | None]]
) -> None:
    for item, length in rows:
        user.items[item.id] = item
        if length is None:
            continue
        terms = document_terms(item.content)
        lengths[item.id] = length
        user.token_sets[item.id] = frozenset(terms.words)
        for postings, counts in ((user.words, terms.words), (user.pairs, terms.pairs)):
            for term, tf in counts.items():
                if len(term) <= TERM_CHARS:
                    postings.setdefault(term, {})[item.id] = tf
                    user.postings += 1


class WarmUsers:
    """The warm users of one process: at most ``memories`` memories in all (0: none kept)."""

    def __init__(self, memories: int, *, hot_after: int = 3) -> None:
        self.capacity = memories
        self.hot_after = hot_after
        self.memories = 0
        self._tokens = LOAD_BURST  # loads that may start now (``LOADS_PER_SECOND``)
        self._tokens_at = time.monotonic()
        self._entries: OrderedDict[UserKey, WarmUser] = OrderedDict()
        # (first search in the window, searches since) of users not warm, bounded.
        self._seen: OrderedDict[UserKey, tuple[float, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: UserKey) -> WarmUser | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def hit(self, entry: WarmUser) -> None:
        """Count a search the layer served from ``entry``."""
        now = time.monotonic()
        if now - entry.window_start > WINDOW:
            entry.window_start, entry.hits = now, 0
        entry.hits += 1

    def noticed(self, key: UserKey) -> bool:
        """Count a search of a user that is not warm; whether to load the user now: once
        searched ``hot_after`` times within ``WINDOW``, when a load may start, and, the layer
        being full, only for a user searched more often than the one it would drop."""
        if self.capacity <= 0:
            return False
        now = time.monotonic()
        first, count = self._seen.pop(key, (now, 0))
        if now - first > WINDOW:
            first, count = now, 0
        count += 1
        if count >= self.hot_after and self._colder_than(count, now) and self._may_load(now):
            return True
        self._seen[key] = (first, count)
        while len(self._seen) > max(1024, self.capacity):
            self._seen.popitem(last=False)
        return False

    def _colder_than(self, count: int, now: float) -> bool:
        """Whether a user searched ``count`` times in the window may take a place: there is
        room for an entry of the average size, or the least recently searched entry was
        searched fewer times in its window."""
        if not self._entries:
            return True
        if self.memories + self.memories / len(self._entries) <= self.capacity:
            return True
        victim = next(iter(self._entries.values()))
        hits = victim.hits if now - victim.window_start <= WINDOW else 0
        return count > hits

    def may_reload(self) -> bool:
        """Whether a warm user found changed may be loaded again now (the same rate as a
        first load: a user whose memories change as often as it is searched must not make
        each search a load)."""
        return self._may_load(time.monotonic())

    def _may_load(self, now: float) -> bool:
        self._tokens = min(LOAD_BURST, self._tokens + (now - self._tokens_at) * LOADS_PER_SECOND)
        self._tokens_at = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True

    def put(self, key: UserKey, entry: WarmUser) -> None:
        """Keep ``entry``, dropping the least recently searched users beyond the bound."""
        self.drop(*key)
        if not 0 < len(entry.items) <= self.capacity:
            return
        self._entries[key] = entry
        self.memories += len(entry.items)
        LOADS.inc()
        while self.memories > self.capacity:
            _, gone = self._entries.popitem(last=False)
            self.memories -= len(gone.items)
        HELD.set(self.memories)

    def drop(self, tenant_id: str, user_id: str | None = None) -> None:
        """Forget these users' entries (every user of the tenant without ``user_id``)."""
        keys = (
            [(tenant_id, user_id)]
            if user_id is not None
            else [key for key in self._entries if key[0] == tenant_id]
        )
        for key in keys:
            gone = self._entries.pop(key, None)
            if gone is not None:
                self.memories -= len(gone.items)
        HELD.set(self.memories)

    def clear(self) -> None:
        self._entries.clear()
        self._seen.clear()
        self.memories = 0
        HELD.set(0)
