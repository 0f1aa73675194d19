"""memstream from a platform service: publish the events memstream reads, and call its API.

    from memstream_client import AsyncClient, Publisher

    async with Publisher("kafka:9092") as publisher:
        await publisher.message(tenant_id="acme", user_id="u1", agent_id="travel",
                                conversation_id="c1", role="user", content="I am vegetarian.")
        await publisher.session_ended(tenant_id="acme", user_id="u1", agent_id="travel",
                                      conversation_id="c1")

    async with AsyncClient("http://memstream:8080", api_key="key1") as api:
        context = await api.context(tenant_id="acme", user_id="u1", agent_id="travel",
                                    conversation_id="c2", query="Where should I eat tonight?")

``Client`` and ``SyncPublisher`` do the same for code without an event loop. Events are checked
before they are sent (``InvalidEvent`` with the reason the worker would dead-letter them for);
API errors raise ``ApiError``, no answer ``ServiceUnavailable``. The wire shapes (the API's
bodies, the event models, the JSON Schemas) are in ``memstream_client.contract``; the memstream
server takes its own from there.
"""

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
