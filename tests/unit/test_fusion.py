"""Reciprocal-rank fusion of lexical and vector rankings, scored on the relativity scale."""

from __future__ import annotations

import numpy as np
import pytest

from memstream.embeddings.fusion import (
    COSINE_FLOOR,
    COSINE_FULL,
    RRF_K,
    entered_by_rank,
    fuse,
    ranks,
    vector_score,
)
from memstream.retrieval import RELATIVITY


def test_vector_score_maps_the_cosine_range_linearly_and_clamps() -> None:
    assert vector_score(COSINE_FLOOR) == 0.0
    assert vector_score(COSINE_FULL) == 1.0
    assert vector_score(-0.5) == 0.0
    assert vector_score(0.99) == 1.0
    midway = (COSINE_FLOOR + COSINE_FULL) / 2
    assert vector_score(midway) == pytest.approx(0.5)
    # The relativity threshold on this scale is a cosine of 0.325 for the default bounds.
    assert vector_score(0.325) == pytest.approx(RELATIVITY)
    assert vector_score(0.5, floor=0.0, full=1.0) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="exceed"):
        vector_score(0.5, floor=0.6, full=0.6)


def test_ranks_sort_by_score_keep_ties_in_order_and_count_an_id_once() -> None:
    assert ranks([("a", 0.2), ("b", 0.9), ("c", 0.2), ("b", 0.1), ("a", 0.5)]) == {
        "b": (1, 0.9),
        "a": (2, 0.5),
        "c": (3, 0.2),
    }
    assert ranks([]) == {}


def test_a_memory_both_retrievers_find_comes_first() -> None:
    lexical = [("lex-only", 0.9), ("both", 0.6)]
    vector = [("vec-only", 0.55), ("both", 0.5)]
    fused = fuse(lexical, vector)
    both = fused[0]
    assert both.id == "both"
    assert both.rrf == pytest.approx(2 / (RRF_K + 2))
    assert both.lexical == 0.6
    assert both.vector == pytest.approx(vector_score(0.5))
    assert {f.id for f in fused} == {"both", "lex-only", "vec-only"}


def test_ties_in_rrf_keep_the_lexical_order_first() -> None:
    fused = fuse([("l1", 0.9), ("l2", 0.8)], [("v1", 0.6), ("v2", 0.59)])
    # l1 and v1 both have rank 1 in one list: equal RRF; lexical rank 1 goes first.
    assert [f.id for f in fused] == ["l1", "v1", "l2", "v2"]


def test_the_threshold_keeps_its_meaning() -> None:
    lexical = [("strong", 0.8), ("weak", 0.3)]
    vector = [("weak", 0.2), ("near", 0.40), ("noise", 0.05)]
    fused = {f.id: f for f in fuse(lexical, vector)}
    # "weak" matches a third of the query's words and is barely close in meaning: dropped,
    # exactly as the lexical retriever alone would drop it at 0.45.
    assert "weak" not in fused
    assert "noise" not in fused
    assert set(fused) == {"strong", "near"}
    assert fused["near"].score == pytest.approx(vector_score(0.40))
    # Every score reaches the threshold, so the load path's 0.3 floor drops none of them.
    assert all(f.score >= RELATIVITY for f in fused.values())
    # With no threshold, only what neither retriever relates to the query at all is dropped.
    assert {f.id for f in fuse(lexical, vector, threshold=0.0)} == {"strong", "weak", "near"}


def test_scores_fall_along_the_fused_order_and_never_exceed_the_evidence() -> None:
    lexical = [("a", 0.70), ("b", 0.95)]
    vector = [("a", 0.40), ("d", 0.35)]
    fused = fuse(lexical, vector)
    # "a" is second lexically and first by meaning: first fused. "b", the best lexical match,
    # follows and shows a's score: a score never rises along the fused order.
    assert [f.id for f in fused] == ["a", "b", "d"]
    assert [f.score for f in fused] == pytest.approx([0.70, 0.70, vector_score(0.35)])
    assert fused[1].lexical == 0.95
    for f in fused:
        assert f.score <= max(f.lexical, f.vector)
        assert 0.0 <= f.score <= 1.0


