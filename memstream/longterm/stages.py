"""What each long-term stage does with one record, apart from the Faust wiring.

session  -> judge    : the session's messages, new ones (no MD5 mark) flagged
judge    -> dedupe   : candidate memories (LLM or rules)
dedupe   -> conflict : candidates de-duplicated within the session, re-keyed by (tenant, user)
conflict             : what to store and which live memories to expire (``plan``), then
                       writing new first and expiring old (``persist``), one session of a
                       user after the other (``memstream.longterm.user_queue``)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from memstream.changes.model import RETENTION, Cause
from memstream.errors import ProviderUnavailable
from memstream.longterm.conflict import LLMConflictResolver, resolve
from memstream.longterm.models import Candidate, SessionMessage
from memstream.longterm.payloads import Session
from memstream.longterm.retention import Retention, expired_episodes
from memstream.memory import MemoryItem, NewMemory, is_provisional
from memstream.providers.base import LongTermProvider
from memstream.store.marks import MarkStore, mark_of
from memstream.store.messages import MessageStore
from memstream.text.normalise import fold_spaces_and_case

SESSION_MESSAGES = 200  # the newest messages of a conversation a session end looks at
CHAT_ROLES = ("user", "assistant")
SPEAKER_KEYS = ("speaker", "name", "user_name")  # where a platform names who said a message
MAX_SPEAKER_CHARS = 64


def speaker_of(metadata: dict[str, Any] | None) -> str | None:
    """The speaker's name a message's metadata gives, if a usable one."""
    for key in SPEAKER_KEYS:
        value = (metadata or {}).get(key)
        if isinstance(value, str) and 0 < len(value.strip()) <= MAX_SPEAKER_CHARS:
            return " ".join(value.split())
    return None


@dataclass(frozen=True, slots=True)
class Collected:
    messages: list[SessionMessage]
    new_marks: list[str]


async def collect(
    session: Session,
    messages: MessageStore,
    marks: MarkStore,
    limit: int = SESSION_MESSAGES,
    kept_back: frozenset[str] = frozenset(),
) -> Collected | None:
    """The session's chat messages with the unjudged ones flagged, but ``kept_back`` (event
    ids said before a forget of the user); None when none is new."""
    stored = await messages.recent(session.tenant_id, session.conversation_id, limit)
    chat = [
        m
        for m in stored
        if m.message_type == "chat" and m.role in CHAT_ROLES and m.event_id not in kept_back
    ]
    keys = [mark_of(m.role, m.content) for m in chat]
    seen = await marks.present(session.tenant_id, session.conversation_id, keys)
    fresh: set[str] = set()
    out = []
    for m, key in zip(chat, keys, strict=True):
        # The same text twice in one session is judged once.
        new = key not in seen and key not in fresh
        fresh.add(key)
        speaker = speaker_of(m.metadata)
        out.append(SessionMessage(m.event_id, m.role, m.content, new, m.created_at, speaker))
    new_marks = sorted(k for k in fresh if k not in seen)
    if not new_marks:
        return None
    return Collected(out, new_marks)


@dataclass(frozen=True, slots=True)
class Plan:
    """The conflict stage's verdict for one session: memories to store, ids to expire."""

    store: list[NewMemory]
    expire: list[str]
    skipped: int


async def plan(
    session: Session,
    candidates: Sequence[Candidate],
    provider: LongTermProvider,
    resolver: LLMConflictResolver | None = None,
) -> Plan:
    """Compare each candidate with the live memories of its cube: store, skip or supersede."""
    live = await provider.list_live(session.tenant_id, session.user_id, session.agent_id)
    # Facts are weighed against the live facts; an episode records what was said on a day, so it
    # neither contradicts nor supersedes anything and is only skipped when already kept.
    by_cube: dict[str, list[MemoryItem]] = {}
    said: set[tuple[str, str]] = set()
    for item in live:
        if item.kind == "episode":
            said.add((item.cube_id, fold_spaces_and_case(item.content)))
        else:
            by_cube.setdefault(item.cube_id, []).append(item)
    store: list[NewMemory] = []
    expire: list[str] = []
    skipped = 0
    for candidate in candidates:
        cube = session.cube_of(candidate)
        if candidate.kind == "episode":
            key = (cube, fold_spaces_and_case(candidate.content))
            if key in said:
                skipped += 1
            else:
                said.add(key)
                store.append(session.memory(candidate))
            continue
        current = by_cube.get(cube, [])
        decision = (
            await resolver.resolve(candidate, current) if resolver else resolve(candidate, current)
        )
        if decision.action == "skip":
            skipped += 1
            continue
        replaced = [i for i in dict.fromkeys(decision.expire_ids) if i not in expire]
        store.append(replace(session.memory(candidate), supersedes=tuple(replaced)))
        gone = set(decision.expire_ids)
        expire += replaced
        by_cube[cube] = [m for m in current if m.id not in gone]
    return Plan(store, expire, skipped)


KEEP_EVERY_EPISODE = Retention()


async def persist(
    provider: LongTermProvider,
    session: Session,
    store: Sequence[NewMemory],
    expire: Sequence[str],
    retention: Retention = KEEP_EVERY_EPISODE,
    overtaken: Callable[[], Awaitable[bool]] | None = None,
) -> list[str]:
    """Write new memories first, then expire the old (each superseded by the new memory that
    replaced it): a crash in between leaves a duplicate for a while, never a gap. Nothing
    expires before every add is confirmed: a provider that answers a provisional id (MemOS
    adding asynchronously) may still lose the memory, so the call fails as an outage and is
    tried again (adds are idempotent). Episodes past their retention go last (``expired``);
    answers what expired. Each change is recorded as the provider makes it. ``overtaken`` is
    asked once the adds are in: True when a forget of the user began after the session ended
    and took them back, and then nothing more is done."""
    superseded_by: dict[str, list[str]] = {}
    if store:
        cause = Cause.session(session.conversation_id, session.trace)
        stored = await provider.add(store, cause=cause)
        if overtaken is not None and await overtaken():
            return []
        unconfirmed = sum(1 for item in stored if is_provisional(item))
        if unconfirmed:
            raise ProviderUnavailable(
                f"{provider.name} has not confirmed {unconfirmed} of {len(stored)} added "
                "memories yet; nothing is expired before it has"
            )
        if len(stored) == len(store):
            for memory, item in zip(store, stored, strict=True):
                for old in memory.supersedes:
                    superseded_by.setdefault(old, []).append(item.id)
    if expire:
        cause = Cause.conflict(session.conversation_id, superseded_by, session.trace)
        await provider.delete(session.tenant_id, expire, cause=cause)
    gone = list(expire)
    if any(m.kind == "episode" for m in store) and (retention.period or retention.per_user):
        live = await provider.list_live(session.tenant_id, session.user_id, session.agent_id)
        now = datetime.now(UTC)
        old_episodes = expired_episodes(
            live, now, retention=retention.period, cap=retention.per_user
        )
        if old_episodes:
            await provider.delete(session.tenant_id, old_episodes, cause=RETENTION)
        gone += old_episodes
    return gone
