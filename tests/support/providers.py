"""What the long-term provider contract tests share: a memory to add, the failure counter."""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY

from memstream.memory import NewMemory


def new_memory(content: str, cube: str = "user_profile", **fields: Any) -> NewMemory:
    """A text memory of tenant t1, user u1, agent a1 in ``cube``; ``fields`` override."""
    values: dict[str, Any] = {
        "tenant_id": "t1",
        "user_id": "u1",
        "agent_id": "a1",
        "cube_id": cube,
        "memory_type": "text_mem",
        "content": content,
    }
    values.update(fields)
    return NewMemory(**values)


def provider_failures(provider: str, call: str) -> float:
    """How many failures of ``call`` the provider-failure counter holds for ``provider``."""
    value = REGISTRY.get_sample_value(
        "memstream_provider_failures_total", {"provider": provider, "call": call}
    )
    return value or 0.0
