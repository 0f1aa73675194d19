"""The Mem0 long-term provider (``MEM0``): the Mem0 REST server over one pooled
``httpx.AsyncClient`` (memstream.providers.http). How it isolates tenants, calls Mem0, reads its
scores, keeps adds idempotent and retries: docs/design/mem0.md."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import quote

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

NAME = "MEM0"
ScoreKind = Literal["similarity", "distance", "unbounded"]


def mem0_user(tenant_id: str, user_id: str) -> str:
    """The Mem0 user id of a memstream (tenant, user)."""
    return namespaced(tenant_id, user_id)


def normalise_score(raw: object, kind: ScoreKind) -> float:
    """A Mem0 score as a relevance in [0, 1] (docs/design/mem0.md, "Scores")."""
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return 0.0
    value = float(raw)
    if value != value or value in (float("inf"), float("-inf")):
        return 0.0
    if kind == "distance":
        value = 1.0 - value
    elif kind == "unbounded":
        value = value / (1.0 + value) if value > 0 else 0.0
    return clamp01(value) or 0.0


def _results(body: Any) -> list[dict[str, Any]]:
    """``results`` of a Mem0 reply (older servers answer the bare list)."""
    if isinstance(body, dict):
        body = body.get("results")
    if not isinstance(body, list):
        raise ProviderCallFailed(
            f"Mem0 answered {type(body).__name__} instead of a list of results", retryable=False
        )
    if not all(isinstance(r, dict) for r in body):
        raise ProviderCallFailed("Mem0 answered a result that is not an object", retryable=False)
    return body


def _optional_object(body: Any) -> dict[str, Any] | None:
    if body is None:
        return None
    if not isinstance(body, dict):
        raise ProviderCallFailed(
            f"Mem0 answered {type(body).__name__} for a memory", retryable=False
        )
    return body


def _anything(body: Any) -> Any:
    return body


@dataclass(frozen=True, slots=True)
class _Scope:
    tenant_id: str
    user_id: str

    @property
    def mem0_user(self) -> str:
        return mem0_user(self.tenant_id, self.user_id)


class Mem0Provider:
    """``RemoteProvider`` on a Mem0 REST server."""

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
        score_kind: ScoreKind = "similarity",
        user_scope_overfetch: int = 3,
        list_limit: int = 1000,
        attempts: int = 3,
        search_attempts: int = 2,
        backoff_seconds: float = 0.1,
        concurrency: int = 8,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        headers = {"X-API-Key": api_key, "Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = ProviderHttp(
            NAME,
            base_url_of(base_url, "Mem0"),
            headers=headers,
            timeout=timeout,
            connect_timeout=connect_timeout,
            attempts=attempts,
            backoff_seconds=backoff_seconds,
            transport=transport,
        )
        self.write_timeout = write_timeout
        self.relativity = relativity
        self.score_kind: ScoreKind = score_kind
        self.user_scope_overfetch = max(1, user_scope_overfetch)
        self.list_limit = list_limit
        self.search_attempts = search_attempts
        self._gate = asyncio.Semaphore(concurrency)

    def __repr__(self) -> str:
        return f"Mem0Provider({self.http.base_url!r})"

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
        """Up to ``top_k`` memories per readable cube scoring at least the relativity
        threshold, sorted by score; raises ``ProviderUnavailable`` on any failure."""
        if top_k <= 0 or not query.strip():
            return []
        scope = _Scope(tenant_id, user_id)
        found = await asyncio.gather(
            *(self._search_cube(scope, cube, query, top_k) for cube in readable_cubes(agent_id))
        )
        items = [item for cube_items in found for item in cube_items]
        return sorted(items, key=lambda m: (-m.score, m.id))

    async def _search_cube(
        self, scope: _Scope, cube: str, query: str, top_k: int
    ) -> list[MemoryItem]:
        filters: dict[str, str] = {"user_id": scope.mem0_user}
        limit = top_k
        if cube == USER_PROFILE:
            limit = min(100, top_k * self.user_scope_overfetch)
        else:
            filters["agent_id"] = cube.removeprefix("agent_")
        body: dict[str, Any] = {"query": query, "filters": filters, "top_k": limit}
        if self.score_kind == "similarity":
            body["threshold"] = self.relativity
        results = await self.http.call(
            "search", "POST", "/search", _results, json=body, attempts=self.search_attempts
        )
        items: list[MemoryItem] = []
        for result in results:
            item = self._item(result, scope, scored=True)
            if item is not None and item.cube_id == cube and item.score >= self.relativity:
                items.append(item)
        items.sort(key=lambda m: (-m.score, m.id))
        return items[:top_k]

    def _item(self, result: Mapping[str, Any], scope: _Scope, *, scored: bool) -> MemoryItem | None:
        memory_id = result.get("id")
        if not isinstance(memory_id, str) or not memory_id:
            raise ProviderCallFailed("Mem0 answered a memory without an id", retryable=False)
        text = result.get("memory")
        if not isinstance(text, str):
            raise ProviderCallFailed(f"Mem0 memory {memory_id} has no text", retryable=False)
        if result.get("user_id") not in (None, scope.mem0_user):
            log.warning("Mem0 answered a memory of another user; ignored")
            return None
        if not text.strip():
            return None
        raw_metadata = result.get("metadata")
        metadata: dict[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
        agent = result.get("agent_id")
        cube = metadata.get("memstream_cube")
        if not isinstance(cube, str) or not cube:
            cube = agent_cube(agent) if isinstance(agent, str) and agent else USER_PROFILE
        declared = metadata.get("memory_type")
        memory_type: MemoryType = declared if declared in MEMORY_TYPES else "text_mem"
        events = metadata.get("source_event_ids")
        extra: dict[str, object] = {}
        if isinstance(metadata.get("memstream_key"), str):
            extra["memstream_key"] = metadata["memstream_key"]
        score = 1.0
        if scored:
            extra["raw_score"] = result.get("score")
            score = normalise_score(result.get("score"), self.score_kind)
        created = (
            parse_time(metadata.get("memstream_created_at"))
            or parse_time(result.get("created_at"))
            or parse_time(result.get("updated_at"))
        )
        occurred = parse_time(metadata.get("memstream_occurred_at"))
        return MemoryItem(
            id=memory_id,
            tenant_id=scope.tenant_id,
            user_id=scope.user_id,
            agent_id=agent if isinstance(agent, str) and agent else None,
            cube_id=cube,
            memory_type=memory_type,
            content=text,
            importance=importance_of(metadata.get("importance")),
            source_event_ids=tuple(str(e) for e in events) if isinstance(events, list) else (),
            created_at=created or datetime.fromtimestamp(0, UTC),
            score=round(score, 4),
            kind=kind_of(metadata.get("memstream_kind")),
            occurred_at=occurred,
            extra=extra,
        )

    # --- list ----------------------------------------------------------------------------

    async def _list_user(self, scope: _Scope) -> list[MemoryItem]:
        params = {"user_id": scope.mem0_user, "limit": str(self.list_limit)}
        results = await self.http.call("list", "GET", "/memories", _results, params=params)
        items = [self._item(r, scope, scored=False) for r in results]
        return [m for m in items if m is not None]

    async def list_live(
        self, tenant_id: str, user_id: str, agent_id: str | None
    ) -> list[MemoryItem]:
        """Every live memory of the readable cubes, newest first."""
        readable = set(readable_cubes(agent_id))
        listed = await self._list_user(_Scope(tenant_id, user_id))
        items = [m for m in listed if m.cube_id in readable]
        items.sort(key=lambda m: m.id)
        items.sort(key=lambda m: m.created_at, reverse=True)
        return items

    # --- add -----------------------------------------------------------------------------

    async def add(self, memories: Sequence[NewMemory]) -> list[MemoryItem]:
        """Store memories as they are (``infer: false``); content already in the cube is
        answered as it is, never added twice. Answers one item per input."""
        for memory in memories:
            validate_new(memory)
        listed: dict[tuple[str, str], list[MemoryItem]] = {}
        out: list[MemoryItem] = []
        for memory in memories:
            scope = _Scope(memory.tenant_id, memory.user_id)
            key = (memory.tenant_id, memory.user_id)
            if key not in listed:
                listed[key] = await self._list_user(scope)
            found = _same(listed[key], memory)
            if found is None:
                found = await self._add_one(scope, memory, listed)
                listed[key].append(found)
            out.append(found)
        return out

    async def _add_one(
        self,
        scope: _Scope,
        memory: NewMemory,
        listed: dict[tuple[str, str], list[MemoryItem]],
    ) -> MemoryItem:
        body: dict[str, Any] = {
            "messages": [{"role": "user", "content": memory.content}],
            "user_id": scope.mem0_user,
            "metadata": {
                "memstream_tenant": memory.tenant_id,
                "memstream_cube": memory.cube_id,
                "memstream_key": content_hash(memory.content),
                "memory_type": memory.memory_type,
                "importance": importance_of(memory.importance),
                "source_event_ids": list(memory.source_event_ids),
            },
            # Facts and episodes alike are stored as they are: memstream has extracted them.
            "infer": False,
        }
        # A memory without a kind reads back as a fact (also those written before kinds).
        if memory.kind != "fact":
            body["metadata"]["memstream_kind"] = memory.kind
        if memory.occurred_at is not None:
            body["metadata"]["memstream_occurred_at"] = time_text(memory.occurred_at)
        if memory.created_at is not None:  # an imported memory keeps when it was first stored
            body["metadata"]["memstream_created_at"] = time_text(memory.created_at)
        if memory.cube_id != USER_PROFILE:
            body["agent_id"] = memory.cube_id.removeprefix("agent_")

        async def written() -> MemoryItem | None:
            fresh = await self._list_user(scope)
            listed[(memory.tenant_id, memory.user_id)] = fresh
            return _same(fresh, memory)

        # Repeated after a failure only if the memory is still missing.
        results = await self.http.write_once(
            "add", "/memories", _results, json=body, seconds=self.write_timeout, written=written
        )
        if isinstance(results, MemoryItem):
            return results  # Mem0 has it: the failed add had happened
        added = [r for r in results if r.get("event", "ADD") == "ADD" and r.get("id")]
        if not added:
            raise ProviderUnavailable(
                f"Mem0 accepted an add but reported no added memory ({len(results)} results)"
            )
        first = added[0]
        memory_id = str(first["id"])
        text = first.get("memory")
        return MemoryItem(
            id=memory_id,
            tenant_id=memory.tenant_id,
            user_id=memory.user_id,
            agent_id=body.get("agent_id"),
            cube_id=memory.cube_id,
            memory_type=memory.memory_type,
            content=text if isinstance(text, str) and text.strip() else memory.content,
            importance=importance_of(memory.importance),
            source_event_ids=tuple(memory.source_event_ids),
            created_at=memory.created_at
            or parse_time(first.get("created_at"))
            or datetime.now(UTC),
            kind=memory.kind,
            occurred_at=parse_time(time_text(memory.occurred_at)),
            extra={"memstream_key": content_hash(memory.content)},
        )

    # --- delete --------------------------------------------------------------------------

    async def delete(self, tenant_id: str, ids: Sequence[str]) -> list[str]:
        """Delete memories of ``tenant_id`` by id (another tenant's id is left alone);
        answers the ids that were deleted."""
        wanted = sorted({i for i in ids if i})
        done = await asyncio.gather(*(self._delete_owned(tenant_id, i) for i in wanted))
        return [i for i, ok in zip(wanted, done, strict=True) if ok]

    async def _delete_owned(self, tenant_id: str, memory_id: str) -> bool:
        async with self._gate:
            try:
                found = await self.http.call(
                    "get", "GET", f"/memories/{_path(memory_id)}", _optional_object
                )
            except ProviderCallFailed as exc:
                if exc.status == 404:
                    return False
                raise
            owner = found.get("user_id") if found else None
            if not isinstance(owner, str) or _tenant_of_user(owner) != escape_part(tenant_id):
                return False
            return await self._delete_id(memory_id)

    async def _delete_id(self, memory_id: str) -> bool:
        try:
            await self.http.call("delete", "DELETE", f"/memories/{_path(memory_id)}", _anything)
        except ProviderCallFailed as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def delete_user(self, tenant_id: str, user_id: str) -> list[str]:
        """Forget a user: delete every memory of the namespaced user (all scopes)."""
        scope = _Scope(tenant_id, user_id)
        deleted: list[str] = []
        for _round in range(50):
            items = await self._list_user(scope)
            if not items:
                break

            async def one(memory_id: str) -> bool:
                async with self._gate:
                    return await self._delete_id(memory_id)

            ids = [m.id for m in items]
            done = await asyncio.gather(*(one(i) for i in ids))
            deleted += [i for i, ok in zip(ids, done, strict=True) if ok]
            if len(items) < self.list_limit or not any(done):
                break
        return deleted


def _same(items: Sequence[MemoryItem], memory: NewMemory) -> MemoryItem | None:
    key = content_hash(memory.content)
    wanted = fold_spaces_and_case(memory.content)
    for item in items:
        if item.cube_id == memory.cube_id and (
            item.extra.get("memstream_key") == key or fold_spaces_and_case(item.content) == wanted
        ):
            return replace(item, score=1.0)
    return None


def _path(memory_id: str) -> str:
    return quote(memory_id, safe="")


def _tenant_of_user(mem0_user_id: str) -> str | None:
    parts = mem0_user_id.split(":")
    return parts[0] if len(parts) == 2 else None