def test_lexical_scores_outside_zero_to_one_are_clamped() -> None:
    fused = fuse([("x", 1.7)], [])
    assert fused[0].score == 1.0
    assert fuse([("x", -1.0)], []) == []


def test_weights_and_limit() -> None:
    lexical = [("l", 0.9)]
    vector = [("v", 0.9)]
    assert [f.id for f in fuse(lexical, vector, vector_weight=2.0)] == ["v", "l"]
    assert [f.id for f in fuse(lexical, vector, lexical_weight=0.0)] == ["v", "l"]
    assert len(fuse(lexical, vector, limit=1)) == 1
    assert fuse(lexical, vector, limit=0) == []
    assert fuse([], []) == []
    with pytest.raises(ValueError, match="negative"):
        fuse(lexical, vector, k=-1)


def test_a_question_finds_its_answer_by_meaning_alone() -> None:
    # No shared word, so only the vector ranking has it; MiniLM's cosine for this question
    # and answer is 0.57 (bench/embedding_server.py --check).
    lexical = [("m-city", 0.5)]
    vector = [("m-teacher", 0.57), ("m-city", 0.12)]
    fused = fuse(lexical, vector)
    assert [f.id for f in fused] == ["m-city", "m-teacher"]
    assert fused[1].score >= RELATIVITY


def test_the_best_vector_hit_enters_by_rank_when_it_clearly_beats_the_rest() -> None:
    # MiniLM, "Where should I eat tonight?": the vegetarian memory 0.128, Berlin 0.033.
    assert entered_by_rank([0.128, 0.033]) == [0]
    # An episode saying the same comes first, and the fact still enters with it.
    assert entered_by_rank([0.128, 0.033, 0.19]) == [2, 0]
    # Nothing stands out: nothing enters.
    assert entered_by_rank([0.05, 0.04, 0.06, 0.03]) == []
    assert entered_by_rank([]) == [] and entered_by_rank([0.9], entries=0) == []


def test_entry_by_rank_does_not_let_noise_in_however_many_memories() -> None:
    seeds_with_entries = 0
    for seed in range(50):
        noise = np.random.default_rng(seed).normal(0.2, 0.1, size=1000).astype(np.float32)
        seeds_with_entries += bool(entered_by_rank(noise))
        clear = np.append(noise, np.float32(0.9))
        assert entered_by_rank(clear)[0] == 1000
    assert seeds_with_entries <= 10


def test_entered_hits_count_at_the_threshold() -> None:
    fused = fuse([], [("faint", 0.128), ("other", 0.033)], entered={"faint"})
    assert [(f.id, f.score) for f in fused] == [("faint", RELATIVITY)]
    assert fuse([], [("faint", 0.128)]) == []


def test_the_weighted_order_lets_the_lexical_score_lead() -> None:
    lexical = [("words", 0.8), ("tied-a", 1.0), ("tied-b", 1.0)]
    vector = [("meaning", 0.6), ("tied-b", 0.5), ("words", 0.2)]
    fused = fuse(lexical, vector, order="weighted", vector_weight=0.1)
    # Equal lexical scores are ordered by meaning; a memory found by meaning alone follows
    # the lexical matches; every score still falls along the order.
    assert [f.id for f in fused] == ["tied-b", "tied-a", "words", "meaning"]
    assert fused[0].weighted == pytest.approx(1.0 + 0.1 * vector_score(0.5))
    assert [f.score for f in fused] == sorted((f.score for f in fused), reverse=True)
    with pytest.raises(ValueError, match="order"):
        fuse(lexical, vector, order="best")  # type: ignore[arg-type]
