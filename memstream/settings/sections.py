"""The settings, one section a part of memstream: each field declares its variable (``MEMSTREAM_``
and its name), default, allowed values and what it does; docs/settings.md is rendered from here
(``memstream.settings.reference``). A component takes the section it reads."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cached_property
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic.config import JsonDict

from memstream_client.contract.security import BrokerSecurity, SaslMechanism, SecurityProtocol

# Tokens a conversation summary is folded to, and what the context window keeps for it.
SUMMARY_BUDGET_TOKENS = 2000


def setting(default: Any, doc: str, *, allowed: str | None = None, **limits: Any) -> Any:
    """A field with what docs/settings.md says of it: ``doc`` is its "what it does" column and
    ``allowed`` its "allowed" one, when the limits, the type and the validators do not say it."""
    extra: JsonDict | None = None if allowed is None else {"allowed": allowed}
    return Field(default=default, description=doc, json_schema_extra=extra, **limits)


class Section(BaseModel):
    """A group of settings: ``title`` heads its table in docs/settings.md, ``intro`` opens it."""

    model_config = ConfigDict(frozen=True)

    title: ClassVar[str]
    intro: ClassVar[str] = ""

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # A URL's password (the database's, Redis's) must not reach a log or a traceback.
        for name, value in super().__repr_args__():
            yield name, masked_url(value) if isinstance(value, str) else value


def _no_spaces(value: str) -> str:
    if any(ch.isspace() for ch in value):
        raise ValueError("must not contain white space")
    return value


class BrokerSettings(Section):
    title = "Kafka"

    kafka_bootstrap_servers: str = setting(
        "127.0.0.1:9092", "Kafka bootstrap servers, `host:port,host:port`"
    )
    kafka_wait_seconds: float = setting(
        60.0,
        "how long a command (the worker's start, replay, redrive, dead-letters, publish, "
        "readiness) waits for a broker that is not ready yet (a new cluster, a restart) before "
        "it fails",
        ge=0,
    )
    kafka_security_protocol: SecurityProtocol = setting(
        "PLAINTEXT",
        "how every client memstream builds (the workers, Faust's, the API's readiness, the "
        "commands, `Publisher.from_settings`) reaches the broker "
        "([security](security.md#the-broker))",
    )
    kafka_sasl_mechanism: Literal[""] | SaslMechanism = setting(
        "",
        "the SASL mechanism",
        allowed="`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`; required by `SASL_*`",
    )
    kafka_sasl_username: str = setting(
        "", "the SASL user", allowed="required by `SASL_*`, refused otherwise"
    )
    kafka_sasl_password: SecretStr = setting(
        SecretStr(""), "the SASL user's password", allowed="required by `SASL_*`, refused otherwise"
    )
    kafka_ssl_cafile: str = setting(
        "",
        "the CA certificates the broker's certificate is checked against (the system's CAs when "
        "empty); the broker's name or address must be in its certificate",
        allowed="an existing PEM file; `SSL`, `SASL_SSL` only",
    )
    kafka_ssl_certfile: str = setting(
        "",
        "the client certificate, for a broker that authenticates clients by TLS "
        "(`ssl.client.auth=required`)",
        allowed="an existing PEM file; `SSL`, `SASL_SSL` only",
    )
    kafka_ssl_keyfile: str = setting(
        "",
        "the client certificate's key (it may be in the certificate file)",
        allowed="an existing PEM file; `SSL`, `SASL_SSL` only; needs a certificate",
    )
    app_id: str = setting(
        "memstream",
        "the consumer group in which the workers read `message-written` (the history stage); "
        "the summary and long-term stages run as the Faust app `<app id>-summary-longterm` (or "
        "`-summary`, `-longterm`: [stage roles](operations.md#stage-roles-and-sizing))",
    )
    topic_prefix: str = setting("memory.", "prefix of every topic name", allowed="no white space")
    topic_partitions: int = setting(
        8, "partitions of the topics memstream creates (the unit of worker parallelism)", ge=1
    )
    topic_replication_factor: int = setting(
        1, "replication factor of the topics memstream creates", ge=1
    )
    changes_retention_hours: float = setting(
        168.0,
        "`retention.ms` of `memory-changed`, set when memstream creates the topic and whenever "
        "it finds it differs: the longest a published change, a forgotten user's text "
        "included, stays on the topic",
        gt=0,
    )

    _topic_prefix_has_no_spaces = field_validator("topic_prefix")(_no_spaces)

    @model_validator(mode="after")
    def _security_fits(self) -> BrokerSettings:
        try:
            self.kafka_security  # noqa: B018 -- building it checks it
        except ValueError as exc:
            raise ValueError(f"MEMSTREAM_KAFKA_* security settings: {exc}") from None
        return self

    def topic(self, name: str) -> str:
        """Full topic name for a public or internal topic."""
        return f"{self.topic_prefix}{name}"

    @property
    def kafka_security(self) -> BrokerSecurity:
        """How the broker is reached: protocol, SASL credentials, TLS files (built on each
        call: a cached one would outlive ``model_copy(update=...)``)."""
        return BrokerSecurity(
            protocol=self.kafka_security_protocol,
            sasl_mechanism=self.kafka_sasl_mechanism,
            sasl_username=self.kafka_sasl_username,
            sasl_password=self.kafka_sasl_password.get_secret_value(),
            ssl_cafile=self.kafka_ssl_cafile,
            ssl_certfile=self.kafka_ssl_certfile,
            ssl_keyfile=self.kafka_ssl_keyfile,
        )


class DatabaseSettings(Section):
    title = "Database"

    database_url: str = setting(
        "mysql+aiomysql://root@127.0.0.1:3306/memstream",
        "SQLAlchemy async URL of the record; `sqlite+aiosqlite:///path.db` for the embedded "
        "default",
    )
    database_read_url: str = setting(
        "",
        "a read replica of the record: the query API's reads (load path, search, memory lists, "
        "messages, stats) go there, its writes to `MEMSTREAM_DATABASE_URL`; empty: the primary "
        "([read replicas](operations.md#read-replicas))",
    )
    database_read_sticky_seconds: float = setting(
        5.0,
        "after the API changes a user's memories, that user's reads stay on the primary this "
        "long, so its own writes are seen while the read replica catches up",
        ge=0,
    )
    database_read_lag_check_seconds: float = setting(
        1.0,
        "how often each API process reads the replica's lag (`SHOW REPLICA STATUS`, which needs "
        "the `REPLICATION CLIENT` / `SLAVE MONITOR` privilege); `0`: never, the replica is read "
        "whatever its lag",
        ge=0,
    )
    database_read_max_lag_seconds: float = setting(
        5.0,
        "while the replica's lag is over this, or unknown (not replicating, the check failing "
        "or stale), the API's reads go to the primary; keep it at most the sticky time",
        ge=0,
    )
    db_retry_max_seconds: float = setting(
        30.0, "longest backoff between retries while the database is down", gt=0
    )


class CacheSettings(Section):
    title = "Cache"

    redis_url: str = setting(
        "redis://127.0.0.1:6379/0", "the hot cache; an empty string runs without it"
    )
    redis_cluster: bool = setting(
        False,
        "`MEMSTREAM_REDIS_URL` names one node of a Redis Cluster; the client finds the others",
    )
    cache_prefix: str = setting(
        "memstream:", "prefix of every Redis key", allowed="no white space, no `{` or `}`"
    )
    cache_max_messages: int = setting(
        200, "newest messages kept in the cache per conversation", ge=1
    )
    cache_ttl_seconds: int = setting(
        3 * 24 * 3600, "cache lifetime of a conversation after its last write", ge=1
    )
    summary_cache_ttl_seconds: int = setting(3600, "how long a summary stays in the cache", ge=1)
    redis_timeout_seconds: float = setting(
        0.5,
        "Redis socket timeout: every wait for the server (a write, a probe) is cut off after "
        "this; the load path's reads have a shorter budget (below)",
        gt=0,
    )
    cache_read_budget_seconds: float = setting(
        0.1,
        "how long the load path waits for the cache (never more than half of "
        "`MEMSTREAM_SHORT_TERM_TIMEOUT_SECONDS`) before it reads the record, so that a slow "
        "cache leaves the record read its time",
        gt=0,
    )
    cache_breaker_failures: int = setting(
        3,
        "failed cache calls in a row after which a node (a cluster's master, or the one server) "
        "is no longer asked",
        ge=1,
    )
    cache_probe_seconds: float = setting(
        1.0,
        "how often a node that is no longer asked is probed; it serves again once it answers",
        gt=0,
    )

    _cache_prefix_has_no_spaces = field_validator("cache_prefix")(_no_spaces)

    @field_validator("cache_prefix")
    @classmethod
    def _no_braces(cls, value: str) -> str:
        # A brace would start a Redis Cluster hash tag of its own and split a conversation's
        # keys over slots.
        if "{" in value or "}" in value:
            raise ValueError("must not contain { or }")
        return value

    @property
    def cache_enabled(self) -> bool:
        return bool(self.redis_url.strip())


class ApiSettings(Section):
    title = "Query API"

    api_host: str = setting("127.0.0.1", "query API bind address")
    api_port: int = setting(8080, "query API port", ge=1, le=65535)
    api_keys: SecretStr = setting(
        SecretStr(""),
        "`key1:tenantA,key2:tenantB` binds API keys to tenants; empty with "
        "`MEMSTREAM_API_ADMIN_KEYS` empty too is open (dev) mode, allowed on a loopback address "
        "only (operators' keys alone open no tenant's data)",
        allowed="`key:tenant,...`",
    )
    api_admin_keys: SecretStr = setting(
        SecretStr(""),
        "operators' keys (the name says whose): the views of every tenant, the dashboard's "
        "pipeline panel (`/dashboard/pipeline`), need one of these once any keys are set; they "
        "read no tenant's data ([security](security.md))",
        allowed="`key:name,...`",
    )
    api_snapshot_seconds: float = setting(
        5.0,
        "how long an API process keeps `/readyz`'s worker groups and the pipeline panel before "
        "computing them again (each opens broker clients); concurrent callers share one "
        "computation (`0`: no keeping, still shared)",
        ge=0,
    )
    api_allow_open: bool = setting(
        False,
        "`true` lets open mode listen on an address other than loopback (every tenant's data to "
        "anyone who reaches the port)",
    )
    api_allowed_hosts: str = setting(
        "",
        "the `Host` headers the API answers (ports ignored); empty: loopback names only "
        "(`localhost`, `127.0.0.0/8`, `[::1]`) in open mode, any with keys; others get 421 "
        "([security](security.md))",
        allowed="`host,...` or `*`",
    )
    api_max_body_bytes: int = setting(
        1024 * 1024,
        "larger request bodies are refused with 413, counted as they arrive whatever their "
        "headers say",
        ge=1024,
    )
    api_max_in_flight: int = setting(
        64,
        "`/v1` requests one API process serves at once; the next ones wait for a slot "
        "([overload](operations.md#overload))",
        ge=1,
    )
    api_min_in_flight: int = setting(
        4,
        "the fewest `/v1` requests a busy process runs at once: while its event loop wakes up "
        "late, fewer than `MEMSTREAM_API_MAX_IN_FLIGHT` run ([overload](operations.md#overload))",
        ge=1,
    )
    api_loop_target_seconds: float = setting(
        0.005,
        "how late the event loop may wake up while the process has a core before fewer requests "
        "run at once ([overload](operations.md#overload))",
        gt=0,
    )
    api_queue_seconds: float = setting(
        0.1,
        "how long a `/v1` request waits for a slot before it is refused with 503 and "
        "`Retry-After` (`0`: refused at once)",
        ge=0,
    )
    api_lag_seconds: float = setting(
        0.1,
        "event-loop lag past which `/v1/context` answers from the short-term window only "
        "(`degraded`: `long_term`) to the tenants sending an equal share of the recent requests "
        "or more, until the loop catches up",
        gt=0,
    )
    api_header_seconds: float = setting(
        5.0,
        "a request's head (request line and headers) must be complete this long after its first "
        "byte, or after the connection opened; else 408 and the connection is closed (a "
        "connection that sent nothing is closed)",
        gt=0,
    )
    api_body_seconds: float = setting(
        10.0,
        "a request's body must be complete this long after its head; else 408 and the "
        "connection is closed (the request never took a slot)",
        gt=0,
    )
    api_max_header_bytes: int = setting(
        16 * 1024,
        "a longer head is refused with 431 and the connection closed, before more of it is held",
        ge=1024,
    )
    api_max_headers: int = setting(100, "a head with more header fields is refused with 431", ge=8)
    api_max_connections: int = setting(
        1000,
        "connections and request tasks one API process holds at once; past it, new requests get "
        "503 (keep it below the process's file descriptor limit)",
        ge=1,
    )
    api_max_body_bytes_in_flight: int = setting(
        64 * 1024 * 1024,
        "request-body bytes one process holds at once: what the bodies being read or served "
        "announce (`Content-Length`; a body of unknown length counts as "
        "`MEMSTREAM_API_MAX_BODY_BYTES`); past it, 503 with `Retry-After`",
        ge=1024,
    )
    api_tenant_max_body_bytes_in_flight: int = setting(
        16 * 1024 * 1024,
        "the same for one tenant's requests; past it, 429 with `Retry-After`",
        ge=1024,
    )
    api_tenant_max_in_flight: int = setting(
        32,
        "`/v1` requests of one tenant (its API key's) one process serves at once; past it, 429 "
        "with `Retry-After` (`0`: only the process's limit) "
        "([fairness](operations.md#fairness-between-tenants))",
        ge=0,
    )
    api_tenant_rate: float = setting(
        0.0,
        "`/v1` requests a second one tenant may send to one process, a second's worth at once; "
        "past it, 429 with `Retry-After` (`0`: no rate limit)",
        ge=0,
    )
    api_tenant_max_in_flight_overrides: str = setting(
        "",
        "tenants whose `MEMSTREAM_API_TENANT_MAX_IN_FLIGHT` differs from the default",
        allowed="`tenant=N,...`",
    )
    api_tenant_rate_overrides: str = setting(
        "",
        "tenants whose `MEMSTREAM_API_TENANT_RATE` differs from the default (`0`: none)",
        allowed="`tenant=rate,...`",
    )

    @field_validator("api_keys", "api_admin_keys")
    @classmethod
    def _valid_keys(cls, value: SecretStr) -> SecretStr:
        _parse_api_keys(value.get_secret_value())
        return value

    @field_validator("api_tenant_max_in_flight_overrides", "api_tenant_rate_overrides")
    @classmethod
    def _valid_tenant_overrides(cls, value: str) -> str:
        _parse_tenant_numbers(value)
        return value

    @cached_property
    def tenant_of_key(self) -> dict[str, str]:
        """API key -> tenant id; empty means open (dev) mode."""
        return _parse_api_keys(self.api_keys.get_secret_value())

    @cached_property
    def operator_of_key(self) -> dict[str, str]:
        """Operator API key -> the operator's name (``MEMSTREAM_API_ADMIN_KEYS``)."""
        return _parse_api_keys(self.api_admin_keys.get_secret_value())

    @property
    def api_open(self) -> bool:
        """Open (dev) mode: neither tenant nor operator keys, so every tenant's data is open."""
        return not self.tenant_of_key and not self.operator_of_key

    @cached_property
    def tenant_in_flight_overrides(self) -> dict[str, int]:
        """Tenant -> its own ``MEMSTREAM_API_TENANT_MAX_IN_FLIGHT``."""
        raw = self.api_tenant_max_in_flight_overrides
        return {tenant: int(n) for tenant, n in _parse_tenant_numbers(raw).items()}

    @cached_property
    def tenant_rate_overrides(self) -> dict[str, float]:
        """Tenant -> its own ``MEMSTREAM_API_TENANT_RATE``."""
        return _parse_tenant_numbers(self.api_tenant_rate_overrides)


