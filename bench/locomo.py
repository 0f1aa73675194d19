"""LoCoMo retrieval: the built-in long-term store against plain BM25, LLM-free.

Every turn of the LoCoMo dev split (shared/data/locomo, never copied into the repo) becomes
one memory of its conversation's user, stored through ``MySQLProvider`` on a fresh SQLite
file: ``"<speaker>: <text>"`` plus the shared photo's caption, ``source_event_ids`` =
(dia_id,). Each question of categories 1-4 is a search; recall@k is the share of its
evidence dia_ids among the dia_ids of the top k items, averaged per category and overall.

The store is measured twice: with the configured relativity threshold (what the load path
returns) and with no threshold (ranking alone). The baseline is textbook Okapi BM25
(k1 = 1.5, b = 0.75, lower-cased ``\\w+`` tokens, rank_bm25's idf floor) over the same texts,
and once over the bare turn text as the reference design ran it.

Last, search latency on MariaDB (``MEMSTREAM_DATABASE_URL``): 1,000 memories of one user,
warm cache, one search after another; skipped when the database is not reachable.

``MEMSTREAM_LOCOMO_PATH`` overrides the data file.
"""

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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import delete

from memstream.memory import USER_PROFILE, NewMemory
from memstream.providers.mysql import MySQLProvider
from memstream.retrieval import RELATIVITY
from memstream.settings import Settings
from memstream.store.database import create_engine, migrate
from memstream.store.schema import long_term_memory
from memstream.text.tokens import count_many

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10)
TENANT = "locomo-bench"
LATENCY_MEMORIES = 1_000
LATENCY_SEARCHES = 2_000
RATE = 200  # searches per second in the paced run


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


async def evaluate(samples: list[Sample]) -> dict[str, Recall]:
    results = {
        f"memstream, relativity {RELATIVITY}": Recall(),
        "memstream, no threshold": Recall(),
        "BM25, same texts": Recall(),
        "BM25, turn text only": Recall(),
    }
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'locomo.db'}"
        await migrate(url)
        engine = create_engine(url)
        try:
            stored_tokens = 0
            for sample in samples:
                memories = [
                    NewMemory(
                        tenant_id=TENANT,
                        user_id=sample.sample_id,
                        agent_id=None,
                        cube_id=USER_PROFILE,
                        memory_type="text_mem",
                        content=turn.memory_text(),
                        source_event_ids=(turn.dia_id,),
                    )
                    for turn in sample.turns
                ]
                writer = MySQLProvider(engine)
                for start in range(0, len(memories), 200):
                    await writer.add(memories[start : start + 200])
                stored_tokens += sum(count_many([m.content for m in memories]))
            print(
                f"stored {sum(len(s.turns) for s in samples)} memories "
                f"({stored_tokens:,} cl100k tokens) for {len(samples)} users"
            )
            providers = {
                f"memstream, relativity {RELATIVITY}": MySQLProvider(engine),
                "memstream, no threshold": MySQLProvider(engine, relativity=0.0),
            }
            for sample in samples:
                same = OkapiBM25([t.memory_text() for t in sample.turns])
                bare = OkapiBM25([t.memory_text(speaker=False) for t in sample.turns])
                for question in sample.questions:
                    for label, provider in providers.items():
                        results[label].count(question)
                        for k in KS:
                            items = await provider.search(
                                TENANT, sample.sample_id, None, question.text, top_k=k
                            )
                            results[label].add(question, k, [i.source_event_ids for i in items])
                    for label, bm25 in (("BM25, same texts", same), ("BM25, turn text only", bare)):
                        results[label].count(question)
                        top = bm25.top(question.text, max(KS))
                        cited = [(sample.turns[d].dia_id,) for d in top]
                        for k in KS:
                            results[label].add(question, k, cited)
        finally:
            await engine.dispose()
    return results


