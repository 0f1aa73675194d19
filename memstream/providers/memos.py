"""The MemOS long-term provider (``MEMOS``): MemTensor MemOS's ``/product`` API over one pooled
``httpx.AsyncClient`` (memstream.providers.http). How it isolates tenants, calls MemOS, keeps
adds idempotent, confirms ids and retries: docs/design/memos.md."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

import httpx

from memstream.errors import ProviderUnavailable
from memstream.identity import content_hash, escape_part, namespaced
from memstream.memory import (
    MEMORY_TYPES,
    USER_PROFILE,
    MemoryItem,
    MemoryType,
    NewMemory,
    agent_cube,
    readable_cubes,
)
from memstream.providers.http import (
    PROVIDER_FAILURES,
    ProviderCallFailed,
    ProviderHttp,
    base_url_of,
    clamp01,
    importance_of,
    kind_of,
    parse_time,
    time_text,
    validate_new,
)
from memstream.retrieval import RELATIVITY
from memstream.text.normalise import fold_spaces_and_case

log = logging.getLogger(__name__)

NAME = "MEMOS"
# The buckets of a search or get_memory reply that hold memories, and their memory type.
BUCKETS: tuple[MemoryType, ...] = MEMORY_TYPES
# MemOS node states that are not live memories.
_DEAD_STATES = frozenset({"deleted", "archived"})

AgentsOf = Callable[[str], Awaitable[Sequence[str]]]


def memos_user(tenant_id: str, user_id: str) -> str:
    """The MemOS user id of a memstream (tenant, user)."""
    return namespaced(tenant_id, user_id)


def memos_cube(tenant_id: str, user_id: str, cube_id: str) -> str:
    """The MemOS cube id of a memstream cube of one (tenant, user)."""
    return namespaced(tenant_id, user_id, cube_id)


@dataclass(frozen=True, slots=True)
class _Scope:
    tenant_id: str
    user_id: str
    agent_id: str | None

    def cubes(self, cube_ids: Iterable[str]) -> dict[str, str]:
        """MemOS cube id -> memstream cube id."""
        return {memos_cube(self.tenant_id, self.user_id, c): c for c in cube_ids}


def _envelope(body: Any) -> Any:
    """``data`` of a MemOS ``{"code", "message", "data"}`` reply; any other code fails."""
    if not isinstance(body, dict):
        raise ProviderCallFailed(
            f"MemOS answered {type(body).__name__} instead of an envelope", retryable=False
        )
    code = body.get("code", 200)
    if code != 200:
        retryable = isinstance(code, int) and (code >= 500 or code == 429)
        raise ProviderCallFailed(
            f"MemOS answered code {code}",
            retryable=retryable,
            status=code if isinstance(code, int) else None,
        )
    return body.get("data")


def _data_dict(body: Any) -> dict[str, Any]:
    data = _envelope(body)
    if not isinstance(data, dict):
        raise ProviderCallFailed(
            f"MemOS answered data of type {type(data).__name__}, not an object", retryable=False
        )
    return data


def _data_list(body: Any) -> list[Any]:
    data = _envelope(body)
    if data is None:
        return []
    if not isinstance(data, list):
        raise ProviderCallFailed(
            f"MemOS answered data of type {type(data).__name__}, not a list", retryable=False
        )
    return data


def _malformed(what: str) -> ProviderCallFailed:
    return ProviderCallFailed(f"MemOS answered a malformed reply: {what}", retryable=False)


class MemOSProvider:
    """``RemoteProvider`` on a MemOS server (its ``/product`` API)."""

    name = NAME

    def __init__(
        self,
        base_url: str,
        api_key: str = "",
        *,
        timeout: float = 5.0,
        write_timeout: float = 30.0,
        connect_timeout: float = 2.0,
        relativity: float = RELATIVITY,
        pref_top_k: int = 6,
        add_mode: Literal["fast", "fine"] = "fast",
        confirm_delays: Sequence[float] = (0.2, 0.5, 1.0),
        lookup_top_k: int = 20,
        list_limit: int = 1000,
        attempts: int = 3,
        search_attempts: int = 2,
        backoff_seconds: float = 0.1,
        agents_of: AgentsOf | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        base = base_url_of(base_url, "MemOS")
        # Accept the router's URL too: the /product paths are appended here.
        base = base.removesuffix("/product")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = ProviderHttp(
            NAME,
            base,
            headers=headers,
            timeout=timeout,
            connect_timeout=connect_timeout,
            attempts=attempts,
            backoff_seconds=backoff_seconds,
            transport=transport,
        )
        self.write_timeout = write_timeout
        self.relativity = relativity
        self.pref_top_k = pref_top_k
        self.add_mode = add_mode
        self.confirm_delays = tuple(confirm_delays)
        self.lookup_top_k = lookup_top_k
        self.list_limit = list_limit
        self.search_attempts = search_attempts
        self.agents_of = agents_of
        self._no_get_memory = False  # the server lacks /product/get_memory (learned once)

    def __repr__(self) -> str:
        return f"MemOSProvider({self.http.base_url!r})"

    async def aclose(self) -> None:
        await self.http.aclose()

    # --- search --------------------------------------------------------------------------

    async def search(
        self,
        tenant_id: str,
        user_id: str,
        agent_id: str | None,
        query: str,
        *,
        top_k: int = 10,
    ) -> list[MemoryItem]:
        """Up to ``top_k`` memories per readable cube, sorted by score; raises
        ``ProviderUnavailable`` on any failure (never an empty result instead)."""
        if top_k <= 0 or not query.strip():
            return []
        scope = _Scope(tenant_id, user_id, agent_id)
        cubes = scope.cubes(readable_cubes(agent_id))
        found = await self._search(
            scope,
            cubes,
            query,
            top_k=top_k,
            relativity=self.relativity,
            dedup="mmr",
            call="search",
            attempts=self.search_attempts,
        )
        kept = [m for m in found if m.score >= self.relativity or "unscored" in m.extra]
        return _top_per_cube(kept, top_k)

    async def _search(
        self,
        scope: _Scope,
        cubes: Mapping[str, str],
        query: str,
        *,
        top_k: int,
        relativity: float,
        dedup: str,
        call: str,
        attempts: int | None = None,
    ) -> list[MemoryItem]:
        body = {
            "query": query,
            "user_id": memos_user(scope.tenant_id, scope.user_id),
            "readable_cube_ids": list(cubes),
            "mode": "fast",
            "top_k": top_k,
            "relativity": relativity,
            "dedup": dedup,
            "include_preference": True,
            "pref_top_k": self.pref_top_k,
        }
        data = await self.http.call(
            call, "POST", "/product/search", _data_dict, json=body, attempts=attempts
        )
        return self._parse_buckets(data, scope, cubes, scored=True)

    def _parse_buckets(
        self, data: Mapping[str, Any], scope: _Scope, cubes: Mapping[str, str], *, scored: bool
    ) -> list[MemoryItem]:
        """Every memory of every bucket, one item per id (the best score), best first."""
        best: dict[str, MemoryItem] = {}
        for bucket in BUCKETS:
            groups = data.get(bucket)
            if groups is None:
                continue
            if not isinstance(groups, list):
                raise _malformed(f"data.{bucket} is a {type(groups).__name__}, not a list")
            for group in groups:
                if not isinstance(group, dict):
                    raise _malformed(f"an entry of data.{bucket} is not an object")
                cube = cubes.get(str(group.get("cube_id")))
                if cube is None:
                    if group.get("memories"):
                        # Never show memories of a cube this request did not ask for.
                        log.warning(
                            "MemOS answered memories of a cube outside the request; ignored"
                        )
                    continue
                for entry in _entries(group.get("memories"), bucket):
                    item = _item(entry, bucket, cube, scope, scored=scored)
                    if item is None:
                        continue
                    held = best.get(item.id)
                    if held is None or item.score > held.score:
                        best[item.id] = item
        return sorted(best.values(), key=lambda m: (-m.score, m.id))

    # --- add -----------------------------------------------------------------------------

    async def add(self, memories: Sequence[NewMemory]) -> list[MemoryItem]:
        """Store memories one by one (docs/design/memos.md): content already in the
        cube is answered as it is, never added twice. Answers one item per input."""
        for memory in memories:
            validate_new(memory)
        stored: dict[tuple[str, str, str, str], MemoryItem] = {}
        out: list[MemoryItem] = []
        for memory in memories:
            key = (memory.tenant_id, memory.user_id, memory.cube_id, content_hash(memory.content))
            item = stored.get(key)
            if item is None:
                item = await self._add_one(memory, key[3])
                stored[key] = item
            out.append(item)
        return out

    async def _add_one(self, memory: NewMemory, key: str) -> MemoryItem:
        scope = _Scope(memory.tenant_id, memory.user_id, memory.agent_id)
        cube = memos_cube(memory.tenant_id, memory.user_id, memory.cube_id)
        existing = await self._lookup(scope, memory, key, ())
        if existing is not None:
            return existing
        info: dict[str, Any] = {
            "memstream_key": key,
            "memstream_tenant": memory.tenant_id,
            "memstream_memory_type": memory.memory_type,
            "memstream_importance": importance_of(memory.importance),
            "memstream_agent_id": memory.agent_id or "",
            "memstream_source_event_ids": list(memory.source_event_ids),
        }
        # A memory without a kind reads back as a fact (also those written before kinds).
        if memory.kind != "fact":
            info["memstream_kind"] = memory.kind
        if memory.occurred_at is not None:
            info["memstream_occurred_at"] = time_text(memory.occurred_at)
        if memory.created_at is not None:  # an imported memory keeps when it was first stored
            info["memstream_created_at"] = time_text(memory.created_at)
        body = {
            "user_id": memos_user(memory.tenant_id, memory.user_id),
            "writable_cube_ids": [cube],
            "messages": [{"role": "user", "content": memory.content}],
            "async_mode": "sync",
            # An episode is what was said, dated and attributed already: stored as it is,
            # never through MemOS's own extraction, whatever ``add_mode`` says.
            "mode": "fast" if memory.kind == "episode" else self.add_mode,
            "info": info,
        }
        # Repeated after a failure only if the cube still lacks it.
        answered = await self.http.write_once(
            "add",
            "/product/add",
            _data_list,
            json=body,
            seconds=self.write_timeout,
            written=lambda: self._lookup(scope, memory, key, ()),
        )
        if isinstance(answered, MemoryItem):
            return answered  # the cube has it: the failed add had happened
        ids = _answered_ids(answered, cube)
        return await self._confirm(scope, memory, key, ids)

    async def _confirm(
        self, scope: _Scope, memory: NewMemory, key: str, ids: Sequence[str]
    ) -> MemoryItem:
        """The stored memory, read back; provisional when it does not show up in time."""
        for delay in (0.0, *self.confirm_delays):
            if delay:
                await asyncio.sleep(delay)
            found = await self._lookup(scope, memory, key, ids)
            if found is not None:
                if found.id not in ids and ids:
                    found = replace(found, extra={**found.extra, "temporary_ids": list(ids)})
                elif len(ids) > 1:
                    found = replace(found, extra={**found.extra, "memos_ids": list(ids)})
                return found
        if not ids:
            raise ProviderUnavailable(
                "MemOS accepted an add but answered no memory id, and the memory is not "
                "readable yet"
            )
        log.warning(
            "MemOS add answered ids that are not readable after %.1fs (async processing?); "
            "answering a provisional item",
            sum(self.confirm_delays),
        )
        PROVIDER_FAILURES.labels(NAME, "add_confirm").inc()
        return MemoryItem(
            id=ids[0],
            tenant_id=memory.tenant_id,
            user_id=memory.user_id,
            agent_id=memory.agent_id,
            cube_id=memory.cube_id,
            memory_type=memory.memory_type,
            content=memory.content,
            importance=importance_of(memory.importance),
            source_event_ids=tuple(memory.source_event_ids),
            created_at=memory.created_at or datetime.now(UTC),
            kind=memory.kind,
            occurred_at=parse_time(time_text(memory.occurred_at)),
            extra={"provisional": True, "temporary_ids": list(ids)},
        )

    async def _lookup(
        self, scope: _Scope, memory: NewMemory, key: str, ids: Sequence[str]
    ) -> MemoryItem | None:
        """A memory of the memory's cube that is one of ``ids`` or has the same content."""
        cubes = scope.cubes([memory.cube_id])
        found = await self._search(
            scope,
            cubes,
            memory.content,
            top_k=self.lookup_top_k,
            relativity=0.0,
            dedup="no",
            call="lookup",
        )
        wanted = fold_spaces_and_case(memory.content)
        match = next((m for m in found if m.id in ids), None)
        if match is None:
            match = next(
                (
                    m
                    for m in found
                    if m.extra.get("memstream_key") == key
                    or fold_spaces_and_case(m.content) == wanted
                ),
                None,
            )
        if match is None:
            return None
        extra = {k: v for k, v in match.extra.items() if k != "unscored"}
        return replace(match, score=1.0, extra=extra)

    # --- delete --------------------------------------------------------------------------

    async def delete(self, tenant_id: str, ids: Sequence[str]) -> list[str]:
        """Delete memories of ``tenant_id`` by id; ids held by other tenants' cubes (or by
        no cube) are left alone. Answers the ids that were deleted."""
        wanted = sorted({i for i in ids if i})
        if not wanted:
            return []
        owners = await self.http.call(
            "owners",
            "POST",
            "/product/get_user_names_by_memory_ids",
            _data_dict,
            json={"memory_ids": wanted},
        )
        mine = escape_part(tenant_id)
        by_cube: dict[str, list[str]] = {}
        for memory_id in wanted:
            owner = owners.get(memory_id)
            if isinstance(owner, str) and _tenant_of_cube(owner) == mine:
                by_cube.setdefault(owner, []).append(memory_id)
        deleted: list[str] = []
        for cube, cube_ids in by_cube.items():
            deleted += await self._delete_in(cube, cube_ids)
        return deleted

    async def _delete_in(self, cube: str, ids: Sequence[str]) -> list[str]:
        def parse(body: Any) -> list[str]:
            data = _envelope(body)
            status = data.get("status") if isinstance(data, dict) else None
            if status == "failure":
                raise ProviderCallFailed(
                    "MemOS refused to delete memories",
                    retryable=False,
                )
            if isinstance(data, dict) and isinstance(data.get("deleted"), list):
                done = {str(i) for i in data["deleted"]}
                return [i for i in ids if i in done]
            return list(ids)

        body = {"writable_cube_ids": [cube], "memory_ids": list(ids)}
        return await self.http.call("delete", "POST", "/product/delete_memory", parse, json=body)

    async def delete_user(self, tenant_id: str, user_id: str) -> list[str]:
        """Forget a user: every memory of the profile cube and of every configured agent's
        cube. Answers the deleted ids."""
        agents: Sequence[str] = await self.agents_of(tenant_id) if self.agents_of else ()
        cube_ids = [USER_PROFILE] + [agent_cube(a) for a in sorted(set(agents))]
        scope = _Scope(tenant_id, user_id, None)
        deleted: list[str] = []
        for cube_id in cube_ids:
            cube = memos_cube(tenant_id, user_id, cube_id)
            for _round in range(50):
                items, complete = await self._list_cube(scope, cube_id)
                if not items:
                    break
                deleted += await self._delete_in(cube, [m.id for m in items])
                if complete:
                    break
        return deleted

    # --- list ----------------------------------------------------------------------------

    async def list_live(
        self, tenant_id: str, user_id: str, agent_id: str | None
    ) -> list[MemoryItem]:
        """Every live memory of the readable cubes, newest first."""
        scope = _Scope(tenant_id, user_id, agent_id)
        lists = await asyncio.gather(
            *(self._list_cube(scope, cube) for cube in readable_cubes(agent_id))
        )
        items = [item for found, _complete in lists for item in found]
        items.sort(key=lambda m: m.id)
        items.sort(key=lambda m: m.created_at, reverse=True)
        return items

    async def _list_cube(self, scope: _Scope, cube_id: str) -> tuple[list[MemoryItem], bool]:
        """The cube's memories and whether the list is known to be complete."""
        cubes = scope.cubes([cube_id])
        if not self._no_get_memory:
            body = {
                "mem_cube_id": next(iter(cubes)),
                "user_id": memos_user(scope.tenant_id, scope.user_id),
                "include_preference": True,
                "include_tool_memory": True,
                "include_skill_memory": True,
            }
            try:
                data = await self.http.call(
                    "list", "POST", "/product/get_memory", _data_dict, json=body
                )
            except ProviderCallFailed as exc:
                if exc.status not in (404, 405):
                    raise
                log.warning(
                    "the MemOS server has no /product/get_memory; memories are listed by a "
                    "broad search, at most %d per cube, so lists may be incomplete",
                    self.list_limit,
                )
                self._no_get_memory = True
            else:
                items = self._parse_buckets(data, scope, cubes, scored=False)
                return [replace(m, score=1.0) for m in items], True
        found = await self._search(
            scope,
            cubes,
            "memory",
            top_k=self.list_limit,
            relativity=0.0,
            dedup="no",
            call="list",
        )
        return [replace(m, score=1.0) for m in found], len(found) < self.list_limit


