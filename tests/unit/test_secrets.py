"""Passwords in URLs never shown: the settings' repr, ``memstream dev``'s banner."""

from __future__ import annotations

import pytest

from memstream.cli.dev import _banner
from memstream.settings import Settings, masked_url

SECRET = "hunter2-x"


def configured() -> Settings:
    return Settings(
        database_url=f"mysql+aiomysql://root:{SECRET}@db:3306/memstream",
        redis_url=f"redis://:{SECRET}@cache:6379/0",
        memos_url=f"https://ops:{SECRET}@memos.example.com",
        _env_file=None,  # type: ignore[call-arg]
    )


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("mysql+aiomysql://root:pw@db/m", "mysql+aiomysql://root:***@db/m"),
        ("redis://:pw@cache:6379/0", "redis://:***@cache:6379/0"),
        ("redis://u:p%40ss@cache", "redis://u:***@cache"),
        ("mysql+aiomysql://root@db/m", "mysql+aiomysql://root@db/m"),
        ("127.0.0.1:9092,kafka:9092", "127.0.0.1:9092,kafka:9092"),
        ("a:pw@k1:9092,b:pw2@k2:9092", "a:***@k1:9092,b:***@k2:9092"),
        ("", ""),
    ],
)
def test_masked_url_hides_passwords_only(url: str, shown: str) -> None:
    assert masked_url(url) == shown


def test_the_settings_never_show_a_password() -> None:
    settings = configured()
    for shown in (repr(settings), str(settings)):
        assert SECRET not in shown
        assert "root:***@db:3306" in shown
    # The value itself is untouched: the engine needs it.
    assert SECRET in settings.database_url


def test_the_dev_banner_never_shows_a_password() -> None:
    banner = _banner(configured(), bundled=False)
    assert SECRET not in banner
    assert "mysql+aiomysql://root:***@db:3306/memstream" in banner
