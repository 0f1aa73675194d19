"""LoCoMo retrieval through the API, as a platform searches: ``POST /v1/memories/search``.

The dev split's turns, one memory each, on MariaDB under a tenant of the run's own, embedded
by the backfill on the local all-MiniLM-L6-v2 server; two ``memstream api`` processes serve
them, hybrid and lexical, searched at k = 5 and 10 with each answer's ``degraded`` recorded,
the hybrid one on a quiet embeddings server and again beside a running backfill.
``python -m bench locomo-api``; ``MEMSTREAM_LOCOMO_PATH`` (the data file),
``BENCH_LOCOMO_API_PASSES`` (``quiet,busy,lexical``; ``sweep`` tunes the fusion weight on
two conversations and measures it on the other three), ``BENCH_LOCOMO_API_TENANT`` (a tenant
kept and reused between runs)."""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import httpx
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.embedding_server import MODEL_NAME, running
from bench.locomo import (
    CATEGORIES,
    KS,
    TENANT,
    MemoClient,
    Recall,
    Sample,
    dev_split,
    store_turns,
)
from bench.support import isolated_settings, log_dir
from memstream.embeddings.backfill import EmbeddingBackfill
from memstream.embeddings.client import EmbeddingClient
from memstream.launch import api_url
from memstream.providers.builtin import BuiltinProvider
from memstream.settings import Settings
from memstream.store.database import create_engine, migrate
from memstream.store.schema import (
    long_term_memory,
    memory_embedding,
    memory_term,
    memory_vector_block,
)
from tests.support.processes import start_memstream
from tests.support.settings import free_port


@dataclass(slots=True)
class Pass:
    """One pass over every question through one API: recall overall and per conversation,
    and how many searches came back degraded."""

    label: str
    recall: dict[str, Recall] = field(default_factory=lambda: {"": Recall()})
    searches: int = 0
    degraded: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    failures: float = 0.0  # the API's memstream_provider_failures_total{call="embed_query"}


async def search_pass(label: str, base: str, tenant: str, samples: Sequence[Sample]) -> Pass:
    """Every question at each k through ``POST /v1/memories/search`` of ``base``."""
    out = Pass(label)
    async with httpx.AsyncClient(base_url=base, timeout=30.0) as http:
        for sample in samples:
            out.recall[sample.sample_id] = Recall()
            for question in sample.questions:
                ranked: dict[int, list[Sequence[str]]] = {}
                for k in KS:
                    body = {
                        "tenant_id": tenant,
                        "user_id": sample.sample_id,
                        "query": question.text,
                        "top_k": k,
                    }
                    began = time.perf_counter()
                    response = await http.post("/v1/memories/search", json=body)
                    out.latencies.append((time.perf_counter() - began) * 1000)
                    response.raise_for_status()
                    answer = response.json()
                    out.searches += 1
                    out.degraded.update(answer["degraded"])
                    ranked[k] = [tuple(item["source_event_ids"]) for item in answer["items"]]
                for recall in (out.recall[""], out.recall[sample.sample_id]):
                    recall.count(question)
                    for k in KS:
                        recall.add(question, k, ranked[k])
        return await with_failures(out, http)


async def with_failures(out: Pass, http: httpx.AsyncClient) -> Pass:
    response = await http.get("/metrics")
    out.failures = sum(
        sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
        if sample.name == "memstream_provider_failures_total"
        and sample.labels.get("call") == "embed_query"
    )
    return out


async def keep_embedding(
    engine: AsyncEngine,
    url: str,
    samples: Sequence[Sample],
    tenants: list[str],
    busy: asyncio.Event,
) -> int:
    """Store fresh copies of the turns and embed them through the backfill, one copy after
    another, until ``busy`` is cleared; answers the memories embedded."""
    embedded = 0
    async with EmbeddingClient(url, MODEL_NAME, timeout=60.0) as client:
        while busy.is_set():
            tenant = f"{TENANT}-fill-{uuid.uuid4().hex[:8]}"
            tenants.append(tenant)
            await store_turns(engine, list(samples), tenant)
            backfill = EmbeddingBackfill(engine, client, tenant_id=tenant)
            while busy.is_set():
                tick = await backfill.tick()
                embedded += tick.stored
                if tick.error:
                    await asyncio.sleep(1.0)
                elif not tick.stored:
                    break
    return embedded


def print_pass(samples: Sequence[Sample], result: Pass) -> None:
    recall = result.recall[""]
    per = "".join(
        f"  {CATEGORIES[c]} {recall.at(5, c):.1f}/{recall.at(10, c):.1f}" for c in CATEGORIES
    )
    degraded = ", ".join(f"{part} {n}" for part, n in result.degraded.items()) or "none"
    convs = "  ".join(
        f"{s.sample_id} {result.recall[s.sample_id].at(10):.1f}"
        for s in samples
        if s.sample_id in result.recall
    )
    print(
        f"{result.label}: @5 {recall.at(5):.1f}  @10 {recall.at(10):.1f}  "
        f"({sum(recall.counts.values())} questions){per}\n"
        f"  searches {result.searches}, degraded: {degraded}; embed_query failures counted by "
        f"the API {result.failures:.0f}; latency p50 {statistics.median(result.latencies):.1f} ms"
        f", max {max(result.latencies):.1f} ms\n  recall@10 per conversation: {convs}"
    )


