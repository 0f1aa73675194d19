"""LoCoMo retrieval: the built-in long-term store against plain BM25, LLM-free.

Every turn of the dev split becomes one memory of its conversation's user on a fresh SQLite
file, and each question of categories 1-4 is a search: recall@k is the share of its evidence
dia_ids among the top k's, with the relativity threshold and without it, against textbook
Okapi BM25 over the same texts. With the bench extra, the same run measures hybrid search on
the local all-MiniLM-L6-v2 server (conv-41, -42 and -43 held out for the fusion weight) and
MiniLM alone; last, search latency on MariaDB for one user with 10,000 memories.
``MEMSTREAM_LOCOMO_PATH`` overrides the data file."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import statistics
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.embedding_server import MODEL_NAME, running
from memstream.embeddings.backfill import EmbeddingBackfill
from memstream.embeddings.client import EmbeddingClient
from memstream.memory import USER_PROFILE, NewMemory
from memstream.providers.builtin import BuiltinProvider
from memstream.retrieval import RELATIVITY
from memstream.settings import Settings
from memstream.store import embeddings as vector_rows
from memstream.store.database import create_engine, migrate
from memstream.store.schema import long_term_memory, memory_embedding
from memstream.text.tokens import count_many

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10)
TENANT = "locomo-bench"
LATENCY_MEMORIES = 10_000
LATENCY_SEARCHES = 2_000
HYBRID_SEARCHES = 1_000
RATE = 100  # searches per second in the paced run (one search is 3-6 ms of CPU)
LEXICAL = f"memstream, relativity {RELATIVITY}"
LEXICAL_ALL = "memstream, no threshold"
HYBRID = f"memstream + MiniLM, relativity {RELATIVITY}"
HYBRID_ALL = "memstream + MiniLM, no threshold"
DENSE = "MiniLM alone"
BM25 = "BM25, same texts"


def data_path() -> Path:
    return Path(os.environ.get("MEMSTREAM_LOCOMO_PATH") or DEFAULT_PATH)


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str | None

    def memory_text(self, *, speaker: bool = True) -> str:
        text = self.text
        if self.caption:
            text += f" [shares a photo of {self.caption}]"
        return f"{self.speaker}: {text}" if speaker else self.text


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]


@dataclass(slots=True)
class Sample:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    skipped: int = 0


def load(path: Path) -> list[Sample]:
    samples = []
    for raw in json.loads(path.read_text(encoding="utf-8")):
        conversation = raw["conversation"]
        turns = [
            Turn(t["dia_id"], t["speaker"], t["text"], t.get("blip_caption"))
            for key in sorted(
                (k for k in conversation if re.fullmatch(r"session_\d+", k)),
                key=lambda k: int(k.split("_")[1]),
            )
            for t in conversation[key]
        ]
        known = {t.dia_id for t in turns}
        sample = Sample(raw["sample_id"], turns, [])
        for qa in raw["qa"]:
            if qa["category"] not in CATEGORIES:
                continue
            # A few evidence lists join two ids with ";" or cite a malformed id: split the
            # former, drop the latter; a question left without evidence is not scored.
            evidence = frozenset(
                part.strip()
                for item in qa["evidence"]
                for part in str(item).split(";")
                if part.strip() in known
            )
            if evidence:
                sample.questions.append(Question(qa["question"], qa["category"], evidence))
            else:
                sample.skipped += 1
        samples.append(sample)
    return samples


# --- plain BM25, the baseline ----------------------------------------------------------------


class OkapiBM25:
    """Textbook Okapi BM25 as rank_bm25's ``BM25Okapi`` computes it."""

    def __init__(self, docs: Sequence[str], k1: float = 1.5, b: float = 0.75) -> None:
        tokens = [self.tokenize(d) for d in docs]
        self.tf = [Counter(t) for t in tokens]
        self.lengths = [len(t) for t in tokens]
        self.avgdl = sum(self.lengths) / len(tokens)
        df = Counter(term for counter in self.tf for term in counter)
        n = len(docs)
        idf = {term: math.log(n - f + 0.5) - math.log(f + 0.5) for term, f in df.items()}
        floor = 0.25 * sum(idf.values()) / len(idf)  # rank_bm25's epsilon for negative idf
        self.idf = {term: value if value >= 0 else floor for term, value in idf.items()}
        self.k1, self.b = k1, b

    @staticmethod
    def tokenize(text: str) -> list[str]:
        return re.findall(r"\w+", text.lower())

    def top(self, query: str, k: int) -> list[int]:
        terms = self.tokenize(query)
        scores = []
        for doc, tf in enumerate(self.tf):
            norm = self.k1 * (1 - self.b + self.b * self.lengths[doc] / self.avgdl)
            score = 0.0
            for term in terms:
                f = tf.get(term, 0)
                if f:
                    score += self.idf[term] * f * (self.k1 + 1) / (f + norm)
            scores.append(score)
        return sorted(range(len(scores)), key=lambda d: -scores[d])[:k]


