"""The Redis hot cache of recent messages: derived from the record, rebuildable, best effort.

Each conversation is one sorted set scored by message time, so writing the same message twice
(redelivery, replay) changes nothing, and the newest N are read without reading the rest.
A key exists only while it holds the conversation's complete recent history: appends go only to
keys that exist (atomically, in Lua), and a missing key is rebuilt from the record. A key that
may have missed a write is marked in the record (``memstream.store.rebuilds``) and dropped once
Redis answers.

On a Redis Cluster every key of one conversation carries the same hash tag (a digest of the
conversation, ``{...}`` in the key), so they share a slot: the load path reads the messages and
the summary in one script, which a cluster refuses across slots.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import NamedTuple, cast

import orjson
import redis.asyncio as redis
from redis.asyncio.cluster import RedisCluster
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.retry import Retry

from memstream.store.messages import StoredMessage
from memstream.store.rebuilds import CacheRebuilds

# Append only while the key exists, then trim to the newest N and refresh the TTL.
_APPEND_IF_WARM = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('ZADD', KEYS[1], unpack(ARGV, 3))
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -tonumber(ARGV[1]) - 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""

# Script calls a cluster client has in flight at once while appending a batch (a cluster
# pipeline cannot carry scripts): each is one round trip to the conversation's master.
_CLUSTER_CONCURRENCY = 64

Client = redis.Redis | RedisCluster

_EPOCH = datetime(1970, 1, 1)
_MICROSECOND = timedelta(microseconds=1)


def score(created_at: datetime) -> float:
    """Microseconds since the epoch (naive UTC): exact in a double for the next 200 years."""
    return float((created_at - _EPOCH) // _MICROSECOND)


def encode_member(m: StoredMessage) -> bytes:
    """The cached form of a message; deterministic, so a rewrite is a no-op."""
    return orjson.dumps(
        [m.event_id, m.role, m.message_type, m.content, m.token_count, m.created_at.isoformat()]
    )


class CachedMessage(NamedTuple):
    """A message as cached: enough for the load path, nothing more."""

    event_id: str
    role: str
    message_type: str
    content: str
    token_count: int
    created_at: str


def decode_member(raw: bytes) -> CachedMessage:
    return CachedMessage(*orjson.loads(raw))


class RedisCache:
    """Recent messages per conversation in Redis sorted sets."""

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = "memstream:",
        max_messages: int = 200,
        ttl_seconds: int = 3 * 24 * 3600,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.max_messages = max_messages
        self.ttl_ms = ttl_seconds * 1000
        self._append = self.script(_APPEND_IF_WARM)

    @classmethod
    def from_url(
        cls, url: str, *, timeout: float = 0.5, cluster: bool = False, **kwargs: int | str
    ) -> RedisCache:
        # Short timeouts: a slow or absent cache must cost milliseconds, never stall the stream.
        client: Client
        if cluster:
            # No retries: the client's own (with back-off up to seconds) would hold a request
            # on a master that died; the caller falls back to the record at once instead, and
            # the client relearns the cluster's layout on its next command.
            client = RedisCluster.from_url(
                url,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                retry=Retry(NoBackoff(), 0),
            )
        else:
            client = redis.Redis.from_url(
                url, socket_timeout=timeout, socket_connect_timeout=timeout, retry_on_timeout=False
            )
        return cls(client, **kwargs)  # type: ignore[arg-type]

    def script(self, text: str) -> AsyncScript:
        """A Lua script run through this cache's client."""
        # redis-py types its scripts for redis.Redis only; on a cluster the same script
        # object runs each call on the master of its keys' slot.
        return AsyncScript(cast(redis.Redis, self.client), text)

    async def ready(self) -> None:
        """On a cluster, learn its layout before calls run side by side: calls that race the
        client's first discovery lose their connections when it replaces its startup node.
        Once known, this is a flag test."""
        if isinstance(self.client, RedisCluster):
            await self.client.initialize()

    def _name(self, kind: str, tenant_id: str, conversation_id: str) -> str:
        # The tenant's length makes the name unambiguous whatever characters the ids hold; the
        # tag comes before the ids so that a brace in an id cannot end it early.
        ids = f"{len(tenant_id)}:{tenant_id}:{conversation_id}"
        tag = hashlib.blake2b(ids.encode(), digest_size=8).hexdigest()
        return f"{self.prefix}{kind}:{{{tag}}}:{ids}"

    def key(self, tenant_id: str, conversation_id: str) -> str:
        return self._name("msgs", tenant_id, conversation_id)

    def summary_key(self, tenant_id: str, conversation_id: str) -> str:
        return self._name("summary", tenant_id, conversation_id)

    async def cached_summary(self, tenant_id: str, conversation_id: str) -> tuple[str, int] | None:
        """(text, tokens) when cached; ("", 0) caches "no summary"; None when not cached."""
        raw = await self.client.get(self.summary_key(tenant_id, conversation_id))
        if raw is None:
            return None
        text, tokens = orjson.loads(raw)
        return str(text), int(tokens)

    async def cache_summary(
        self, tenant_id: str, conversation_id: str, text: str, tokens: int, ttl_seconds: int
    ) -> None:
        key = self.summary_key(tenant_id, conversation_id)
        await self.client.set(key, orjson.dumps([text, tokens]), ex=ttl_seconds)

    async def append(
        self, batches: Mapping[tuple[str, str], Sequence[StoredMessage]]
    ) -> list[tuple[str, str]]:
        """Add messages to warm conversations; return the conversations whose key was missing."""
        if not batches:
            return []
        order = list(batches)
        calls: list[tuple[str, list[float | bytes | int]]] = []
        for tenant_id, conversation_id in order:
            args: list[float | bytes | int] = [self.max_messages, self.ttl_ms]
            for m in batches[(tenant_id, conversation_id)]:
                args += (score(m.created_at), encode_member(m))
            calls.append((self.key(tenant_id, conversation_id), args))
        results: list[int] = []
        if isinstance(self.client, RedisCluster):
            await self.ready()
            for start in range(0, len(calls), _CLUSTER_CONCURRENCY):
                chunk = calls[start : start + _CLUSTER_CONCURRENCY]
                results += await asyncio.gather(
                    *(self._append(keys=[key], args=args) for key, args in chunk)
                )
        else:
            pipe = self.client.pipeline(transaction=False)
            for key, args in calls:
                await self._append(keys=[key], args=args, client=pipe)
            results = await pipe.execute()
        return [conv for conv, warm in zip(order, results, strict=True) if not warm]

    async def warm(self, conversations: Mapping[tuple[str, str], Sequence[StoredMessage]]) -> None:
        """Write each conversation's complete recent history (from the record)."""
        if not conversations:
            return
        pipe = self.client.pipeline(transaction=False)
        for (tenant_id, conversation_id), messages in conversations.items():
            if not messages:
                continue
            key = self.key(tenant_id, conversation_id)
            pipe.zadd(key, {encode_member(m): score(m.created_at) for m in messages})
            pipe.zremrangebyrank(key, 0, -self.max_messages - 1)
            pipe.pexpire(key, self.ttl_ms)
        await pipe.execute()

    async def recent(
        self, tenant_id: str, conversation_id: str, limit: int
    ) -> list[CachedMessage] | None:
        """The newest ``limit`` cached messages, oldest first; None when not cached."""
        raw = await self.client.zrange(self.key(tenant_id, conversation_id), -limit, -1)
        if not raw:
            return None
        return [decode_member(r) for r in raw]

    async def forget(self, keys: Iterable[tuple[str, str]]) -> None:
        """Drop conversations' cached messages and summaries (rebuilt from the record); on a
        cluster the client sends each master the names in its slots."""
        names = [name for t, c in keys for name in (self.key(t, c), self.summary_key(t, c))]
        if names:
            await self.client.delete(*names)

    async def drop_stale(
        self, rebuilds: CacheRebuilds, *, batch: int = 500, rounds: int = 20
    ) -> int:
        """Drop the conversations marked in ``rebuilds``, then clear their marks (at the
        version read, ``memstream.store.rebuilds``), ``batch`` at a time for at most
        ``rounds``; answers how many were dropped."""
        dropped = 0
        for _ in range(rounds):
            marks = await rebuilds.marked(batch)
            if marks:
                await self.forget((tenant, conversation) for tenant, conversation, _ in marks)
                await rebuilds.clear(marks)
                dropped += len(marks)
            if len(marks) < batch:
                break
        return dropped

    async def ping(self) -> bool:
        return bool(await self.client.ping())  # type: ignore[misc]

    async def close(self) -> None:
        await self.client.aclose()
