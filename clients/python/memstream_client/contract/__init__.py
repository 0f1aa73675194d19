"""The wire vocabulary: what crosses between memstream and the services around it.

``api`` holds the query API's request and response bodies, ``events`` the public events as
typed models (and the decoding of a raw value into one), ``schemas`` the JSON Schemas those
events are checked against, ``errors`` the errors a caller meets. The API, the workers and the
client all take their shapes from here; nothing here imports the memstream server (no store, no
broker, no web framework), so the client loads this and nothing of the server. ``security``
says how a Kafka client reaches a secured broker, for the server's clients and the publisher alike.
"""
