"""The Host headers the API answers (against DNS rebinding): parsing and the choice of check."""

from __future__ import annotations

import pytest

from memstream.api.hosts import host_check, host_name, loopback, parse_allowed


@pytest.mark.parametrize(
    ("header", "host"),
    [
        ("localhost", "localhost"),
        ("LocalHost:8080", "localhost"),
        ("127.0.0.1:8080", "127.0.0.1"),
        ("[::1]:8080", "::1"),
        ("[::1]", "::1"),
        ("::1", "::1"),
        ("memstream.example.com.", "memstream.example.com"),
        ("evil.example:80", "evil.example"),
        ("", ""),
    ],
)
def test_host_name_drops_the_port(header: str, host: str) -> None:
    assert host_name(header) == host


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "127.8.9.10", "::1"])
def test_loopback_names(host: str) -> None:
    assert loopback(host)


@pytest.mark.parametrize(
    "host", ["", "evil.example", "localhost.evil.example", "10.0.0.1", "0.0.0.0", "::"]
)
def test_names_that_are_not_loopback(host: str) -> None:
    assert not loopback(host)


def test_open_mode_answers_loopback_only() -> None:
    check = host_check(frozenset(), open_mode=True)
    assert check is not None and check("127.0.0.1") and not check("evil.example")


def test_with_keys_and_no_list_any_host_will_do() -> None:
    assert host_check(frozenset(), open_mode=False) is None


def test_a_list_replaces_the_default_in_either_mode() -> None:
    allowed = parse_allowed(" memstream.internal:8080, API.example.com ")
    assert allowed == {"memstream.internal", "api.example.com"}
    for open_mode in (True, False):
        check = host_check(allowed, open_mode)
        assert check is not None and check("api.example.com") and not check("localhost")
    assert host_check(parse_allowed("*"), open_mode=True) is None
