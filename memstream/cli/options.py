"""What every ``memstream`` command shares: ``-b/--bootstrap-servers``, ``--version`` and
examples at the end of its help."""

from __future__ import annotations

import argparse
from importlib import metadata
from typing import Any

DESCRIPTION = """\
memstream, the memory layer for multi-agent platforms: a Kafka stream processor for short-
and long-term agent memory. Settings are MEMSTREAM_* environment variables (a .env file is
read too); the options below override them."""

EXAMPLES: dict[str, list[str]] = {
    "": [
        "memstream dev                      # everything on this machine, for a first try",
        "memstream worker -b kafka:9092     # the stream worker on your Kafka",
        "memstream publish --help           # a command's own options and examples",
    ],
    "worker": [
        "memstream worker",
        "memstream worker -b kafka-1:9092,kafka-2:9092",
        "memstream worker --stages history           # ingest only, scaled on its own",
        "memstream worker --stages summary,longterm  # the CPU-heavy roles elsewhere",
        "MEMSTREAM_WORKER_WEB_PORT=6067 memstream worker   # a second worker on this host",
    ],
    "api": [
        "memstream api",
        "MEMSTREAM_API_KEYS=key1:acme MEMSTREAM_API_HOST=0.0.0.0 memstream api",
    ],
    "migrate": [
        "memstream migrate",
        "MEMSTREAM_DATABASE_URL=sqlite+aiosqlite:///var/memstream.db memstream migrate",
    ],
    "dev": [
        "memstream dev                     # bundled broker on 127.0.0.1:19092, SQLite in var/dev/",
        "memstream dev -b 127.0.0.1:9092   # your own Kafka instead of the bundled broker",
    ],
    "mcp": [
        "MEMSTREAM_API_KEY=key1 memstream mcp --api-url http://memstream:8080 --tenant-id acme"
        " --user-id u1 --agent-id travel",
        "memstream mcp --tenant-id acme --user-id u1   # an API in open mode on 127.0.0.1:8080",
    ],
    "publish": [
        "memstream publish -b 127.0.0.1:19092 chat.jsonl --topic message-written",
        "memstream publish ends.jsonl --topic session-ended",
        "memstream publish odd.jsonl --topic message-written --no-validate",
    ],
    "replay": [
        "memstream replay --topic message-written --to earliest",
        "memstream replay --topic session-ended --to 2026-03-01T00:00:00Z",
    ],
    "redrive": [
        "memstream redrive --dry-run",
        "memstream redrive --reason retries_exhausted --since 2026-03-01T00:00:00Z",
    ],
    "dead-letters": [
        "memstream dead-letters",
        "memstream dead-letters --reason schema_violation --limit 50",
    ],
    "changes": [
        "memstream changes --follow",
        "memstream changes --follow --tenant-id acme --user-id u1",
        "memstream changes --tenant-id acme --since 2026-03-01T00:00:00Z --json",
    ],
    "export": [
        "memstream export --tenant-id acme -o acme.jsonl",
        "memstream export --tenant-id acme --user-id u1 --history",
    ],
    "import": [
        "memstream import acme.jsonl --tenant-id acme --agent-id travel",
    ],
}


def version() -> str:
    try:
        return metadata.version("memstream")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def program_parser() -> argparse.ArgumentParser:
    """The top-level parser, its commands still to be added."""
    parser = argparse.ArgumentParser(
        prog="memstream",
        description=DESCRIPTION,
        epilog=_examples(""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_shared(parser)
    return parser


def with_shared_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give every command of ``parser`` the shared options and its examples; a command's
    one-line help becomes the description of its own help when it has none."""
    commands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for action in commands:
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        for name, command in action.choices.items():
            _add_shared(command)
            summary = helps.get(name, "")
            if command.description is None and summary:
                command.description = f"{summary[0].upper()}{summary[1:]}."
            command.epilog = _examples(name) if name in EXAMPLES else None
            command.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the command line sets, to build ``Settings`` with."""
    servers = getattr(args, "bootstrap_servers", None)
    return {} if servers is None else {"kafka_bootstrap_servers": servers}


def _add_shared(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: a command's own default must not undo what was given before the command.
    parser.add_argument(
        "-b",
        "--bootstrap-servers",
        metavar="HOST:PORT[,...]",
        default=argparse.SUPPRESS,
        help="Kafka bootstrap servers (instead of MEMSTREAM_KAFKA_BOOTSTRAP_SERVERS)",
    )
    parser.add_argument("--version", action="version", version=f"memstream {version()}")


def _examples(command: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[command])
