"""The long-term chain with a real small model beside the rule-based judge, on the same LoCoMo
subset: ``python -m bench longterm-llm`` (needs ``make llm-venv``).

SmolLM2-135M-Instruct behind llama-cpp-python's server (``THREADS`` threads) judges,
resolves conflicts and summarises; ``MEMSTREAM_BENCH_LLM_SUBSET`` (``SAMPLESxSESSIONS``,
default ``SUBSET``) picks the conversations and sessions, ``MEMSTREAM_BENCH_LLM_VENV`` the
server's venv. Each judge has a worker and a database of its own; sessions end one at a
time, each timed from its ``session-ended`` to its last memory, then the questions search
what was kept. The model's run ends with its answers clean, repaired or rejected per stage."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from bench.locomo import KS
from bench.longterm import PipelineRun, Subset, locomo_pipeline
from bench.support import log_dir
from memstream.settings import Settings
from memstream.store.database import migrate
from tests.support.llm import MODEL_NAME, VENV, llm_server
from tests.support.processes import worker_metric

SUBSET = Subset(samples=5, sessions=3)
"""Every conversation of the dev split cut to its first three sessions: 15 sessions, 327 turns,
95 questions, so every speaker pair is in it and each conversation's second and third sessions
meet the memories of its first (the conflict resolver is asked). With the model, about a
minute or two a session on a shared core: the full split (128 sessions) would take hours."""
THREADS = 1
"""The server's threads. On two cores shared with other jobs, two threads answered at 1.3
tokens/s and one at 18 (the same request, one after the other): llama.cpp's threads wait on
each other at every token, and a thread that is not scheduled holds the other up."""
MAX_TOKENS = 384
"""The cap on every answer (``MEMSTREAM_LLM_MAX_TOKENS``): at about 17 tokens/s a judge asked
for its full 1500 takes 90 s a session."""
STAGES = ("judge", "conflict", "summary")
REASONS = (
    "truncated",
    "invented_field",
    "wrong_type",
    "bad_value",
    "out_of_range",
    "unknown_id",
    "unparseable",
    "wrong_shape",
    "empty",
)


def model_settings(url: str) -> dict[str, Any]:
    return {
        "llm_base_url": url,
        "llm_model": MODEL_NAME,
        "llm_timeout_seconds": 600.0,
        "llm_max_in_flight": 1,
        "llm_max_tokens": MAX_TOKENS,
    }


async def report_model(port: int) -> None:
    """What the worker on ``port`` counted of the model's answers."""
    for stage in STAGES:
        outcomes = {
            o: await worker_metric(port, "memstream_llm_answers_total", stage=stage, outcome=o)
            for o in ("clean", "repaired", "rejected")
        }
        failed = await worker_metric(port, "memstream_llm_requests_total", purpose=stage)
        failed -= await worker_metric(
            port, "memstream_llm_requests_total", purpose=stage, outcome="ok"
        )
        flaws = {
            r: await worker_metric(port, "memstream_llm_malformed_total", stage=stage, reason=r)
            for r in REASONS
        }
        answers = sum(outcomes.values())
        malformed = outcomes["repaired"] + outcomes["rejected"]
        print(
            f"  {stage:8s}: {answers:.0f} answers, {outcomes['clean']:.0f} clean, "
            f"{outcomes['repaired']:.0f} repaired, {outcomes['rejected']:.0f} rejected "
            f"(malformed {100 * malformed / max(1, answers):.0f}%); requests failed "
            f"{failed:.0f}; flaws: "
            + (", ".join(f"{r} {v:.0f}" for r, v in flaws.items() if v) or "none")
        )
    fallbacks = {
        r: await worker_metric(port, "memstream_judge_fallbacks_total", reason=r)
        for r in ("malformed", "timeout", "error", "empty")
    }
    print(
        "  judge fallbacks to the rules: " + ", ".join(f"{r} {v:.0f}" for r, v in fallbacks.items())
    )


def subset_from_env() -> Subset:
    """``MEMSTREAM_BENCH_LLM_SUBSET``: ``SAMPLESxSESSIONS`` (``3x4``: the first three LoCoMo
    conversations, each cut to its first four sessions)."""
    raw = os.environ.get("MEMSTREAM_BENCH_LLM_SUBSET", "").strip().lower()
    if not raw:
        return SUBSET
    samples, _, sessions = raw.partition("x")
    try:
        subset = Subset(samples=int(samples), sessions=int(sessions))
    except ValueError:
        raise SystemExit(f"MEMSTREAM_BENCH_LLM_SUBSET={raw!r}: expected SAMPLESxSESSIONS") from None
    if subset.samples < 1 or subset.sessions < 1:
        raise SystemExit(f"MEMSTREAM_BENCH_LLM_SUBSET={raw!r}: both counts must be at least 1")
    return subset


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile: with a dozen sessions, p95 is the slowest but none."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)] if ordered else float("nan")


def compare(runs: dict[str, PipelineRun]) -> None:
    """Per-session latency, memories and recall of each judge on the same subset, and the
    model's recall as a share of the rules'."""
    print("same subset, sessions ended one at a time:")
    for judge, run in runs.items():
        stored, idle = run.stored_seconds, run.idle_seconds
        print(
            f"  {judge:28s}: session-ended -> last memory written p50 "
            f"{percentile(stored, 0.5):.1f} s, p95 {percentile(stored, 0.95):.1f} s, max "
            f"{max(stored, default=float('nan')):.1f} s ({run.sessions_without_writes} sessions "
            f"wrote nothing); -> chain idle p50 {percentile(idle, 0.5):.1f} s, p95 "
            f"{percentile(idle, 0.95):.1f} s; {run.memories} memories "
            f"({run.memories - run.episodes} facts, {run.episodes} episodes), "
            f"{run.questions} questions"
        )
    model, rules = runs[f"{MODEL_NAME} judge"], runs["rule-based judge"]
    for label in model.recalls:
        if label not in rules.recalls or label.startswith("BM25"):
            continue  # BM25 reads the raw turns: the same for both judges
        cells = []
        for k in KS:
            ours, theirs = model.recalls[label].at(k), rules.recalls[label].at(k)
            cells.append(f"@{k} {ours:.1f}% vs {theirs:.1f}% ({ours / max(theirs, 1e-9):.2f}x)")
        print(f"  recall, {label:32s}: model vs rules " + ", ".join(cells))


async def main() -> None:
    base = Settings()
    await migrate(base.database_url)
    subset = subset_from_env()
    venv = Path(os.environ.get("MEMSTREAM_BENCH_LLM_VENV") or VENV)
    print(
        f"LoCoMo subset: the first {subset.samples} conversations, each cut to its first "
        f"{subset.sessions} sessions; server threads {THREADS}, answers capped at {MAX_TOKENS} "
        "tokens",
        flush=True,
    )
    runs = {}
    # The rules first: a few minutes, and their figures are there even if the model's run is cut.
    runs["rule-based judge"] = await locomo_pipeline(base, None, subset=subset, one_at_a_time=True)
    with llm_server(venv, threads=THREADS, log=log_dir("llm-server") / "server.log") as url:
        runs[f"{MODEL_NAME} judge"] = await locomo_pipeline(
            base,
            None,
            subset=subset,
            overrides=model_settings(url),
            judge=f"{MODEL_NAME} judge",
            after=report_model,
            one_at_a_time=True,
        )
    compare(runs)
