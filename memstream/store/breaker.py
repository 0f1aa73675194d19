"""Circuit breakers, one per cache node: after ``failures`` failed calls in a row a node is
open (not asked at all) until it is closed again, which the cache does once a probe finds the
node answering. No IO here: the cache calls, counts and probes."""

from __future__ import annotations


class Breakers:
    """The open or failing nodes, by name; a node never seen is closed."""

    def __init__(self, failures: int) -> None:
        if failures < 1:
            raise ValueError("a breaker opens after one failure at least")
        self.failures = failures
        self._failing: dict[str, int] = {}  # closed nodes with failures in a row
        self._open: set[str] = set()

    def allows(self, node: str) -> bool:
        return node not in self._open

    def failed(self, node: str) -> bool:
        """Count a failed call; True when this one opened the node's breaker."""
        if node in self._open:
            return False
        count = self._failing.get(node, 0) + 1
        if count < self.failures:
            self._failing[node] = count
            return False
        self._failing.pop(node, None)
        self._open.add(node)
        return True

    def succeeded(self, node: str) -> None:
        """A call answered: the failures in a row start again from none."""
        if self._failing:
            self._failing.pop(node, None)

    def close(self, node: str) -> None:
        self._open.discard(node)
        self._failing.pop(node, None)

    @property
    def open(self) -> frozenset[str]:
        return frozenset(self._open)
