"""The built-in store's ranking: lexical (BM25 relevance, thresholded, MMR, over the stored
postings) and hybrid (the lexical ranking and the vector ranking of the user's packed
vectors fused, then MMR). No IO: each runs on data its search read and owns, inline or in a
worker thread (provider.py)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from memstream.embeddings.fusion import entered_by_rank, fuse
from memstream.memory import MemoryItem
from memstream.retrieval import mmr, normalised


class HybridOptions(Protocol):
    """The knobs of a hybrid search (the provider's settings)."""

    relativity: float
    mmr_lambda: float
    vector_weight: float
    fusion: Literal["rrf", "weighted"]
    rrf_k: int


def pool_size(top_k: int) -> int:
    """The candidates of each cube MMR picks among: the best ones only."""
    return max(3 * top_k, 30)


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
    size = pool_size(top_k)
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


@dataclass(frozen=True, slots=True)
class HybridCandidates:
    """The candidates of a hybrid search, per readable cube: the most relevant (id,
    relevance) pairs and the nearest (id, cosine) pairs, best first, with room for memories
    found deleted when their rows are read; and the vector hits entered by rank."""

    lexical: dict[str, list[tuple[str, float]]]
    vector: dict[str, list[tuple[str, float]]]
    entered: frozenset[str]

    def ids(self) -> list[str]:
        """Every candidate's id, sorted (the rows to read)."""
        pools = (*self.lexical.values(), *self.vector.values())
        return sorted({doc_id for pool in pools for doc_id, _ in pool})


def hybrid_candidates(
    relevance: Mapping[str, float],
    cube_of: Callable[[str], str],
    ids: Sequence[str],
    vector_cubes: Sequence[str],
    cosines: npt.NDArray[np.float32],
    cubes: Sequence[str],
    top_k: int,
) -> HybridCandidates:
    """What a hybrid search reads the rows of: ``relevance`` of live memories by id (their
    cubes by ``cube_of``), and the cosines of the user's vectors (row ``i`` is memory
    ``ids[i]`` of cube ``vector_cubes[i]``)."""
    size = pool_size(top_k)
    lexical: dict[str, list[tuple[float, str]]] = {c: [] for c in cubes}
    for doc_id, value in relevance.items():
        if value > 0.0:
            bucket = lexical.get(cube_of(doc_id))
            if bucket is not None:
                bucket.append((value, doc_id))
    entered = frozenset(ids[n] for n in entered_by_rank(cosines))
    return HybridCandidates(
        {c: [(i, v) for v, i in heapq.nlargest(size, pool)] for c, pool in lexical.items()},
        _nearest_by_cube(ids, vector_cubes, cosines, cubes, 2 * size),
        entered,
    )


def pick_hybrid(
    candidates: HybridCandidates,
    items: Mapping[str, MemoryItem],
    token_set: Callable[[str], frozenset[str]],
    cubes: Sequence[str],
    top_k: int,
    options: HybridOptions,
) -> list[MemoryItem]:
    """Lexical and vector rankings of each readable cube fused over the candidates still
    live (those in ``items``; memstream.embeddings.fusion), then MMR on the fused scores."""
    size = pool_size(top_k)
    picked: list[tuple[float, float, str]] = []
    for cube in cubes:
        ranked = [
            (doc_id, normalised(value))
            for doc_id, value in candidates.lexical[cube]
            if doc_id in items
        ]
        nearest = [pair for pair in candidates.vector[cube] if pair[0] in items][:size]
        fused = fuse(
            ranked,
            nearest,
            threshold=options.relativity,
            k=options.rrf_k,
            vector_weight=options.vector_weight,
            entered=candidates.entered,
            order=options.fusion,
            limit=size,
        )
        pool = [
            ((f.rrf if options.fusion == "rrf" else f.weighted, f.id), f.score, token_set(f.id))
            for f in fused
        ]
        for (value, doc_id), score, _tokens in mmr(pool, options.mmr_lambda, top_k):
            picked.append((score, value, doc_id))
    picked.sort(reverse=True)
    return [replace(items[doc_id], score=round(score, 4)) for score, _, doc_id in picked]


def _nearest_by_cube(
    ids: Sequence[str],
    vector_cubes: Sequence[str],
    cosines: npt.NDArray[np.float32],
    cubes: Sequence[str],
    size: int,
) -> dict[str, list[tuple[str, float]]]:
    """The ``size`` best (id, cosine) pairs of each readable cube, best first."""
    by_cube: dict[str, list[tuple[str, float]]] = {c: [] for c in cubes}

    def fill(rows: npt.NDArray[np.intp]) -> None:
        for n in rows[np.argsort(-cosines[rows], kind="stable")]:
            bucket = by_cube.get(vector_cubes[n])
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
