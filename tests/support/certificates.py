"""A certificate authority of a test's own and the certificates it signs, as PEM files."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class TlsFiles:
    """The CA certificate, the broker's key and certificate chain in one file (Kafka's PEM
    keystore), and a client's certificate and key, all signed by the CA."""

    ca: Path
    broker: Path
    client_cert: Path
    client_key: Path


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem_key(key: rsa.RSAPrivateKey) -> bytes:
    # PKCS#8, as Kafka's PEM keystore requires.
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _certificate(
    name: str,
    key: rsa.RSAPrivateKey,
    issuer: x509.Name | None = None,
    signer: rsa.RSAPrivateKey | None = None,
    host: str | None = None,
) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer or subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if host is not None:
        # Clients check the broker's address against its certificate.
        names = [x509.IPAddress(ipaddress.ip_address(host)), x509.DNSName("localhost")]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(signer or key, hashes.SHA256())


def tls_files(directory: Path, host: str = "127.0.0.1") -> TlsFiles:
    """A new CA, a broker certificate for ``host`` and a client certificate, in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca = _certificate("memstream test CA", ca_key)

    def signed(name: str, host: str | None = None) -> tuple[bytes, bytes]:
        key = _key()
        cert = _certificate(name, key, ca.subject, ca_key, host)
        return _pem_key(key), cert.public_bytes(serialization.Encoding.PEM)

    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    broker_key, broker_cert = signed("memstream test broker", host)
    client_key, client_cert = signed("memstream test client")
    files = TlsFiles(
        ca=directory / "ca.pem",
        broker=directory / "broker.pem",
        client_cert=directory / "client.pem",
        client_key=directory / "client-key.pem",
    )
    files.ca.write_bytes(ca_pem)
    files.broker.write_bytes(broker_key + broker_cert + ca_pem)
    files.client_cert.write_bytes(client_cert)
    files.client_key.write_bytes(client_key)
    return files
