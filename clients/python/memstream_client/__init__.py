"""memstream from a platform service: publish the events memstream reads, and call its API.
Why it works this way: docs/design/client-package.md."""

from memstream_client.api import AsyncClient, Call, Client
from memstream_client.contract.errors import ApiError, InvalidEvent, ServiceUnavailable
from memstream_client.events import Event, checked, new_event_id
from memstream_client.publisher import PRODUCER_SETTINGS, Published, Publisher, SyncPublisher

__version__ = "0.1.0"
__all__ = [
    "PRODUCER_SETTINGS",
    "ApiError",
    "AsyncClient",
    "Call",
    "Client",
    "Event",
    "InvalidEvent",
    "Published",
    "Publisher",
    "ServiceUnavailable",
    "SyncPublisher",
    "checked",
    "new_event_id",
]
