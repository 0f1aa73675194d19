"""The Faust application, built once from the settings; agents register on it."""

from __future__ import annotations

import tempfile
from pathlib import Path

from memstream.broker.clients import broker_urls
from memstream.roles import group_id
from memstream.streams.config import current
from memstream.streams.consumer import App
from memstream.streams.credentials import broker_credentials

settings = current().settings
roles = current().roles
# The Faust app id is the consumer group of the summary and long-term stages, named after the
# ones this worker runs; the history stage reads in a group of its own (memstream.roles).
group = group_id(settings.app_id, roles)

# Faust keeps small per-app files here; the parent must exist before it creates the folder.
_datadir = Path(tempfile.gettempdir()) / "memstream-faust" / group
_datadir.parent.mkdir(parents=True, exist_ok=True)


app = App(
    group,
    # Reaches the broker as every other client memstream builds does.
    broker=broker_urls(settings),
    # Faust reads the protocol from its credentials (the URLs' kafka:// only names the driver).
    broker_credentials=broker_credentials(settings),
    store="memory://",
    # A new consumer group starts at the beginning: nothing published before the first
    # worker started is skipped.
    consumer_auto_offset_reset="earliest",
    topic_partitions=settings.topic_partitions,
    topic_replication_factor=settings.topic_replication_factor,
    producer_acks=-1,
    web_enabled=settings.worker_web_port != 0,
    web_port=settings.worker_web_port or 6066,
    web_bind=settings.worker_web_host,
    # The port serves /metrics (streams/worker.py) and nothing else: Faust's own views show
    # tables, partition assignments and topology to anyone who reaches it, with no key.
    web_router_enabled=False,
    web_tables_enabled=False,
    web_graph_enabled=False,
    web_stats_enabled=False,
    web_metrics_enabled=False,
    datadir=str(_datadir),
    # Offsets of acknowledged events are committed this often; unacknowledged ones never are.
    broker_commit_interval=1.0,
    stream_buffer_maxsize=max(4096, 2 * settings.batch_max_events),
    # 1 MiB per partition and fetch (thousands of events): larger fetches held the summary and
    # session stages' records behind whole megabytes of message-written, and cost more CPU to
    # parse than they saved.
    consumer_max_fetch_size=1024 * 1024,
)
