"""``memstream worker``: the Faust worker running the stream stages of its roles (all by
default; ``--stages`` names some, see ``memstream.roles``)."""

from __future__ import annotations

import asyncio
import importlib
import logging
from functools import partial

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from memstream import tracing
from memstream.broker import offsets
from memstream.broker.clients import admin_client
from memstream.broker.patience import patiently
from memstream.broker.topics import ensure_topics, partitions
from memstream.metrics import faust_lag, update_consumer_lag
from memstream.roles import group_id, groups_running, reading_group
from memstream.settings import Settings
from memstream.topology import (
    PUBLIC_TOPICS,
    ROLES,
    STAGES,
    inputs_of,
    internal_topics,
    role_of_topic,
    tier_topics,
)

log = logging.getLogger(__name__)

LAG_INTERVAL_SECONDS = 10.0

# Besides one agent module per stage (named after it in memstream.topology): the embedding
# and term backfills, the turn index and the memory-changed relay run with the long-term stages.
_BESIDES = {"longterm": ("embed", "index_terms", "index_history", "changes")}
# The agent modules of each role; importing one registers its agents on the app.
AGENTS = {
    role: (*(stage.name for stage in STAGES if stage.role == role), *_BESIDES.get(role, ()))
    for role in ROLES
}


def agent_modules(roles: tuple[str, ...]) -> list[str]:
    """The agent modules a worker of ``roles`` imports. The retry stage sends records back to
    the stages that use the retry tiers (summary and long-term), each group its own."""
    names = [name for role in ROLES if role in roles for name in AGENTS[role]]
    if "summary" in roles or "longterm" in roles:
        names.append("retry")
    return [f"memstream.agents.{name}" for name in names]


async def take_over(settings: Settings, roles: tuple[str, ...]) -> None:
    """Move this worker's group forward, on each topic its roles read, to where any group that
    ran the same role has got (the all-roles group before a split into roles, the role groups
    after going back to one worker kind): what they committed is done, so nothing is read
    twice for nothing. Never backward, and never while the group has live members (their
    positions stand). On the retry tiers only the position of the app id's retry stage is
    taken over: it sent back every role's records, where each role group's retry stage skips
    the other roles' records, so its position says nothing of what another has sent back."""
    reads = [
        (
            reading_group(settings.app_id, roles, name),
            name,
            groups_running(settings.app_id, role_of_topic(name) or ""),
        )
        for name in inputs_of(*roles)
    ]
    if "summary" in roles or "longterm" in roles:
        retry = f"{group_id(settings.app_id, roles)}.retry"  # agents/retry.py
        legacy = [f"{settings.app_id}.retry"]
        reads += [(retry, tier, legacy) for tier in tier_topics(settings)]
    async with admin_client(settings) as admin:
        forward: dict[str, dict[TopicPartition, int]] = {}
        for own_group, name, groups in reads:
            tps = await partitions(admin, settings.topic(name))
            others = [g for g in groups if g != own_group]
            if not tps or not others:
                continue
            own = await offsets.committed(admin, own_group, tps)
            found = await asyncio.gather(*(offsets.committed(admin, g, tps) for g in others))
            for tp in tps:
                best = max(done[tp] for done in found)
                if best > own[tp]:
                    forward.setdefault(own_group, {})[tp] = best
    for own_group, positions in forward.items():
        await _commit(settings, own_group, positions)


async def _commit(settings: Settings, group: str, positions: dict[TopicPartition, int]) -> None:
    try:
        await offsets.commit(settings, group, positions)
        log.info("%s: took over %d partition offset(s) from other groups", group, len(positions))
    except KafkaError as exc:  # a live group refuses: its members' positions stand
        log.info("%s: offsets not taken over (%r)", group, exc)


async def prepare(settings: Settings, roles: tuple[str, ...]) -> None:
    # Topics are created up front with the configured partition count, so every worker of the
    # group agrees on it whoever starts first.
    await ensure_topics(settings, PUBLIC_TOPICS + internal_topics(settings))
    # A new cluster has no group coordinator until its offsets topic exists.
    await patiently(settings, "taking over offsets", partial(take_over, settings, roles))


def run_worker(settings: Settings, roles: tuple[str, ...] = ROLES) -> int:
    tracing.configure("memstream-worker")
    asyncio.run(prepare(settings, roles))

    from memstream.streams import config

    config.bind(settings, roles)  # before the app is built from it

    import faust
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    from memstream.streams.app import app

    for module in agent_modules(roles):
        importlib.import_module(module)

    @app.page("/metrics")
    async def metrics(self: faust.web.View, request: faust.web.Request) -> faust.web.Response:
        # aiohttp wants the charset apart from the media type.
        return self.text(generate_latest().decode(), content_type=CONTENT_TYPE_LATEST.split(";")[0])

    @app.timer(interval=LAG_INTERVAL_SECONDS)  # type: ignore[untyped-decorator]
    async def consumer_lag() -> None:
        lags = faust_lag(app.consumer)
        if "history" in roles:
            from memstream.agents import history

            if history.stage is not None:
                lags += history.stage.lag()
        update_consumer_lag(lags)

    worker = faust.Worker(app, loglevel=settings.log_level.lower())
    # Faust's terminal spinner, kept at WARNING and above, turns every logger to DEBUG and
    # builds a log record for each message produced and consumed: a tenth of the CPU at load.
    worker.spinner = None
    worker.execute_from_commandline()
    return 0
