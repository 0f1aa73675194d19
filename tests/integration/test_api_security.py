"""``memstream api`` as deployed, against hostile requests: bodies that lie about their size,
names rebound to loopback, pages that frame the dashboard."""

from __future__ import annotations

import re
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memstream.launch import Launched
from memstream.settings import Settings
from tests.support import REPO
from tests.support.api import client_for
from tests.support.processes import start_memstream
from tests.support.settings import free_port, isolated_settings

pytestmark = pytest.mark.integration

LIMIT = 1024 * 1024
SENT = 32 * LIMIT  # what each hostile body would cost if the API read it whole
PIECE = 64 * 1024
# What the API may grow by, at its peak, over all the bodies together: a few pieces in flight,
# far below one body read whole.
GROWTH = 12 * LIMIT


@pytest.fixture(scope="module")
def open_api(services: Settings) -> Iterator[tuple[Launched, int]]:
    """``memstream api`` in open mode (no key to stop anyone), in its own process."""
    settings = isolated_settings(api_port=free_port(), log_level="WARNING")
    with tempfile.TemporaryDirectory(prefix="memstream-api-") as logs:
        api = start_memstream("api", settings, log_path=Path(logs) / "api.log", cwd=REPO)
        try:
            yield api, settings.api_port
        finally:
            api.stop(timeout=10)


def peak_rss(pid: int) -> int:
    """The most memory the process has held at once, in bytes (``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for process {pid}")


def post_raw(port: int, transfer_encoding: str | None) -> bytes:
    """POST ``SENT`` bytes to ``/v1/context`` on a raw socket, chunked under the given
    ``Transfer-Encoding`` spelling (or with no framing header at all), stopping when the API
    closes; the start of its answer."""
    head = (
        f"POST /v1/context HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
    )
    if transfer_encoding is not None:
        head += f"Transfer-Encoding: {transfer_encoding}\r\n"
        piece = f"{PIECE:x}\r\n".encode() + b"x" * PIECE + b"\r\n"
    else:
        piece = b"x" * PIECE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode() + b"\r\n")
        try:
            for _ in range(SENT // PIECE):
                sock.sendall(piece)
            if transfer_encoding is not None:
                sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the API answered and closed: the rest is refused unread
        answer = b""
        try:
            while got := sock.recv(4096):  # until the API closes the connection
                answer += got
        except OSError:
            pass
    return answer


def statuses(answer: bytes) -> list[int]:
    return [int(m) for m in re.findall(rb"HTTP/1\.1 (\d{3}) ", answer)]


@pytest.mark.parametrize("spelling", ["chunked", "Chunked", "CHUNKED", "gzip, chunked"])
def test_a_chunked_body_over_the_limit_is_refused_in_any_spelling(
    open_api: tuple[Launched, int], spelling: str
) -> None:
    api, port = open_api
    before = peak_rss(api.pid)
    answer = post_raw(port, spelling)
    status = answer.split(b"\r\n", 1)[0]
    if spelling.startswith("gzip"):
        # A coding the server does not decode may be refused as such; never read whole.
        assert status.split(b" ")[1] in (b"400", b"413", b"501"), answer[:300]
    else:
        assert status == b"HTTP/1.1 413 Request Entity Too Large", answer[:300]
    assert peak_rss(api.pid) - before < GROWTH
    assert api.alive()


def test_bytes_with_no_length_are_never_read_as_a_body(open_api: tuple[Launched, int]) -> None:
    api, port = open_api
    before = peak_rss(api.pid)
    answer = post_raw(port, None)
    # Without a length, HTTP/1.1 gives a request no body: the route may refuse it empty (422),
    # and the bytes are a malformed next request (400), never a body read.
    assert statuses(answer) and set(statuses(answer)) <= {400, 422}, answer[:300]
    assert statuses(answer)[-1] == 400, answer[:300]
    assert peak_rss(api.pid) - before < GROWTH
    assert api.alive()


def get_with_host(port: int, path: str, host: str) -> httpx.Response:
    """GET ``path`` from the API on 127.0.0.1 with the ``Host`` header a rebound name sends."""
    return httpx.get(f"http://127.0.0.1:{port}{path}", headers={"host": host}, timeout=10)


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:{port}", "127.0.0.1:{port}", "127.9.9.9", "[::1]:{port}"]
)
def test_open_mode_answers_loopback_hosts(open_api: tuple[Launched, int], host: str) -> None:
    _, port = open_api
    answer = get_with_host(
        port, "/v1/conversations/c1/messages?tenant_id=t1", host.format(port=port)
    )
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:{port}", "localhost.evil.example", "10.0.0.5:{port}", ""]
)
def test_open_mode_refuses_a_rebound_name(open_api: tuple[Launched, int], host: str) -> None:
    _, port = open_api
    for path in ("/v1/conversations/c1/messages?tenant_id=t1", "/dashboard/tenants", "/readyz"):
        answer = get_with_host(port, path, host.format(port=port))
        assert answer.status_code == 421, (path, answer.text)
        assert answer.json()["error"]["code"] == "host_not_allowed"


async def test_the_allowed_hosts_replace_loopback(services: Settings) -> None:
    settings = isolated_settings(api_allowed_hosts="memstream.internal, api.example.com")
    async with client_for(settings) as api:
        path = "/v1/conversations/c1/messages?tenant_id=t1"
        listed = await api.get(path, headers={"host": "memstream.internal:8080"})
        local = await api.get(path, headers={"host": "localhost"})
    assert listed.status_code == 200, listed.text
    assert local.status_code == 421


def test_the_dashboard_forbids_framing_and_foreign_content(open_api: tuple[Launched, int]) -> None:
    _, port = open_api
    page = httpx.get(f"http://127.0.0.1:{port}/dashboard", timeout=10)
    assert page.status_code == 200
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
    health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
    assert health.headers["x-content-type-options"] == "nosniff"


async def test_operator_keys_alone_leave_no_route_open(services: Settings) -> None:
    """With only MEMSTREAM_API_ADMIN_KEYS set the API is not in open mode: no tenant's data
    answers without a tenant's key, and an operator's key is not one."""
    settings = isolated_settings(api_admin_keys="op-key:oncall")
    body = {"tenant_id": "acme", "user_id": "u1", "conversation_id": "c1", "query": "hi"}
    async with client_for(settings) as api:
        for headers in ({}, {"authorization": "Bearer op-key"}):
            context = await api.post("/v1/context", json=body, headers=headers)
            assert context.status_code == 401, context.text
            listed = await api.get(
                "/v1/memories", params={"tenant_id": "acme", "user_id": "u1"}, headers=headers
            )
            assert listed.status_code == 401, listed.text
            scope = {"x-memstream-user-id": "u1", "x-memstream-tenant-id": "acme"}
            tools = await api.post("/mcp", json={}, headers={**headers, **scope})
            assert tools.status_code == 401, tools.text
            tenants = await api.get("/dashboard/tenants", headers=headers)
            assert tenants.json() == {"open": False, "tenants": []}