class LoadPathSettings(Section):
    title = "Load path"
    intro = "What `POST /v1/context` and `POST /v1/memories/search` load, and how long they wait."

    short_term_timeout_seconds: float = setting(
        0.5, "the short-term window's time limit before it answers empty and degraded", gt=0
    )
    long_term_timeout_seconds: float = setting(
        0.8, "long-term memory's time limit before it answers empty and degraded", gt=0
    )
    window_max_tokens: int = setting(8000, "the short-term window's budget", ge=1)
    summary_budget_tokens: int = setting(
        SUMMARY_BUDGET_TOKENS,
        "the part of the window reserved for the summary",
        allowed="≥ 0, at most `MEMSTREAM_WINDOW_MAX_TOKENS`",
        ge=0,
    )
    long_term_budget_tokens: int = setting(4000, "long-term memory's budget", ge=0)
    user_profile_share: float = setting(
        0.6, "the user profile's largest share of the long-term budget", ge=0, le=1
    )
    user_profile_fact_share: float = setting(
        0.5,
        "the part of the user profile's share facts are guaranteed before episodes",
        ge=0,
        le=1,
    )
    long_term_top_k: int = setting(10, "memories retrieved per cube", ge=1, le=100)
    long_term_fresh_seconds: float = setting(
        1.0,
        "how long the built-in store reuses the answer of a lexical search for the same query: "
        "what another process writes or deletes reaches the load path within it (a process's "
        "own writes are seen at once)",
        ge=0,
    )
    long_term_warm_memories: int = setting(
        20_000,
        "memories of hot users the built-in store keeps in each API process (about 2.5 KB "
        "each), to rank their lexical searches there after one primary-key read of the user's "
        "stamp instead of the search's statement; 0 turns the warm layer off",
        ge=0,
    )
    long_term_warm_after: int = setting(
        3,
        "searches of a user within a minute that make the user warm (loaded off the request's "
        "path)",
        ge=1,
    )
    search_history: bool = setting(
        True,
        "the built-in store's search also ranks the best passages of the user's stored chat "
        "turns (the turn index the worker fills) and answers them, `origin` `history`, in what "
        "the memories above the threshold leave of the top k",
    )

    @model_validator(mode="after")
    def _budgets_fit(self) -> LoadPathSettings:
        if self.summary_budget_tokens > self.window_max_tokens:
            raise ValueError("summary_budget_tokens must not exceed window_max_tokens")
        return self


