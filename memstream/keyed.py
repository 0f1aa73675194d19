"""Memories stored under a key their writer chose, with a JSON value (a LangGraph store's
items, ``/v1/items``): the value's text is a memory of the agent's provider, searchable like
any other; putting a new value under the key supersedes that memory (history and
``memory-changed`` see it); a value put again unchanged is left as it is."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memstream.changes.model import Cause
from memstream.memory import MemoryItem, MemoryType, NewMemory, readable_cubes
from memstream.providers.router import ProviderRouter
from memstream.store import keys

Namespace = tuple[str, ...]
MAX_TEXT = 2000  # what a memory added through the API may hold


@dataclass(frozen=True, slots=True)
class KeyedItem:
    """An item: its namespace (below the user), key, value and the memory holding its text;
    ``score`` is set by a search. A memory the chain learned has its id as key and no slot."""

    namespace: Namespace
    key: str
    value: dict[str, Any]
    memory_id: str
    cube_id: str
    created_at: datetime
    updated_at: datetime
    score: float | None = None


def slot_of(namespace: Sequence[str], key: str) -> str:
    """The primary key of an item of one user: namespace and key are free text."""
    return hashlib.sha256(orjson.dumps([list(namespace), key])).hexdigest()


def path_of(namespace: Sequence[str]) -> str:
    """The namespace as one text whose prefixes are its parents' (``a/b/`` under ``a/``)."""
    return "".join(part.replace("\\", "\\\\").replace("/", "\\/") + "/" for part in namespace)


def text_of(value: Mapping[str, Any]) -> str:
    """The searchable text of a value: its strings, depth first (a ``content`` first), else
    the value as JSON; cut to what a memory holds."""
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, str):
            if node.strip():
                found.append(node.strip())
        elif isinstance(node, Mapping):
            names = sorted(node, key=lambda k: (k != "content", str(k)))
            for k in names:
                walk(node[k])
        elif isinstance(node, list | tuple):
            for child in node:
                walk(child)

    walk(value)
    text = "\n".join(found) or orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    return text[:MAX_TEXT]


def check_text(*texts: str) -> None:
    """Raise ``ValueError`` for text no database column holds (a lone surrogate)."""
    for text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"not valid Unicode text: {exc.reason}") from None


def value_text(value: Mapping[str, Any]) -> str:
    """The value as stored JSON; ``ValueError`` for one JSON cannot keep (an integer past 64
    bits, a lone surrogate)."""
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError as exc:
        raise ValueError(f"the value cannot be stored as JSON: {exc}") from None


OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


def check_filter(wanted: Mapping[str, Any] | None) -> None:
    """Raise ``ValueError`` for a filter naming an operator LangGraph's filters do not have."""
    for condition in (wanted or {}).values():
        if isinstance(condition, Mapping):
            unknown = [op for op in condition if str(op).startswith("$") and op not in OPERATORS]
            if unknown:
                raise ValueError(f"unknown filter operator {unknown[0]!r}: use {sorted(OPERATORS)}")


