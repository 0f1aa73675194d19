"""Memory as a stream: every change to long-term memory, recorded and published on
``memory-changed`` (``schemas/memory-changed.v1.json``).

A transactional outbox:

- ``model``: what a change says (pure): its stable ``change_id``, derived from the tenant, the
  provider, the memory id and the kind of change, so that applying the same change twice (a
  redelivered session end, a replay, a retry) records it once; and the published value.
- ``outbox``: the ``memory_change`` rows, written by the providers with the change itself (in
  the same transaction for the built-in store; right after MemOS or Mem0 answered, with the
  ledger, for those), and the links from a superseding memory to those it replaced
  (``memory_link``).
- ``relay``: publishes the unpublished rows in the order they were written, keyed by tenant
  and user, then marks them; one relay per topic holds the lease at a time.
- ``history``: a memory's chain for ``GET /v1/memories/{id}/history``.
- ``memstream.cli.changes``: ``memstream changes --follow``.
"""