# --- scoring ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Recall:
    """Summed recall per category and k, plus what the returned items looked like."""

    sums: dict[tuple[int, int], float] = field(default_factory=dict)
    counts: Counter[int] = field(default_factory=Counter)
    returned: Counter[int] = field(default_factory=Counter)  # items returned at each k
    dia_ids: Counter[int] = field(default_factory=Counter)  # dia_ids cited by those items

    def add(self, question: Question, k: int, items: Sequence[Sequence[str]]) -> None:
        cited = {d for item in items[:k] for d in item}
        key = (question.category, k)
        self.sums[key] = self.sums.get(key, 0.0) + len(question.evidence & cited) / len(
            question.evidence
        )
        self.returned[k] += len(items[:k])
        self.dia_ids[k] += sum(len(item) for item in items[:k])

    def count(self, question: Question) -> None:
        self.counts[question.category] += 1

    def at(self, k: int, category: int | None = None) -> float:
        cats = [category] if category is not None else list(CATEGORIES)
        total = sum(self.sums.get((c, k), 0.0) for c in cats)
        n = sum(self.counts[c] for c in cats)
        return 100.0 * total / n if n else 0.0

    def mean_items(self, k: int) -> float:
        return self.returned[k] / max(1, sum(self.counts.values()))

    def mean_dia_ids(self, k: int) -> float:
        return self.dia_ids[k] / max(1, self.returned[k])


class MemoClient(EmbeddingClient):
    """Embeds each distinct text once: every question is searched at two k by two providers
    and scored by cosine alone, and the server's time is not what is measured here."""

    def __init__(self, url: str, model: str) -> None:
        super().__init__(url, model, timeout=60.0)
        self.memo: dict[str, npt.NDArray[np.float32]] = {}

    async def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        vector = self.memo.get(text)
        if vector is None:
            vector = self.memo[text] = await super().embed_one(text)
        return vector


Results = dict[str, dict[str, Recall]]  # label -> sample id ("" for all) -> recall


async def store_turns(engine: AsyncEngine, samples: list[Sample], tenant: str = TENANT) -> int:
    """Every turn as one memory of its conversation's user; answers the tokens stored."""
    stored_tokens = 0
    writer = BuiltinProvider(engine)
    for sample in samples:
        memories = [
            NewMemory(
                tenant_id=tenant,
                user_id=sample.sample_id,
                agent_id=None,
                cube_id=USER_PROFILE,
                memory_type="text_mem",
                content=turn.memory_text(),
                source_event_ids=(turn.dia_id,),
            )
            for turn in sample.turns
        ]
        for start in range(0, len(memories), 200):
            await writer.add(memories[start : start + 200])
        stored_tokens += sum(count_many([m.content for m in memories]))
    return stored_tokens


