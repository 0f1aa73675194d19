"""Outages on demand: a proxy in front of a real service that a test can cut and restore."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy.engine import make_url

from memstream.settings import Settings
from tests.support.settings import free_port, isolated_settings


async def proxied_database(base: Settings, **overrides: Any) -> tuple[TcpProxy, Settings]:
    """Settings whose database goes through a proxy the test can cut (an outage) and restore."""
    url = make_url(base.database_url)
    proxy = await TcpProxy(url.port or 3306).start()
    through = url.set(host="127.0.0.1", port=proxy.port).render_as_string(False)
    return proxy, isolated_settings(database_url=through, **overrides)


class TcpProxy:
    """A loopback TCP proxy to a real service; closing it is an outage, reopening a recovery."""

    def __init__(self, target_port: int, port: int | None = None) -> None:
        self.target_port = target_port
        self.port = port or free_port()
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.StreamWriter] = set()

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        return self

    async def stop(self) -> None:
        """Refuse new connections and cut every open one."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._pipes):
            writer.close()
        self._pipes.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self._pipes |= {writer, up_writer}
        await asyncio.gather(
            self._pump(reader, up_writer), self._pump(up_reader, writer), return_exceptions=True
        )

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()
            self._pipes.discard(writer)
