"""``memstream-mcp`` (and ``memstream mcp``): the memory tools over stdio, for a desktop or IDE
agent that starts the server itself. It talks to memstream's API only, with the key in
``MEMSTREAM_API_KEY`` (one of the API's ``MEMSTREAM_API_KEYS``; none for an API in open mode).

This module imports no MCP code until the server runs: ``memstream --help`` stays quick.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memstream_client.mcp.scope import Scope

API_KEY_VARIABLE = "MEMSTREAM_API_KEY"
NEEDS_THE_SDK = (
    "memstream-mcp needs the MCP SDK: pip install 'memstream-client[mcp]' (the mcp extra)"
)
DESCRIPTION = (
    "Serve memstream's memory tools (get_context, search_memory, add_memory, list_memories,"
    " delete_memory) to an MCP host over stdio, for one tenant, user and agent. The API key is"
    f" read from {API_KEY_VARIABLE}."
)
EXAMPLES = [
    "MEMSTREAM_API_KEY=key1 memstream-mcp --api-url http://memstream:8080 \\",
    "    --tenant-id acme --user-id u1 --agent-id travel",
    "memstream-mcp --tenant-id acme --user-id u1   # an API in open mode on 127.0.0.1:8080",
]


def _id(value: str) -> str:
    """An id as the API takes it: 1 to 128 characters, not all blank."""
    if not value.strip() or len(value) > 128:
        raise argparse.ArgumentTypeError(f"{value!r} is not an id (1 to 128 characters)")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of the command, for ``memstream-mcp`` and ``memstream mcp`` alike."""
    parser.add_argument(
        "--api-url",
        default="http://127.0.0.1:8080",
        metavar="URL",
        help="memstream's query API (default http://127.0.0.1:8080)",
    )
    parser.add_argument("--tenant-id", required=True, type=_id, metavar="T")
    parser.add_argument("--user-id", required=True, type=_id, metavar="U")
    parser.add_argument(
        "--agent-id",
        type=_id,
        metavar="A",
        help="the agent whose memories and provider to use (default: the user's profile only)",
    )
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="what goes to stderr (stdout is the protocol's)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Serve until the host closes stdin; 2 without the SDK."""
    from memstream_client.mcp.scope import Scope

    if importlib.util.find_spec("mcp") is None:
        print(NEEDS_THE_SDK, file=sys.stderr)
        return 2
    # stdout carries the protocol: every log line goes to stderr, set before the SDK's own.
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    scope = Scope(args.tenant_id, args.user_id, args.agent_id)
    key = os.environ.get(API_KEY_VARIABLE, "").strip() or None
    asyncio.run(_serve(args.api_url, key, scope, args.log_level))
    return 0


async def _serve(url: str, key: str | None, scope: Scope, log_level: str) -> None:
    from mcp.server.mcpserver import Context

    from memstream_client import AsyncClient
    from memstream_client.mcp.scope import Memory
    from memstream_client.mcp.tools import memory_server

    async with AsyncClient(url, api_key=key) as api:
        memory = Memory(api, scope)

        @asynccontextmanager
        async def fixed(_: Context) -> AsyncIterator[Memory]:
            yield memory

        await memory_server(fixed, log_level=log_level).run_stdio_async()


def parser() -> argparse.ArgumentParser:
    return add_arguments(
        argparse.ArgumentParser(
            prog="memstream-mcp",
            description=DESCRIPTION,
            epilog="examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )


def main(argv: list[str] | None = None) -> int:
    return main_with(parser().parse_args(argv))


def main_with(args: argparse.Namespace) -> int:
    """Run the parsed command: 130 when interrupted."""
    try:
        return run(args)
    except KeyboardInterrupt:
        return 130
