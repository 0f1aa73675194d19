"""The one typed, frozen settings object, built from ``MEMSTREAM_*`` variables (and ``.env``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cached_property
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from memstream_client.contract.security import BrokerSecurity, SaslMechanism, SecurityProtocol

# Tokens a conversation summary is folded to, and what the context window keeps for it.
SUMMARY_BUDGET_TOKENS = 2000


class Settings(BaseSettings):
    """Every knob memstream has; nothing else reads the environment."""

    model_config = SettingsConfigDict(
        env_prefix="MEMSTREAM_", env_file=".env", frozen=True, extra="ignore"
    )

    # Public settings (docs/settings.md).
    kafka_bootstrap_servers: str = "127.0.0.1:9092"
    # How every client memstream builds reaches the broker (memstream_client.contract.security); an
    # empty value is unset. docs/security.md says which listener takes which.
    kafka_security_protocol: SecurityProtocol = "PLAINTEXT"
    kafka_sasl_mechanism: Literal[""] | SaslMechanism = ""
    kafka_sasl_username: str = ""
    kafka_sasl_password: SecretStr = SecretStr("")
    kafka_ssl_cafile: str = ""
    kafka_ssl_certfile: str = ""
    kafka_ssl_keyfile: str = ""
    app_id: str = "memstream"
    topic_prefix: str = "memory."
    database_url: str = "mysql+aiomysql://root@127.0.0.1:3306/memstream"
    # The API's reads (load path, search, messages, stats) go here; empty: the primary.
    database_read_url: str = ""
    redis_url: str = "redis://127.0.0.1:6379/0"
    api_host: str = "127.0.0.1"
    api_port: int = Field(default=8080, ge=1, le=65535)
    api_keys: SecretStr = SecretStr("")
    # Operators' keys (``key:name``): the cluster-wide views (the dashboard's pipeline panel).
    api_admin_keys: SecretStr = SecretStr("")
    # How long /readyz's worker groups and the pipeline panel are kept before one is recomputed.
    api_snapshot_seconds: float = Field(default=5.0, ge=0)
    # Request bodies larger than this are refused (413) before they are read whole. Open mode
    # (no API keys) is refused on an address other than loopback unless explicitly allowed.
    api_max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    api_allow_open: bool = False
    # Host names the API answers (ports ignored, ``*`` for any); empty: loopback names only in
    # open mode, any with keys (memstream.api.hosts: against DNS rebinding).
    api_allowed_hosts: str = ""
    # Overload: /v1 requests in flight per process, how long one waits for a slot before a 503,
    # and the event-loop lag past which /v1/context answers short-term only. While the loop
    # wakes later than loop_target_seconds, fewer run at once (down to min_in_flight).
    api_max_in_flight: int = Field(default=64, ge=1)
    api_min_in_flight: int = Field(default=4, ge=1)
    api_loop_target_seconds: float = Field(default=0.005, gt=0)
    api_queue_seconds: float = Field(default=0.1, ge=0)
    api_lag_seconds: float = Field(default=0.1, gt=0)
    # Slow and large clients (memstream.api.server): a request's head must arrive within
    # header_seconds of its first byte, its body within body_seconds of its head; heads over
    # max_header_bytes or max_headers fields get 431; connections past max_connections a 503.
    api_header_seconds: float = Field(default=5.0, gt=0)
    api_body_seconds: float = Field(default=10.0, gt=0)
    api_max_header_bytes: int = Field(default=16 * 1024, ge=1024)
    api_max_headers: int = Field(default=100, ge=8)
    api_max_connections: int = Field(default=1000, ge=1)
    # Bodies are read before a slot is taken; the bytes they announce are held while they are
    # read and served, at most these many per process and per tenant.
    api_max_body_bytes_in_flight: int = Field(default=64 * 1024 * 1024, ge=1024)
    api_tenant_max_body_bytes_in_flight: int = Field(default=16 * 1024 * 1024, ge=1024)
    # Each tenant's share of a process (the API key's tenant): requests in flight and a rate
    # (requests/s, a second's worth as burst); 0: no limit of its own. Per-tenant overrides are
    # written ``tenant=value,...``; over either, 429 with Retry-After.
    api_tenant_max_in_flight: int = Field(default=32, ge=0)
    api_tenant_rate: float = Field(default=0.0, ge=0)
    api_tenant_max_in_flight_overrides: str = ""
    api_tenant_rate_overrides: str = ""
    llm_base_url: str = ""
    llm_model: str = ""
    llm_api_key: SecretStr = SecretStr("")
    # A completion's time limit, and the requests one process sends at once (a local server
    # such as llama.cpp's answers one at a time: 1 keeps queued requests out of the timeout).
    llm_timeout_seconds: float = Field(default=20.0, gt=0)
    llm_max_in_flight: int = Field(default=32, ge=1)
    # The longest answer any request asks for (the judge asks up to 1500 tokens, the summary
    # up to its budget): a slow model's answer has to fit in the timeout.
    llm_max_tokens: int = Field(default=2000, ge=16)
    # ``target=model,...``: the LLM model that serves an agent's ``model_target_id``; a target
    # not listed is judged with ``llm_model``.
    llm_models: str = ""
    memos_url: str = ""
    memos_api_key: SecretStr = SecretStr("")
    mem0_url: str = ""
    mem0_api_key: SecretStr = SecretStr("")
    max_content_chars: int = Field(default=32768, ge=1)
    embedding_base_url: str = ""
    embedding_model: str = ""
    embedding_api_key: SecretStr = SecretStr("")

    # Operational settings.
    topic_partitions: int = Field(default=8, ge=1)
    topic_replication_factor: int = Field(default=1, ge=1)
    cache_prefix: str = "memstream:"
    # MEMSTREAM_REDIS_URL names one node of a Redis Cluster; the client finds the others.
    redis_cluster: bool = False
    cache_max_messages: int = Field(default=200, ge=1)
    cache_ttl_seconds: int = Field(default=3 * 24 * 3600, ge=1)
    redis_timeout_seconds: float = Field(default=0.5, gt=0)
    # The load path waits this long for the cache (at most half its short-term limit), so
    # that a slow cache leaves the record read its time; after this many failed calls in a row
    # a node (or the one server) is not asked, and is probed this often until it answers.
    cache_read_budget_seconds: float = Field(default=0.1, gt=0)
    cache_breaker_failures: int = Field(default=3, ge=1)
    cache_probe_seconds: float = Field(default=1.0, gt=0)
    batch_max_events: int = Field(default=5000, ge=1)
    batch_within_seconds: float = Field(default=0.2, gt=0)
    # After the API changes a user's memories, that user's reads stay on the primary this long,
    # so its own writes are seen while the read replica catches up.
    database_read_sticky_seconds: float = Field(default=5.0, ge=0)
    # The read replica's lag is read this often (0: never, the replica is always read); while
    # it is over the maximum, or unknown, the API reads the primary.
    database_read_lag_check_seconds: float = Field(default=1.0, ge=0)
    database_read_max_lag_seconds: float = Field(default=5.0, ge=0)
    db_retry_max_seconds: float = Field(default=30.0, gt=0)
    # How long a command waits for a broker that is not ready (a new cluster, a restart)
    # before it fails.
    kafka_wait_seconds: float = Field(default=60.0, ge=0)
    # Load path (query API).
    short_term_timeout_seconds: float = Field(default=0.5, gt=0)
    long_term_timeout_seconds: float = Field(default=0.8, gt=0)
    window_max_tokens: int = Field(default=8000, ge=1)
    summary_budget_tokens: int = Field(default=SUMMARY_BUDGET_TOKENS, ge=0)
    long_term_budget_tokens: int = Field(default=4000, ge=0)
    user_profile_share: float = Field(default=0.6, ge=0, le=1)
    # The part of the user profile's share kept for facts before episodes may use it.
    user_profile_fact_share: float = Field(default=0.5, ge=0, le=1)
    long_term_top_k: int = Field(default=10, ge=1, le=100)
    # How long a user's memory index, checked against the built-in store, serves searches
    # before it is checked again: what the worker writes reaches the load path within it.
    long_term_fresh_seconds: float = Field(default=1.0, ge=0)
    # The built-in store's search also ranks passages of the user's stored chat turns, which
    # fill what the memories above the threshold leave of the top k.
    search_history: bool = True
    # Episodes (what the user said, dated) are kept this many days from when they were stored,
    # and at most this many per user, the newest first; 0 turns either limit off.
    episode_retention_days: int = Field(default=365, ge=0)
    episode_max_per_user: int = Field(default=5000, ge=0)
    summary_cache_ttl_seconds: int = Field(default=3600, ge=1)
    agent_config_cache_seconds: float = Field(default=5.0, ge=0)
    # How long a stage reuses its copy of the forget records before it looks for new ones (a
    # write is checked against a fresh copy once done, whatever this says).
    forget_refresh_seconds: float = Field(default=1.0, ge=0)
    # How long memory-changed keeps a record (its retention.ms): the longest a forgotten
    # user's published text stays readable there.
    changes_retention_hours: float = Field(default=168.0, gt=0)
    # Stream stages: a record that meets an outage (database, provider, broker) is tried again
    # after the base delay, doubling up to the longest delay, until it has been failing for the
    # horizon; only then is it dead-lettered as retries_exhausted.
    retry_base_seconds: float = Field(default=1.0, gt=0)
    retry_max_delay_seconds: float = Field(default=300.0, gt=0)
    retry_horizon_seconds: float = Field(default=3600.0, ge=0)
    # memory-changed: whether this worker's long-term role relays the outbox to the topic (one
    # relay publishes at a time, whichever holds the lease), and how often an idle relay looks
    # for changes written by other processes (the API's).
    changes_relay: bool = True
    changes_relay_interval_seconds: float = Field(default=0.5, gt=0)
    worker_web_host: str = "127.0.0.1"
    worker_web_port: int = Field(default=6066, ge=0, le=65535)
    log_level: str = "INFO"
    # Traces (OTEL_* variables, docs/tracing.md): the API's spans name the user only when true,
    # since traces outlive a forget.
    trace_user_ids: bool = False
    # Embeddings (hybrid retrieval): texts per request and the time limit of one request.
    embedding_batch_size: int = Field(default=64, ge=1, le=2048)
    embedding_timeout_seconds: float = Field(default=10.0, gt=0)

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # A URL's password (the database's, Redis's) must not reach a log or a traceback.
        for name, value in super().__repr_args__():
            yield name, masked_url(value) if isinstance(value, str) else value

    @field_validator("topic_prefix", "cache_prefix")
    @classmethod
    def _no_spaces(cls, value: str) -> str:
        if any(ch.isspace() for ch in value):
            raise ValueError("must not contain white space")
        return value

    @field_validator("cache_prefix")
    @classmethod
    def _no_braces(cls, value: str) -> str:
        # A brace would start a Redis Cluster hash tag of its own and split a conversation's
        # keys over slots.
        if "{" in value or "}" in value:
            raise ValueError("must not contain { or }")
        return value

    @field_validator("api_keys", "api_admin_keys")
    @classmethod
    def _valid_keys(cls, value: SecretStr) -> SecretStr:
        _parse_api_keys(value.get_secret_value())
        return value

    @field_validator("llm_models")
    @classmethod
    def _valid_models(cls, value: str) -> str:
        _parse_models(value)
        return value

    @field_validator("api_tenant_max_in_flight_overrides", "api_tenant_rate_overrides")
    @classmethod
    def _valid_tenant_overrides(cls, value: str) -> str:
        _parse_tenant_numbers(value)
        return value

    @model_validator(mode="after")
    def _budgets_fit(self) -> Settings:
        if self.summary_budget_tokens > self.window_max_tokens:
            raise ValueError("summary_budget_tokens must not exceed window_max_tokens")
        return self

    @model_validator(mode="after")
    def _kafka_security_fits(self) -> Settings:
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

    @cached_property
    def tenant_of_key(self) -> dict[str, str]:
        """API key -> tenant id; empty means open (dev) mode."""
        return _parse_api_keys(self.api_keys.get_secret_value())

    @property
    def api_open(self) -> bool:
        """Open (dev) mode: neither tenant nor operator keys, so every tenant's data is open."""
        return not self.tenant_of_key and not self.operator_of_key

    @cached_property
    def operator_of_key(self) -> dict[str, str]:
        """Operator API key -> the operator's name (``MEMSTREAM_API_ADMIN_KEYS``)."""
        return _parse_api_keys(self.api_admin_keys.get_secret_value())

    @cached_property
    def model_of_target(self) -> dict[str, str]:
        """Agent ``model_target_id`` -> the LLM model that serves it."""
        return _parse_models(self.llm_models)

    @cached_property
    def tenant_in_flight_overrides(self) -> dict[str, int]:
        """Tenant -> its own ``MEMSTREAM_API_TENANT_MAX_IN_FLIGHT``."""
        raw = self.api_tenant_max_in_flight_overrides
        return {tenant: int(n) for tenant, n in _parse_tenant_numbers(raw).items()}

    @cached_property
    def tenant_rate_overrides(self) -> dict[str, float]:
        """Tenant -> its own ``MEMSTREAM_API_TENANT_RATE``."""
        return _parse_tenant_numbers(self.api_tenant_rate_overrides)

    @property
    def cache_enabled(self) -> bool:
        return bool(self.redis_url.strip())


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
