"""What the LLM-output metrics counted, and what grew between two readings."""

from __future__ import annotations

from prometheus_client import REGISTRY


def flaw_counts(stage: str = "judge") -> dict[str, float]:
    reasons = ("truncated", "invented_field", "wrong_type", "bad_value", "out_of_range")
    reasons += ("unknown_id", "unparseable", "wrong_shape", "empty")
    counts = {
        r: REGISTRY.get_sample_value("memstream_llm_malformed_total", {"stage": stage, "reason": r})
        or 0.0
        for r in reasons
    }
    for outcome in ("clean", "repaired", "rejected"):
        counts[outcome] = (
            REGISTRY.get_sample_value(
                "memstream_llm_answers_total", {"stage": stage, "outcome": outcome}
            )
            or 0.0
        )
    return counts


def grown(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}
