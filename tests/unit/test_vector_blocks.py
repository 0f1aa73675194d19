"""Packed vector blocks: int8 quantisation, the stored bytes, and the hybrid ranking over
the candidates a search reads."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import numpy as np
import pytest

from memstream.memory import USER_PROFILE, MemoryItem
from memstream.providers.builtin.ranking import hybrid_candidates, pick_hybrid
from memstream.store import vector_blocks

DIMS = 384


def unit_rows(n: int, seed: int = 7) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(n, DIMS)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_quantised_cosines_stay_within_two_thousandths() -> None:
    vectors = unit_rows(200)
    query = unit_rows(1, seed=8)[0]
    codes, scales = vector_blocks.quantise(vectors)
    assert codes.dtype == np.int8 and scales.dtype == np.float32
    matrix = vector_blocks.Matrix(tuple(map(str, range(200))), ("c",) * 200, codes, scales)
    assert np.max(np.abs(matrix.cosines(query) - vectors @ query)) < 2e-3


def test_a_zero_vector_quantises_to_zeros() -> None:
    codes, scales = vector_blocks.quantise(np.zeros((1, DIMS), dtype=np.float32))
    assert not codes.any() and scales[0] == 1.0


def test_a_block_reads_back_as_written() -> None:
    codes, scales = vector_blocks.quantise(unit_rows(3))
    ids, cubes = ["a", "b", "c"], [USER_PROFILE, "agent_x", USER_PROFILE]
    raw_ids, raw_vectors = vector_blocks.encode(ids, cubes, codes, scales)
    assert len(raw_vectors) == 3 * (4 + DIMS)
    back = vector_blocks.decode(3, DIMS, raw_ids, raw_vectors)
    assert back is not None
    assert back.ids == tuple(ids) and back.cubes == tuple(cubes)
    assert np.array_equal(back.codes, codes) and np.array_equal(back.scales, scales)


def test_a_block_written_wrong_is_never_misread() -> None:
    codes, scales = vector_blocks.quantise(unit_rows(2))
    raw_ids, raw_vectors = vector_blocks.encode(["a", "b"], ["c", "c"], codes, scales)
    assert vector_blocks.decode(3, DIMS, raw_ids, raw_vectors) is None  # count
    assert vector_blocks.decode(2, DIMS + 1, raw_ids, raw_vectors) is None  # dimension
    assert vector_blocks.decode(2, DIMS, raw_ids, raw_vectors[:-1]) is None  # truncated
    odd_ids, odd_vectors = vector_blocks.encode(["a\x1fb", "c"], ["c", "c"], codes, scales)
    assert vector_blocks.decode(2, DIMS, odd_ids, odd_vectors) is None  # a separator in an id
    found = [
        vector_blocks.Block(DIMS, 2, raw_ids, raw_vectors),
        vector_blocks.Block(DIMS, 2, raw_ids, raw_vectors[:-1]),
        vector_blocks.Block(DIMS + 1, 2, raw_ids, raw_vectors),
    ]
    assert vector_blocks.matrix_of(found, DIMS).ids == ("a", "b")
    with pytest.raises(ValueError):
        vector_blocks.encode(["a"], ["c", "c"], codes, scales)


def test_blocks_join_in_order_and_lose_deleted_rows() -> None:
    codes, scales = vector_blocks.quantise(unit_rows(4))
    first = vector_blocks.Matrix(("a", "b"), ("c", "c"), codes[:2], scales[:2])
    second = vector_blocks.Matrix(("x", "y"), ("c", "d"), codes[2:], scales[2:])
    joined = vector_blocks.join([first, second], DIMS)
    assert joined.ids == ("a", "b", "x", "y") and joined.codes.shape == (4, DIMS)
    left = vector_blocks.without(joined, {"b", "y"})
    assert left.ids == ("a", "x") and left.cubes == ("c", "c")
    assert np.array_equal(left.codes, codes[[0, 2]])
    assert len(vector_blocks.join([], DIMS)) == 0


@dataclass
class Options:
    relativity: float = 0.45
    mmr_lambda: float = 0.7
    vector_weight: float = 0.1
    fusion: Literal["rrf", "weighted"] = "weighted"
    rrf_k: int = 60


def item(memory_id: str, content: str) -> MemoryItem:
    return MemoryItem(
        id=memory_id,
        tenant_id="t",
        user_id="u",
        agent_id=None,
        cube_id=USER_PROFILE,
        memory_type="text_mem",
        content=content,
        importance=5,
        source_event_ids=(),
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_a_vector_only_hit_is_answered_and_a_deleted_one_makes_room() -> None:
    # Memory "m0" shares no word with the query but is its clear nearest neighbour; "m1" is
    # nearer still, but deleted (its row is not read back).
    rng = np.random.default_rng(3)
    n = 300
    cosines = rng.normal(0.0, 0.05, size=n).astype(np.float32)
    cosines[0], cosines[1] = 0.55, 0.7
    ids = tuple(f"m{k}" for k in range(n))
    found = hybrid_candidates(
        {"m5": 2.0}, lambda _: USER_PROFILE, ids, (USER_PROFILE,) * n, cosines, [USER_PROFILE], 10
    )
    assert {"m0", "m1"} <= found.entered
    assert {"m0", "m1", "m5"} <= set(found.ids())
    # Room for the rows found deleted: twice the pool of the vector ranking.
    assert len(found.vector[USER_PROFILE]) == 60 and len(found.lexical[USER_PROFILE]) == 1
    items = {i: item(i, f"note {i} words") for i in found.ids() if i != "m1"}
    picked = pick_hybrid(
        found, items, lambda i: frozenset(items[i].content.split()), [USER_PROFILE], 10, Options()
    )
    assert [p.id for p in picked][:2] == ["m5", "m0"]
    assert "m1" not in {p.id for p in picked}
    assert all(0.0 < p.score <= 1.0 for p in picked)


def test_no_vectors_rank_lexically() -> None:
    empty = np.zeros(0, dtype=np.float32)
    found = hybrid_candidates(
        {"a": 1.0, "b": 0.3}, lambda _: USER_PROFILE, (), (), empty, [USER_PROFILE], 10
    )
    assert not found.entered and found.ids() == ["a", "b"]
    items = {i: item(i, f"{i} text") for i in found.ids()}
    picked = pick_hybrid(found, items, lambda i: frozenset({i}), [USER_PROFILE], 10, Options())
    assert [p.id for p in picked] == ["a", "b"]  # 0.3 -> sqrt(0.3) = 0.55 >= 0.45
