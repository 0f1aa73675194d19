"""The per-user queues of the conflict stage (``memstream.longterm.user_queue``): sessions of
one (tenant, user) applied in the order they ended, the later ones waiting while an earlier one
is still on its way or waits out an outage. Partitioned like ``lt-conflict`` and changed only
by the conflict stage while it handles a record of that partition, so its changelog topic is
the queues' record and a worker taking the partition over reads them back from it."""

from __future__ import annotations

from memstream.streams.app import app

user_queues = app.Table(
    "longterm-order",
    key_type=bytes,  # raw bytes in the changelog, as the stage encodes them
    value_type=bytes,
    help="Per-user queues of the conflict stage.",
)
