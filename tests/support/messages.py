"""Stored conversations tests build: a chat of given turns, and alternating turns."""

from __future__ import annotations

from datetime import datetime, timedelta

from memstream.store.messages import StoredMessage
from memstream.text.tokens import count_tokens


def chat(tenant: str, conversation: str, contents: list[tuple[str, str]]) -> list[StoredMessage]:
    start = datetime(2026, 2, 1, 12, 0)
    return [
        StoredMessage(
            tenant_id=tenant,
            conversation_id=conversation,
            event_id=f"{conversation}-{i}",
            user_id="u1",
            agent_id="a1",
            role=role,
            message_type="chat",
            content=content,
            token_count=count_tokens(content),
            created_at=start + timedelta(seconds=i),
            source_conversation_id=conversation,
        )
        for i, (role, content) in enumerate(contents)
    ]


def alternating(n: int) -> list[tuple[str, str]]:
    return [("user" if i % 2 == 0 else "assistant", f"turn {i} about trains") for i in range(n)]
