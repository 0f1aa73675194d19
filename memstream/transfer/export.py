"""Reading memories out as JSON lines, a page at a time: the built-in store by keyset pages of
its table, MemOS and Mem0 one user's cube at a time (the users and cubes from the ledger and
the tenant's agents). Each page takes a connection of its own and gives it back before its
lines are written, so a slow reader holds no database connection between pages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from memstream.forget import providers_used
from memstream.memory import USER_PROFILE, MemoryItem, agent_cube, readable_cubes
from memstream.providers.router import ProviderRouter, provider_name
from memstream.store import exports
from memstream.store.memory_rows import item_of
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


def _state(memory_id: str, links: exports.Links) -> State:
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
    tenant = selection.tenant_id
    cubes = readable_cubes(selection.agent_id) if selection.agent_id is not None else None
    after: exports.Position | None = None
    emitted: set[str] = set()
    while True:
        async with engine.connect() as conn:
            rows = await exports.live_page(
                conn, tenant, page, user_id=selection.user_id, cubes=cubes, after=after
            )
            if not rows:
                return
            items = [item_of(r) for r in rows]
            ids = [i.id for i in items]
            older_items: list[tuple[MemoryItem, datetime | None]] = []
            if selection.history:
                older = [i for i in await exports.replaced(conn, tenant, ids) if i not in emitted]
                emitted.update(older)
                older_items = await exports.builtin_items(conn, tenant, older)
            links = await exports.links(conn, tenant, ids + [i.id for i, _ in older_items])
            keyed = await exports.keyed(conn, tenant, ids)
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
    links: exports.Links,
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
    rows = await exports.ledger_cubes(engine, selection.tenant_id, name, selection.user_id)
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
                        replaced = await exports.replaced(conn, tenant, ids)
                        older = [i for i in replaced if i not in emitted]
                        emitted.update(older)
                        older_items = await exports.ledger_items(conn, tenant, name, older)
                    links = await exports.links(conn, tenant, ids + [i.id for i, _ in older_items])
                    keyed = await exports.keyed(conn, tenant, ids)
                for item, deleted_at in older_items:
                    state = _state(item.id, links)
                    yield _line(item, name, links, state=state, deleted_at=deleted_at)
                for item in chunk:
                    yield _line(item, name, links, keyed=keyed.get(item.id))
