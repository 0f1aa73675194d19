"""The API process's cache of memory vectors: one matrix per user, least recently used first
out, bounded by the bytes it holds rather than by a count of users.

A count bound would let one user with 100,000 memories (150 MB of 384-dimensional float32)
take the memory meant for thousands of small ones. Methods never await, so on one event loop
each runs whole; the cache does no IO and knows nothing of where vectors come from.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

# Bookkeeping of one entry besides its arrays and ids (key, dict slot, objects): an estimate,
# so that very many tiny entries still count.
ENTRY_OVERHEAD = 512


@dataclass(frozen=True, slots=True, eq=False)
class UserVectors:
    """One user's memory vectors: row ``i`` of ``vectors`` is memory ``ids[i]``; ``version``
    is the caller's (e.g. a fingerprint of the user's memories) to tell a stale entry."""

    ids: tuple[str, ...]
    vectors: npt.NDArray[np.float32]
    version: Hashable = None
    nbytes: int = field(init=False)

    def __post_init__(self) -> None:
        if self.vectors.ndim != 2 or self.vectors.shape[0] != len(self.ids):
            raise ValueError(
                f"{len(self.ids)} ids need a matrix of {len(self.ids)} rows, "
                f"got shape {self.vectors.shape}"
            )
        # Cached arrays are shared by every request: nobody may write to them.
        vectors = np.array(self.vectors, dtype=np.float32, copy=True)
        vectors.flags.writeable = False
        object.__setattr__(self, "vectors", vectors)
        id_bytes = sys.getsizeof(self.ids) + sum(sys.getsizeof(i) for i in self.ids)
        object.__setattr__(self, "nbytes", vectors.nbytes + id_bytes + ENTRY_OVERHEAD)

    def cosines(self, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Dot products with a query vector: cosines, the rows and the query being unit."""
        # einsum's own loop, not BLAS: OpenBLAS spreads a matrix-vector product over threads
        # that spin while they wait, which cost three times the CPU of one thread on a busy
        # host (and the API serves other requests meanwhile).
        query = query.astype(np.float32, copy=False)
        scores: npt.NDArray[np.float32] = np.einsum("ij,j->i", self.vectors, query)
        return scores

    def top(self, query: npt.NDArray[np.float32], k: int) -> list[tuple[str, float]]:
        """The ``k`` (id, cosine) pairs nearest to ``query``, best first."""
        if k <= 0 or not self.ids:
            return []
        scores = self.cosines(query)
        k = min(k, len(self.ids))
        best = np.argpartition(-scores, k - 1)[:k]
        best = best[np.argsort(-scores[best], kind="stable")]
        return [(self.ids[i], float(scores[i])) for i in best]


class VectorCache:
    """Least-recently-used ``UserVectors`` by key, holding at most ``max_bytes`` in total."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, UserVectors] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    @property
    def nbytes(self) -> int:
        """Bytes held now (never more than ``max_bytes``)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: Hashable, version: Hashable = None) -> UserVectors | None:
        """The entry of ``key``, now the most recently used; None when absent or, if
        ``version`` is given, when the entry has another one (it is dropped)."""
        entry = self._entries.get(key)
        if entry is not None and version is not None and entry.version != version:
            self.discard(key)
            entry = None
        if entry is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry

    def put(
        self,
        key: Hashable,
        ids: Sequence[str],
        vectors: npt.NDArray[np.float32],
        version: Hashable = None,
    ) -> UserVectors:
        """Cache ``vectors`` for ``key`` (replacing its entry), evicting the least recently
        used until it fits; an entry larger than the whole cache is answered, not kept."""
        entry = UserVectors(tuple(ids), vectors, version)
        self.discard(key)
        if entry.nbytes > self.max_bytes:
            return entry
        while self._bytes + entry.nbytes > self.max_bytes:
            _, old = self._entries.popitem(last=False)
            self._bytes -= old.nbytes
            self.evictions += 1
        self._entries[key] = entry
        self._bytes += entry.nbytes
        return entry

    def discard(self, key: Hashable) -> bool:
        """Forget ``key`` (its memories changed); answers whether it was cached."""
        entry = self._entries.pop(key, None)
        if entry is None:
            return False
        self._bytes -= entry.nbytes
        return True

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0
