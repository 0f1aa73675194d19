"""The cache's breakers: failures in a row open a node, a success in between starts the count
again, an open node stays open until closed, and nodes are counted apart."""

from __future__ import annotations

import pytest

from memstream.store.breaker import Breakers


def test_a_node_opens_after_failures_in_a_row_and_only_then() -> None:
    breakers = Breakers(3)
    assert breakers.allows("a")
    assert not breakers.failed("a")
    assert not breakers.failed("a")
    assert breakers.allows("a")
    assert breakers.failed("a")  # the third opens it, and says so once
    assert not breakers.allows("a")
    assert not breakers.failed("a")
    assert breakers.open == {"a"}


def test_a_success_starts_the_count_again() -> None:
    breakers = Breakers(2)
    breakers.failed("a")
    breakers.succeeded("a")
    assert not breakers.failed("a")
    assert breakers.allows("a")


def test_nodes_are_counted_apart() -> None:
    breakers = Breakers(2)
    breakers.failed("a")
    breakers.failed("b")
    assert breakers.failed("a")
    assert not breakers.allows("a")
    assert breakers.allows("b")


def test_an_open_node_stays_open_until_closed_and_then_counts_from_none() -> None:
    breakers = Breakers(2)
    breakers.failed("a")
    breakers.failed("a")
    breakers.succeeded("a")  # a call that was already in flight answered: still open
    assert not breakers.allows("a")
    breakers.close("a")
    assert breakers.allows("a")
    assert not breakers.failed("a")


def test_a_breaker_needs_one_failure_at_least() -> None:
    with pytest.raises(ValueError):
        Breakers(0)
