"""The ``memstream`` command line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from memstream.errors import MemstreamError
from memstream.settings import Settings


def _parse_to(value: str) -> datetime | None:
    if value == "earliest":
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is neither 'earliest' nor an RFC 3339 time"
        ) from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{value!r} needs a UTC offset, e.g. 2026-01-01T00:00:00Z")
    return moment


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memstream", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("worker", help="run the stream worker (all stages)")
    sub.add_parser("api", help="run the query API")
    sub.add_parser("migrate", help="create or upgrade the database schema")
    sub.add_parser("dev", help="run everything locally on the embedded default")
    pub = sub.add_parser("publish", help="publish events from a JSON-lines file")
    pub.add_argument("file", type=Path)
    pub.add_argument("--topic", required=True, choices=["message-written", "session-ended"])
    pub.add_argument(
        "--no-validate",
        action="store_true",
        help="send every line as is (invalid ones then land in dead-letter)",
    )
    rep = sub.add_parser("replay", help="rewind the worker group's offsets for a backfill")
    rep.add_argument("--topic", required=True, choices=["message-written", "session-ended"])
    rep.add_argument("--to", required=True, type=_parse_to, help="earliest or an RFC 3339 time")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"MEMSTREAM_{'_'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors()
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

        return run_worker(settings)
    if args.command == "api":
        import uvicorn

        from memstream.api.app import create_app

        uvicorn.run(
            create_app(settings),
            host=settings.api_host,
            port=settings.api_port,
            log_level=settings.log_level.lower(),
            access_log=False,
        )
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
    if args.command == "replay":
        from memstream.kafka import replay

        rewinds = asyncio.run(replay(settings, args.topic, args.to))
        for r in rewinds:
            print(f"{settings.topic(args.topic)}[{r.partition}]: {r.before} -> {r.after}")
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