class StageSettings(Section):
    title = "Ingest and stages"

    max_content_chars: int = setting(
        32768, "longer message content goes to `dead-letter` (`content_too_large`)", ge=1
    )
    batch_max_events: int = setting(
        5000, "events written per batch (one multi-row INSERT, one Redis pipeline)", ge=1
    )
    batch_within_seconds: float = setting(0.2, "how long a batch waits to fill up", gt=0)
    agent_config_cache_seconds: float = setting(
        5.0, "how long the API and worker reuse an agent's config before reading it again", ge=0
    )
    forget_refresh_seconds: float = setting(
        1.0,
        "how long a stage reuses its copy of the forget records before it looks for new ones; "
        "every write is checked against a fresh copy once done "
        "([forgetting a user](operations.md#forgetting-a-user))",
        ge=0,
    )
    episode_retention_days: int = setting(
        365,
        "episodes (what the user said, dated) are kept this many days from when they were "
        "stored; `0` turns the limit off",
        ge=0,
    )
    episode_max_per_user: int = setting(
        5000, "at most this many episodes are kept per user, the newest; `0`: no limit", ge=0
    )
    changes_relay: bool = setting(
        True,
        "whether a worker running the long-term role relays the outbox of changes to "
        "`memory-changed` (one relay publishes at a time, whichever holds the lease; the others "
        "stand by); `false` for workers that should never publish "
        "([memory-changed](operations.md#memory-changed))",
    )
    changes_relay_interval_seconds: float = setting(
        0.5,
        "how often an idle relay looks for changes other processes wrote (the API's); the "
        "worker's own changes go out at once",
        gt=0,
    )


