"""How memstream names what it stores in any provider: the content key and namespaced ids."""

from __future__ import annotations

import hashlib

from memstream.text.normalise import fold_spaces_and_case


def content_hash(content: str) -> str:
    """SHA-256 (hex) of the normalised content: the per-cube duplicate key."""
    return hashlib.sha256(fold_spaces_and_case(content).encode("utf-8")).hexdigest()


def escape_part(part: str) -> str:
    """One component of a namespaced id, with ``%`` and ``:`` escaped so that joining
    components with ``:`` is injective (tenant ``a:b`` + user ``c`` never equals tenant ``a``
    + user ``b:c``)."""
    return part.replace("%", "%25").replace(":", "%3A")


def namespaced(*parts: str) -> str:
    return ":".join(escape_part(p) for p in parts)
