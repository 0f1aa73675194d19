"""The settings object is its sections put together: no setting, validator or check of a section
is lost or shadowed on the way, and each section stands on its own."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memstream.settings import ApiSettings, CacheSettings, LoadPathSettings, Settings


def test_every_setting_belongs_to_exactly_one_section() -> None:
    owners: dict[str, list[str]] = {}
    for section in Settings.sections():
        for name in section.model_fields:
            owners.setdefault(name, []).append(section.__name__)
    shared = {name: where for name, where in owners.items() if len(where) > 1}
    assert not shared
    assert set(owners) == set(Settings.model_fields)


def test_every_validator_of_a_section_runs_in_the_settings() -> None:
    kept = Settings.__pydantic_decorators__
    for section in Settings.sections():
        own = section.__pydantic_decorators__
        for kind in ("field_validators", "model_validators"):
            names = set(getattr(own, kind))
            lost = names - set(getattr(kept, kind))
            assert not lost, f"{section.__name__}: {kind} {lost} shadowed by another section"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"cache_prefix": "a b"}, "white space"),
        ({"cache_prefix": "a{b"}, "{ or }"),
        ({"topic_prefix": "a b"}, "white space"),
        ({"summary_budget_tokens": 9000}, "must not exceed"),
        ({"api_keys": "no-tenant"}, "key:tenant"),
        ({"kafka_security_protocol": "SASL_SSL"}, "MEMSTREAM_KAFKA_"),
    ],
)
def test_the_settings_refuse_what_a_section_refuses(
    values: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        Settings(**values)  # type: ignore[arg-type]


def test_a_section_stands_on_its_own() -> None:
    assert ApiSettings(api_keys="k1:acme").tenant_of_key == {"k1": "acme"}  # type: ignore[arg-type]
    assert not CacheSettings(redis_url="").cache_enabled
    with pytest.raises(ValidationError, match="must not exceed"):
        LoadPathSettings(window_max_tokens=100, summary_budget_tokens=200)


def test_a_section_masks_the_passwords_of_its_urls() -> None:
    settings = Settings(database_url="mysql+aiomysql://app:hunter2@db/memstream")
    assert "hunter2" not in repr(settings)
    assert "app:***@" in repr(settings)
