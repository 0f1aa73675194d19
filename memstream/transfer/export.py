"""Reading memories out as JSON lines, a page at a time: the built-in store by keyset pages of
its table, MemOS and Mem0 one user's cube at a time (the users and cubes from the ledger and
the tenant's agents). Each page takes a connection of its own and gives it back before its
lines are written, so a slow reader holds no database connection between pages."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import and_, literal, or_, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memstream.changes.history import MAX_CHAIN
from memstream.forget import providers_used
from memstream.memory import USER_PROFILE, MemoryItem, agent_cube, readable_cubes
from memstream.providers.builtin.sql import COLUMNS, item_of
from memstream.providers.router import ProviderRouter, provider_name
from memstream.store.database import in_lists
from memstream.store.schema import long_term_memory, memory_key, memory_link, provider_memory
from memstream.transfer.lines import State, line_of

PAGE = 500  # memories per page


@dataclass(frozen=True, slots=True)
class Selection:
    """Whose memories: a tenant's, one user's, those an agent reads (its provider, the
    user's profile and its own cube); with ``history``, what each replaced too."""

    tenant_id: str
    user_id: str | None = None
    agent_id: str | None = None
    history: bool = False


@dataclass(slots=True)
class _Links:
    supersedes: dict[str, list[str]]
    superseded_by: dict[str, list[str]]


async def _links(conn: AsyncConnection, tenant_id: str, ids: Sequence[str]) -> _Links:
    link = memory_link.c
    out = _Links({}, {})
    if not ids:
        return out
    query = select(link.memory_id, link.supersedes_id).where(
        link.tenant_id == tenant_id,
        or_(link.memory_id.in_(ids), link.supersedes_id.in_(ids)),
    )
    for row in (await conn.execute(query)).all():
        out.supersedes.setdefault(row.memory_id, []).append(row.supersedes_id)
        out.superseded_by.setdefault(row.supersedes_id, []).append(row.memory_id)
    return out


async def _older(conn: AsyncConnection, tenant_id: str, ids: Sequence[str]) -> list[str]:
    """Every memory ``ids`` replaced, directly or through others, oldest last (bounded)."""
    link = memory_link.c
    seen: set[str] = set(ids)
    frontier, found = list(ids), list[str]()
    while frontier and len(found) < MAX_CHAIN:
        query = select(link.supersedes_id).where(
            link.tenant_id == tenant_id, link.memory_id.in_(frontier)
        )
        frontier = [i for i in (await conn.execute(query)).scalars() if i not in seen]
        seen.update(frontier)
        found += frontier
    return found[:MAX_CHAIN]


async def _keyed(
    conn: AsyncConnection, tenant_id: str, ids: Sequence[str]
) -> dict[str, tuple[list[str], str, dict[str, Any]]]:
    """The namespace, key and value of the memories among ``ids`` held under a key."""
    k = memory_key.c
    if not ids:
        return {}
    query = select(k.memory_id, k.namespace, k.item_key, k.value).where(
        k.tenant_id == tenant_id, k.memory_id.in_(ids)
    )
    return {
        r.memory_id: (list(r.namespace), r.item_key, orjson.loads(r.value))
        for r in (await conn.execute(query)).all()
    }


def _state(memory_id: str, links: _Links) -> State:
    return "superseded" if links.superseded_by.get(memory_id) else "deleted"


async def export_lines(
    router: ProviderRouter, engine: AsyncEngine, selection: Selection, *, page: int = PAGE
) -> AsyncIterator[bytes]:
    """The JSON lines of the selected memories: each provider's in turn, within one oldest
    first; with history, the memories a page replaced come before it."""
    if selection.agent_id is not None:
        names = [provider_name(await router.config(selection.tenant_id, selection.agent_id))]
    else:
        names = ["MYSQL", *await providers_used(engine, selection.tenant_id)]
    for name in names:
        source = _builtin if name == "MYSQL" else _external
        async for line in source(router, engine, selection, name, page):
            yield line


async def _builtin(
    router: ProviderRouter, engine: AsyncEngine, selection: Selection, name: str, page: int
) -> AsyncIterator[bytes]:
    m = long_term_memory.c
    tenant = selection.tenant_id
    scope = [m.tenant_id == tenant, m.deleted_at.is_(None)]
    if selection.user_id is not None:
        scope.append(m.user_id == selection.user_id)
    if selection.agent_id is not None:
        scope.append(m.cube_id.in_(readable_cubes(selection.agent_id)))
    after: tuple[str, datetime, str] | None = None
    emitted: set[str] = set()
    while True:
        query = select(*COLUMNS).where(*scope).order_by(m.user_id, m.created_at, m.id).limit(page)
        if after is not None:
            query = query.where(
                tuple_(m.user_id, m.created_at, m.id) > tuple_(*map(literal, after))
            )
        async with engine.connect() as conn:
            rows = (await conn.execute(query)).all()
            if not rows:
                return
            items = [item_of(r) for r in rows]
            ids = [i.id for i in items]
            older_items: list[tuple[MemoryItem, datetime | None]] = []
            if selection.history:
                older = [i for i in await _older(conn, tenant, ids) if i not in emitted]
                emitted.update(older)
                for chunk in in_lists(older):
                    found = await conn.execute(
                        select(*COLUMNS, m.deleted_at).where(m.tenant_id == tenant, m.id.in_(chunk))
                    )
                    older_items += [(item_of(r), r.deleted_at) for r in found.all()]
            links = await _links(conn, tenant, ids + [i.id for i, _ in older_items])
            keyed = await _keyed(conn, tenant, ids)
        last = rows[-1]
        after = (last.user_id, last.created_at, last.id)
        older_items.sort(key=lambda pair: (pair[0].created_at, pair[0].id))
        for item, deleted_at in older_items:
            yield _line(item, name, links, state=_state(item.id, links), deleted_at=deleted_at)
        for item in items:
            yield _line(item, name, links, keyed=keyed.get(item.id))
        if len(rows) < page:
            return


def _line(
    item: MemoryItem,
    provider: str,
    links: _Links,
    *,
    state: State = "live",
    deleted_at: datetime | None = None,
    keyed: tuple[list[str], str, dict[str, Any]] | None = None,
) -> bytes:
    return line_of(
        item,
        provider,
        state=state,
        deleted_at=deleted_at,
        supersedes=links.supersedes.get(item.id, []),
        superseded_by=links.superseded_by.get(item.id, []),
        keyed=keyed,
    )


async def _cubes_of(
    router: ProviderRouter, engine: AsyncEngine, selection: Selection, name: str
) -> list[tuple[str, list[str]]]:
    """(user, cubes) to read from an external provider: the ledger's, and for one user the
    cubes of the tenant's agents too (a memory memstream did not write is in no ledger)."""
    if selection.agent_id is not None:
        wanted: list[str] | None = readable_cubes(selection.agent_id)
    else:
        wanted = None
    p = provider_memory.c
    query = (
        select(p.user_id, p.cube_id)
        .distinct()
        .where(p.tenant_id == selection.tenant_id, p.provider == name, p.deleted_at.is_(None))
    )
    if selection.user_id is not None:
        query = query.where(p.user_id == selection.user_id)
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    cubes: dict[str, set[str]] = {}
    for row in rows:
        cubes.setdefault(row.user_id, set()).add(row.cube_id)
    if selection.user_id is not None:
        mine = cubes.setdefault(selection.user_id, set())
        mine.add(USER_PROFILE)
        for agent, provider in await router.tenant_agents(selection.tenant_id):
            if (provider or "MYSQL") == name:
                mine.add(agent_cube(agent))
    return [
        (user, sorted(c for c in found if wanted is None or c in wanted))
        for user, found in sorted(cubes.items())
    ]


async def _external(
    router: ProviderRouter, engine: AsyncEngine, selection: Selection, name: str, page: int
) -> AsyncIterator[bytes]:
    provider = router.named(name)  # type: ignore[arg-type]
    tenant = selection.tenant_id
    emitted: set[str] = set()
    for user, cubes in await _cubes_of(router, engine, selection, name):
        for cube in cubes:
            agent = None if cube == USER_PROFILE else cube.removeprefix("agent_")
            listed = await provider.list_live(tenant, user, agent)
            items = sorted(
                (i for i in listed if i.cube_id == cube and i.id not in emitted),
                key=lambda i: (i.created_at, i.id),
            )
            emitted.update(i.id for i in items)
            for start in range(0, len(items), page):
                chunk = items[start : start + page]
                ids = [i.id for i in chunk]
                older_items: list[tuple[MemoryItem, datetime | None]] = []
                async with engine.connect() as conn:
                    if selection.history:
                        older = [i for i in await _older(conn, tenant, ids) if i not in emitted]
                        emitted.update(older)
                        older_items = await _ledger_rows(conn, tenant, name, older)
                    links = await _links(conn, tenant, ids + [i.id for i, _ in older_items])
                    keyed = await _keyed(conn, tenant, ids)
                for item, deleted_at in older_items:
                    state = _state(item.id, links)
                    yield _line(item, name, links, state=state, deleted_at=deleted_at)
                for item in chunk:
                    yield _line(item, name, links, keyed=keyed.get(item.id))


async def _ledger_rows(
    conn: AsyncConnection, tenant_id: str, provider: str, ids: Sequence[str]
) -> list[tuple[MemoryItem, datetime | None]]:
    """What the ledger kept of memories an external provider no longer has (their text, if
    it was superseded rather than deleted by a user)."""
    p = provider_memory.c
    out: list[tuple[MemoryItem, datetime | None]] = []
    for chunk in in_lists(list(ids)):
        query = select(provider_memory).where(
            and_(p.tenant_id == tenant_id, p.provider == provider, p.memory_id.in_(chunk))
        )
        for row in (await conn.execute(query)).all():
            if not row.content:
                continue
            created = row.created_at.replace(tzinfo=UTC)
            item = MemoryItem(
                id=row.memory_id,
                tenant_id=row.tenant_id,
                user_id=row.user_id,
                agent_id=row.agent_id,
                cube_id=row.cube_id,
                memory_type=row.memory_type,
                content=row.content,
                importance=int(row.importance),
                source_event_ids=(),
                created_at=created,
            )
            out.append((item, row.deleted_at))
    out.sort(key=lambda pair: (pair[0].created_at, pair[0].id))
    return out