class RetrySettings(Section):
    title = "Retries"
    intro = (
        "A stage record that meets an outage (database, provider, broker) is tried again on the "
        "retry tiers: [delivery guarantees](design.md#delivery-guarantees)."
    )

    retry_base_seconds: float = setting(1.0, "a failing stage record's first backoff", gt=0)
    retry_max_delay_seconds: float = setting(
        300.0, "the longest backoff, which the first doubles up to", gt=0
    )
    retry_horizon_seconds: float = setting(
        3600.0,
        "how long a record keeps being retried before it goes to `dead-letter` as "
        "`retries_exhausted`",
        ge=0,
    )


class LlmSettings(Section):
    title = "LLM"
    intro = (
        "An OpenAI-compatible chat completions endpoint; without one the judge and the conflict "
        "stage use the rules and the summary is extractive ([a small local model](llm.md))."
    )

    llm_base_url: str = setting("", "the endpoint's base URL (like `http://host:port/v1`)")
    llm_model: str = setting("", "the model asked for")
    llm_api_key: SecretStr = setting(SecretStr(""), "the endpoint's key")
    llm_timeout_seconds: float = setting(
        20.0,
        "one completion's time limit; past it the judge uses the rules, the conflict stage the "
        "rules, the summary the extract",
        gt=0,
    )
    llm_max_in_flight: int = setting(
        32,
        "completions one process asks for at once; the others wait for a slot before their time "
        "limit starts (`1` for a local server that answers one request at a time)",
        ge=1,
    )
    llm_max_tokens: int = setting(
        2000,
        "the longest answer any completion asks for (the judge asks up to 1500 tokens by the "
        "session's size, the conflict stage up to 264, the summary its budget); a slow model's "
        "answer has to fit in the time limit",
        ge=16,
    )
    llm_models: str = setting(
        "",
        "the endpoint's model for an agent's `model_target_id`; the judge uses it for that "
        "agent's sessions, and `MEMSTREAM_LLM_MODEL` for targets not listed",
        allowed="`target=model,...`",
    )

    @field_validator("llm_models")
    @classmethod
    def _valid_models(cls, value: str) -> str:
        _parse_models(value)
        return value

    @cached_property
    def model_of_target(self) -> dict[str, str]:
        """Agent ``model_target_id`` -> the LLM model that serves it."""
        return _parse_models(self.llm_models)


