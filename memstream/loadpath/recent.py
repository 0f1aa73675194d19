"""The newest chat turns of a conversation for the window: from the cache when it can answer
them, else from the record, so the window never depends on what the cache happens to hold.

Rounds count chat turns: tool calls, tool results and status rows are skipped, not counted.
One more turn than asked for is read, which says whether older history was left out (the
summary's cue). The cache holds the newest ``max_messages`` messages of every type; when those
hold too few turns and the cache may have dropped older ones, the record answers instead.
The cache's calls are bounded by one deadline, so that the record read keeps its time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import orjson
from sqlalchemy.ext.asyncio import AsyncEngine

from memstream import metrics
from memstream.store.cache import RedisCache, decode_member
from memstream.store.messages import MessageStore

log = logging.getLogger(__name__)

MAX_REWARMS = 8
"""Cache re-warms running at once; a miss beyond them is left to a later request."""


class Turn(NamedTuple):
    """A chat message as the window needs it."""

    role: str
    message_type: str
    content: str
    token_count: int


@dataclass(frozen=True, slots=True)
class Recent:
    """The newest turns, oldest first; ``earlier`` says older turns exist."""

    turns: Sequence[Turn]
    earlier: bool


def is_turn(role: str, message_type: str) -> bool:
    return message_type == "chat" and role != "tool"


def _newest(turns: list[Turn], limit: int) -> Recent:
    """At most ``limit`` of the turns read (``limit + 1`` were asked for), oldest first."""
    if len(turns) > limit:
        return Recent(turns[len(turns) - limit :], earlier=True)
    return Recent(turns, earlier=False)


class RecentTurns:
    """Reads the newest turns of conversations; re-warms missing cache keys in the background,
    one task per conversation at most and ``MAX_REWARMS`` in all."""

    def __init__(
        self, engine: AsyncEngine, messages: MessageStore, cache: RedisCache | None
    ) -> None:
        self._record = MessageStore(engine)  # the replica's, when there is one
        self._messages = messages
        self._cache = cache
        self._rewarming: dict[tuple[str, str], asyncio.Task[None]] = {}

    async def close(self) -> None:
        """Cancel the re-warms still running."""
        for task in list(self._rewarming.values()):
            task.cancel()

    async def from_cache(
        self, tenant_id: str, conversation_id: str, limit: int, deadline: float
    ) -> tuple[Recent | None, tuple[str, int] | None]:
        """The cache's turns (None when it cannot answer them; a miss re-warms the key) and
        its summary entry (``cached_summary``'s answer), read in one round trip by
        ``deadline`` (the loop's clock); ``CacheUnavailable`` when the cache fails."""
        cache = self._cache
        assert cache is not None
        size, raw, summary = await cache.newest(tenant_id, conversation_id, limit + 1, deadline)
        cached_summary = None if summary is None else _summary_entry(summary)
        if not size:
            metrics.CACHE.labels("read", "miss").inc()
            self._rewarm(tenant_id, conversation_id)
            return None, cached_summary
        metrics.CACHE.labels("read", "hit").inc()
        turns = _turns(raw)
        if len(turns) <= limit and size > len(raw):
            # Tool and status rows among the newest: the whole cached history has the turns.
            turns = _turns(await cache.members(tenant_id, conversation_id, deadline))
        if len(turns) <= limit and size >= cache.max_messages:
            return None, cached_summary  # older turns may be in the record only
        return _newest(turns, limit), cached_summary

    async def from_record(self, tenant_id: str, conversation_id: str, limit: int) -> Recent:
        rows = await self._record.newest_turns(tenant_id, conversation_id, limit + 1)
        return _newest([Turn(*row) for row in rows], limit)

    def _rewarm(self, tenant_id: str, conversation_id: str) -> None:
        """Rebuild a missing cache key from the record, off the request's path."""
        conv = (tenant_id, conversation_id)
        if conv in self._rewarming or len(self._rewarming) >= MAX_REWARMS:
            return
        cache = self._cache
        assert cache is not None
        if not cache.asks(cache.key(tenant_id, conversation_id)):
            return  # its node fails: the record read would be for nothing

        async def run() -> None:
            try:
                found = await self._messages.recent_many([conv], cache.max_messages)
                await cache.warm(found)
            except Exception as exc:
                log.warning("cache re-warm failed: %r", exc)
            finally:
                self._rewarming.pop(conv, None)

        self._rewarming[conv] = asyncio.create_task(run())


def _turns(raw: Sequence[bytes]) -> list[Turn]:
    out = []
    for member in raw:
        m = decode_member(member)
        if is_turn(m.role, m.message_type):
            out.append(Turn(m.role, m.message_type, m.content, m.token_count))
    return out


def _summary_entry(raw: bytes) -> tuple[str, int]:
    """A summary entry as ``RedisCache.cache_summary`` writes it."""
    text, tokens = orjson.loads(raw)
    return str(text), int(tokens)