async def evaluate(samples: list[Sample], embeddings: str | None) -> Results:
    labels = [LEXICAL, LEXICAL_ALL, BM25, "BM25, turn text only"]
    if embeddings:
        labels[2:2] = [HYBRID, HYBRID_ALL, DENSE]
    results: Results = {label: {"": Recall()} for label in labels}
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'locomo.db'}"
        await migrate(url)
        engine = create_engine(url)
        try:
            stored_tokens = await store_turns(engine, samples)
            print(
                f"stored {sum(len(s.turns) for s in samples)} memories "
                f"({stored_tokens:,} cl100k tokens) for {len(samples)} users"
            )
            providers = {
                LEXICAL: BuiltinProvider(engine),
                LEXICAL_ALL: BuiltinProvider(engine, relativity=0.0),
            }
            client: MemoClient | None = None
            if embeddings:
                client = MemoClient(embeddings, MODEL_NAME)
                began = time.perf_counter()
                filled = await EmbeddingBackfill(engine, client, tenant_id=TENANT).run_until_done()
                took = time.perf_counter() - began
                print(
                    f"embedded {filled.stored} memories through the backfill in {took:.1f} s "
                    f"({filled.stored / took:.0f}/s, {MODEL_NAME} on this machine's CPU)"
                )
                if filled.error:
                    raise RuntimeError(f"the backfill failed: {filled.error}")
                # A generous query timeout: this run measures quality, not an outage.
                providers[HYBRID] = BuiltinProvider(engine, embedder=client, query_timeout=60.0)
                providers[HYBRID_ALL] = BuiltinProvider(
                    engine, embedder=client, query_timeout=60.0, relativity=0.0
                )
            for sample in samples:
                for per_label in results.values():
                    per_label[sample.sample_id] = Recall()
                same = OkapiBM25([t.memory_text() for t in sample.turns])
                bare = OkapiBM25([t.memory_text(speaker=False) for t in sample.turns])
                dense = await dense_ranker(engine, sample, client)
                for question in sample.questions:
                    ranked: dict[str, list[Sequence[str]]] = {}
                    for label, provider in providers.items():
                        for k in KS:
                            items = await provider.search(
                                TENANT, sample.sample_id, None, question.text, top_k=k
                            )
                            ranked[f"{label}@{k}"] = [i.source_event_ids for i in items]
                    for label, bm25 in ((BM25, same), ("BM25, turn text only", bare)):
                        top_turns = bm25.top(question.text, max(KS))
                        cited: list[Sequence[str]] = [(sample.turns[d].dia_id,) for d in top_turns]
                        for k in KS:
                            ranked[f"{label}@{k}"] = cited
                    if dense is not None and client is not None:
                        top = dense(await client.embed_one(question.text), max(KS))
                        for k in KS:
                            ranked[f"{DENSE}@{k}"] = [(d,) for d in top]
                    for label, per_sample in results.items():
                        for recall in (per_sample[""], per_sample[sample.sample_id]):
                            recall.count(question)
                            for k in KS:
                                recall.add(question, k, ranked[f"{label}@{k}"])
            for provider in providers.values():
                await provider.aclose()
        finally:
            await engine.dispose()
    return results


async def dense_ranker(
    engine: AsyncEngine, sample: Sample, client: MemoClient | None
) -> Callable[[npt.NDArray[np.float32], int], list[str]] | None:
    """Ranks the sample's turns by cosine with a query vector: their dia_ids, best first."""
    if client is None or client.dimension is None:
        return None
    dims = client.dimension
    async with engine.connect() as conn:
        ids, vectors = await vector_rows.load(conn, TENANT, sample.sample_id, client.model, dims)
    async with engine.connect() as conn:
        dia = await memory_dia_ids(conn, sample.sample_id)
    dia_ids = [dia[i] for i in ids]

    def top(query: npt.NDArray[np.float32], k: int) -> list[str]:
        order = np.argsort(-(vectors @ query), kind="stable")[:k]
        return [dia_ids[i] for i in order]

    return top


async def memory_dia_ids(conn: Any, user_id: str) -> dict[str, str]:
    t = long_term_memory
    query = select(t.c.id, t.c.source_event_ids).where(
        t.c.tenant_id == TENANT, t.c.user_id == user_id
    )
    return {row.id: row.source_event_ids[0] for row in (await conn.execute(query)).all()}


