"""The built-in store's per-user lexical indexes: a bounded LRU cache of one ``LexicalIndex``
per (tenant, user), checked against the table's counts before it serves a search
(docs/design/builtin-store.md, "Freshness check")."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.memory import MemoryItem
from memstream.retrieval import LexicalIndex
from memstream.store import memory_rows
from memstream.store.memory_rows import Counts, Fingerprint
from memstream.store.reads import Reads

# Up to this many added plus removed memories are applied to a cached index in place on the
# event loop (about 30 µs each); a cold load or a bigger change is built in a worker thread.
INLINE_UPDATE_LIMIT = 100

UserKey = tuple[str, str]


@dataclass(slots=True)
class UserIndex:
    """One user's live memories (all cubes, by id) and their index."""

    fingerprint: Counts
    items: dict[str, MemoryItem]
    index: LexicalIndex
    checked_at: float = field(default_factory=time.monotonic)
    # When the counts last matched the table (never: 0), and those counts with the vectors'.
    verified_at: float = 0.0
    verified: Fingerprint = (0, 0, 0)
    counted: int = 0  # memories this entry adds to the cache's total (set by _store)


class UserIndexCache:
    """Fresh lexical indexes of users, at most ``users`` of them holding at most ``memories``
    memories in all, least recently used dropped first."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        users: int,
        memories: int,
        revalidate_seconds: float,
        fresh_seconds: float,
        reads: Reads | None = None,
    ) -> None:
        # Indexes are read from the replica unless this process just wrote for the user.
        self._reads = reads if reads is not None else Reads(engine, sticky_seconds=0)
        self._dialect = engine.dialect.name
        self._users = users
        self._memories = memories
        self._revalidate = revalidate_seconds
        self._fresh = fresh_seconds
        self._entries: OrderedDict[UserKey, UserIndex] = OrderedDict()
        self.memories = 0  # memories the cached entries hold
        self._locks: weakref.WeakValueDictionary[UserKey, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        self.rebuilds = 0  # index (re)builds, for tests and metrics

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __getitem__(self, key: UserKey) -> UserIndex:
        return self._entries[key]

    def __iter__(self) -> Iterator[UserKey]:
        return iter(self._entries)

    def unverify(self, tenant_id: str, user_id: str | None = None) -> None:
        """The next search of these users (all of the tenant's) checks the table again."""
        for (tenant, user), entry in self._entries.items():
            if tenant == tenant_id and user_id in (None, user):
                entry.verified_at = 0.0

    def lock(self, tenant_id: str, user_id: str) -> asyncio.Lock:
        """The user's lock: held while the user's index loads or changes in place, and while
        a search ranks over it in a worker thread (so no change lands under that thread)."""
        key = (tenant_id, user_id)
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    async def get(
        self, tenant_id: str, user_id: str, model: str | None
    ) -> tuple[UserIndex, Fingerprint]:
        """The user's lexical index, fresh, and the fingerprint it was checked against (with
        the count of the user's vectors of the embedding ``model``)."""
        key = (tenant_id, user_id)
        entry = self._entries.get(key)
        if entry is not None and time.monotonic() - entry.verified_at < self._fresh:
            self._entries.move_to_end(key)
            return entry, entry.verified
        reader = self._reads.engine(tenant_id, user_id)
        async with reader.connect() as conn:
            fingerprint = await memory_rows.fingerprint(conn, tenant_id, user_id, model)
        entry = self._entries.get(key)
        counts: Counts = fingerprint[:2]
        if entry is not None and self._usable(entry, counts, exact=True):
            self._entries.move_to_end(key)
            entry.verified_at, entry.verified = time.monotonic(), fingerprint
            return entry, fingerprint
        # One load per user at a time; the others wait for it instead of loading the same.
        async with self.lock(tenant_id, user_id):
            entry = self._entries.get(key)
            # Loaded while this request waited, so from a fingerprint read after this one's.
            if entry is not None and self._usable(entry, counts, exact=False):
                self._entries.move_to_end(key)
                return entry, (*entry.fingerprint, fingerprint[2])
            async with reader.connect() as conn:
                held = entry.items if entry is not None else None
                counts, live_ids, added = await memory_rows.changes(
                    conn, self._dialect, tenant_id, user_id, held
                )
            changes = (
                len(added) if entry is None else 2 * len(added) + len(entry.items) - len(live_ids)
            )
            if entry is None or changes > INLINE_UPDATE_LIMIT:
                # A cold load or a big change: tokenize and build off the event loop.
                entry = await asyncio.to_thread(_build, counts, live_ids, added, entry)
                # Out of the collector's way: every full collection would walk the index's
                # objects again (80,000 at 20 users of 1,000 memories, a 100 ms pause). Frozen
                # objects are still freed by their reference counts when the index goes; the
                # young generations are collected first so no garbage is frozen with them.
                gc.collect(1)
                gc.freeze()
            else:
                _update(entry, counts, live_ids, added)
            self.rebuilds += 1
            self._store(key, entry)
            # The vector count read before the live set: never newer than the vectors read
            # after it, so a vector matrix tagged with it is refreshed rather than kept stale.
            entry.verified_at, entry.verified = time.monotonic(), (*counts, fingerprint[2])
            return entry, entry.verified

    def _usable(self, entry: UserIndex, fingerprint: Counts, *, exact: bool) -> bool:
        if time.monotonic() - entry.checked_at >= self._revalidate:
            return False
        if exact:
            return entry.fingerprint == fingerprint
        # Both counts only grow under the store's writes (docs/design/builtin-store.md).
        return entry.fingerprint[0] >= fingerprint[0] and entry.fingerprint[1] >= fingerprint[1]

    def _store(self, key: UserKey, entry: UserIndex) -> None:
        self.evict(key)
        entry.counted = len(entry.items)
        self._entries[key] = entry
        self.memories += entry.counted
        while len(self._entries) > 1 and (
            len(self._entries) > self._users or self.memories > self._memories
        ):
            _, dropped = self._entries.popitem(last=False)
            self.memories -= dropped.counted

    def evict(self, key: UserKey) -> None:
        dropped = self._entries.pop(key, None)
        if dropped is not None:
            self.memories -= dropped.counted

    def clear(self) -> None:
        self._entries.clear()
        self.memories = 0


def _build(
    fingerprint: Counts,
    live_ids: Sequence[str],
    added: Sequence[MemoryItem],
    old: UserIndex | None,
) -> UserIndex:
    """A new entry from scratch, reusing the tokens of memories ``old`` already holds
    (runs in a worker thread: it reads ``old`` and builds new objects only)."""
    live = set(live_ids)
    kept = [] if old is None else [i for i in old.items.values() if i.id in live]
    docs: list[tuple[MemoryItem, str | Sequence[str]]] = [
        (item, old.index.tokens(item.id)) for item in kept if old is not None
    ]
    docs += [(item, item.content) for item in added]
    # Oldest first: on equal scores the index ranks the earlier added first.
    docs.sort(key=lambda pair: (pair[0].created_at, pair[0].id))
    index = LexicalIndex((item.id, body) for item, body in docs)
    return UserIndex(fingerprint, {item.id: item for item, _ in docs}, index)


def _update(
    entry: UserIndex,
    fingerprint: Counts,
    live_ids: Sequence[str],
    added: Sequence[MemoryItem],
) -> None:
    """Apply a small change in place (synchronous: no search sees it half done)."""
    live = set(live_ids)
    for gone in [i for i in entry.items if i not in live]:
        entry.index.remove(gone)
        del entry.items[gone]
    for item in sorted(added, key=lambda i: (i.created_at, i.id)):
        entry.index.add(item.id, item.content)
        entry.items[item.id] = item
    entry.fingerprint = fingerprint
    entry.checked_at = time.monotonic()


# tenant, user, agent, the query's cut terms (``search_terms``), top_k
SearchKey = tuple[str, str, str | None, tuple[str, ...], int]

# What an entry costs beyond its text: the key's tuple and the entry, and each item's object
# and fields (tracemalloc: 5.8 KB for an answer of 10 items of 95 characters and a key of 7
# terms, which these count as 6.5 KB).
ENTRY_BYTES = 400
ITEM_BYTES = 500


def search_terms(terms: Sequence[str], longest: int) -> tuple[str, ...]:
    """The part of a query's cut terms that decides its answer: a term longer than ``longest``
    (the stored terms' limit) matches nothing and only counts, so any stands for it."""
    return tuple(term if len(term) <= longest else "" for term in terms)


def _text(value: str) -> int:
    # CPython keeps a string in 1, 2 or 4 bytes a character: count the widest unless ASCII.
    return len(value) if value.isascii() else 4 * len(value)


def _cost(key: SearchKey, found: Sequence[MemoryItem]) -> int:
    text = sum(map(_text, key[3])) + _text(key[0]) + _text(key[1]) + _text(key[2] or "")
    return ENTRY_BYTES + text + sum(ITEM_BYTES + _text(item.content) for item in found)


class RecentSearches:
    """The answers of this process's latest lexical searches, reused for ``fresh_seconds``
    (``MEMSTREAM_LONG_TERM_FRESH_SECONDS``: what another process writes may take that long to
    be seen here; this process's own writes drop its users' answers at once, and a caller
    checks that an answer's memories are still live before serving it). A LRU bounded by
    the bytes its keys and answers hold (``max_bytes``); with ``fresh_seconds`` 0 nothing is
    kept."""

    def __init__(self, fresh_seconds: float, max_bytes: int = 16 * 2**20) -> None:
        self._fresh = fresh_seconds
        self.max_bytes = max_bytes
        self.bytes = 0  # what the entries hold, estimated (``_cost``)
        self._entries: OrderedDict[SearchKey, tuple[float, list[MemoryItem], int]] = OrderedDict()
        self._of_user: dict[UserKey, set[SearchKey]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: SearchKey) -> list[MemoryItem] | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if time.monotonic() - entry[0] >= self._fresh:
            self._remove(key)
            return None
        self._entries.move_to_end(key)
        return list(entry[1])

    def put(self, key: SearchKey, found: list[MemoryItem]) -> None:
        cost = _cost(key, found)
        if self._fresh <= 0 or cost > self.max_bytes:
            return
        self._remove(key)
        self._entries[key] = (time.monotonic(), list(found), cost)
        self._of_user.setdefault((key[0], key[1]), set()).add(key)
        self.bytes += cost
        while self.bytes > self.max_bytes:
            self._remove(next(iter(self._entries)))

    def _remove(self, key: SearchKey) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        self.bytes -= entry[2]
        keys = self._of_user[(key[0], key[1])]
        keys.discard(key)
        if not keys:
            del self._of_user[(key[0], key[1])]

    def drop(self, tenant_id: str, user_id: str | None = None) -> None:
        """Forget the answers for these users (all of the tenant's)."""
        users = (
            [(tenant_id, user_id)]
            if user_id is not None
            else [user for user in self._of_user if user[0] == tenant_id]
        )
        for user in users:
            for key in list(self._of_user.get(user, ())):
                self._remove(key)

    def clear(self) -> None:
        self._entries.clear()
        self._of_user.clear()
        self.bytes = 0
