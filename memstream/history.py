"""The history stage: message-written events into the record (MySQL), then the hot cache
(Redis), in the order that loses nothing through a crash; a redelivered batch changes nothing.
Why it works this way: docs/design/history-stage.md."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from memstream import metrics
from memstream.errors import InvalidEvent, Refused
from memstream.events.deadletter import DeadLetter, SourceRecord, dead_letter
from memstream.failure.classify import TRANSIENT
from memstream.failure.inplace import retry_forever
from memstream.store.cache import RedisCache
from memstream.store.forgets import ForgetSet
from memstream.store.messages import MessageStore, StoredMessage, utc_naive
from memstream.store.rebuilds import CacheRebuilds
from memstream.text.tokens import count_tokens
from memstream_client.contract.events import MessageWritten, parse_message

log = logging.getLogger(__name__)

STAGE = "history"
# How often a writer looks for conversations marked stale by any worker (one small query).
STALE_SWEEP_SECONDS = 30.0
ConversationKey = tuple[str, str]
PublishDeadLetters = Callable[[Sequence[DeadLetter]], Awaitable[None]]


@dataclass(slots=True)
class Triage:
    """A batch sorted into what to store, what to reject and how many sub-agent drops."""

    accepted: list[tuple[StoredMessage, SourceRecord]] = field(default_factory=list)
    rejected: list[DeadLetter] = field(default_factory=list)
    dropped: int = 0
    forgotten: int = 0
    forget_mark: int | None = None  # how far the forgets it was checked against went


def to_stored(event: MessageWritten, record: SourceRecord) -> StoredMessage:
    """The stored form of a valid event (token count computed here, once); raises
    ``InvalidEvent`` when neither ``created_at`` nor the record's timestamp is a usable time."""
    return StoredMessage(
        tenant_id=event.tenant_id,
        conversation_id=event.target_conversation_id,
        event_id=event.event_id,
        user_id=event.user_id,
        agent_id=event.agent_id,
        role=event.role,
        message_type=event.message_type,
        content=event.content,
        token_count=count_tokens(event.content),
        created_at=utc_naive(event.created_at or record.time),
        source_conversation_id=event.conversation_id,
        metadata=event.metadata,
    )


def triage(records: Sequence[SourceRecord], max_content_chars: int) -> Triage:
    """Validate a batch and apply the sub-agent rule (docs/api.md); no IO, and no record can
    make it raise: whatever one record breaks becomes that record's dead letter."""
    out = Triage()
    seen: set[tuple[str, str]] = set()
    for record in records:
        try:
            event = parse_message(record.value, max_content_chars)
            if event.is_sub_agent and event.message_type != "chat":
                # A sub-agent's tool traffic stays out of the parent conversation, on purpose.
                out.dropped += 1
                continue
            stored = to_stored(event, record)
        except InvalidEvent as exc:
            out.rejected.append(dead_letter(exc.reason, exc.detail, STAGE, record))
            continue
        except Exception as exc:
            # A value the schema accepts but something here cannot handle: one dead letter,
            # never a failed batch that the group would redeliver forever.
            log.exception("record %s[%d]@%d failed", record.topic, record.partition, record.offset)
            detail = f"The history stage failed on this record: {exc!r}."[:500]
            out.rejected.append(dead_letter("stage_error", detail, STAGE, record))
            continue
        identity = (event.tenant_id, event.event_id)
        if identity in seen:
            continue  # the same event twice in one batch: the record would keep the first
        seen.add(identity)
        out.accepted.append((stored, record))
    return out