def report(samples: list[Sample], results: Results) -> None:
    scored = sum(len(s.questions) for s in samples)
    skipped = sum(s.skipped for s in samples)
    print(
        f"LoCoMo dev: {len(samples)} conversations, {scored} questions of categories 1-4 "
        f"scored ({skipped} without usable evidence left out)\n"
    )
    head = f"{'recall@k (%)':36s}" + "".join(f"{f'all @{k}':>10s}" for k in KS)
    head += "".join(f"{f'{c} {CATEGORIES[c]} @5/@10':>24s}" for c in CATEGORIES)
    print(head)
    for label, per_sample in results.items():
        recall = per_sample[""]
        row = f"{label:36s}" + "".join(f"{recall.at(k):10.1f}" for k in KS)
        row += "".join(
            f"{f'{recall.at(5, c):.1f} / {recall.at(10, c):.1f}':>24s}" for c in CATEGORIES
        )
        print(row)
    print()
    for label, per_sample in results.items():
        recall = per_sample[""]
        print(
            f"{label:36s} items returned @5 {recall.mean_items(5):.2f}, @10 "
            f"{recall.mean_items(10):.2f}; dia_ids per item {recall.mean_dia_ids(10):.2f}"
        )
    base = results[BM25][""]
    print()
    for label in (LEXICAL, LEXICAL_ALL, HYBRID, HYBRID_ALL, DENSE):
        if label in results:
            ours = results[label][""]
            print(
                f"{label} / BM25: @5 {ours.at(5) / base.at(5):.3f}x, @10 "
                f"{ours.at(10) / base.at(10):.3f}x"
            )
    print("\nrecall@10 (%) per conversation (questions):")
    ids = [s.sample_id for s in samples]
    print(f"{'':36s}" + "".join(f"{f'{s.sample_id} ({len(s.questions)})':>16s}" for s in samples))
    for label, per_sample in results.items():
        print(f"{label:36s}" + "".join(f"{per_sample[i].at(10):16.1f}" for i in ids))


# --- latency ---------------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def spread(values: Sequence[float]) -> str:
    return (
        f"p50 {statistics.median(values):.2f} ms, p99 {percentile(values, 99):.2f} ms, "
        f"max {max(values):.2f} ms"
    )


def latency_texts(samples: list[Sample], n: int) -> list[tuple[str, str]]:
    """``n`` distinct (text, dia_id) memories: the turns, then the turns retold."""
    turns = [t for s in samples for t in s.turns]
    out = []
    for i in range(n):
        turn, copy = turns[i % len(turns)], i // len(turns)
        text = turn.memory_text()
        out.append((text if not copy else f"{text} (retold {copy})", turn.dia_id))
    return out


async def latency(samples: list[Sample], embeddings: str | None) -> None:
    url = Settings().database_url
    try:
        await migrate(url)
    except Exception as exc:
        print(f"\nlatency: skipped, {url} not reachable ({exc.__class__.__name__})")
        return
    engine = create_engine(url)
    tenant = f"{TENANT}-{uuid.uuid4().hex[:8]}"
    queries = [q.text for s in samples for q in s.questions]
    try:
        provider = BuiltinProvider(engine)
        memories = [
            NewMemory(tenant, "u1", None, USER_PROFILE, "text_mem", text, 5, (dia_id,))
            for text, dia_id in latency_texts(samples, LATENCY_MEMORIES)
        ]
        for start in range(0, len(memories), 250):
            await provider.add(memories[start : start + 250])

        async def timed(searcher: BuiltinProvider, query: str) -> float:
            began = time.perf_counter()
            await searcher.search(tenant, "u1", None, query)
            return (time.perf_counter() - began) * 1000

        cold = await timed(provider, queries[0])
        cpu = time.process_time()
        warm = [await timed(provider, q) for q in _cycle(queries, LATENCY_SEARCHES)]
        warm_cpu = (time.process_time() - cpu) * 1000 / len(warm)
        # Open loop at RATE searches per second, as the load path would issue them.
        paced: list[float] = []

        async def one(query: str, due: float) -> None:
            await provider.search(tenant, "u1", None, query)
            paced.append((time.perf_counter() - due) * 1000)

        began = time.perf_counter()
        tasks = []
        for i, query in enumerate(_cycle(queries, LATENCY_SEARCHES)):
            due = began + i / RATE
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            tasks.append(asyncio.create_task(one(query, due)))
        await asyncio.gather(*tasks)
        # Another process adds a memory, then the next search refreshes the cached index.
        writer = BuiltinProvider(engine)
        refresh = []
        for n in range(20):
            note = f"Note {n}: a new memory about the garden."
            await writer.add([NewMemory(tenant, "u1", None, USER_PROFILE, "text_mem", note)])
            refresh.append(await timed(provider, "garden"))
        print(
            f"\nsearch latency on {engine.dialect.name}, {len(memories):,} memories of one user "
            f"(top_k 10, LoCoMo questions as queries; {os.cpu_count()} cores, load average "
            f"{os.getloadavg()[0]:.1f} at the end):\n"
            f"  lexical, warm, one at a time      {spread(warm)} ({len(warm)} searches; "
            f"{warm_cpu:.1f} ms of this process's CPU a search)\n"
            f"  lexical, warm, {RATE} searches/s    {spread(paced)}\n"
            f"  lexical, after a write elsewhere  p50 {statistics.median(refresh):.2f} ms, "
            f"max {max(refresh):.2f} ms (incremental refresh)\n"
            f"  lexical, cold (load + index)      {cold:.1f} ms"
        )
        if embeddings:
            await hybrid_latency(engine, tenant, queries, embeddings, timed)
    finally:
        async with engine.begin() as conn:  # the benchmark's own rows only
            for table in (long_term_memory, memory_embedding):
                await conn.execute(delete(table).where(table.c.tenant_id == tenant))
        await engine.dispose()


