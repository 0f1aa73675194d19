"""The database schema, one definition for MySQL/MariaDB and SQLite."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Double,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import BindParameter, ColumnElement
from sqlalchemy.sql.functions import FunctionElement

metadata = MetaData()

# BIGINT AUTO_INCREMENT on MySQL, INTEGER PRIMARY KEY (rowid) on SQLite.
_PK = BigInteger().with_variant(Integer(), "sqlite")
# Content up to MEMSTREAM_MAX_CONTENT_CHARS (32k characters of up to 4 bytes) needs MEDIUMTEXT.
_LONG_TEXT = Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")
_TIME = DateTime(timezone=False).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
_ID = String(128)
# Index terms longer than this are not posted (the primary key must fit InnoDB's 3,072 bytes).
TERM_CHARS = 200


class _FromHex(FunctionElement[bytes]):
    """A parameter sent as hex text, turned back into bytes by MySQL (others pass it as is)."""

    type = LargeBinary()
    inherit_cache = True


def _to_hex(value: bytes | None) -> str | None:
    return None if value is None else bytes(value).hex()


@compiles(_FromHex)
def _from_hex(element: _FromHex, compiler: SQLCompiler, **kw: object) -> str:
    return compiler.process(element.clauses, **kw)


@compiles(_FromHex, "mysql")
@compiles(_FromHex, "mariadb")
def _from_hex_mysql(element: _FromHex, compiler: SQLCompiler, **kw: object) -> str:
    return f"UNHEX({compiler.process(element.clauses, **kw)})"


class Blob(TypeDecorator[bytes]):
    """Binary data that aiomysql can send: with PyMySQL 1.2 it fails on every ``bytes``
    parameter (``escape_bytes_prefixed`` is gone), so MySQL gets hex text and ``UNHEX``."""

    impl = LargeBinary
    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], Any] | None:
        if dialect.name in ("mysql", "mariadb"):
            return _to_hex
        return super().bind_processor(dialect)

    def bind_expression(self, bindvalue: BindParameter[bytes]) -> ColumnElement[bytes]:
        return _FromHex(bindvalue)


class LargeBlob(Blob):
    """``Blob`` of up to 16 MiB on MySQL (MEDIUMBLOB; BLOB holds 64 KiB)."""

    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> Any:
        if dialect.name in ("mysql", "mariadb"):
            return dialect.type_descriptor(mysql.MEDIUMBLOB())
        return super().load_dialect_impl(dialect)


MYSQL_TABLE_ARGS: dict[str, Any] = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
    "mariadb_engine": "InnoDB",
    "mariadb_charset": "utf8mb4",
    "mariadb_collate": "utf8mb4_bin",
}

conversation_message = Table(
    "conversation_message",
    metadata,
    Column("id", _PK, primary_key=True, autoincrement=True),
    Column("tenant_id", _ID, nullable=False),
    Column("conversation_id", _ID, nullable=False),
    Column("event_id", _ID, nullable=False),
    Column("user_id", _ID, nullable=False),
    Column("agent_id", _ID, nullable=True),
    Column("role", String(16), nullable=False),
    Column("message_type", String(16), nullable=False),
    Column("content", _LONG_TEXT, nullable=False),
    Column("token_count", Integer, nullable=False),
    Column("metadata", JSON, nullable=True),
    Column("source_conversation_id", _ID, nullable=False),
    Column("created_at", _TIME, nullable=False),
    # Idempotency key: the same event id twice (redelivery, replay, a platform retry) is
    # stored once. Scoped by tenant so one tenant's ids can never shadow another's.
    UniqueConstraint("tenant_id", "event_id", name="uq_message_event"),
    # The load path reads the newest N of one conversation in order.
    Index("ix_message_conversation_time", "tenant_id", "conversation_id", "created_at", "id"),
    # Stats: messages of a tenant per time bucket, a range scan on this index alone.
    Index("ix_message_tenant_time", "tenant_id", "created_at"),
    # The summary stage reads the chat messages after its summary's last one: a range scan of
    # just those, however long the conversation.
    Index("ix_message_conversation_kind", "tenant_id", "conversation_id", "message_type", "id"),
    **MYSQL_TABLE_ARGS,
)

conversation_summary = Table(
    "conversation_summary",
    metadata,
    Column("tenant_id", _ID, primary_key=True),
    Column("conversation_id", _ID, primary_key=True),
    Column("summary", _LONG_TEXT, nullable=False),
    Column("token_count", Integer, nullable=False),
    # How many stored messages the summary covers, so the trigger knows what is uncovered.
    Column("covered_messages", Integer, nullable=False, default=0),
    Column("last_message_id", BigInteger, nullable=True),
    # An extractive summary's sentences with their scores (JSON), so the next one scores only
    # the new messages; NULL for a model's summary.
    Column("sentences", _LONG_TEXT, nullable=True),
    Column("updated_at", _TIME, nullable=False),
    **MYSQL_TABLE_ARGS,
)

long_term_memory = Table(
    "long_term_memory",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("tenant_id", _ID, nullable=False),
    Column("user_id", _ID, nullable=False),
    Column("agent_id", _ID, nullable=True),
    Column("cube_id", String(140), nullable=False),
    Column("memory_type", String(16), nullable=False),
    Column("content", Text, nullable=False),
    Column("importance", SmallInteger, nullable=False, default=5),
    Column("source_event_ids", JSON, nullable=False),
    # Content key per cube: the same memory is never stored twice (idempotent persist).
    Column("content_hash", String(64), nullable=False),
    Column("created_at", _TIME, nullable=False),
    Column("deleted_at", _TIME, nullable=True),
    # "fact" (distilled, kept until contradicted) or "episode" (what was said, dated); the
    # server default fills rows written before the column existed.
    Column("kind", String(16), nullable=False, default="fact", server_default="fact"),
    # When what the memory says happened or was said (episodes), as opposed to when stored.
    Column("occurred_at", _TIME, nullable=True),
    # The memory's length in index terms, written with its postings in ``memory_term``; NULL
    # until they are (a row imported by SQL, or written before the postings existed): the
    # term backfill finds those rows by it.
    Column("term_count", Integer, nullable=True),
    # The trace id of the session end the memory came from (NULL: none, or by the API).
    Column("trace_id", String(32), nullable=True),
    UniqueConstraint("tenant_id", "user_id", "cube_id", "content_hash", name="uq_memory_content"),
    Index("ix_memory_scope", "tenant_id", "user_id", "cube_id", "deleted_at"),
    # Stats: memories of a tenant per time bucket and type (covering for the trend query).
    Index("ix_memory_tenant_time", "tenant_id", "created_at", "memory_type"),
    # Stats: live memories of a tenant by cube, type, importance and agent (covering).
    Index(
        "ix_memory_tenant_cube",
        "tenant_id",
        "cube_id",
        "deleted_at",
        "memory_type",
        "importance",
        "agent_id",
    ),
    # Stats: the newest live memories of a cube.
    Index("ix_memory_cube_time", "tenant_id", "cube_id", "deleted_at", "created_at"),
    # The embedding backfill walks memories in the order they were written.
    Index("ix_memory_written", "created_at", "id"),
    # The term backfill finds the live rows without postings.
    Index("ix_memory_terms_pending", "term_count", "deleted_at"),
    **MYSQL_TABLE_ARGS,
)

# The lexical postings of the built-in store: one row per memory and index term (``field`` 0,
# a word) or adjacent word pair (``field`` 1, the phrase field), with its frequency in the
# memory, so that a search reads only its terms' postings of one user (the primary key's
# prefix) instead of tokenizing every memory of the user. Rows of a deleted memory are never
# scored (a search joins on the live memory) and are removed with it where memstream deletes.
memory_term = Table(
    "memory_term",
    metadata,
    Column("tenant_id", _ID, primary_key=True),
    Column("user_id", _ID, primary_key=True),
    Column("term", String(TERM_CHARS), primary_key=True),
    Column("field", SmallInteger, primary_key=True, autoincrement=False),
    Column("memory_id", String(64), primary_key=True),
    Column("tf", Integer, nullable=False),
    # What ranking needs, so that a search scores in one statement on this table alone: the
    # memory's cube, and the term's BM25 impact on it (its length normalised against a fixed
    # reference, so it never changes); NULL only until ``memstream migrate`` fills them in.
    Column("cube_id", String(140), nullable=True),
    Column("impact", Double, nullable=True),
    # Deleting one memory's postings.
    Index("ix_term_memory", "tenant_id", "memory_id"),
    **MYSQL_TABLE_ARGS,
)

# One vector per memory and embedding model, in full (float32 little-endian in ``vector``);
# searches read the packed copy in ``memory_vector_block``. A vector is written once (only
# ``block`` changes, when it is packed); a memory's vector stays when it is deleted (a user's
# delete erases it) and is never packed again, like the memory row itself.
memory_embedding = Table(
    "memory_embedding",
    metadata,
    Column("memory_id", String(64), primary_key=True),
    Column("model", String(128), primary_key=True),
    Column("tenant_id", _ID, nullable=False),
    Column("user_id", _ID, nullable=False),
    Column("dims", Integer, nullable=False),
    # BLOB on MySQL: up to 65,535 bytes, 16,383 dimensions.
    Column("vector", Blob, nullable=False),
    Column("created_at", _TIME, nullable=False),
    # The ``memory_vector_block`` holding this vector; NULL until it is packed into one (a
    # vector just stored, or stored by SQL), -1 once its memory is deleted (never packed).
    Column("block", Integer, nullable=True),
    # A search loads and counts one user's vectors of one model.
    Index("ix_embedding_user", "tenant_id", "user_id", "model"),
    # The backfill finds the vectors not packed yet.
    Index("ix_embedding_unpacked", "block"),
    **MYSQL_TABLE_ARGS,
)

# The vectors of one user and model packed for search (memstream.store.vector_blocks): up to
# BLOCK_MEMORIES live memories per row, their ids and cubes in ``ids`` and their vectors
# int8-quantised in ``vectors``, so that one range read on the primary key returns a user's
# whole matrix (docs/design/builtin-store.md, "Vector blocks"). Filled from
# ``memory_embedding``; a memory deleted through memstream leaves its block at once.
memory_vector_block = Table(
    "memory_vector_block",
    metadata,
    Column("tenant_id", _ID, primary_key=True),
    Column("user_id", _ID, primary_key=True),
    Column("model", String(128), primary_key=True),
    Column("block", Integer, primary_key=True, autoincrement=False),
    Column("dims", Integer, nullable=False),
    Column("memories", Integer, nullable=False),
    Column("ids", LargeBlob, nullable=False),
    Column("vectors", LargeBlob, nullable=False),
    **MYSQL_TABLE_ARGS,
    sqlite_with_rowid=False,
)

# What the long-term chain and the API wrote to an external provider (MemOS, Mem0), kept so the
# operations views can count memories that live there (memstream.store.ledger): one row per
# memory id the provider answered, marked deleted when memstream deletes it there.
provider_memory = Table(
    "provider_memory",
    metadata,
    Column("tenant_id", _ID, primary_key=True),
    Column("provider", String(8), primary_key=True),
    Column("memory_id", String(128), primary_key=True),
    Column("user_id", _ID, nullable=False),
    Column("agent_id", _ID, nullable=True),
    Column("cube_id", String(140), nullable=False),
    Column("memory_type", String(16), nullable=False),
    Column("content", Text, nullable=False),
    Column("importance", SmallInteger, nullable=False, default=5),
    Column("created_at", _TIME, nullable=False),
    Column("deleted_at", _TIME, nullable=True),
    # The same covering indexes as long_term_memory's for the stats queries, and a user's rows.
    Index("ix_provider_memory_time", "tenant_id", "created_at", "memory_type"),
    Index(
        "ix_provider_memory_cube",
        "tenant_id",
        "cube_id",
        "deleted_at",
        "memory_type",
        "importance",
        "agent_id",
    ),
    Index("ix_provider_memory_user", "tenant_id", "provider", "user_id", "deleted_at"),
    **MYSQL_TABLE_ARGS,
)

agent_config = Table(
    "agent_config",
    metadata,
    Column("tenant_id", _ID, primary_key=True),
    Column("agent_id", _ID, primary_key=True),
    Column("long_memory_provider", String(8), nullable=True),
    Column("open_long_memory", Boolean, nullable=False, default=True),
    Column("context_rounds", Integer, nullable=False, default=10),
    Column("model_target_id", _ID, nullable=True),
    Column("updated_at", _TIME, nullable=True),
    **MYSQL_TABLE_ARGS,
)

# MD5 of ``role:content`` per conversation: messages already judged are not judged again.
# A mark lives for seven days (the reference design's number); expired marks are ignored and pruned.
processed_mark = Table(
    "processed_mark",
    metadata,
    Column("tenant_id", _ID, primary_key=True),
    Column("conversation_id", _ID, primary_key=True),
    Column("mark", String(32), primary_key=True),
    Column("expires_at", _TIME, nullable=False),
    Index("ix_mark_expiry", "expires_at"),
    **MYSQL_TABLE_ARGS,
)

# Load-path long-term searches, aggregated per tenant and minute in the API process and
# flushed in batches (memstream.store.searchstats); a flush adds its counts to the row (upsert).
# ``le_*`` is a latency histogram: searches that took longer than the previous bound and at
# most this one (not cumulative); ``searchstats.LATENCY_BUCKETS`` names them in order.
search_stat = Table(
    "search_stat",
    metadata,
    Column("tenant_id", _ID, primary_key=True),
    Column("bucket_start", DateTime(timezone=False), primary_key=True),
    Column("searches", BigInteger, nullable=False, default=0),
    Column("hits", BigInteger, nullable=False, default=0),
    Column("latency_seconds_sum", Float, nullable=False, default=0.0),
    *(
        Column(name, BigInteger, nullable=False, default=0)
        for name in (
            "le_1ms",
            "le_2_5ms",
            "le_5ms",
            "le_10ms",
            "le_25ms",
            "le_50ms",
            "le_100ms",
            "le_250ms",
            "le_500ms",
            "le_1s",
            "le_inf",
        )
    ),
    **MYSQL_TABLE_ARGS,
)

# Dead letters ``memstream redrive`` has sent back, keyed by where each sits in the dead-letter
# topic. A row is written ("sending") before its letter is sent and marked "sent" once the broker
# has it, so no letter is ever sent twice, not even by a run after one that was interrupted.
redriven_letter = Table(
    "redriven_letter",
    metadata,
    Column("topic", String(255), primary_key=True),  # the dead-letter topic, prefix included
    Column("letter_partition", Integer, primary_key=True, autoincrement=False),
    Column("letter_offset", BigInteger, primary_key=True, autoincrement=False),
    Column("reason", String(64), nullable=False),
    Column("stage", String(64), nullable=False),
    Column("target_topic", String(255), nullable=False),
    Column("state", String(8), nullable=False),  # sending, sent
    Column("claimed_at", _TIME, nullable=False),
    Column("sent_at", _TIME, nullable=True),
    **MYSQL_TABLE_ARGS,
)

# Conversations whose cached history may have missed a write (memstream.store.rebuilds): the
# history stage records one when a cache update fails, before it acknowledges the batch, and
# drops its key once Redis answers, so that the load path rebuilds it from the record.
# ``version`` grows with every failure: clearing a row read earlier never clears a later one.
cache_rebuild = Table(
    "cache_rebuild",
    metadata,
    Column("tenant_id", _ID, primary_key=True),
    Column("conversation_id", _ID, primary_key=True),
    Column("version", BigInteger, nullable=False, default=1),
    Column("marked_at", _TIME, nullable=False),
    **MYSQL_TABLE_ARGS,
)

# The outbox of ``memory-changed`` (memstream.changes): one row per change to long-term memory,
# written with the change itself (in its transaction for the built-in store, right after the
# provider answered for MemOS and Mem0), published by the relay in ``seq`` order and marked.
# ``change_id`` is derived from what changed, so a change applied twice is recorded once. The
# rows stay as the memories' record of why they changed (``/v1/memories/{id}/history``), their
# text dropped once published; forgetting a user deletes them.
memory_change = Table(
    "memory_change",
    metadata,
    Column("seq", _PK, primary_key=True, autoincrement=True),
    Column("change_id", String(64), nullable=False),
    # The full topic name (prefix included): deployments that share a database publish apart.
    Column("topic", String(255), nullable=False),
    Column("tenant_id", _ID, nullable=False),
    Column("user_id", _ID, nullable=False),
    Column("provider", String(8), nullable=False),
    Column("memory_id", String(128), nullable=False),
    Column("change", String(16), nullable=False),
    Column("cause", String(16), nullable=False),
    Column("conversation_id", _ID, nullable=True),
    # The published value without ``content``; the text of an ``added`` change is kept apart
    # until it is published (or erased).
    Column("payload", _LONG_TEXT, nullable=False),
    Column("content", Text, nullable=True),
    Column("changed_at", _TIME, nullable=False),
    Column("published_at", _TIME, nullable=True),
    # The trace of the session end behind the change: the relay puts it on the record.
    Column("traceparent", String(64), nullable=True),
    UniqueConstraint("change_id", name="uq_change_id"),
    # The relay reads the oldest unpublished rows of its topic.
    Index("ix_change_pending", "topic", "published_at", "seq"),
    # A memory's changes (history, erasing), and a user's (forgetting).
    Index("ix_change_memory", "tenant_id", "memory_id"),
    Index("ix_change_user", "tenant_id", "user_id"),
    **MYSQL_TABLE_ARGS,
)

# Which memories a newer one superseded (conflict resolution), kept in the record: one row per
# (newer, older) pair, for every provider (ids are the provider's).
memory_link = Table(
    "memory_link",
    metadata,
    Column("tenant_id", _ID, primary_key=True),
    Column("memory_id", String(128), primary_key=True),
    Column("supersedes_id", String(128), primary_key=True),
    Column("user_id", _ID, nullable=False),
    Column("provider", String(8), nullable=False),
    Column("created_at", _TIME, nullable=False),
    Index("ix_link_superseded", "tenant_id", "supersedes_id"),
    Index("ix_link_user", "tenant_id", "user_id"),
    **MYSQL_TABLE_ARGS,
)

# Who relays a topic's outbox now: one holder at a time per topic, for a few seconds, renewed
# while it runs, so that several workers never publish the same rows side by side.
change_relay = Table(
    "change_relay",
    metadata,
    Column("topic", String(255), primary_key=True),
    Column("owner", String(64), nullable=False),
    Column("expires_at", _TIME, nullable=False),
    **MYSQL_TABLE_ARGS,
)

# Memories stored under a key their writer chose (a LangGraph store's items): the key, the
# JSON value and the memory holding its text now, in whichever provider. Putting a new value
# supersedes that memory (``memstream.keyed``).
memory_key = Table(
    "memory_key",
    metadata,
    Column("tenant_id", _ID, primary_key=True),
    Column("user_id", _ID, primary_key=True),
    # SHA-256 of the namespace and the key: both are free text, too long for a primary key.
    Column("slot", String(64), primary_key=True),
    Column("namespace", JSON, nullable=False),
    # The namespace as one text whose prefixes are its parents' (``memstream.keyed.path_of``).
    Column("path", Text, nullable=False),
    Column("item_key", Text, nullable=False),
    Column("cube_id", String(140), nullable=False),
    Column("provider", String(8), nullable=False),
    Column("memory_id", String(128), nullable=False),
    Column("value", _LONG_TEXT, nullable=False),
    Column("created_at", _TIME, nullable=False),
    Column("updated_at", _TIME, nullable=False),
    Index("ix_key_memory", "tenant_id", "memory_id"),
    **MYSQL_TABLE_ARGS,
)


# Each forget of a user (memstream.forget), kept for good: every stage that writes a user's data
# drops what the user said before it. "Before" is exact: the end of each partition of the public
# input topics when the forget began (``offsets``: full topic name -> partition -> end offset),
# the record's last message id then (``message_id``), for history a forget keeps, and the last
# change to memory recorded then (``change_seq``), whose text the relay never publishes.
user_forget = Table(
    "user_forget",
    metadata,
    Column("id", _PK, primary_key=True, autoincrement=True),
    Column("tenant_id", _ID, nullable=False),
    Column("user_id", _ID, nullable=False),
    Column("purge_history", Boolean, nullable=False),
    Column("offsets", JSON, nullable=False),
    Column("message_id", BigInteger, nullable=False),
    Column("change_seq", BigInteger, nullable=False),
    Column("forgotten_at", _TIME, nullable=False),
    Index("ix_forget_user", "tenant_id", "user_id"),
    **MYSQL_TABLE_ARGS,
)


# Each user's memory stamp: raised in every transaction that changes which of the user's
# built-in memories are live or searchable (a row never goes, not even when the user is
# forgotten, so a stamp never comes back), so that a process holding a hot user's memories
# tells with one primary-key read whether they are still what the table holds.
memory_stamp = Table(
    "memory_stamp",
    metadata,
    Column("tenant_id", _ID, primary_key=True),
    Column("user_id", _ID, primary_key=True),
    Column("stamp", BigInteger, nullable=False),
    **MYSQL_TABLE_ARGS,
)


# The built-in store's search over the stored chat turns (providers/builtin/history.py), the
# fallback where memories cannot answer: the postings of each indexed message, one row per
# word with its frequency, read per query term for one user (the primary key's prefix).
message_term = Table(
    "message_term",
    metadata,
    Column("tenant_id", _ID, primary_key=True),
    Column("user_id", _ID, primary_key=True),
    Column("term", String(TERM_CHARS), primary_key=True),
    Column("message_id", _PK, primary_key=True, autoincrement=False),
    Column("tf", Integer, nullable=False),
    **MYSQL_TABLE_ARGS,
)

# One row per ``conversation_message`` row the turn index has read (``message_id`` is its
# ``id``): who said it and its length in index terms, 0 for a message that is not searched
# (not a chat turn of the user or the assistant). A message without a row is not indexed yet.
message_indexed = Table(
    "message_indexed",
    metadata,
    Column("message_id", _PK, primary_key=True, autoincrement=False),
    Column("tenant_id", _ID, nullable=False),
    Column("user_id", _ID, nullable=False),
    Column("agent_id", _ID, nullable=True),
    Column("role", String(16), nullable=False),
    Column("term_count", Integer, nullable=False),
    # A search counts one user's searchable turns it may answer (N and the average length of
    # BM25) from this index alone: who said each and to which agent ride in it.
    Index("ix_message_indexed_visible", "tenant_id", "user_id", "term_count", "role", "agent_id"),
    **MYSQL_TABLE_ARGS,
)
