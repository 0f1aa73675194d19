"""Lexical retrieval for the built-in long-term store: BM25 index, MMR, threshold. Pure
functions and in-memory structures only (no IO). How it scores and why the score is
normalised as it is: docs/design/lexical-retrieval.md."""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from memstream.text.similarity import token_jaccard
from memstream.text.terms import phrases, tokenize

RELATIVITY = 0.45
"""Default search threshold on the normalised score (the reference design's relativity)."""

MMR_LAMBDA = 0.85
"""Default MMR trade-off: 1.0 is pure relevance, 0.0 pure novelty."""

DUPLICATE_SIMILARITY = 0.8
"""Token-set Jaccard at or above which a candidate counts as a near-duplicate and is dropped."""

# BM25 parameters, tuned on the LoCoMo dev split; phrase pairs weigh 0.3 of a word.
# Lengths are measured against a fixed reference, the length in index terms of a typical
# distilled fact, not against the user's average: a memory's score, and so what the relativity
# threshold keeps, must not move when the user's other memories get longer or shorter. With
# episodes (a dated line per user turn, about 20 terms) next to the facts, the former light
# normalisation (b = 0.2 against the average) favoured long items: a top 10 held 1.7x the
# tokens of BM25's top 10 raw turns. These values hold it to 1.2-1.45x for a point or two of
# recall.
K1 = 1.2
B = 0.45
REFERENCE_TERMS = 9
PHRASE_WEIGHT = 0.3
BACKGROUND_DOCS = 50

QUERY_TERMS = 128
"""At most this many distinct terms (words plus word pairs) of a query are searched: the
longest prefix of its tokens within the bound (docs/design/builtin-store.md, "Bounds")."""


# --- BM25 index ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: the document id and its normalised score in [0, 1]."""

    id: str
    score: float


def _idf(n_docs: int, df: int) -> float:
    # The Lucene form (always positive: a term in most documents still counts a little instead
    # of counting against the document) over the memories plus the background documents.
    n_docs += BACKGROUND_DOCS
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


@dataclass(frozen=True, slots=True)
class _Doc:
    tokens: tuple[str, ...]
    terms: frozenset[str]
    phrases: frozenset[str]


