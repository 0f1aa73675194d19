"""``memstream api`` as deployed, against hostile requests: bodies that lie about their size."""

from __future__ import annotations

import re
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstream.launch import Launched
from memstream.settings import Settings
from tests.support import REPO
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
