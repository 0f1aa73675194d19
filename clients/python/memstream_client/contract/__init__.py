"""The wire vocabulary: what crosses between memstream and the services around it.

``api`` holds the query API's request and response bodies, ``events`` the public events as
typed models (and the decoding of a raw value into one), ``schemas`` the JSON Schemas those
events are checked against, ``errors`` the errors a caller meets. The API, the workers and the
client all take their shapes from here; nothing here imports the memstream server (no store, no
broker, no web framework), so the client loads this and nothing of the server. ``security``
says how a Kafka client reaches a secured broker, for the server's clients and the publisher alike.
"""

from __future__ import annotations


def build_models() -> None:
    """Build every model of ``api`` and ``events`` now, and every adapter made of them later.

    The models build on first use so that a client's import stays light. A server wants the
    opposite: FastAPI makes an adapter of each route's models when the route is declared and
    silences a warning about its own field metadata only then, so a deferred adapter would warn
    on the first request (and build there). Call this before declaring routes.
    """
    from pydantic import BaseModel

    from memstream_client.contract import api, events

    for module in (api, events):
        for model in vars(module).values():
            if (
                isinstance(model, type)
                and issubclass(model, BaseModel)
                and model.__module__ == module.__name__
            ):
                # A TypeAdapter reads the flag from the model's config when it is made.
                model.model_config["defer_build"] = False
                model.model_rebuild()