def report(samples: list[Sample], results: dict[str, Recall]) -> None:
    scored = sum(len(s.questions) for s in samples)
    skipped = sum(s.skipped for s in samples)
    print(
        f"LoCoMo dev: {len(samples)} conversations, {scored} questions of categories 1-4 "
        f"scored ({skipped} without usable evidence left out)\n"
    )
    head = f"{'recall@k (%)':34s}" + "".join(f"{f'all @{k}':>10s}" for k in KS)
    head += "".join(f"{f'{c} {CATEGORIES[c]} @5/@10':>24s}" for c in CATEGORIES)
    print(head)
    for label, recall in results.items():
        row = f"{label:34s}" + "".join(f"{recall.at(k):10.1f}" for k in KS)
        row += "".join(
            f"{f'{recall.at(5, c):.1f} / {recall.at(10, c):.1f}':>24s}" for c in CATEGORIES
        )
        print(row)
    print()
    for label, recall in results.items():
        print(
            f"{label:34s} items returned @5 {recall.mean_items(5):.2f}, @10 "
            f"{recall.mean_items(10):.2f}; dia_ids per item {recall.mean_dia_ids(10):.2f}"
        )
    base = results["BM25, same texts"]
    print()
    for label in list(results)[:2]:
        ours = results[label]
        print(
            f"{label} / BM25: @5 {ours.at(5) / base.at(5):.3f}x, @10 "
            f"{ours.at(10) / base.at(10):.3f}x"
        )


# --- latency ---------------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def latency(samples: list[Sample]) -> None:
    url = Settings().database_url
    try:
        await migrate(url)
    except Exception as exc:
        print(f"\nlatency: skipped, {url} not reachable ({exc.__class__.__name__})")
        return
    engine = create_engine(url)
    tenant = f"{TENANT}-{uuid.uuid4().hex[:8]}"
    turns = [t for s in samples for t in s.turns][:LATENCY_MEMORIES]
    queries = [q.text for s in samples for q in s.questions]
    try:
        provider = MySQLProvider(engine)
        memories = [
            NewMemory(tenant, "u1", None, USER_PROFILE, "text_mem", t.memory_text(), 5, (t.dia_id,))
            for t in turns
        ]
        for start in range(0, len(memories), 250):
            await provider.add(memories[start : start + 250])

        async def timed(query: str) -> float:
            began = time.perf_counter()
            await provider.search(tenant, "u1", None, query)
            return (time.perf_counter() - began) * 1000

        cold = await timed(queries[0])
        warm = [await timed(q) for q in _cycle(queries, LATENCY_SEARCHES)]
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
        writer = MySQLProvider(engine)
        refresh = []
        for n in range(20):
            note = f"Note {n}: a new memory about the garden."
            await writer.add([NewMemory(tenant, "u1", None, USER_PROFILE, "text_mem", note)])
            refresh.append(await timed("garden"))
        print(
            f"\nsearch latency on {engine.dialect.name}, {len(memories)} memories of one user "
            f"(top_k 10, LoCoMo questions as queries):\n"
            f"  warm cache, one at a time     p50 {statistics.median(warm):.2f} ms, "
            f"p99 {percentile(warm, 99):.2f} ms, max {max(warm):.2f} ms ({len(warm)} searches)\n"
            f"  warm cache, {RATE} searches/s   p50 {statistics.median(paced):.2f} ms, "
            f"p99 {percentile(paced, 99):.2f} ms, max {max(paced):.2f} ms\n"
            f"  after a write elsewhere       p50 {statistics.median(refresh):.2f} ms, "
            f"max {max(refresh):.2f} ms (incremental refresh)\n"
            f"  cold (load + index build)     {cold:.1f} ms"
        )
    finally:
        async with engine.begin() as conn:  # the benchmark's own rows only
            await conn.execute(
                delete(long_term_memory).where(long_term_memory.c.tenant_id == tenant)
            )
        await engine.dispose()


def _cycle(values: Sequence[str], n: int) -> Iterable[str]:
    for i in range(n):
        yield values[i % len(values)]


async def main() -> None:
    path = data_path()
    if not path.is_file():
        print(f"LoCoMo data not found at {path}; set MEMSTREAM_LOCOMO_PATH")
        return
    samples = load(path)
    began = time.perf_counter()
    results = await evaluate(samples)
    report(samples, results)
    print(f"\n(evaluation took {time.perf_counter() - began:.1f} s)")
    await latency(samples)


if __name__ == "__main__":
    asyncio.run(main())
