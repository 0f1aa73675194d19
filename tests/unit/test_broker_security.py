"""The broker's security settings: checked together, and turned into the same options for
every client memstream builds (aiokafka's, Faust's, the client package's publisher)."""

from __future__ import annotations

import ssl
from pathlib import Path

import faust
import pytest
from pydantic import SecretStr, ValidationError

from memstream.broker.clients import client_options
from memstream.cli.main import main
from memstream.settings import Settings
from memstream.streams.credentials import broker_credentials
from memstream_client import Publisher
from memstream_client.contract.security import BrokerSecurity
from tests.support.certificates import TlsFiles, tls_files

SCRAM = {
    "kafka_sasl_mechanism": "SCRAM-SHA-512",
    "kafka_sasl_username": "memstream",
    "kafka_sasl_password": "s3cret",
}


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return tls_files(tmp_path_factory.mktemp("tls"))


def test_plaintext_is_the_default_and_adds_nothing_else() -> None:
    assert client_options(Settings(kafka_bootstrap_servers="k:9092")) == {
        "bootstrap_servers": "k:9092",
        "security_protocol": "PLAINTEXT",
    }
    assert broker_credentials(Settings()) is None


def test_sasl_plaintext_gives_the_mechanism_and_credentials_and_no_tls() -> None:
    settings = Settings(kafka_security_protocol="SASL_PLAINTEXT", **SCRAM)
    assert client_options(settings) == {
        "bootstrap_servers": settings.kafka_bootstrap_servers,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "memstream",
        "sasl_plain_password": "s3cret",
    }
    credentials = broker_credentials(settings)
    assert isinstance(credentials, faust.SASLCredentials)
    assert (credentials.protocol.value, credentials.mechanism.value) == (
        "SASL_PLAINTEXT",
        "SCRAM-SHA-512",
    )
    assert (credentials.username, credentials.password) == ("memstream", "s3cret")


def test_sasl_ssl_checks_the_broker_against_the_ca_file(tls: TlsFiles) -> None:
    settings = Settings(kafka_security_protocol="SASL_SSL", kafka_ssl_cafile=str(tls.ca), **SCRAM)
    options = client_options(settings)
    assert options["security_protocol"] == "SASL_SSL"
    assert options["sasl_mechanism"] == "SCRAM-SHA-512"
    context = options["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert [dict(c["subject"][0])["commonName"] for c in context.get_ca_certs()] == [
        "memstream test CA"
    ]
    credentials = broker_credentials(settings)
    assert isinstance(credentials, faust.SASLCredentials)
    assert credentials.protocol.value == "SASL_SSL"
    assert credentials.ssl_context is not None


def test_ssl_with_a_client_certificate(tls: TlsFiles) -> None:
    settings = Settings(
        kafka_security_protocol="SSL",
        kafka_ssl_cafile=str(tls.ca),
        kafka_ssl_certfile=str(tls.client_cert),
        kafka_ssl_keyfile=str(tls.client_key),
    )
    options = client_options(settings)
    assert set(options) == {"bootstrap_servers", "security_protocol", "ssl_context"}
    assert options["security_protocol"] == "SSL"
    credentials = broker_credentials(settings)
    assert isinstance(credentials, faust.SSLCredentials)
    assert credentials.protocol.value == "SSL"


def test_a_key_of_another_certificate_is_refused_when_the_context_is_built(
    tls: TlsFiles,
) -> None:
    security = BrokerSecurity(
        protocol="SSL", ssl_certfile=str(tls.client_cert), ssl_keyfile=str(tls.broker)
    )
    with pytest.raises(ssl.SSLError):
        security.ssl_context()


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        (
            {"kafka_security_protocol": "SASL_SSL"},
            "security_protocol SASL_SSL needs sasl_mechanism and sasl_username and sasl_password",
        ),
        (
            {**SCRAM, "kafka_security_protocol": "SASL_PLAINTEXT", "kafka_sasl_password": ""},
            "security_protocol SASL_PLAINTEXT needs sasl_password",
        ),
        (
            {"kafka_sasl_username": "memstream"},
            "sasl_username set, but security_protocol PLAINTEXT does not use SASL",
        ),
        (
            {**SCRAM, "kafka_security_protocol": "SASL_PLAINTEXT", "kafka_ssl_cafile": "ca.pem"},
            "ssl_cafile set, but security_protocol SASL_PLAINTEXT does not use TLS",
        ),
        (
            {"kafka_security_protocol": "SSL", "kafka_ssl_keyfile": "key.pem"},
            "ssl_keyfile needs ssl_certfile",
        ),
        (
            {"kafka_security_protocol": "SSL", "kafka_ssl_cafile": "/nonexistent/ca.pem"},
            "ssl_cafile: no file at /nonexistent/ca.pem",
        ),
    ],
)
def test_settings_that_do_not_fit_together_are_refused_by_name(
    values: dict[str, str], problem: str
) -> None:
    with pytest.raises(ValidationError, match="MEMSTREAM_KAFKA_\\* security settings") as caught:
        Settings(**values)
    assert problem in str(caught.value)


def test_an_unknown_protocol_or_mechanism_is_refused() -> None:
    with pytest.raises(ValidationError, match="kafka_security_protocol"):
        Settings(kafka_security_protocol="TLS")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="kafka_sasl_mechanism"):
        Settings(kafka_security_protocol="SASL_SSL", **{**SCRAM, "kafka_sasl_mechanism": "MD5"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="sasl_mechanism must be one of PLAIN"):
        BrokerSecurity(protocol="SASL_SSL", sasl_mechanism="GSSAPI")


def test_the_password_shows_in_no_repr() -> None:
    settings = Settings(kafka_security_protocol="SASL_PLAINTEXT", **SCRAM)
    assert "s3cret" not in repr(settings)
    assert "s3cret" not in repr(settings.kafka_security)


def test_the_command_line_names_what_does_not_fit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("MEMSTREAM_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("MEMSTREAM_KAFKA_SASL_MECHANISM", "PLAIN")
    code = main(["publish", str(tmp_path / "events.jsonl"), "--topic", "message-written"])
    assert code == 2
    assert (
        "memstream: invalid settings: Value error, MEMSTREAM_KAFKA_* security settings: "
        "security_protocol "
        "SASL_SSL needs sasl_username and sasl_password"
    ) in capsys.readouterr().err


def test_the_publisher_takes_the_same_options_from_the_settings(tls: TlsFiles) -> None:
    settings = Settings(kafka_security_protocol="SASL_SSL", kafka_ssl_cafile=str(tls.ca), **SCRAM)
    publisher = Publisher.from_settings(settings)
    assert publisher.security == settings.kafka_security
    direct = Publisher(
        "k:9092",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="memstream",
        sasl_password="s3cret",
        ssl_cafile=str(tls.ca),
    )
    assert direct.security == settings.kafka_security
    with pytest.raises(ValueError, match="security_protocol SASL_PLAINTEXT needs sasl_mechanism"):
        Publisher(
            "k:9092", security_protocol="SASL_PLAINTEXT", sasl_username="u", sasl_password="p"
        )


def test_a_copy_with_other_security_settings_reaches_the_broker_with_those() -> None:
    # model_copy does not validate: the values go in as the settings hold them.
    update = {**SCRAM, "kafka_security_protocol": "SASL_PLAINTEXT"}
    update["kafka_sasl_password"] = SecretStr(SCRAM["kafka_sasl_password"])
    copied = Settings().model_copy(update=update)
    assert client_options(copied)["sasl_mechanism"] == "SCRAM-SHA-512"
