"""Faust's broker credentials for the security settings every other client memstream builds
is given (``memstream_client.contract.security``): Faust builds its consumer, producer and topic
creation from them, not from aiokafka options."""

from __future__ import annotations

import faust
from faust.types.auth import CredentialsT

from memstream.settings import BrokerSettings


def broker_credentials(settings: BrokerSettings) -> CredentialsT | None:
    """``SASLCredentials`` (with a TLS context over ``SASL_SSL``), ``SSLCredentials`` over
    ``SSL``, nothing over ``PLAINTEXT``."""
    security = settings.kafka_security
    if security.sasl:
        return faust.SASLCredentials(
            username=security.sasl_username,
            password=security.sasl_password,
            mechanism=security.sasl_mechanism,
            ssl_context=security.ssl_context(),
        )
    if security.tls:
        return faust.SSLCredentials(security.ssl_context())
    return None