class EmbeddingSettings(Section):
    title = "Embeddings"
    intro = (
        "An OpenAI-compatible `/v1/embeddings` endpoint for hybrid retrieval; without one "
        "retrieval is lexical only ([retrieval](design.md#retrieval-in-the-built-in-store))."
    )

    embedding_base_url: str = setting("", "the endpoint's base URL (like `http://host:port/v1`)")
    embedding_model: str = setting("", "the model asked for")
    embedding_api_key: SecretStr = setting(SecretStr(""), "the endpoint's key")
    embedding_batch_size: int = setting(64, "texts per embeddings request", ge=1, le=2048)
    embedding_timeout_seconds: float = setting(
        10.0,
        "one request's time limit (timeouts, connection errors, 429 and 5xx are retried with "
        "capped backoff; other 4xx are not)",
        gt=0,
    )


class ProviderSettings(Section):
    title = "MemOS and Mem0"
    intro = "The long-term stores an agent may choose instead of the built-in one."

    memos_url: str = setting("", "MemOS server (its `/product/*` API)")
    memos_api_key: SecretStr = setting(SecretStr(""), "the MemOS server's key")
    mem0_url: str = setting("", "Mem0 REST server")
    mem0_api_key: SecretStr = setting(SecretStr(""), "the Mem0 server's key")


