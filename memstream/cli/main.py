"""The memstream command line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from datetime import datetime
from functools import partial
from pathlib import Path

from pydantic import ValidationError

from memstream.cli.options import overrides, program_parser, with_shared_options
from memstream.errors import MemstreamError
from memstream.roles import ROLES, parse_stages
from memstream.settings import Settings
from memstream_client.contract.topics import INPUT_TOPICS
from memstream_client.mcp import command as mcp_command


def _parse_time(value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an RFC 3339 time") from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{value!r} needs a UTC offset, e.g. 2026-01-01T00:00:00Z")
    return moment


def _parse_to(value: str) -> datetime | None:
    if value == "earliest":
        return None
    try:
        return _parse_time(value)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, nor 'earliest'") from None


def _stages(value: str) -> tuple[str, ...]:
    try:
        return parse_stages(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive whole number")
    return int(value)


REDRIVE_HELP = """\
Send dead letters back to the topic they came from (the source.topic of each letter:
message-written, session-ended or a stage's internal topic), with their original key and value,
so that the stage tries them again once what made them fail is fixed. Prints how many were sent
per reason and stage.

Each letter is sent at most once, whatever happens: it is recorded in the database table
redriven_letter (created by memstream migrate, or here when missing) before it is sent, and
later runs skip every recorded letter. A run interrupted after recording a letter but before the
broker confirmed its send leaves it recorded as interrupted: it may or may not have reached its
topic, and no run sends it again unless its row is deleted from redriven_letter (check the topic
first). A letter that fails again lands in dead-letter as a new letter, which a later run can
send back.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = program_parser()
    sub = parser.add_subparsers(dest="command", required=True)
    worker = sub.add_parser("worker", help="run the stream worker (all stages, or --stages)")
    worker.add_argument(
        "--stages",
        type=_stages,
        default=ROLES,
        metavar="ROLE[,ROLE]",
        help=f"only these stage roles, each its own consumer group: {', '.join(ROLES)}"
        " (default: all)",
    )
    sub.add_parser("api", help="run the query API")
    sub.add_parser("migrate", help="create or upgrade the database schema")
    sub.add_parser("dev", help="run everything locally on the embedded default")
    mcp_command.add_arguments(
        sub.add_parser(
            "mcp",
            help="serve the memory tools to an MCP host over stdio (as memstream-mcp)",
            description=mcp_command.DESCRIPTION,
        )
    )
    pub = sub.add_parser("publish", help="publish events from a JSON-lines file")
    pub.add_argument("file", type=Path)
    pub.add_argument("--topic", required=True, choices=INPUT_TOPICS)
    pub.add_argument(
        "--no-validate",
        action="store_true",
        help="send every line as is (invalid ones then land in dead-letter)",
    )
    rep = sub.add_parser("replay", help="rewind the worker group's offsets for a backfill")
    rep.add_argument("--topic", required=True, choices=INPUT_TOPICS)
    rep.add_argument("--to", required=True, type=_parse_to, help="earliest or an RFC 3339 time")
    red = sub.add_parser(
        "redrive",
        help="send dead letters back to the topic they came from, each at most once",
        description=REDRIVE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _reasons(red)
    red.add_argument(
        "--since",
        type=_parse_time,
        metavar="TIME",
        help="only letters that failed at or after this RFC 3339 time",
    )
    red.add_argument("--dry-run", action="store_true", help="count what would be sent; send none")
    dead = sub.add_parser(
        "dead-letters", help="list dead letters: reason, stage, source, time, payload preview"
    )
    _reasons(dead)
    dead.add_argument(
        "--limit", type=_positive, default=20, metavar="N", help="show the newest N (default 20)"
    )
    changes = sub.add_parser(
        "changes",
        help="print the memory-changed stream: what was learned, replaced and forgotten",
    )
    changes.add_argument(
        "--follow", action="store_true", help="keep printing changes as they come (Ctrl-C stops)"
    )
    changes.add_argument("--tenant-id", metavar="T", help="only this tenant's changes")
    changes.add_argument("--user-id", metavar="U", help="only this user's changes")
    changes.add_argument(
        "--since",
        type=_parse_time,
        metavar="TIME",
        help="from this RFC 3339 time (default: the start, or now with --follow)",
    )
    changes.add_argument(
        "--json", action="store_true", help="one JSON value per line, as published"
    )
    _transfer_commands(sub)
    return with_shared_options(parser)


def _transfer_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    out = sub.add_parser(
        "export", help="write live memories as JSON lines (one memory a line, stdout by default)"
    )
    out.add_argument("--tenant-id", required=True, metavar="T")
    out.add_argument("--user-id", metavar="U", help="only this user's memories")
    out.add_argument(
        "--agent-id", metavar="A", help="only what this agent reads, from its provider"
    )
    out.add_argument("--history", action="store_true", help="also what each memory replaced")
    out.add_argument("-o", "--output", type=Path, metavar="FILE", help="write here, not stdout")
    into = sub.add_parser(
        "import", help="write exported memories through an agent's provider, idempotently"
    )
    into.add_argument("file", type=Path)
    into.add_argument("--tenant-id", required=True, metavar="T")
    into.add_argument("--agent-id", required=True, metavar="A")
    into.add_argument("--no-progress", action="store_true", help="no progress bar")


def _reasons(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--reason",
        dest="reasons",
        action="extend",
        nargs="+",
        default=[],
        metavar="R",
        help="only letters with this reason (e.g. retries_exhausted); several may be named",
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "mcp":
        # A client of the API: none of the server's settings apply to it.
        return mcp_command.main_with(args)
    try:
        settings = Settings(**overrides(args))
    except ValidationError as exc:
        # A check of several settings together (the broker's security) has no one name.
        problems = "; ".join(
            f"MEMSTREAM_{'_'.join(map(str, e['loc'])).upper()}: {e['msg']}"
            if e["loc"]
            else e["msg"]
            for e in exc.errors()
        )
        print(f"memstream: invalid settings: {problems}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        return _run(args, settings)
    except MemstreamError as exc:
        print(f"memstream {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _run(args: argparse.Namespace, settings: Settings) -> int:
    if args.command == "worker":
        from memstream.streams.worker import run_worker

        return run_worker(settings, args.stages)
    if args.command == "api":
        from memstream.api.server import serve

        serve(settings)
        return 0
    if args.command == "migrate":
        from memstream.store.database import migrate

        tables = asyncio.run(migrate(settings.database_url))
        print(f"schema up to date: {', '.join(tables)}")
        return 0
    if args.command == "dev":
        from memstream.cli.dev import run_dev

        return run_dev(settings)
    if args.command == "publish":
        return _publish(args, settings)
    if args.command in ("redrive", "dead-letters"):
        return _dead_letters(args, settings)
    if args.command == "changes":
        from memstream.cli.changes import Filter, show

        selection = Filter(args.tenant_id, args.user_id)
        options = {"follow": args.follow, "since": args.since, "as_json": args.json}
        asyncio.run(show(settings, selection, **options))
        return 0
    if args.command in ("export", "import"):
        return _transfer(args, settings)
    if args.command == "replay":
        from memstream.broker.patience import patiently
        from memstream.broker.replay import replay

        rewind = partial(replay, settings, args.topic, args.to)
        rewinds = asyncio.run(patiently(settings, "replay", rewind))
        for r in rewinds:
            print(
                f"{settings.topic(args.topic)}[{r.partition}]: {r.before} -> {r.after} ({r.group})"
            )
        return 0
    raise AssertionError(args.command)


def _publish(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.cli.publish import publish_file

    if not args.file.is_file():
        print(f"memstream publish: no such file {args.file}", file=sys.stderr)
        return 2
    report = asyncio.run(
        publish_file(settings, args.file, args.topic, validate=not args.no_validate)
    )
    for number, why in report.bad_lines:
        print(f"{args.file}:{number}: {why}", file=sys.stderr)
    print(f"published {report.sent} events, {len(report.bad_lines)} bad lines skipped")
    return 1 if report.bad_lines else 0


def _transfer(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.cli import transfer

    if args.command == "export":
        selection = transfer.Selection(args.tenant_id, args.user_id, args.agent_id, args.history)
        written = asyncio.run(transfer.export(settings, selection, args.output))
        print(f"exported {written} lines", file=sys.stderr)
        return 0
    if not args.file.is_file():
        print(f"memstream import: no such file {args.file}", file=sys.stderr)
        return 2
    report = asyncio.run(
        transfer.import_(
            settings, args.file, args.tenant_id, args.agent_id, progress=not args.no_progress
        )
    )
    for number, why in report.bad_lines:
        print(f"{args.file}:{number}: {why}", file=sys.stderr)
    print(report.summary())
    if report.stopped is not None:
        print(
            f"memstream import: {report.stopped}; import the file again to finish", file=sys.stderr
        )
        return 1
    return 0


def _dead_letters(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.cli.deadletters import Selection, newest, table
    from memstream.cli.redrive import redrive

    selection = Selection(frozenset(args.reasons), getattr(args, "since", None))
    if args.command == "redrive":
        report = asyncio.run(redrive(settings, selection, dry_run=args.dry_run))
        print("\n".join(report.lines()))
        return 0
    reading = asyncio.run(newest(settings, selection, args.limit))
    print("\n".join(table(reading.letters)))
    if reading.unreadable:
        print(f"({reading.unreadable} records of the topic are no dead letters)", file=sys.stderr)
    return 0
