"""The Redis hot cache of recent messages, standalone or cluster: derived from the record,
rebuildable, best effort; a node that fails is not asked while its breaker is open.
Why it works this way: docs/design/redis-cache.md."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

import orjson
import redis.asyncio as redis
from redis.asyncio.cluster import RedisCluster
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.crc import REDIS_CLUSTER_HASH_SLOTS
from redis.exceptions import ClusterError, RedisClusterException, SlotNotCoveredError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from memstream import metrics
from memstream.errors import CacheUnavailable
from memstream.store.breaker import Breakers
from memstream.store.messages import StoredMessage
from memstream.store.rebuilds import CacheRebuilds

if TYPE_CHECKING:
    from memstream.settings import CacheSettings

log = logging.getLogger(__name__)
T = TypeVar("T")

# Append only while the key exists, then trim to the newest N and refresh the TTL.
_APPEND_IF_WARM = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('ZADD', KEYS[1], unpack(ARGV, 3))
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -tonumber(ARGV[1]) - 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""

# The size of a conversation's cached history, its newest ARGV[1] members and its cached
# summary, in one command: cheaper for the client than a pipeline of three.
_READ_NEWEST = """
local size = redis.call('ZCARD', KEYS[1])
local newest = {}
if size > 0 then newest = redis.call('ZRANGE', KEYS[1], -tonumber(ARGV[1]), -1) end
return {size, newest, redis.call('GET', KEYS[2])}
"""

# What a failing node (or server) raises: counted by its breaker. A refused command
# (a ResponseError other than the cluster's) is a bug, not an outage, and is not.
FAILURES = (
    RedisConnectionError,
    RedisTimeoutError,
    ClusterError,
    RedisClusterException,
    TimeoutError,
)

WHOLE = "*"
"""The breaker of the whole cache: the one server, or a cluster whose layout is unknown."""
UNCOVERED = "uncovered"
"""The breaker of a cluster's slots that no node serves (a master lost with no replica)."""

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


class _Cluster(RedisCluster):
    """A cluster client whose reloads after a failure relearn the slots only (a few ms). The
    stock client reads the whole command table again as well, ~100 ms of parsing that holds
    the event loop and every call behind it, though a lost node changes no command."""

    async def initialize(self) -> RedisCluster:
        if not (self._initialize and self.commands_parser.commands):
            first = self._initialize
            await super().initialize()  # the first discovery, or nothing to do
            if first:
                _share_nodes(self.nodes_manager)
            return self
        if not self._lock:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._initialize:
                await self.refresh_slots()
                self.commands_parser.node = self.nodes_manager.default_node
                self._initialize = False
        return self

    async def refresh_slots(self) -> None:
        await self.nodes_manager.initialize()
        _share_nodes(self.nodes_manager)


def _share_nodes(manager: Any) -> None:
    """Point the slot table at the nodes the client keeps. A reload keeps a known node's object
    (and its connections) but fills the slot table with new ones: calls then open connections
    on those, and the next reload drops them unclosed ("Unclosed ClusterNode object")."""
    kept: dict[int, list[Any]] = {}
    for slot, nodes in manager.slots_cache.items():
        shared = kept.get(id(nodes))
        if shared is None:
            shared = kept[id(nodes)] = [manager.nodes_cache.get(n.name, n) for n in nodes]
        manager.slots_cache[slot] = shared


class Newest(NamedTuple):
    """A conversation's cached size, its newest members (oldest first) and its summary entry."""

    size: int
    members: list[bytes]
    summary: bytes | None


class Appended(NamedTuple):
    """What ``RedisCache.append`` did not write: conversations with no key (to warm from the
    record) and conversations it could not reach (their keys may have missed the batch)."""

    cold: list[tuple[str, str]]
    failed: list[tuple[str, str]]


