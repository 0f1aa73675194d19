"""The pipeline panel's arithmetic: worker counters summed, error rates, changes since an
earlier snapshot."""

from __future__ import annotations

from memstream.pipeline_panel import Sample, error_rates, parse_counters, since

WORKER = """\
# TYPE memstream_provider_seconds histogram
memstream_provider_seconds_bucket{call="add",le="+Inf",provider="MEMOS"} 8.0
memstream_provider_seconds_count{call="add",provider="MEMOS"} 8.0
memstream_provider_seconds_sum{call="add",provider="MEMOS"} 1.5
memstream_provider_seconds_count{call="search",provider="MEMOS"} 2.0
# TYPE memstream_provider_failures_total counter
memstream_provider_failures_total{call="add",provider="MEMOS"} 3.0
# TYPE memstream_llm_requests_total counter
memstream_llm_requests_total{outcome="ok",purpose="judge"} 9.0
memstream_llm_requests_total{outcome="timeout",purpose="judge"} 1.0
# TYPE memstream_events_total counter
memstream_events_total{outcome="stored",stage="history"} 100.0
"""


def test_counters_are_summed_over_workers_by_provider_and_outcome() -> None:
    counters = parse_counters([WORKER, WORKER])
    assert counters == {
        "memstream_provider_seconds{MEMOS}": 20.0,
        "memstream_provider_failures{MEMOS}": 6.0,
        "memstream_llm_requests{ok}": 18.0,
        "memstream_llm_requests{timeout}": 2.0,
    }
    rates = error_rates(counters)
    assert rates["providers"] == {"MEMOS": {"calls": 20, "failures": 6, "error_rate": 0.3}}
    assert rates["llm"] == {"calls": 20, "failures": 2, "error_rate": 0.1}
    assert error_rates({})["llm"]["error_rate"] is None


def test_changes_since_an_earlier_snapshot_survive_a_restarted_worker() -> None:
    earlier = Sample(10.0, {"history": 100}, {"memstream_llm_requests{ok}": 50.0})
    now = Sample(15.0, {"history": 160}, {"memstream_llm_requests{ok}": 4.0})
    seconds, changed = since(now, earlier)
    assert seconds == 5.0
    assert changed.committed == {"history": 60}
    # The counter went down: its worker restarted, so all of its value is new.
    assert changed.counters == {"memstream_llm_requests{ok}": 4.0}
    assert since(now, None) == (None, now)
