"""Hybrid ranking: a lexical and a vector ranking fused into one order, scored in [0, 1]. The
two orders, the score and entry by rank, and why: docs/design/hybrid-ranking.md."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from memstream.retrieval import RELATIVITY

RRF_K = 60
"""The usual RRF constant: rank 1 is worth 1/61, rank 10 still 1/70."""

COSINE_FLOOR = 0.10
"""Cosine mapped to vector score 0 (unrelated text)."""

COSINE_FULL = 0.60
"""Cosine mapped to vector score 1 (a memory that answers the query)."""

VECTOR_WEIGHT = 0.1
"""The vector score's weight in the built-in store's weighted order, the lexical one's 1.0."""

RANK_ENTRIES = 2
"""How many of a search's best vector hits may enter by rank."""

BACKGROUND_COSINE = 0.0
"""MiniLM's cosine between unrelated texts, typically (-0.07 to 0.07 on ``--check`` pairs)."""

BACKGROUND_SPREAD = 0.06
"""Its spread (standard deviation) over unrelated texts."""

PRIOR_MEMORIES = 8
"""Weight of that prior, in memories, against the user's own cosines."""


@dataclass(frozen=True, slots=True)
class Fused:
    """One fused result: ``score`` in [0, 1] (docs/design/hybrid-ranking.md) and its sources."""

    id: str
    score: float
    lexical: float  # the lexical score, 0.0 when the lexical ranking lacks the id
    vector: float  # the mapped cosine, 0.0 when the vector ranking lacks the id
    rrf: float
    weighted: float = 0.0  # lexical_weight * lexical + vector_weight * vector


def vector_score(cosine: float, *, floor: float = COSINE_FLOOR, full: float = COSINE_FULL) -> float:
    """A cosine on the relativity scale: linear from ``floor`` (0) to ``full`` (1), clamped."""
    if full <= floor:
        raise ValueError("the full-match cosine must exceed the floor")
    return min(1.0, max(0.0, (cosine - floor) / (full - floor)))


def entered_by_rank(
    cosines: npt.NDArray[np.float32] | Iterable[float],
    *,
    entries: int = RANK_ENTRIES,
    background: float = BACKGROUND_COSINE,
    spread: float = BACKGROUND_SPREAD,
    prior: float = PRIOR_MEMORIES,
) -> list[int]:
    """Positions in ``cosines`` (one per memory of the user) of the best ``entries`` hits
    that clearly beat the rest (docs/design/hybrid-ranking.md), best first."""
    values = np.asarray(list(cosines) if not isinstance(cosines, np.ndarray) else cosines)
    n = int(values.shape[0])
    if n == 0 or entries <= 0:
        return []
    if n > entries:  # a partial sort: the matrix of a large store has many rows
        best = np.argpartition(-values, entries - 1)[:entries]
        best = best[np.argsort(-values[best], kind="stable")]
    else:
        best = np.argsort(-values, kind="stable")
    rest = np.delete(values, best)
    median = float(np.median(rest)) if rest.size else 0.0
    mad = 1.4826 * float(np.median(np.abs(rest - median))) if rest.size else 0.0
    weight = rest.size + prior
    centre = (rest.size * median + prior * background) / weight
    scale = math.sqrt((rest.size * mad * mad + prior * spread * spread) / weight)
    bar = centre + math.sqrt(2.0 * math.log(n + 1)) * scale
    return [int(i) for i in best if values[i] >= bar]


def ranks(scored: Iterable[tuple[str, float]]) -> dict[str, tuple[int, float]]:
    """id -> (rank from 1, score), best score first, ties in the given order; an id given
    twice counts once, with its better score."""
    best: dict[str, tuple[float, int]] = {}
    for position, (doc_id, score) in enumerate(scored):
        if doc_id not in best or score > best[doc_id][0]:
            best[doc_id] = (score, best[doc_id][1] if doc_id in best else position)
    order = sorted(best.items(), key=lambda item: (-item[1][0], item[1][1]))
    return {doc_id: (rank, score) for rank, (doc_id, (score, _)) in enumerate(order, start=1)}


def fuse(
    lexical: Iterable[tuple[str, float]],
    vector: Iterable[tuple[str, float]],
    *,
    threshold: float = RELATIVITY,
    k: int = RRF_K,
    lexical_weight: float = 1.0,
    vector_weight: float = 1.0,
    cosine_floor: float = COSINE_FLOOR,
    cosine_full: float = COSINE_FULL,
    entered: Collection[str] = (),
    order: Literal["rrf", "weighted"] = "rrf",
    limit: int | None = None,
) -> list[Fused]:
    """Fuse (id, lexical score in [0, 1]) and (id, cosine) pairs, in any order; answers the
    memories whose evidence reaches ``threshold``, in fused ``order`` (at most ``limit``).
    Vector hits named in ``entered`` (``entered_by_rank``) count as evidence at the
    threshold at least."""
    if k < 0 or lexical_weight < 0 or vector_weight < 0:
        raise ValueError("k and the weights must not be negative")
    if order not in ("rrf", "weighted"):
        raise ValueError(f"unknown fusion order {order!r}")
    by_lexical = ranks(lexical)
    by_vector = ranks(vector)
    candidates: list[tuple[float, int, int, Fused]] = []
    for doc_id in by_lexical.keys() | by_vector.keys():
        lex_rank, lex_score = by_lexical.get(doc_id, (0, 0.0))
        vec_rank, cosine = by_vector.get(doc_id, (0, 0.0))
        lex = min(1.0, max(0.0, lex_score)) if lex_rank else 0.0
        vec = vector_score(cosine, floor=cosine_floor, full=cosine_full) if vec_rank else 0.0
        if vec_rank and doc_id in entered:
            vec = max(vec, threshold)
        evidence = max(lex, vec)
        if evidence <= 0.0 or evidence < threshold:
            continue
        rrf = (lexical_weight / (k + lex_rank) if lex_rank else 0.0) + (
            vector_weight / (k + vec_rank) if vec_rank else 0.0
        )
        weighted = lexical_weight * lex + vector_weight * vec
        # Missing ranks sort after every present one.
        tie = (lex_rank or len(by_lexical) + 1, vec_rank or len(by_vector) + 1)
        value = rrf if order == "rrf" else weighted
        candidates.append((-value, *tie, Fused(doc_id, evidence, lex, vec, rrf, weighted)))
    candidates.sort(key=lambda c: c[:3])
    out: list[Fused] = []
    cap = 1.0
    for *_, item in candidates[:limit]:
        cap = min(cap, item.score)
        out.append(Fused(item.id, cap, item.lexical, item.vector, item.rrf, item.weighted))
    return out
