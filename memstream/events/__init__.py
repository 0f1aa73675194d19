"""Public events: their JSON Schemas, parsing into typed events, and dead letters."""
