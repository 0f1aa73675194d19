"""The query API: the load path and the memory, history and agent endpoints."""
