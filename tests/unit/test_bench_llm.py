"""The small-model bench's subset: chosen by ``MEMSTREAM_BENCH_LLM_SUBSET``, cut by session,
scored only on questions whose evidence it keeps; and its nearest-rank percentiles."""

from __future__ import annotations

import pytest

from bench.locomo import Question, Sample, Turn
from bench.longterm import Subset
from bench.longterm_llm import SUBSET, percentile, subset_from_env


def test_the_default_subset_is_used_without_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMSTREAM_BENCH_LLM_SUBSET", raising=False)
    assert subset_from_env() == SUBSET


@pytest.mark.parametrize(("raw", "expected"), [("2x1", Subset(2, 1)), (" 5X3 ", Subset(5, 3))])
def test_the_variable_names_samples_by_sessions(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: Subset
) -> None:
    monkeypatch.setenv("MEMSTREAM_BENCH_LLM_SUBSET", raw)
    assert subset_from_env() == expected


@pytest.mark.parametrize("raw", ["3", "x4", "3x", "threexfour", "0x3", "3x0"])
def test_a_malformed_subset_stops_the_bench(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("MEMSTREAM_BENCH_LLM_SUBSET", raw)
    with pytest.raises(SystemExit, match="MEMSTREAM_BENCH_LLM_SUBSET"):
        subset_from_env()


def test_a_subset_keeps_its_sessions_turns_and_the_questions_they_answer() -> None:
    turns = [Turn(f"D{s}:{t}", "A", f"turn {s}.{t}", None) for s in (1, 2, 3) for t in (1, 2)]
    inside = Question("in the first two", 1, frozenset({"D1:2", "D2:1"}))
    outside = Question("needs the third", 2, frozenset({"D2:2", "D3:1"}))
    kept = Subset(samples=1, sessions=2).keep(Sample("conv-1", turns, [inside, outside]))
    assert [t.dia_id for t in kept.turns] == ["D1:1", "D1:2", "D2:1", "D2:2"]
    assert kept.questions == [inside]


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(15, 0, -1)]
    assert percentile(values, 0.5) == 8.0
    assert percentile(values, 0.95) == 15.0
    assert percentile([3.0], 0.95) == 3.0
    assert percentile(list(map(float, range(1, 101))), 0.95) == 95.0