async def main() -> None:
    samples = dev_split()
    if samples is None:
        return
    passes = os.environ.get("BENCH_LOCOMO_API_PASSES", "quiet,busy,lexical").split(",")
    base_settings = isolated_settings()
    await migrate(base_settings.database_url)
    engine = create_engine(base_settings.database_url)
    kept = os.environ.get("BENCH_LOCOMO_API_TENANT", "")
    tenant = kept or f"{TENANT}-api-{uuid.uuid4().hex[:8]}"
    tenants = [] if kept else [tenant]
    logs = log_dir("locomo-api")
    try:
        with running() as embeddings:
            if not await stored(engine, tenant):
                await store_turns(engine, samples, tenant)
            began = time.perf_counter()
            async with EmbeddingClient(embeddings, MODEL_NAME, timeout=60.0) as client:
                filled = await EmbeddingBackfill(engine, client, tenant_id=tenant).run_until_done()
            print(
                f"{tenant}: embedded {filled.stored} memories in "
                f"{time.perf_counter() - began:.0f} s; load average {os.getloadavg()[0]:.1f}"
            )
            for name in passes:
                if name == "sweep":
                    await sweep(engine, embeddings, samples, tenant)
                    continue
                await run_pass(name, base_settings, embeddings, engine, samples, tenant, tenants)
        print(f"(logs in {logs})")
    finally:
        async with engine.begin() as conn:
            for table in (memory_vector_block, memory_embedding, memory_term, long_term_memory):
                await conn.execute(delete(table).where(table.c.tenant_id.in_(tenants)))
        await engine.dispose()


WEIGHTS = (0.03, 0.05, 0.1, 0.2, 0.35, 0.5, 1.0)
FOLDS = (("conv-26", "conv-30"), ("conv-41", "conv-42", "conv-43"))


async def sweep(
    engine: AsyncEngine, embeddings: str, samples: Sequence[Sample], tenant: str
) -> None:
    """The fusion's vector weight (and the relativity threshold) chosen on one fold of the
    conversations and measured on the other, both ways; in this process, every query
    embedded once, the same ranking code the API runs."""
    client = MemoClient(embeddings, MODEL_NAME)
    configs: dict[str, BuiltinProvider] = {
        "lexical": BuiltinProvider(engine),
        "lexical, no threshold": BuiltinProvider(engine, relativity=0.0),
    }
    for weight in WEIGHTS:
        configs[f"hybrid w={weight}"] = BuiltinProvider(
            engine, embedder=client, query_timeout=60.0, vector_weight=weight
        )
    configs["hybrid w=0.1, no threshold"] = BuiltinProvider(
        engine, embedder=client, query_timeout=60.0, relativity=0.0
    )
    results: dict[str, dict[str, Recall]] = {}
    for label, provider in configs.items():
        per = results[label] = {}
        for sample in samples:
            recall = per[sample.sample_id] = Recall()
            for question in sample.questions:
                recall.count(question)
                for k in KS:
                    items = await provider.search(
                        tenant, sample.sample_id, None, question.text, top_k=k
                    )
                    recall.add(question, k, [i.source_event_ids for i in items])
        await provider.aclose()

    def fold(label: str, ids: Sequence[str], k: int) -> float:
        merged = Recall()
        for sample_id in ids:
            part = results[label][sample_id]
            merged.counts.update(part.counts)
            for key, value in part.sums.items():
                merged.sums[key] = merged.sums.get(key, 0.0) + value
        return merged.at(k)

    print("in-process sweep, recall @5 / @10 per fold:")
    for label in results:
        cells = "   ".join(
            f"{'+'.join(f)} {fold(label, f, 5):.1f} / {fold(label, f, 10):.1f}" for f in FOLDS
        )
        print(f"  {label:30s} {cells}")
    hybrids = [label for label in results if label.startswith("hybrid w=") and "no" not in label]
    for chosen_on, reported_on in (FOLDS, FOLDS[::-1]):
        best = max(
            hybrids, key=lambda label: (fold(label, chosen_on, 10), fold(label, chosen_on, 5))
        )
        lexical, hybrid = (
            f"{fold(label, reported_on, 5):.1f} / {fold(label, reported_on, 10):.1f}"
            for label in ("lexical", best)
        )
        print(
            f"chosen on {'+'.join(chosen_on)}: {best}; on {'+'.join(reported_on)}: lexical "
            f"{lexical}, hybrid {hybrid}"
        )


async def stored(engine: AsyncEngine, tenant: str) -> bool:
    """Whether ``tenant`` holds memories already (a kept tenant of an earlier run)."""
    query = select(func.count()).where(long_term_memory.c.tenant_id == tenant)
    async with engine.connect() as conn:
        return int((await conn.execute(query)).scalar_one()) > 0


async def run_pass(
    name: str,
    base_settings: Settings,
    embeddings: str,
    engine: AsyncEngine,
    samples: Sequence[Sample],
    tenant: str,
    tenants: list[str],
) -> None:
    hybrid = name != "lexical"
    settings = base_settings.model_copy(
        update={
            "api_port": free_port(),
            "embedding_base_url": embeddings if hybrid else "",
            "embedding_model": MODEL_NAME if hybrid else "",
        }
    )
    logs = log_dir("locomo-api")
    api = start_memstream("api", settings, log_path=logs / f"api-{name}.log", timeout=60)
    try:
        load_before = os.getloadavg()[0]
        if name == "busy":
            busy = asyncio.Event()
            busy.set()
            filler = asyncio.create_task(keep_embedding(engine, embeddings, samples, tenants, busy))
            await asyncio.sleep(5.0)  # the backfill under way before the first search
            try:
                label = "hybrid API, backfill running"
                result = await search_pass(label, api_url(settings), tenant, samples)
            finally:
                busy.clear()
                embedded = await filler
            print(f"(the backfill embedded {embedded} memories meanwhile)")
        else:
            label = "hybrid API, quiet embeddings server" if hybrid else "lexical API"
            result = await search_pass(label, api_url(settings), tenant, samples)
        print_pass(samples, result)
        print(f"  load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")
    finally:
        api.stop(timeout=10)
