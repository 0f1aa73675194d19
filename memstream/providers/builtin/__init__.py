"""The built-in long-term store (``MYSQL``): its SQL, its per-user index cache, its ranking."""

from memstream.providers.builtin.provider import BuiltinProvider

__all__ = ["BuiltinProvider"]
