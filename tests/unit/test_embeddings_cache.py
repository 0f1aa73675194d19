"""The per-user vector cache: least recently used out, bounded by bytes."""

from __future__ import annotations

import numpy as np
import pytest

from memstream.embeddings.cache import UserVectors, VectorCache


def matrix(rows: int, dimension: int = 384, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(rows, dimension)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def ids(rows: int, prefix: str = "m") -> list[str]:
    return [f"{prefix}-{i}" for i in range(rows)]


def test_an_entry_counts_its_arrays_and_its_ids() -> None:
    entry = UserVectors(tuple(ids(100)), matrix(100))
    assert entry.vectors.nbytes == 100 * 384 * 4
    assert entry.nbytes > entry.vectors.nbytes + 100 * 40  # each id is a str object
    longer = UserVectors(tuple(i + "x" * 1000 for i in ids(100)), matrix(100))
    assert longer.nbytes >= entry.nbytes + 100 * 1000


def test_entries_are_read_only_copies() -> None:
    source = matrix(3)
    entry = UserVectors(("a", "b", "c"), source)
    source[0, 0] = 42.0
    assert entry.vectors[0, 0] != 42.0
    with pytest.raises(ValueError, match="read-only"):
        entry.vectors[0, 0] = 1.0
    with pytest.raises(ValueError, match="3 rows"):
        UserVectors(("a", "b", "c"), matrix(2))
    with pytest.raises(ValueError, match="3 rows"):
        UserVectors(("a", "b", "c"), np.zeros(3, dtype=np.float32))


def test_the_byte_bound_holds_and_evicts_the_least_recently_used() -> None:
    one_user = UserVectors(tuple(ids(100)), matrix(100)).nbytes
    cache = VectorCache(max_bytes=3 * one_user)
    for user in ("u1", "u2", "u3"):
        cache.put(("t", user), ids(100), matrix(100))
    assert len(cache) == 3
    assert cache.nbytes == 3 * one_user
    assert cache.get(("t", "u1")) is not None  # u1 is now the most recent; u2 the least
    cache.put(("t", "u4"), ids(100), matrix(100))
    assert ("t", "u2") not in cache
    assert all(("t", user) in cache for user in ("u1", "u3", "u4"))
    assert cache.nbytes <= cache.max_bytes
    assert cache.evictions == 1


def test_one_large_user_pushes_out_many_small_ones() -> None:
    small = UserVectors(tuple(ids(10)), matrix(10)).nbytes
    cache = VectorCache(max_bytes=50 * small)
    for n in range(50):
        cache.put(n, ids(10), matrix(10, seed=n))
    assert len(cache) == 50
    cache.put("big", ids(300), matrix(300))  # about 30 small users' worth of bytes
    assert "big" in cache
    assert 15 <= len(cache) - 1 <= 25
    assert cache.nbytes <= cache.max_bytes
    assert 0 not in cache and 49 in cache  # the oldest went first


def test_an_entry_larger_than_the_cache_is_answered_but_not_kept() -> None:
    cache = VectorCache(max_bytes=10_000)
    cache.put("small", ids(2), matrix(2, dimension=8))
    entry = cache.put("huge", ids(100), matrix(100))
    assert entry.vectors.shape == (100, 384)
    assert "huge" not in cache
    assert "small" in cache  # nothing was evicted for it
    disabled = VectorCache(max_bytes=0)
    disabled.put("x", ids(1), matrix(1))
    assert len(disabled) == 0 and disabled.nbytes == 0


def test_replacing_discarding_and_versions() -> None:
    cache = VectorCache(max_bytes=1_000_000)
    cache.put("u", ids(10), matrix(10), version=(10, 0))
    before = cache.nbytes
    cache.put("u", ids(20), matrix(20), version=(20, 0))
    assert len(cache) == 1
    assert cache.nbytes > before
    got = cache.get("u", version=(20, 0))
    assert got is not None and len(got.ids) == 20
    assert cache.get("u", version=(21, 0)) is None  # stale: dropped
    assert "u" not in cache and cache.nbytes == 0
    cache.put("v", ids(1), matrix(1))
    assert cache.discard("v") is True
    assert cache.discard("v") is False
    assert cache.nbytes == 0
    assert (cache.hits, cache.misses) == (1, 1)
    cache.put("w", ids(1), matrix(1))
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0
    with pytest.raises(ValueError, match="negative"):
        VectorCache(max_bytes=-1)


def test_top_answers_the_nearest_memories_by_cosine() -> None:
    vectors = matrix(50, dimension=16, seed=3)
    entry = UserVectors(tuple(ids(50)), vectors)
    query = vectors[7] * 0.6 + vectors[8] * 0.4
    query = (query / np.linalg.norm(query)).astype(np.float32)
    top = entry.top(query, 3)
    brute = sorted(range(50), key=lambda i: -float(vectors[i] @ query))[:3]
    assert [doc for doc, _ in top] == [f"m-{i}" for i in brute]
    assert top[0][0] == "m-7"
    cosines = [score for _, score in top]
    assert cosines == sorted(cosines, reverse=True)
    assert cosines[0] == pytest.approx(float(vectors[7] @ query), rel=1e-5)
    assert len(entry.top(query, 500)) == 50
    assert entry.top(query, 0) == []
    assert UserVectors((), np.zeros((0, 16), dtype=np.float32)).top(query, 3) == []