# --- parsing -----------------------------------------------------------------------------


def _entries(memories: Any, bucket: str) -> list[dict[str, Any]]:
    """The memory objects of one bucket entry: a list, or (``get_memory``) a cube graph
    ``{"nodes": [...], "edges": [...]}``."""
    if memories is None:
        return []
    if isinstance(memories, dict):
        memories = memories.get("nodes", [])
    if not isinstance(memories, list):
        raise _malformed(f"memories of data.{bucket} are a {type(memories).__name__}")
    if not all(isinstance(m, dict) for m in memories):
        raise _malformed(f"a memory of data.{bucket} is not an object")
    return memories


def _item(
    entry: Mapping[str, Any], bucket: MemoryType, cube: str, scope: _Scope, *, scored: bool
) -> MemoryItem | None:
    metadata = entry.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise _malformed("a memory's metadata is not an object")
    memory_id = entry.get("id") or metadata.get("id")
    if not isinstance(memory_id, str) or not memory_id:
        raise _malformed("a memory without an id")
    text = entry.get("memory", metadata.get("memory"))
    if not isinstance(text, str):
        raise _malformed(f"memory {memory_id} has no text")
    if not text.strip() or metadata.get("status") in _DEAD_STATES:
        return None
    raw_info = metadata.get("info")
    info: dict[str, Any] = raw_info if isinstance(raw_info, dict) else {}

    def ours(name: str) -> Any:
        return info.get(name, metadata.get(name))

    extra: dict[str, object] = {}
    score = 1.0
    if scored:
        value = clamp01(metadata.get("relativity"))
        if value is None:
            value = clamp01(metadata.get("score", entry.get("score")))
        if value is None:
            extra["unscored"] = True
        score = value or 0.0
    memory_type: MemoryType = bucket
    declared = ours("memstream_memory_type")
    if declared in MEMORY_TYPES:
        memory_type = declared
    if isinstance(ours("memstream_key"), str):
        extra["memstream_key"] = ours("memstream_key")
    if isinstance(metadata.get("memory_type"), str):
        extra["memos_memory_type"] = metadata["memory_type"]
    # An agent cube names its agent; a profile memory may say which agent's session made it.
    agent_id = cube.removeprefix("agent_") if cube != USER_PROFILE else ours("memstream_agent_id")
    created = (
        parse_time(ours("memstream_created_at"))
        or parse_time(metadata.get("created_at"))
        or parse_time(metadata.get("updated_at"))
    )
    events = ours("memstream_source_event_ids")
    return MemoryItem(
        id=memory_id,
        tenant_id=scope.tenant_id,
        user_id=scope.user_id,
        agent_id=agent_id if isinstance(agent_id, str) and agent_id else None,
        cube_id=cube,
        memory_type=memory_type,
        content=text,
        importance=importance_of(ours("memstream_importance")),
        source_event_ids=tuple(str(e) for e in events) if isinstance(events, list) else (),
        created_at=created or datetime.fromtimestamp(0, UTC),
        score=round(score, 4),
        kind=kind_of(ours("memstream_kind")),
        occurred_at=parse_time(ours("memstream_occurred_at")),
        extra=extra,
    )


def _answered_ids(data: Sequence[Any], cube: str) -> list[str]:
    ids: list[str] = []
    for entry in data:
        if not isinstance(entry, dict):
            raise _malformed("an entry of the add reply is not an object")
        if entry.get("cube_id") not in (None, cube):
            continue
        memory_id = entry.get("memory_id", entry.get("id"))
        if isinstance(memory_id, str) and memory_id and memory_id not in ids:
            ids.append(memory_id)
    return ids


def _tenant_of_cube(cube: str) -> str | None:
    parts = cube.split(":")
    return parts[0] if len(parts) == 3 else None


def _top_per_cube(items: Sequence[MemoryItem], top_k: int) -> list[MemoryItem]:
    counts: dict[str, int] = {}
    out: list[MemoryItem] = []
    for item in items:  # best first
        if counts.get(item.cube_id, 0) < top_k:
            counts[item.cube_id] = counts.get(item.cube_id, 0) + 1
            out.append(item)
    return out
