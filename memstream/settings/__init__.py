"""The one typed, frozen settings object, built from ``MEMSTREAM_*`` variables (and ``.env``),
made of the sections of ``memstream.settings.sections``: every setting keeps its flat name
(``settings.api_port`` is ``MEMSTREAM_API_PORT``), and a component that reads one part takes
that part's section (``ApiSettings``), which the whole object is."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict

from memstream.settings.sections import (
    SUMMARY_BUDGET_TOKENS,
    ApiSettings,
    BrokerSettings,
    CacheSettings,
    DatabaseSettings,
    EmbeddingSettings,
    LlmSettings,
    LoadPathSettings,
    ProcessSettings,
    ProviderSettings,
    RetrySettings,
    Section,
    StageSettings,
    masked_url,
)

__all__ = [
    "SUMMARY_BUDGET_TOKENS",
    "ApiSettings",
    "BrokerSettings",
    "CacheSettings",
    "DatabaseSettings",
    "EmbeddingSettings",
    "LlmSettings",
    "LoadPathSettings",
    "ProcessSettings",
    "ProviderSettings",
    "RetrySettings",
    "Section",
    "Settings",
    "StageSettings",
    "masked_url",
]


class Settings(
    BrokerSettings,
    DatabaseSettings,
    CacheSettings,
    ApiSettings,
    LoadPathSettings,
    StageSettings,
    RetrySettings,
    LlmSettings,
    EmbeddingSettings,
    ProviderSettings,
    ProcessSettings,
    BaseSettings,
):
    """Every knob memstream has; nothing else reads the environment."""

    model_config = SettingsConfigDict(
        env_prefix="MEMSTREAM_", env_file=".env", frozen=True, extra="ignore"
    )

    @classmethod
    def sections(cls) -> tuple[type[Section], ...]:
        """The sections, in the order docs/settings.md shows them."""
        return tuple(base for base in cls.__bases__ if issubclass(base, Section))