class HistoryWriter:
    """Applies one batch of ``message-written`` records; see the module docstring."""

    def __init__(
        self,
        store: MessageStore,
        cache: RedisCache | None,
        publish_dead_letters: PublishDeadLetters,
        *,
        rebuilds: CacheRebuilds,
        max_content_chars: int,
        max_backoff: float = 30.0,
        forgets: ForgetSet | None = None,
    ) -> None:
        self.store = store
        self.cache = cache
        self.rebuilds = rebuilds
        self.publish_dead_letters = publish_dead_letters
        self.max_content_chars = max_content_chars
        self.max_backoff = max_backoff
        self.forgets = forgets
        self._sweep_at = 0.0  # monotonic; the first batch looks for marks a crash left

    async def process(self, records: Sequence[SourceRecord]) -> Triage:
        batch = triage(records, self.max_content_chars)
        await self._drop_forgotten(batch)
        stored, refused = await self._write_record(batch.accepted)
        rejected = batch.rejected + refused
        if rejected:
            await self._retry_forever("dead_letter", lambda: self.publish_dead_letters(rejected))
        await self._update_cache(stored)
        await self._take_back(batch, stored)
        self._count(batch, len(stored), rejected)
        metrics.RECORDS.labels(STAGE, "finished").inc(len(records) - len(rejected))
        metrics.RECORDS.labels(STAGE, "dead_lettered").inc(len(rejected))
        return batch

    async def _drop_forgotten(self, batch: Triage) -> None:
        """Leave out the events of users whose history was forgotten after they were sent."""
        if self.forgets is None:
            return
        # A copy up to MEMSTREAM_FORGET_REFRESH_SECONDS old: what it misses is taken back.
        batch.forget_mark = await self._forgets_now(fresh=False)
        kept = [
            (m, r)
            for m, r in batch.accepted
            if not self.forgets.before(m.tenant_id, m.user_id, r.first, history=True)
        ]
        batch.forgotten += len(batch.accepted) - len(kept)
        batch.accepted = kept

    async def _take_back(self, batch: Triage, stored: list[StoredMessage]) -> None:
        """A forget that began while the batch was written purged before the batch was in:
        what it covers is deleted again, and the conversations' cached copies dropped."""
        mark = batch.forget_mark
        if self.forgets is None or mark is None or not stored:
            return
        await self._forgets_now(fresh=True)
        users = self.forgets.since(mark, history=True)
        if not users:
            return
        origins = {(m.tenant_id, m.event_id): r.first for m, r in batch.accepted}
        covered = [
            m
            for m in stored
            if (m.tenant_id, m.user_id) in users
            and self.forgets.before(
                m.tenant_id, m.user_id, origins.get((m.tenant_id, m.event_id)), history=True
            )
        ]
        by_tenant: dict[str, list[str]] = defaultdict(list)
        for m in covered:
            by_tenant[m.tenant_id].append(m.event_id)
        for tenant_id, event_ids in by_tenant.items():
            await self._retry_forever("forget", partial(self._delete_events, tenant_id, event_ids))
        conversations = list({(m.tenant_id, m.conversation_id) for m in covered})
        if conversations and self.cache is not None:
            try:
                await self.cache.forget(conversations)
            except Exception:
                await self._retry_forever("mark_stale", partial(self.rebuilds.mark, conversations))
        batch.forgotten += len(covered)

    async def _forgets_now(self, *, fresh: bool) -> int:
        assert self.forgets is not None
        marks: list[int] = []

        async def refresh() -> None:
            marks.append(await self.forgets.refresh(fresh=fresh))  # type: ignore[union-attr]

        await self._retry_forever("forgets", refresh)
        return marks[-1]

    async def _delete_events(self, tenant_id: str, event_ids: list[str]) -> None:
        await self.store.delete_events(tenant_id, event_ids)

    async def _write_record(
        self, accepted: list[tuple[StoredMessage, SourceRecord]]
    ) -> tuple[list[StoredMessage], list[DeadLetter]]:
        """Store the batch; rows the database refuses, or that fail in a way no wait can fix,
        are isolated and dead-lettered so that they never hold back the others."""
        messages = [m for m, _ in accepted]
        if not messages:
            return [], []
        try:
            await self._retry_forever("insert", lambda: self.store.insert_many(messages))
            return messages, []
        except Exception:
            log.warning(
                "batch insert failed for good; storing its %d rows one by one", len(messages)
            )
        stored, letters = [], []
        for message, record in accepted:
            try:
                await self._retry_forever("insert", partial(self.store.insert_many, [message]))
                stored.append(message)
            except Refused as exc:
                detail = f"The database refused the message: {exc.__cause__}"[:500]
                letters.append(dead_letter("rejected_by_database", detail, STAGE, record))
            except Exception as exc:
                log.exception("storing %s failed", message.event_id)
                detail = f"The history stage could not store the message: {exc!r}."[:500]
                letters.append(dead_letter("stage_error", detail, STAGE, record))
        return stored, letters

    async def _retry_forever(self, op: str, call: Callable[[], Awaitable[None]]) -> None:
        # Dead letters wait out a broker outage too, whatever the client raises.
        transient = (Exception,) if op == "dead_letter" else TRANSIENT
        await retry_forever(STAGE, op, call, max_backoff=self.max_backoff, transient=transient)

    async def _update_cache(self, messages: list[StoredMessage]) -> None:
        if self.cache is None:
            return
        by_conversation: dict[ConversationKey, list[StoredMessage]] = defaultdict(list)
        for m in messages:
            by_conversation[(m.tenant_id, m.conversation_id)].append(m)
        cache = self.cache
        try:
            if time.monotonic() >= self._sweep_at:
                # Marks on a failing node stay for its recovery (or the next sweep).
                await cache.drop_stale(self.rebuilds)
                self._sweep_at = time.monotonic() + STALE_SWEEP_SECONDS
            appended = await cache.append(by_conversation)
            failed = appended.failed
            if appended.cold:
                recent = await self.store.recent_many(appended.cold, limit=cache.max_messages)
                failed = failed + await cache.warm(recent)
        except Exception as exc:  # Redis is best effort: the record already holds the batch.
            log.warning("cache update failed for %d conversations: %r", len(by_conversation), exc)
            failed = list(by_conversation)
        # A node that fails is not asked (its breaker is open): its conversations cost a mark.
        metrics.CACHE.labels("write", "ok").inc(len(by_conversation) - len(failed))
        if not failed:
            return
        metrics.CACHE.labels("write", "error").inc(len(failed))
        # The keys may hold part of the batch: marked before the batch is acknowledged, so
        # no crash loses the mark, and dropped with the next batch that reaches Redis, or when
        # a failing node answers again.
        await self._retry_forever("mark_stale", partial(self.rebuilds.mark, failed))
        self._sweep_at = 0.0

    @staticmethod
    def _count(batch: Triage, stored: int, rejected: list[DeadLetter]) -> None:
        metrics.EVENTS.labels(STAGE, "stored").inc(stored)
        metrics.EVENTS.labels(STAGE, "dropped_sub_agent").inc(batch.dropped)
        metrics.EVENTS.labels(STAGE, "dropped_forgotten").inc(batch.forgotten)
        metrics.EVENTS.labels(STAGE, "dead_letter").inc(len(rejected))
        for letter in rejected:
            metrics.DEAD_LETTERS.labels(STAGE, letter.reason).inc()
