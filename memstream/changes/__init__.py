"""Memory as a stream: every change to long-term memory, recorded and published on
``memory-changed`` (``schemas/memory-changed.v1.json``).
Why it works this way: docs/design/memory-changes.md."""