class RedisCache:
    """Recent messages per conversation in Redis sorted sets, behind a breaker per node."""

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = "memstream:",
        max_messages: int = 200,
        ttl_seconds: int = 3 * 24 * 3600,
        timeout: float = 0.5,
        read_budget: float = 0.1,
        breaker_failures: int = 3,
        probe_seconds: float = 1.0,
        rebuilds: CacheRebuilds | None = None,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.max_messages = max_messages
        self.ttl_ms = ttl_seconds * 1000
        self.timeout = timeout
        self.read_budget = read_budget
        self.probe_seconds = probe_seconds
        self.breakers = Breakers(breaker_failures)
        # Marks to drop from a node that answers again, before it serves (None: the caller's
        # own sweeps drop them, as the history stage does).
        self._rebuilds = rebuilds
        self._cluster = isinstance(client, RedisCluster)
        self._layout_known = not self._cluster
        self._layout: asyncio.Task[None] | None = None
        self._probes: dict[str, asyncio.Task[None]] = {}
        self._append = self.script(_APPEND_IF_WARM)
        self._read_newest = self.script(_READ_NEWEST)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        timeout: float = 0.5,
        cluster: bool = False,
        **kwargs: Any,
    ) -> RedisCache:
        # Short timeouts: a slow or absent cache must cost milliseconds, never stall the stream.
        client: Client
        if cluster:
            # No retries: the client's own (with back-off up to seconds) would hold a request
            # on a master that died; the caller falls back to the record at once instead, and
            # the client relearns the cluster's layout on its next command.
            client = _Cluster.from_url(
                url,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                retry=Retry(NoBackoff(), 0),
            )
        else:
            client = redis.Redis.from_url(
                url, socket_timeout=timeout, socket_connect_timeout=timeout, retry_on_timeout=False
            )
        return cls(client, timeout=timeout, **kwargs)

    @classmethod
    def from_settings(cls, settings: CacheSettings, **kwargs: Any) -> RedisCache:
        """The cache the cache section describes (``MEMSTREAM_REDIS_URL`` must be set)."""
        return cls.from_url(
            settings.redis_url,
            timeout=settings.redis_timeout_seconds,
            cluster=settings.redis_cluster,
            prefix=settings.cache_prefix,
            max_messages=settings.cache_max_messages,
            ttl_seconds=settings.cache_ttl_seconds,
            read_budget=settings.cache_read_budget_seconds,
            breaker_failures=settings.cache_breaker_failures,
            probe_seconds=settings.cache_probe_seconds,
            **kwargs,
        )

    def script(self, text: str) -> AsyncScript:
        """A Lua script run through this cache's client."""
        # redis-py types its scripts for redis.Redis only; on a cluster the same script
        # object runs each call on the master of its keys' slot.
        return AsyncScript(cast(redis.Redis, self.client), text)

    async def ready(self, deadline: float | None = None) -> None:
        """On a cluster, learn its layout before calls run side by side: calls that race the
        client's first discovery lose their connections when it replaces its startup node.
        Once known, this is a flag test. The layout is learnt in a task of its own that a
        caller out of time leaves running: a reload cut off half-way would close every
        node's connections and be started again by the next caller, and so on forever."""
        if self._layout_known:
            return
        if not self.breakers.allows(WHOLE):
            raise CacheUnavailable("the cache cluster's layout is unknown; probing it")
        if deadline is None:
            deadline = asyncio.get_running_loop().time() + self.timeout
        try:
            async with asyncio.timeout_at(deadline):
                await asyncio.shield(self._learning())
        except TimeoutError:
            # Not counted: the reload goes on, and counts for itself if it fails.
            raise CacheUnavailable("the cache cluster's layout is being learnt") from None
        except FAILURES as exc:
            raise CacheUnavailable(f"the cache cluster's layout is unknown: {exc!r}") from exc

    def _learning(self) -> asyncio.Task[None]:
        if self._layout is None:
            self._layout = asyncio.create_task(self._learn_layout())
            self._layout.add_done_callback(_retrieved)
        return self._layout

    async def _learn_layout(self) -> None:
        client = self.client
        assert isinstance(client, RedisCluster)
        try:
            await client.initialize()  # a flag test unless a failed call asked for a reload
            self._layout_known = True
            self.breakers.succeeded(WHOLE)
        except FAILURES as exc:
            self._failed(WHOLE, exc)
            raise
        finally:
            self._layout = None

    def node(self, key: str) -> str:
        """The name of the node ``key`` lives on, as far as the client knows."""
        client = self.client
        if not isinstance(client, RedisCluster):
            return WHOLE
        try:
            found = client.get_node_from_key(key)
        except SlotNotCoveredError:
            return UNCOVERED
        except (RedisClusterException, LookupError, TypeError):
            return WHOLE
        return WHOLE if found is None else str(found.name)

    def asks(self, key: str) -> bool:
        """Whether a call for ``key`` would be sent (its node's breaker is closed)."""
        return self.breakers.allows(WHOLE) and self.breakers.allows(self.node(key))

    async def _guarded(
        self,
        node: str,
        call: Callable[[], Awaitable[T]],
        *,
        deadline: float | None = None,
        probing: bool = False,
    ) -> T:
        """``call`` on ``node`` by ``deadline``, counted by the node's breaker;
        ``CacheUnavailable`` at once while it is open. Without a deadline (writes, which may
        be large pipelines) the socket timeout bounds every wait for the server."""
        if not probing and not (self.breakers.allows(node) and self.breakers.allows(WHOLE)):
            raise CacheUnavailable(f"the cache node {node} is failing: not asked until it answers")
        try:
            async with asyncio.timeout_at(deadline):
                result = await call()
        except FAILURES as exc:
            self._failed(node, exc)
            raise CacheUnavailable(f"the cache node {node} failed: {exc!r}") from exc
        self.breakers.succeeded(node)
        return result

    def _failed(self, node: str, exc: BaseException) -> None:
        if self._cluster:
            self._layout_known = False  # the client reloads it before its next call
        if self.breakers.failed(node):
            log.warning(
                "cache node %s failing (%r): not asked until a probe (every %.1fs) answers",
                node, exc, self.probe_seconds,
            )  # fmt: skip
            metrics.CACHE.labels("breaker", "opened").inc()
            self._probes[node] = asyncio.create_task(self._probe(node))

    async def _probe(self, node: str) -> None:
        """Ask an open node every ``probe_seconds`` until it answers, drop the keys marked
        meanwhile, then close its breaker."""
        while True:
            await asyncio.sleep(self.probe_seconds)
            try:
                async with asyncio.timeout(self.timeout):
                    await self._answers(node)
                # As long as the marks take (socket timeouts bound each call); a node that
                # fails meanwhile raises here and stays open.
                if self._rebuilds is not None:
                    await self._sweep(node)
                break
            except Exception as exc:
                log.debug("cache node %s still failing: %r", node, exc)
        self.breakers.close(node)
        self._probes.pop(node, None)
        metrics.CACHE.labels("breaker", "closed").inc()
        log.warning("cache node %s answers again", node)

    async def _sweep(self, node: str) -> None:
        assert self._rebuilds is not None
        marks = await self._rebuilds.marked()
        mine = [(t, c) for t, c, _ in marks if self.node(self.key(t, c)) == node]
        if mine and await self._drop(mine, probing=node):
            raise CacheUnavailable(f"the cache node {node} failed while its marks were dropped")
        await self.drop_stale(self._rebuilds, probing=node)

    async def _answers(self, node: str) -> None:
        client = self.client
        if not isinstance(client, RedisCluster):
            await client.ping()  # type: ignore[misc]
            return
        if node == WHOLE:
            await asyncio.shield(self._learning())
            return
        # The layout first: a replica may have taken the node's slots over. A node that
        # serves none is not asked again; one that does is pinged on a connection of the
        # probe's own, so that the client's connections and layout stay as they are.
        if isinstance(client, _Cluster):
            await client.refresh_slots()
        else:
            await client.nodes_manager.initialize()
        if node == UNCOVERED:
            if len(client.nodes_manager.slots_cache) < REDIS_CLUSTER_HASH_SLOTS:
                raise CacheUnavailable("some slots are still served by no node")
            return
        primary = next((n for n in client.get_primaries() if n.name == node), None)
        if primary is None:
            return
        kwargs = client.nodes_manager.connection_kwargs
        probe = redis.Redis(
            host=primary.host,
            port=int(primary.port),
            username=kwargs.get("username"),
            password=kwargs.get("password"),
            socket_timeout=self.timeout,
            socket_connect_timeout=self.timeout,
        )
        try:
            await probe.ping()  # type: ignore[misc]
        finally:
            await probe.aclose()

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

    async def newest(
        self, tenant_id: str, conversation_id: str, count: int, deadline: float
    ) -> Newest:
        """The load path's read: size, newest ``count`` members and summary in one call."""
        await self.ready(deadline)
        key = self.key(tenant_id, conversation_id)
        summary_key = self.summary_key(tenant_id, conversation_id)
        size, raw, summary = await self._guarded(
            self.node(key),
            lambda: self._read_newest(keys=[key, summary_key], args=[count]),
            deadline=deadline,
        )
        return Newest(int(size), raw, summary)

    async def members(self, tenant_id: str, conversation_id: str, deadline: float) -> list[bytes]:
        """Every cached member of a conversation, oldest first."""
        key = self.key(tenant_id, conversation_id)
        raw = await self._guarded(
            self.node(key), lambda: self.client.zrange(key, 0, -1), deadline=deadline
        )
        return list(raw)

    async def cached_summary(self, tenant_id: str, conversation_id: str) -> tuple[str, int] | None:
        """(text, tokens) when cached; ("", 0) caches "no summary"; None when not cached."""
        await self.ready()
        key = self.summary_key(tenant_id, conversation_id)
        raw = await self._guarded(self.node(key), lambda: self.client.get(key))
        if raw is None:
            return None
        text, tokens = orjson.loads(raw)
        return str(text), int(tokens)

    async def cache_summary(
        self,
        tenant_id: str,
        conversation_id: str,
        text: str,
        tokens: int,
        ttl_seconds: int,
        *,
        deadline: float | None = None,
    ) -> None:
        await self.ready(deadline)
        key = self.summary_key(tenant_id, conversation_id)
        value = orjson.dumps([text, tokens])
        await self._guarded(
            self.node(key), lambda: self.client.set(key, value, ex=ttl_seconds), deadline=deadline
        )

    async def append(self, batches: Mapping[tuple[str, str], Sequence[StoredMessage]]) -> Appended:
        """Add messages to warm conversations; say which had no key and which failed."""
        if not batches:
            return Appended([], [])
        order = list(batches)
        calls: list[tuple[str, list[float | bytes | int]]] = []
        for tenant_id, conversation_id in order:
            args: list[float | bytes | int] = [self.max_messages, self.ttl_ms]
            for m in batches[(tenant_id, conversation_id)]:
                args += (score(m.created_at), encode_member(m))
            calls.append((self.key(tenant_id, conversation_id), args))
        try:
            await self.ready()
        except CacheUnavailable:
            return Appended([], order)
        results: list[int | BaseException] = []
        if self._cluster:
            for start in range(0, len(calls), _CLUSTER_CONCURRENCY):
                chunk = calls[start : start + _CLUSTER_CONCURRENCY]
                results += await asyncio.gather(
                    *(self._append_one(key, args) for key, args in chunk), return_exceptions=True
                )
        else:

            async def pipelined() -> list[int]:
                pipe = self.client.pipeline(transaction=False)
                for key, args in calls:
                    await self._append(keys=[key], args=args, client=cast(redis.Redis, pipe))
                return cast(list[int], await pipe.execute())

            try:
                results += await self._guarded(WHOLE, pipelined)
            except CacheUnavailable as exc:
                results = [exc] * len(calls)
        cold, failed = [], []
        for conv, result in zip(order, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, CacheUnavailable):
                    log.warning("cache append for %s failed: %r", conv, result)
                failed.append(conv)
            elif not result:
                cold.append(conv)
        return Appended(cold, failed)

    async def _append_one(self, key: str, args: list[float | bytes | int]) -> int:
        return cast(
            int, await self._guarded(self.node(key), lambda: self._append(keys=[key], args=args))
        )

    async def warm(
        self, conversations: Mapping[tuple[str, str], Sequence[StoredMessage]]
    ) -> list[tuple[str, str]]:
        """Write each conversation's complete recent history (from the record); answers the
        conversations it could not write."""
        convs = [conv for conv, messages in conversations.items() if messages]
        if not convs:
            return []
        try:
            await self.ready()
        except CacheUnavailable:
            return convs

        async def write(group: list[tuple[str, str]]) -> None:
            pipe = self.client.pipeline(transaction=False)
            for tenant_id, conversation_id in group:
                messages = conversations[(tenant_id, conversation_id)]
                key = self.key(tenant_id, conversation_id)
                pipe.zadd(key, {encode_member(m): score(m.created_at) for m in messages})
                pipe.zremrangebyrank(key, 0, -self.max_messages - 1)
                pipe.pexpire(key, self.ttl_ms)
            await pipe.execute()

        return await self._per_node(convs, write)

    async def _per_node(
        self,
        convs: Sequence[tuple[str, str]],
        call: Callable[[list[tuple[str, str]]], Awaitable[None]],
        *,
        probing: str | None = None,
    ) -> list[tuple[str, str]]:
        """``call`` for each node's conversations side by side (only ``probing``'s when set);
        answers the conversations whose call failed or was not made."""
        groups: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for conv in convs:
            groups[self.node(self.key(*conv))].append(conv)
        targets = [n for n in groups if probing is None or n == probing]

        async def one(node: str) -> None:
            group = groups[node]
            await self._guarded(node, lambda: call(group), probing=node == probing)

        done = await asyncio.gather(*(one(n) for n in targets), return_exceptions=True)
        failed = [c for n in groups if n not in targets for c in groups[n]]
        for node, result in zip(targets, done, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, CacheUnavailable):
                    log.warning("cache call on %s failed: %r", node, result)
                failed += groups[node]
        return failed

    async def recent(
        self, tenant_id: str, conversation_id: str, limit: int
    ) -> list[CachedMessage] | None:
        """The newest ``limit`` cached messages, oldest first; None when not cached."""
        await self.ready()
        key = self.key(tenant_id, conversation_id)
        raw = await self._guarded(self.node(key), lambda: self.client.zrange(key, -limit, -1))
        if not raw:
            return None
        return [decode_member(r) for r in raw]

    async def forget(self, keys: Iterable[tuple[str, str]]) -> None:
        """Drop conversations' cached messages and summaries (rebuilt from the record);
        ``CacheUnavailable`` when some could not be dropped (the caller marks them)."""
        failed = await self._drop(list(keys))
        if failed:
            raise CacheUnavailable(f"{len(failed)} conversations' cached copies not dropped")

    async def _drop(
        self, convs: list[tuple[str, str]], *, probing: str | None = None
    ) -> list[tuple[str, str]]:
        if not convs:
            return []
        try:
            await self.ready()
        except CacheUnavailable:
            return convs

        async def delete(group: list[tuple[str, str]]) -> None:
            # On a cluster the client sends each master the names in its slots.
            await self.client.delete(
                *(name for t, c in group for name in (self.key(t, c), self.summary_key(t, c)))
            )

        return await self._per_node(convs, delete, probing=probing)

    async def drop_stale(
        self,
        rebuilds: CacheRebuilds,
        *,
        batch: int = 500,
        rounds: int = 20,
        probing: str | None = None,
    ) -> int:
        """Drop the conversations marked in ``rebuilds``, then clear their marks (at the
        version read, ``memstream.store.rebuilds``), ``batch`` at a time for at most
        ``rounds``; a node that fails keeps its marks (only ``probing``'s are dropped when
        set). Answers how many were dropped."""
        dropped = 0
        for _ in range(rounds):
            marks = await rebuilds.marked(batch)
            failed = set(await self._drop([(t, c) for t, c, _ in marks], probing=probing))
            done = [m for m in marks if (m[0], m[1]) not in failed]
            await rebuilds.clear(done)
            dropped += len(done)
            if len(marks) < batch or not done:
                break
        return dropped

    async def ping(self) -> bool:
        return bool(await self.client.ping())  # type: ignore[misc]

    async def close(self) -> None:
        for task in [*self._probes.values(), *([self._layout] if self._layout else [])]:
            task.cancel()
        await self.client.aclose()


def _retrieved(task: asyncio.Task[None]) -> None:
    """Its callers may all have stopped waiting: the error is theirs, not the loop's."""
    if not task.cancelled():
        task.exception()
