"""How a Kafka client reaches a secured broker: TLS (``SSL``), SASL, or both (``SASL_SSL``).

The server's clients (``memstream.broker.clients``, Faust's broker credentials) and the client
package's publisher build their options here, so this module needs aiokafka and the standard
library only, and aiokafka only once a TLS context is built or a broker probed: the client loads
it without loading the server or the broker client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

if TYPE_CHECKING:
    import ssl

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
PROTOCOLS: tuple[str, ...] = get_args(SecurityProtocol)
MECHANISMS: tuple[str, ...] = get_args(SaslMechanism)

PROBE_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class BrokerSecurity:
    """A client's security protocol, SASL credentials and TLS files; checked when built
    (``ValueError`` names what does not fit together)."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str = ""
    sasl_username: str = ""
    sasl_password: str = field(default="", repr=False)
    ssl_cafile: str = ""
    ssl_certfile: str = ""
    ssl_keyfile: str = ""

    def __post_init__(self) -> None:
        problem = self.problem()
        if problem is not None:
            raise ValueError(problem)

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def problem(self) -> str | None:
        """Why these options cannot reach a broker, or None."""
        if self.protocol not in PROTOCOLS:
            return f"security_protocol must be one of {', '.join(PROTOCOLS)}, not {self.protocol!r}"
        if self.sasl_mechanism and self.sasl_mechanism not in MECHANISMS:
            return (
                f"sasl_mechanism must be one of {', '.join(MECHANISMS)}, "
                f"not {self.sasl_mechanism!r}"
            )
        sasl = {
            "sasl_mechanism": self.sasl_mechanism,
            "sasl_username": self.sasl_username,
            "sasl_password": self.sasl_password,
        }
        if self.sasl:
            unset = [name for name, value in sasl.items() if not value]
            if unset:
                return f"security_protocol {self.protocol} needs {' and '.join(unset)}"
        elif any(sasl.values()):
            named = [name for name, value in sasl.items() if value]
            return (
                f"{' and '.join(named)} set, but security_protocol {self.protocol} does not use "
                "SASL (SASL_PLAINTEXT or SASL_SSL does)"
            )
        files = {
            "ssl_cafile": self.ssl_cafile,
            "ssl_certfile": self.ssl_certfile,
            "ssl_keyfile": self.ssl_keyfile,
        }
        if not self.tls and any(files.values()):
            named = [name for name, value in files.items() if value]
            return (
                f"{' and '.join(named)} set, but security_protocol {self.protocol} does not use "
                "TLS (SSL or SASL_SSL does)"
            )
        if self.ssl_keyfile and not self.ssl_certfile:
            return "ssl_keyfile needs ssl_certfile (the client certificate it belongs to)"
        for name, path in files.items():
            if path and not Path(path).is_file():
                return f"{name}: no file at {path}"
        return None

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of a TLS protocol (the system's CAs when no CA file is given)."""
        if not self.tls:
            return None
        from aiokafka.helpers import create_ssl_context

        context: ssl.SSLContext = create_ssl_context(
            cafile=self.ssl_cafile or None,
            certfile=self.ssl_certfile or None,
            keyfile=self.ssl_keyfile or None,
        )
        return context

    def client_options(self) -> dict[str, Any]:
        """aiokafka's options for these settings (a consumer's, producer's or admin client's)."""
        options: dict[str, Any] = {"security_protocol": self.protocol}
        if self.sasl:
            options |= {
                "sasl_mechanism": self.sasl_mechanism,
                "sasl_plain_username": self.sasl_username,
                "sasl_plain_password": self.sasl_password,
            }
        if self.tls:
            options["ssl_context"] = self.ssl_context()
        return options

    async def refusal(self, bootstrap_servers: str) -> str | None:
        """Why the broker refuses these credentials or this TLS, or None: it accepts them, or
        no server answers at all (an outage, not a refusal)."""
        if self.protocol == "PLAINTEXT":
            return None
        import asyncio
        import ssl

        from aiokafka.conn import create_conn
        from aiokafka.errors import (
            AuthenticationFailedError,
            AuthenticationMethodNotSupported,
            IllegalSaslStateError,
            KafkaError,
            SaslAuthenticationFailed,
            UnsupportedSaslMechanismError,
        )

        # What the broker answers a client whose credentials or SASL mechanism it does not
        # accept; aiokafka's bootstrap hides them behind "Unable to bootstrap", which reads like
        # an outage.
        refusals = (
            SaslAuthenticationFailed,
            AuthenticationFailedError,
            AuthenticationMethodNotSupported,
            UnsupportedSaslMechanismError,
            IllegalSaslStateError,
        )
        options = self.client_options()
        for server in filter(None, (s.strip() for s in bootstrap_servers.split(","))):
            host, _, port = server.rpartition(":")
            try:
                async with asyncio.timeout(PROBE_SECONDS):
                    conn = await create_conn(
                        host.strip("[]"), int(port), request_timeout_ms=5000, **options
                    )
            except refusals as exc:
                return (
                    f"{server} refused the {self.sasl_mechanism} credentials of user "
                    f"{self.sasl_username!r} over {self.protocol} ({exc})"
                )
            except ssl.SSLError as exc:
                return f"the TLS handshake with {server} failed over {self.protocol} ({exc})"
            except (OSError, TimeoutError, KafkaError):
                continue
            conn.close()
            return None
        return None
