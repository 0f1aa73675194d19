"""The query API: the load path and the memory, history and agent endpoints."""

from memstream_client.contract import build_models

# Before any route is declared: the contract's models build on first use (for the client's
# import), but the API's routes must have theirs built when declared, not on the first request.
build_models()