async def hybrid_latency(
    engine: AsyncEngine,
    tenant: str,
    queries: list[str],
    embeddings: str,
    timed: Callable[[BuiltinProvider, str], Awaitable[float]],
) -> None:
    client = EmbeddingClient(embeddings, MODEL_NAME, timeout=60.0)
    began = time.perf_counter()
    filled = await EmbeddingBackfill(engine, client, tenant_id=tenant).run_until_done()
    took = time.perf_counter() - began
    # As the API runs it: the query embedded by the endpoint on every search.
    hybrid = BuiltinProvider(engine, embedder=client, query_timeout=5.0)
    cold = await timed(hybrid, queries[1])
    searches = list(_cycle(queries, HYBRID_SEARCHES))
    full = [await timed(hybrid, q) for q in searches]
    # The store's own part: every query vector already known.
    memo = MemoClient(embeddings, MODEL_NAME)
    for query in set(searches):
        await memo.embed_one(query)
    store_only = BuiltinProvider(engine, embedder=memo, query_timeout=5.0)
    await timed(store_only, queries[1])
    cpu = time.process_time()
    own = [await timed(store_only, q) for q in searches]
    own_cpu = (time.process_time() - cpu) * 1000 / len(own)
    embed = []
    for query in searches[:200]:
        began = time.perf_counter()
        await client.embed_one(query)
        embed.append((time.perf_counter() - began) * 1000)
    print(
        f"  hybrid, warm, one at a time       {spread(full)} ({len(full)} searches, the "
        f"query embedded each time)\n"
        f"  hybrid, query vector known        {spread(own)} ({own_cpu:.1f} ms of CPU a search)\n"
        f"  query embedding alone             {spread(embed)}\n"
        f"  hybrid, cold (load vectors)       {cold:.1f} ms\n"
        f"  backfill                          {filled.stored:,} memories in {took:.1f} s "
        f"({filled.stored / took:.0f}/s)"
    )
    for closing in (hybrid, store_only):
        await closing.aclose()


def _cycle(values: Sequence[str], n: int) -> Iterable[str]:
    for i in range(n):
        yield values[i % len(values)]


def dev_split() -> list[Sample] | None:
    """The LoCoMo samples, or None (said) when the data file is not there."""
    path = data_path()
    if not path.is_file():
        print(f"LoCoMo data not found at {path}; set MEMSTREAM_LOCOMO_PATH")
        return None
    return load(path)


async def main() -> None:
    samples = dev_split()
    if samples is None:
        return
    with ExitStack() as stack:
        embeddings: str | None = None
        try:
            embeddings = stack.enter_context(running())
        except RuntimeError as exc:
            print(f"hybrid search: skipped, {exc}")
        began = time.perf_counter()
        results = await evaluate(samples, embeddings)
        report(samples, results)
        print(f"\n(evaluation took {time.perf_counter() - began:.1f} s)")
        await latency(samples, embeddings)


if __name__ == "__main__":
    asyncio.run(main())
