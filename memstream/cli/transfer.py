"""``memstream export`` and ``memstream import``: memories out as JSON lines, and back in
through an agent's provider (``memstream.transfer``)."""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack
from pathlib import Path

from memstream.providers.router import ProviderRouter
from memstream.settings import Settings
from memstream.store.database import create_engine, migrate
from memstream.transfer.export import Selection as Selection
from memstream.transfer.export import export_lines
from memstream.transfer.load import ImportReport, import_file


async def export(settings: Settings, selection: Selection, output: Path | None) -> int:
    """Write the selected memories to ``output`` (stdout when None); answers how many lines."""
    engine = create_engine(settings.database_url, pool_size=1)
    router = ProviderRouter(engine, settings)
    written = 0
    try:
        async with AsyncExitStack() as stack:
            sink = (
                stack.enter_context(output.open("wb")) if output is not None else sys.stdout.buffer
            )
            async for line in export_lines(router, engine, selection):
                sink.write(line)
                written += 1
            sink.flush()
    finally:
        await router.close()
        await engine.dispose()
    return written


async def import_(
    settings: Settings, path: Path, tenant_id: str, agent_id: str, *, progress: bool = True
) -> ImportReport:
    """Import ``path`` into the tenant through the agent's provider (the schema first: an
    empty database is a place to import into)."""
    await migrate(settings.database_url)
    engine = create_engine(settings.database_url, pool_size=1)
    router = ProviderRouter(engine, settings, config_cache_seconds=0)
    try:
        return await import_file(router, engine, path, tenant_id, agent_id, progress=progress)
    finally:
        await router.close()
        await engine.dispose()
