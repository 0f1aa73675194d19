"""``memstream dev``'s choice of broker, database and cache, without starting anything."""

from __future__ import annotations

import socket

import pytest

from memstream.cli.dev import DEV_BROKER, DEV_DATABASE, dev_settings, listening
from memstream.settings import Settings


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KAFKA_BOOTSTRAP_SERVERS", "DATABASE_URL", "REDIS_URL"):
        monkeypatch.delenv(f"MEMSTREAM_{name}", raising=False)


def _bundled_port_is_free() -> bool:
    return not listening(DEV_BROKER)


def test_nothing_configured_is_the_embedded_default() -> None:
    chosen, bundled = dev_settings(Settings(_env_file=None))  # type: ignore[call-arg]
    assert chosen.kafka_bootstrap_servers == DEV_BROKER
    assert chosen.database_url == DEV_DATABASE and chosen.redis_url == ""
    assert bundled == _bundled_port_is_free()


def test_what_is_configured_is_used_and_no_broker_started() -> None:
    given = Settings(  # as a flag, the environment or .env would set them
        kafka_bootstrap_servers="kafka:9092",
        database_url="mysql+aiomysql://root@db/memstream",
        redis_url="redis://cache:6379/0",
        _env_file=None,  # type: ignore[call-arg]
    )
    chosen, bundled = dev_settings(given)
    assert chosen == given and bundled is False


def test_the_bundled_address_configured_starts_the_bundled_broker_when_free() -> None:
    chosen, bundled = dev_settings(Settings(kafka_bootstrap_servers=DEV_BROKER, _env_file=None))  # type: ignore[call-arg]
    assert chosen.kafka_bootstrap_servers == DEV_BROKER
    assert bundled == _bundled_port_is_free()


def test_listening_tells_an_open_port_from_a_closed_one() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        assert listening(address)
    assert not listening(address)
