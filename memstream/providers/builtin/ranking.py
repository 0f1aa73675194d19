"""The built-in store's ranking: lexical (BM25 relevance, thresholded, MMR, over the stored
postings or a cached index) and hybrid (lexical and vector rankings of one user's cached
memories fused, then MMR). No IO: each runs synchronously, inline or in a worker thread with
the user's index lock held (provider.py), so nothing changes under it."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from memstream.embeddings.cache import UserVectors
from memstream.embeddings.fusion import entered_by_rank, fuse
from memstream.memory import MemoryItem
from memstream.providers.builtin.index_cache import UserIndex
from memstream.providers.builtin.sql import Counts
from memstream.retrieval import mmr, normalised


class HybridOptions(Protocol):
    """The knobs of a hybrid search (the provider's settings)."""

    relativity: float
    mmr_lambda: float
    vector_weight: float
    fusion: Literal["rrf", "weighted"]
    rrf_k: int


def _pool_size(top_k: int) -> int:
    return max(3 * top_k, 30)  # MMR looks at the best candidates only


def lexical_pools(
    relevance: Mapping[str, float],
    cube_of: Callable[[str], str],
    cubes: Sequence[str],
    top_k: int,
    relativity: float,
) -> dict[str, list[tuple[float, str]]]:
    """The MMR candidates of each readable cube: the best (relevance, id) pairs reaching the
    threshold, best first."""
    # Rank by relevance (it keeps ordering memories the displayed score caps at 1.0),
    # threshold and show the normalised score.
    floor = relativity * relativity
    by_cube: dict[str, list[tuple[float, str]]] = {c: [] for c in cubes}
    for doc_id, value in relevance.items():
        if value >= floor and value > 0.0:
            bucket = by_cube.get(cube_of(doc_id))
            if bucket is not None:
                bucket.append((value, doc_id))
    size = _pool_size(top_k)
    return {cube: heapq.nlargest(size, found) for cube, found in by_cube.items()}


def pick_lexical(
    pools: Mapping[str, Sequence[tuple[float, str]]],
    items: Mapping[str, MemoryItem],
    token_set: Callable[[str], frozenset[str]],
    top_k: int,
    mmr_lambda: float,
) -> list[MemoryItem]:
    """MMR over each cube's candidates (those still in ``items``), all sorted by score."""
    picked: list[tuple[float, float, str]] = []
    for candidates in pools.values():
        pool = [
            ((value, doc_id), normalised(value), token_set(doc_id))
            for value, doc_id in candidates
            if doc_id in items
        ]
        for (value, doc_id), score, _tokens in mmr(pool, mmr_lambda, top_k):
            picked.append((score, value, doc_id))
    picked.sort(reverse=True)
    return [replace(items[doc_id], score=round(score, 4)) for score, _, doc_id in picked]


def rank_hybrid(
    entry: UserIndex,
    terms: Sequence[str],
    query: npt.NDArray[np.float32],
    vectors: UserVectors,
    cubes: Sequence[str],
    top_k: int,
    options: HybridOptions,
) -> list[MemoryItem]:
    """Lexical and vector rankings of each readable cube fused (memstream.embeddings.fusion),
    then MMR on the fused scores."""
    items = entry.items
    pool_size = _pool_size(top_k)
    lexical = _best_lexical(entry, terms, cubes, pool_size)
    ids = vectors.ids
    cosines = vectors.cosines(query)
    if _counts_of(vectors) != entry.fingerprint:
        # The index moved on since the matrix was read: only rows of memories still live.
        live = np.fromiter((memory_id in items for memory_id in ids), dtype=bool, count=len(ids))
        rows = np.flatnonzero(live)
        ids, cosines = tuple(ids[n] for n in rows), cosines[rows]
    entered = {ids[n] for n in entered_by_rank(cosines)}
    by_cosine = _best_by_cube(ids, cosines, items, cubes, pool_size)
    picked: list[tuple[float, float, str]] = []
    tokens = entry.index.token_set
    for cube in cubes:
        ranked = [(doc_id, normalised(value)) for doc_id, value in lexical[cube]]
        fused = fuse(
            ranked,
            by_cosine[cube],
            threshold=options.relativity,
            k=options.rrf_k,
            vector_weight=options.vector_weight,
            entered=entered,
            order=options.fusion,
            limit=pool_size,
        )
        pool = [
            ((f.rrf if options.fusion == "rrf" else f.weighted, f.id), f.score, tokens(f.id))
            for f in fused
        ]
        for (value, doc_id), score, _tokens in mmr(pool, options.mmr_lambda, top_k):
            picked.append((score, value, doc_id))
    picked.sort(reverse=True)
    return [replace(items[doc_id], score=round(score, 4)) for score, _, doc_id in picked]


def _best_lexical(
    entry: UserIndex, terms: Sequence[str], cubes: Sequence[str], size: int
) -> dict[str, list[tuple[str, float]]]:
    """The ``size`` most relevant (id, relevance) pairs of each readable cube, best first."""
    by_cube: dict[str, list[tuple[str, float]]] = {c: [] for c in cubes}
    relevance = entry.index.relevance(terms) if terms else {}
    items = entry.items

    def fill(pairs: Iterable[tuple[str, float]]) -> None:
        for doc_id, value in pairs:
            bucket = by_cube.get(items[doc_id].cube_id)
            if bucket is not None and len(bucket) < size and value > 0.0:
                bucket.append((doc_id, value))

    # A common word matches thousands of a large store's memories: the best few first, all
    # of them only when a cube is still short.
    few = 4 * size * len(cubes)
    head = heapq.nlargest(few, relevance.items(), key=lambda pair: pair[1])
    fill(head)
    if len(relevance) > few and any(len(bucket) < size for bucket in by_cube.values()):
        by_cube = {c: [] for c in cubes}
        fill(sorted(relevance.items(), key=lambda pair: pair[1], reverse=True))
    return by_cube


def _counts_of(vectors: UserVectors) -> Counts | None:
    """The lexical counts a vector matrix was read for (its version's first two counts)."""
    version = vectors.version
    if isinstance(version, tuple) and version and isinstance(version[0], tuple):
        return (version[0][0], version[0][1])
    return None


def _best_by_cube(
    ids: Sequence[str],
    cosines: npt.NDArray[np.float32],
    items: dict[str, MemoryItem],
    cubes: Sequence[str],
    size: int,
) -> dict[str, list[tuple[str, float]]]:
    """The ``size`` best (id, cosine) pairs of each readable cube, best first."""
    by_cube: dict[str, list[tuple[str, float]]] = {c: [] for c in cubes}

    def fill(rows: npt.NDArray[np.intp]) -> None:
        for n in rows[np.argsort(-cosines[rows], kind="stable")]:
            bucket = by_cube.get(items[ids[n]].cube_id)
            if bucket is not None and len(bucket) < size:
                bucket.append((ids[n], float(cosines[n])))

    # A partial sort finds the best rows of a large matrix; the others are read only when a
    # cube is still short (its memories are few, or rank low).
    few = 4 * size * len(cubes)
    if len(ids) <= few:
        fill(np.arange(len(ids)))
        return by_cube
    head = np.argpartition(-cosines, few - 1)[:few]
    fill(head)
    if any(len(bucket) < size for bucket in by_cube.values()):
        rest = np.ones(len(ids), dtype=bool)
        rest[head] = False
        fill(np.flatnonzero(rest))
    return by_cube
