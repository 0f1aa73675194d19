"""The Faust application, built once from the settings; agents register on it."""

from __future__ import annotations

import tempfile
from pathlib import Path

import faust

from memstream.settings import Settings

settings = Settings()

# Faust keeps small per-app files here; the parent must exist before it creates the folder.
_datadir = Path(tempfile.gettempdir()) / "memstream-faust" / settings.app_id
_datadir.parent.mkdir(parents=True, exist_ok=True)


def broker_urls(bootstrap_servers: str) -> list[str]:
    """Faust's broker URLs for a Kafka ``host:port,host:port`` list."""
    return [
        f"kafka://{server.strip()}" for server in bootstrap_servers.split(",") if server.strip()
    ]


app = faust.App(
    settings.app_id,
    broker=broker_urls(settings.kafka_bootstrap_servers),
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
    datadir=str(_datadir),
    # Offsets of acknowledged events are committed this often; unacknowledged ones never are.
    broker_commit_interval=1.0,
    stream_buffer_maxsize=max(4096, 2 * settings.batch_max_events),
    # Larger fetches: the history stage writes thousands of events per batch.
    consumer_max_fetch_size=8 * 1024 * 1024,
)