class LexicalIndex:
    """An in-memory BM25 index over (id, text) documents.

    ``docs`` may give either the text or its tokens (``tokenize(text)``). Documents can be
    added and removed one by one; the idf statistics always reflect the
    current set because impacts are computed at query time.
    """

    __slots__ = ("_b", "_docs", "_k1", "_norms", "_phrase", "_phrase_weight", "_tf")

    def __init__(
        self,
        docs: Iterable[tuple[str, str | Sequence[str]]] = (),
        *,
        k1: float = K1,
        b: float = B,
        phrase_weight: float = PHRASE_WEIGHT,
    ) -> None:
        self._k1 = k1
        self._b = b
        self._phrase_weight = phrase_weight
        self._docs: dict[str, _Doc] = {}
        self._tf: dict[str, dict[str, int]] = {}  # term -> {doc id: term frequency}
        self._phrase: dict[str, dict[str, int]] = {}  # word pair -> {doc id: frequency}
        self._norms: dict[str, float] | None = None  # per-document BM25 length factor
        for doc_id, body in docs:
            self.add(doc_id, body)

    def add(self, doc_id: str, body: str | Sequence[str]) -> None:
        """Index a document (replacing one with the same id)."""
        if doc_id in self._docs:
            self.remove(doc_id)
        tokens = tuple(tokenize(body) if isinstance(body, str) else body)
        counts = Counter(tokens)
        pairs = Counter(phrases(tokens)) if self._phrase_weight else Counter[str]()
        for field_, frequencies in ((self._tf, counts), (self._phrase, pairs)):
            for key, tf in frequencies.items():
                posting = field_.get(key)
                if posting is None:
                    field_[key] = {doc_id: tf}
                else:
                    posting[doc_id] = tf
        self._docs[doc_id] = _Doc(tokens, frozenset(counts), frozenset(pairs))
        self._norms = None

    def remove(self, doc_id: str) -> bool:
        """Drop a document; answers whether it was indexed."""
        doc = self._docs.pop(doc_id, None)
        if doc is None:
            return False
        for field_, keys in ((self._tf, doc.terms), (self._phrase, doc.phrases)):
            for key in keys:
                posting = field_[key]
                del posting[doc_id]
                if not posting:
                    del field_[key]
        self._norms = None
        return True

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._docs

    @property
    def ids(self) -> list[str]:
        return list(self._docs)

    def tokens(self, doc_id: str) -> tuple[str, ...]:
        return self._docs[doc_id].tokens

    def token_set(self, doc_id: str) -> frozenset[str]:
        """The distinct terms of a document (for MMR similarity)."""
        return self._docs[doc_id].terms

    def idf(self, term: str) -> float:
        return _idf(len(self._docs), len(self._tf.get(term, ())))

    def _length_norms(self) -> dict[str, float]:
        if self._norms is None:
            lengths = {i: len(d.tokens) for i, d in self._docs.items()}
            self._norms = length_norms(lengths, k1=self._k1, b=self._b)
        return self._norms

    def relevance(self, query: str | Sequence[str]) -> dict[str, float]:
        """``bm25(q, d) / ideal(q)`` per matching document id (docs/design/lexical-retrieval.md).

        It can exceed 1 (a short memory with every query term, a phrase match), so it ranks
        documents that the displayed score caps at 1.0; ``normalised`` gives that score."""
        tokens = tokenize(query) if isinstance(query, str) else list(query)
        if not self._docs:
            return {}
        return relevance(
            tokens,
            len(self._docs),
            self._tf,
            self._phrase,
            self._length_norms(),
            k1=self._k1,
            phrase_weight=self._phrase_weight,
        )

    def search(
        self,
        query: str | Sequence[str],
        k: int | None = 10,
        *,
        threshold: float = 0.0,
        where: Callable[[str], bool] | None = None,
    ) -> list[Hit]:
        """The best ``k`` documents (all when ``k`` is None) whose normalised score reaches
        ``threshold``, best first (ties: the earlier added first); ``where`` keeps only the
        ids it accepts."""
        floor = threshold * threshold  # normalised(r) >= threshold  <=>  r >= threshold**2
        order = {doc_id: i for i, doc_id in enumerate(self._docs)}
        ranked = [
            (value, -order[doc], doc)
            for doc, value in self.relevance(query).items()
            if value > 0.0 and value >= floor and (where is None or where(doc))
        ]
        top = sorted(ranked, reverse=True) if k is None else heapq.nlargest(k, ranked)
        return [Hit(doc, normalised(value)) for value, _, doc in top]


@dataclass(frozen=True, slots=True)
class DocumentTerms:
    """What a document contributes to an index: its length in index terms and the
    frequency of each term and each word pair (computed once, when the document is written)."""

    length: int
    words: Counter[str]
    pairs: Counter[str]


def document_terms(text: str) -> DocumentTerms:
    """The index terms of ``text`` as ``LexicalIndex.add`` counts them."""
    tokens = tokenize(text)
    return DocumentTerms(len(tokens), Counter(tokens), Counter(phrases(tokens)))


def length_norms(lengths: Mapping[str, int], *, k1: float = K1, b: float = B) -> dict[str, float]:
    """BM25's per-document length factor against the fixed ``REFERENCE_TERMS``."""
    base = k1 * (1.0 - b)
    scale = k1 * b / REFERENCE_TERMS
    return {doc: base + scale * length for doc, length in lengths.items()}


def impact(tf: int, length: int) -> float:
    """A term's BM25 impact on a document of ``length`` index terms where it occurs ``tf``
    times, ``(k1 + 1) tf / (tf + norm)``: fixed once the document is written (the length is
    normalised against ``REFERENCE_TERMS``), so it is stored with the posting and a search
    scores ``sum(qtf * idf * impact) / ideal``, as ``relevance`` does."""
    return (K1 + 1.0) * tf / (tf + K1 * (1.0 - B) + K1 * B / REFERENCE_TERMS * length)


