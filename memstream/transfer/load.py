"""``memstream import``: exported lines written through the provider an agent is routed to.

Idempotent: a memory whose text its cube already holds is not written again (each provider
keeps one memory per text and cube anyway; the check first makes the count exact and spares
the writes). Times are kept (``created_at``, ``occurred_at``): ordering and retention read
them. History lines (``state`` other than ``live``) are not memories to bring back."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson
from sqlalchemy.ext.asyncio import AsyncEngine
from tqdm import tqdm

from memstream.changes.model import API
from memstream.errors import MemstreamError
from memstream.identity import content_hash
from memstream.keyed import path_of, slot_of
from memstream.memory import USER_PROFILE, NewMemory
from memstream.providers.base import LongTermProvider
from memstream.providers.router import ProviderRouter
from memstream.store import keys
from memstream.transfer.lines import BadLine, MemoryLine, new_memory, parse_line

BATCH = 100  # memories per write


@dataclass
class ImportReport:
    added: int = 0
    present: int = 0  # already in their cube: left as they were
    history: int = 0  # lines of what a memory replaced: not imported
    bad_lines: list[tuple[int, str]] = field(default_factory=list)
    provider: str = ""
    # Why writing stopped (the provider failed), and the last line read before: the lines
    # after it were not imported; importing the file again finishes the work.
    stopped: str | None = None

    def summary(self) -> str:
        return (
            f"imported {self.added} memories into {self.provider}, {self.present} already there,"
            f" {self.history} history lines not imported, {len(self.bad_lines)} bad lines skipped"
        )


def read_lines(source: IO[bytes], report: ImportReport) -> Iterator[tuple[int, MemoryLine]]:
    """The good lines of ``source`` with their numbers; the bad ones go to ``report``."""
    for number, raw in enumerate(source, start=1):
        raw = raw.rstrip(b"\r\n")
        if not raw.strip():
            continue
        try:
            yield number, parse_line(raw)
        except BadLine as exc:
            report.bad_lines.append((number, str(exc)))


class Importer:
    """Writes lines through one provider, knowing what each user's cubes hold already."""

    def __init__(
        self, router: ProviderRouter, engine: AsyncEngine, tenant_id: str, agent_id: str
    ) -> None:
        self.router = router
        self.engine = engine
        self.tenant_id = tenant_id
        self.agent_id = agent_id
        self._held: dict[tuple[str, str], set[str]] = {}  # (user, cube) -> content hashes

    async def provider(self) -> LongTermProvider:
        return await self.router.for_agent(self.tenant_id, self.agent_id)

    async def _holds(self, provider: LongTermProvider, user_id: str, cube_id: str) -> set[str]:
        key = (user_id, cube_id)
        if key not in self._held:
            agent = None if cube_id == USER_PROFILE else cube_id.removeprefix("agent_")
            listed = await provider.list_live(self.tenant_id, user_id, agent)
            for item in listed:
                self._held.setdefault((user_id, item.cube_id), set()).add(
                    content_hash(item.content)
                )
            self._held.setdefault(key, set())
        return self._held[key]

    async def write(self, lines: Sequence[MemoryLine], report: ImportReport) -> None:
        provider = await self.provider()
        report.provider = provider.name
        wanted: list[tuple[MemoryLine, NewMemory]] = []
        for line in lines:
            if line.state != "live":
                report.history += 1
                continue
            memory = new_memory(line, self.tenant_id)
            held = await self._holds(provider, memory.user_id, memory.cube_id)
            digest = content_hash(memory.content)
            if digest in held:
                report.present += 1
                continue
            held.add(digest)
            wanted.append((line, memory))
        if not wanted:
            return
        stored = await provider.add([m for _, m in wanted], cause=API)
        report.added += len(wanted)
        keyed = [(line, item) for (line, _), item in zip(wanted, stored, strict=True) if line.key]
        if keyed:
            await self._keep_keys(provider.name, keyed)

    async def _keep_keys(self, provider: str, keyed: Sequence[tuple[MemoryLine, Any]]) -> None:
        """An item stored under a key gets its key and value back."""
        rows = []
        for line, item in keyed:
            namespace = list(line.namespace or [])
            assert line.key is not None
            rows.append(
                {
                    "tenant_id": self.tenant_id,
                    "user_id": line.user_id,
                    "slot": slot_of(namespace, line.key),
                    "namespace": namespace,
                    "path": path_of(namespace),
                    "item_key": line.key,
                    "cube_id": line.cube_id,
                    "provider": provider,
                    "memory_id": item.id,
                    "value": orjson.dumps(line.value or {}).decode(),
                    "created_at": line.created_at.replace(tzinfo=None),
                    "updated_at": line.created_at.replace(tzinfo=None),
                }
            )
        async with self.engine.begin() as conn:
            await keys.put(conn, rows)


def count_lines(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(1 for _ in fh)


async def import_file(
    router: ProviderRouter,
    engine: AsyncEngine,
    path: Path,
    tenant_id: str,
    agent_id: str,
    *,
    progress: bool = True,
) -> ImportReport:
    """Import every good line of ``path`` into ``tenant_id`` through ``agent_id``'s provider."""
    report = ImportReport()
    importer = Importer(router, engine, tenant_id, agent_id)
    report.provider = (await importer.provider()).name
    total = count_lines(path)
    bar = tqdm(total=total, unit="line", disable=not progress, desc="import")
    batch: list[MemoryLine] = []
    number = 0
    try:
        with path.open("rb") as source:
            for number, line in read_lines(source, report):
                batch.append(line)
                if len(batch) >= BATCH:
                    await importer.write(batch, report)
                    batch.clear()
                    bar.update(number - bar.n)
            await importer.write(batch, report)
        bar.update(total - bar.n)
    except MemstreamError as exc:
        report.stopped = f"stopped at line {number}: {exc}"
    finally:
        bar.close()
    return report