class ProcessSettings(Section):
    title = "Worker process, logs and traces"

    worker_web_host: str = setting(
        "127.0.0.1",
        "the worker's HTTP bind address (`0.0.0.0` in containers, so Prometheus can scrape it)",
    )
    worker_web_port: int = setting(
        6066,
        "the worker's HTTP port: `/metrics` and Faust's status index, nothing else (Faust's own "
        "views are off); `0` turns it off",
        ge=0,
        le=65535,
    )
    log_level: str = setting("INFO", "log level")
    trace_user_ids: bool = setting(
        False,
        "`true` puts the user id on the API's spans; traces outlive a forget, so it is off by "
        "default ([tracing](tracing.md))",
    )


# ``user:password@`` in a URL (or a list of them); the user may be empty (``redis://:pw@``).
_USERINFO = re.compile(r"(?P<user>[^\s:/@,]*):(?P<password>[^\s/@,]+)@")


def masked_url(url: str) -> str:
    """``url`` (or a comma-separated list of addresses) with every password shown as ``***``."""
    return _USERINFO.sub(r"\g<user>:***@", url)


def _parse_api_keys(raw: str) -> dict[str, str]:
    return _parse_pairs(raw, ":", "API keys are written key:tenant, separated by commas")


def _parse_models(raw: str) -> dict[str, str]:
    return _parse_pairs(raw, "=", "LLM models are written target=model, separated by commas")


def _parse_tenant_numbers(raw: str) -> dict[str, float]:
    error = "tenant overrides are written tenant=number (at least 0), separated by commas"
    numbers: dict[str, float] = {}
    for tenant, value in _parse_pairs(raw, "=", error).items():
        try:
            number = float(value)
        except ValueError:
            raise ValueError(error) from None
        if not number >= 0:
            raise ValueError(error)
        numbers[tenant] = number
    return numbers


def _parse_pairs(raw: str, separator: str, error: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in raw.split(","))):
        key, sep, value = part.partition(separator)
        if not sep or not key.strip() or not value.strip():
            raise ValueError(error)
        pairs[key.strip()] = value.strip()
    return pairs