def relevance(
    tokens: Sequence[str],
    n_docs: int,
    words: Mapping[str, Mapping[str, int]],
    pairs: Mapping[str, Mapping[str, int]],
    norms: Mapping[str, float],
    *,
    k1: float = K1,
    phrase_weight: float = PHRASE_WEIGHT,
    unread: Mapping[str, int] | None = None,
) -> dict[str, float]:
    """``bm25(q, d) / ideal(q)`` per matching document (module docstring), from the postings
    of the query's terms only: ``words`` and ``pairs`` map a term to {document: tf} over all
    ``n_docs`` documents, ``norms`` gives each posted document's length factor. An in-memory
    index and the stored postings score through this one function, so they agree exactly.
    ``unread`` gives the document frequency of terms whose postings were left unread (too
    common for the search's budget): they still weigh in the ideal, so the others' scores
    do not rise, and add to no document."""
    skipped = unread or {}
    if not tokens or not n_docs:
        return {}
    k1p1 = k1 + 1.0
    raw: dict[str, float] = {}
    ideal = 0.0
    for term, qtf in Counter(tokens).items():
        posting = words.get(term)
        idf = _idf(n_docs, len(posting) if posting else skipped.get(term, 0))
        ideal += qtf * idf
        if posting:
            weight = qtf * idf * k1p1
            for doc, tf in posting.items():
                raw[doc] = raw.get(doc, 0.0) + weight * tf / (tf + norms[doc])
    if phrase_weight and raw:
        for pair, qtf in Counter(phrases(tokens)).items():
            posting = pairs.get(pair)
            if posting:
                weight = phrase_weight * qtf * _idf(n_docs, len(posting)) * k1p1
                for doc, tf in posting.items():
                    raw[doc] += weight * tf / (tf + norms[doc])
    return {doc: value / ideal for doc, value in raw.items()}


def query_terms(tokens: Sequence[str], limit: int = QUERY_TERMS) -> list[str]:
    """The longest prefix of ``tokens`` whose distinct words and word pairs number at most
    ``limit``: what one query may make a search read and score, however long it is."""
    seen: set[str] = set()
    for n, token in enumerate(tokens):
        new = [token] if n == 0 else [token, *phrases(tokens[n - 1 : n + 1])]
        seen.update(new)
        if len(seen) > limit:
            return list(tokens[:n])
    return list(tokens)


def normalised(relevance: float) -> float:
    """The score in [0, 1] shown and thresholded: ``sqrt(min(1, relevance))``."""
    return math.sqrt(min(1.0, relevance)) if relevance > 0.0 else 0.0


# --- Result shaping: threshold and MMR ---------------------------------------------------------

KeyT = TypeVar("KeyT")


def relativity_filter(
    items: Iterable[tuple[KeyT, float, frozenset[str]]], threshold: float = RELATIVITY
) -> list[tuple[KeyT, float, frozenset[str]]]:
    """Keep the items whose score reaches ``threshold``."""
    return [item for item in items if item[1] >= threshold]


def mmr(
    items: Sequence[tuple[KeyT, float, frozenset[str]]],
    lambda_: float = MMR_LAMBDA,
    k: int = 10,
    *,
    duplicate: float = DUPLICATE_SIMILARITY,
) -> list[tuple[KeyT, float, frozenset[str]]]:
    """Maximal marginal relevance over (key, score, token set) items.

    Picks up to ``k`` items, each time the one maximising
    ``lambda_ * score - (1 - lambda_) * max Jaccard to the items already picked``; an item
    whose Jaccard to a picked one is at least ``duplicate`` is dropped outright (a
    near-duplicate never fills a slot). Answers the picked items in pick order.
    """
    if k <= 0:
        return []
    pool = sorted(items, key=lambda item: item[1], reverse=True)
    chosen: list[tuple[KeyT, float, frozenset[str]]] = []
    # Highest similarity of each pool item to the chosen ones so far.
    nearest = [0.0] * len(pool)
    alive = list(range(len(pool)))
    while alive and len(chosen) < k:
        best_pos = max(
            range(len(alive)),
            key=lambda p: lambda_ * pool[alive[p]][1] - (1.0 - lambda_) * nearest[alive[p]],
        )
        picked = pool[alive.pop(best_pos)]
        chosen.append(picked)
        survivors = []
        for index in alive:
            sim = token_jaccard(picked[2], pool[index][2])
            if sim >= duplicate:
                continue
            if sim > nearest[index]:
                nearest[index] = sim
            survivors.append(index)
        alive = survivors
    return chosen