def matches(value: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    """LangGraph's filter: each field equal, or ``{"$eq"|"$ne"|"$gt"|"$gte"|"$lt"|"$lte": x}``."""
    for field, condition in (wanted or {}).items():
        have = value.get(field)
        if (
            isinstance(condition, Mapping)
            and condition
            and all(str(op).startswith("$") for op in condition)
        ):
            for op, operand in condition.items():
                if not _compare(str(op), have, operand):
                    return False
        elif have != condition:
            return False
    return True


def _compare(op: str, have: Any, operand: Any) -> bool:
    if op == "$eq":
        return bool(have == operand)
    if op == "$ne":
        return bool(have != operand)
    try:
        if op == "$gt":
            return bool(have > operand)
        if op == "$gte":
            return bool(have >= operand)
        if op == "$lt":
            return bool(have < operand)
        if op == "$lte":
            return bool(have <= operand)
    except TypeError:
        return False
    raise ValueError(f"unknown filter operator {op!r}")


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _item(row: Any, score: float | None = None) -> KeyedItem:
    return KeyedItem(
        namespace=tuple(row.namespace),
        key=row.item_key,
        value=orjson.loads(row.value),
        memory_id=row.memory_id,
        cube_id=row.cube_id,
        created_at=_utc(row.created_at),
        updated_at=_utc(row.updated_at),
        score=score,
    )


def plain(memory: MemoryItem) -> KeyedItem:
    """A memory stored without a key (the chain's, the API's) as an item of the root."""
    value = {
        "content": memory.content,
        "kind": memory.kind,
        "memory_type": memory.memory_type,
        "cube_id": memory.cube_id,
    }
    return KeyedItem(
        namespace=(),
        key=memory.id,
        value=value,
        memory_id=memory.id,
        cube_id=memory.cube_id,
        created_at=memory.created_at,
        updated_at=memory.created_at,
        score=memory.score,
    )


async def live_ids(conn: AsyncConnection, tenant_id: str, rows: Sequence[Any]) -> set[str]:
    """The memories of the key ``rows`` the record still has live."""
    return await keys.live_ids(conn, tenant_id, [r.memory_id for r in rows])


class KeyedItems:
    """Items of users through their agent's provider, keyed in ``memory_key``."""

    def __init__(self, router: ProviderRouter, engine: AsyncEngine) -> None:
        self.router = router
        self.engine = engine

    async def _row(self, conn: AsyncConnection, tenant_id: str, user_id: str, slot: str) -> Any:
        return await keys.row_of(conn, tenant_id, user_id, slot)

    async def get(
        self, tenant_id: str, user_id: str, namespace: Sequence[str], key: str
    ) -> KeyedItem | None:
        async with self.engine.connect() as conn:
            row = await self._row(conn, tenant_id, user_id, slot_of(namespace, key))
            if row is None or row.memory_id not in await live_ids(conn, tenant_id, [row]):
                return None
        return _item(row)

    async def put(
        self,
        tenant_id: str,
        user_id: str,
        agent_id: str | None,
        cube_id: str,
        namespace: Sequence[str],
        key: str,
        value: dict[str, Any],
        *,
        memory_type: MemoryType = "text_mem",
        importance: int = 5,
    ) -> KeyedItem:
        """Store ``value`` under ``key``: a new memory superseding the one the key held;
        ``ValueError`` for a key, namespace or value that cannot be stored."""
        check_text(key, *namespace)
        stored_value = value_text(value)
        slot = slot_of(namespace, key)
        async with self.engine.connect() as conn:
            old = await self._row(conn, tenant_id, user_id, slot)
            if old is not None and old.memory_id not in await live_ids(conn, tenant_id, [old]):
                old = None
        if old is not None and orjson.loads(old.value) == value and old.cube_id == cube_id:
            return _item(old)
        provider = await self.router.for_agent(tenant_id, agent_id)
        memory = NewMemory(
            tenant_id=tenant_id,
            user_id=user_id,
            agent_id=agent_id,
            cube_id=cube_id,
            memory_type=memory_type,
            content=text_of(value),
            importance=importance,
            supersedes=(old.memory_id,) if old is not None else (),
        )
        (stored,) = await provider.add([memory])
        now = _now()
        row = {
            "tenant_id": tenant_id,
            "user_id": user_id,
            "slot": slot,
            "namespace": list(namespace),
            "path": path_of(namespace),
            "item_key": key,
            "cube_id": cube_id,
            "provider": provider.name,
            "memory_id": stored.id,
            "value": stored_value,
            "created_at": old.created_at if old is not None else now,
            "updated_at": now,
        }
        async with self.engine.begin() as conn:
            await keys.put(conn, [row])
        if old is not None and old.memory_id != stored.id:
            cause = Cause("conflict", None, {old.memory_id: (stored.id,)})
            await self._release(tenant_id, old.provider, old.memory_id, cause)
        async with self.engine.connect() as conn:
            fresh = await self._row(conn, tenant_id, user_id, slot)
        return _item(fresh)

    async def delete(
        self, tenant_id: str, user_id: str, namespace: Sequence[str], key: str
    ) -> list[str]:
        """Delete the item and its memory; answers the memory ids deleted."""
        slot = slot_of(namespace, key)
        async with self.engine.begin() as conn:
            row = await self._row(conn, tenant_id, user_id, slot)
            if row is None:
                return []
            await keys.drop(conn, tenant_id, user_id, slot)
        return await self._release(tenant_id, row.provider, row.memory_id, None)

    async def _release(
        self, tenant_id: str, provider: str, memory_id: str, cause: Cause | None
    ) -> list[str]:
        """Delete a memory no key holds any more (two keys with the same text share one)."""
        async with self.engine.connect() as conn:
            held = await keys.holders(conn, tenant_id, memory_id)
        if held:
            return []
        if provider == "MYSQL":
            # A value superseded keeps its text, the record of what was once known; one the
            # user deleted loses it.
            if cause is None:
                return await self.router.builtin.delete(tenant_id, [memory_id], erase=True)
            return await self.router.builtin.delete(tenant_id, [memory_id], cause=cause)
        target = self.router.named(provider)  # type: ignore[arg-type]
        if cause is None:
            return await target.delete(tenant_id, [memory_id])
        return await target.delete(tenant_id, [memory_id], cause=cause)

    async def listing(
        self,
        tenant_id: str,
        user_id: str,
        agent_id: str | None,
        prefix: Sequence[str],
        *,
        wanted: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[KeyedItem]:
        """Items under ``prefix``, newest first; at the root, the memories stored without a
        key (the chain's) follow the keyed ones."""
        cubes = readable_cubes(agent_id)
        path = path_of(prefix) if prefix else None
        async with self.engine.connect() as conn:
            rows = await keys.under(conn, tenant_id, user_id, cubes, path)
            live = await live_ids(conn, tenant_id, rows)
        items = [_item(r) for r in rows if r.memory_id in live]
        if not prefix:
            provider = await self.router.for_agent(tenant_id, agent_id)
            keyed = {r.memory_id for r in rows}
            for memory in await provider.list_live(tenant_id, user_id, agent_id):
                if memory.id not in keyed:
                    items.append(plain(memory))
        items = [i for i in items if matches(i.value, wanted)]
        return items[offset : offset + limit]

    async def search(
        self,
        tenant_id: str,
        user_id: str,
        agent_id: str | None,
        prefix: Sequence[str],
        query: str,
        *,
        wanted: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[KeyedItem]:
        """Items by relevance to ``query`` (the provider's search): keyed ones under
        ``prefix``, and at the root the memories stored without a key too."""
        provider = await self.router.for_agent(tenant_id, agent_id)
        top_k = min(100, max(1, limit + offset) * 2)
        found = await provider.search(tenant_id, user_id, agent_id, query, top_k=top_k)
        ids = [m.id for m in found]
        async with self.engine.connect() as conn:
            rows = await keys.holding(conn, tenant_id, user_id, ids)
        by_memory: dict[str, list[Any]] = {}
        for row in rows:
            by_memory.setdefault(row.memory_id, []).append(row)
        want = path_of(prefix)
        items: list[KeyedItem] = []
        for memory in sorted(found, key=lambda m: -m.score):
            held = by_memory.get(memory.id)
            if held:
                items += [_item(r, memory.score) for r in held if str(r.path).startswith(want)]
            elif not prefix:
                items.append(plain(memory))
        items = [i for i in items if matches(i.value, wanted)]
        return items[offset : offset + limit]

    async def namespaces(
        self, tenant_id: str, user_id: str | None = None
    ) -> list[tuple[str, Namespace]]:
        """(user, namespace) of every keyed item of the tenant (or of one user)."""
        async with self.engine.connect() as conn:
            rows = await keys.namespaces(conn, tenant_id, user_id)
        return sorted({(r.user_id, tuple(r.namespace)) for r in rows})
