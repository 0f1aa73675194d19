"""Lexical retrieval for the built-in long-term store: tokenizer, BM25 index, MMR, threshold.

Pure functions and in-memory structures only (no IO), so the scoring is testable on its own
and fast enough to run on every load-path request.

Tokenizer
    Text is NFKC-normalised and lower-cased. Latin-script words (letters and digits) drop a
    small English stop-word list and pass through the Porter stemmer ("painted", "painting"
    -> "paint"). Chinese, Japanese and Korean runs have no spaces: they become overlapping
    character bigrams plus the single characters ("四川菜" -> 四 川 菜 四川 川菜). Mixed text
    works, each run is tokenized by its own rule.

Scoring
    Okapi BM25 over those terms, plus a lower-weight field of adjacent-word bigrams (phrase
    evidence: "support group" beats a document that has "support" and "group" far apart).
    The index is an inverted index (term -> {document: tf}) that can add and remove single
    documents, so a cache can follow a user's writes without rebuilding; a query is one pass
    over the postings of its terms.

Normalisation (what makes the 0.45 relativity threshold meaningful)
    ``coverage = min(1, bm25(q, d) / ideal(q))`` where ``ideal(q)`` is the sum of idf(t) over
    the query's terms (with multiplicity): the BM25 score of a document of average length that
    contains every query term exactly once. Coverage is "the share of the query's information
    (idf mass) the memory matches", with BM25's tf saturation and length normalisation on
    top. Query terms no memory contains keep their (high) idf in ``ideal``: the memories
    cannot answer that part of the query. Phrase matches add a bonus without raising
    ``ideal``.

    The score is ``sqrt(coverage)``. For a memory made only of query terms, the cosine
    between binary idf-weighted query and memory vectors is the square root of the share of
    the query's squared weight it matches; the square root puts the lexical score on roughly
    the cosine scale the reference design's relativity 0.45 was chosen for (embedding
    similarity in MemOS): 0.45 keeps memories matching about a fifth of the query's weight,
    1.0 means every query term is present. The score of a memory does not depend on the other
    results (dividing by the best hit would make the top result 1.0 even when it is poor).
    On the LoCoMo dev split (``python -m bench.locomo``) the 0.45 threshold costs 1.3 points
    of recall@5 and 2.6 of recall@10; on linear coverage it cost 16 and 21.
    Ranking uses the uncapped ratio, so memories that all reach 1.0 keep their BM25 order.

    idf is computed as if the user's memories sat among ``BACKGROUND_DOCS`` more documents
    that contain none of the terms: with a handful of memories, plain BM25 idf makes any word
    shared by two of them look as common as "the", and a query term missing from three
    memories would outweigh a matched one four to one.
"""

from __future__ import annotations

import heapq
import itertools
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

RELATIVITY = 0.45
"""Default search threshold on the normalised score (the reference design's relativity)."""

MMR_LAMBDA = 0.85
"""Default MMR trade-off: 1.0 is pure relevance, 0.0 pure novelty."""

DUPLICATE_SIMILARITY = 0.8
"""Token-set Jaccard at or above which a candidate counts as a near-duplicate and is dropped."""

# BM25 parameters, tuned on the LoCoMo dev split: memories are short, so length
# normalisation (b) is kept light; phrase pairs weigh 0.3 of a word.
K1 = 1.2
B = 0.2
PHRASE_WEIGHT = 0.3
BACKGROUND_DOCS = 50

# Articles, pronouns, auxiliaries, prepositions and question words: they carry no topic.
STOP_WORDS = frozenset(
    """
    a an the and or but if then so than that this these those there here
    i me my mine myself we us our ours you your yours he him his she her hers it its
    they them their theirs who whom whose which what when where why how
    am is are was were be been being do does did doing have has had having
    will would shall should can could might must
    of in on at to for from by with about as into onto over under up down out off
    again further once just very too also not no nor only own same such
    s t d ll m re ve don didn doesn isn wasn aren weren wouldn couldn shouldn
    any all both each few more most other some
    """.split()  # noqa: SIM905 - a word list reads better as text
)

# Common Chinese function characters; bigrams that contain them are kept.
CJK_STOP_CHARS = frozenset("的了是在和与也就都而及着过吗呢吧啊呀嘛么之其或")

_CJK = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3130-\u318f"  # Hangul compatibility Jamo
    "\u31f0-\u31ff"  # Katakana extension
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
)
_TOKEN = re.compile(rf"([{_CJK}]+)|([^\W_{_CJK}]+)")  # (CJK run, word)
_CJK_CHAR = re.compile(f"[{_CJK}]")
_POSSESSIVE = re.compile(r"['’]s\b")


def tokenize(text: str) -> list[str]:
    """Index terms of ``text`` in order: stemmed words and CJK character bigrams/unigrams."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    out: list[str] = []
    for run, word in _TOKEN.findall(_POSSESSIVE.sub("", text.lower())):
        if word:
            term = _word_term(word)
            if term:
                out.append(term)
        else:
            out.extend(ch for ch in run if ch not in CJK_STOP_CHARS)
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
    return out


@lru_cache(maxsize=65536)
def _word_term(word: str) -> str:
    """The index term of one lower-case word; empty for stop words and single letters."""
    if word in STOP_WORDS or (len(word) == 1 and not word.isdigit()):
        return ""
    return stem(word)


def phrases(tokens: Sequence[str]) -> list[str]:
    """Adjacent word pairs of a token list (the phrase field); CJK terms are skipped, their
    bigrams already are phrases."""
    return [f"{a} {b}" for a, b in itertools.pairwise(tokens) if not (_cjk(a) or _cjk(b))]


def _cjk(term: str) -> bool:
    # Every CJK block sits at or above U+1100: most terms are decided by one comparison.
    return term[0] >= "\u1100" and _CJK_CHAR.match(term) is not None


# --- Porter stemmer (M. F. Porter, 1980), for lower-case ASCII words -------------------------

_VOWELS = frozenset("aeiou")


def _is_consonant(word: str, i: int) -> bool:
    ch = word[i]
    if ch in _VOWELS:
        return False
    if ch == "y":
        return i == 0 or not _is_consonant(word, i - 1)
    return True


def _measure(stem_: str) -> int:
    """m in [C](VC){m}[V]."""
    m = 0
    prev_vowel = False
    for i in range(len(stem_)):
        vowel = not _is_consonant(stem_, i)
        if prev_vowel and not vowel:
            m += 1
        prev_vowel = vowel
    return m


def _has_vowel(stem_: str) -> bool:
    return any(not _is_consonant(stem_, i) for i in range(len(stem_)))


def _double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _is_consonant(word, len(word) - 1)


def _cvc(word: str) -> bool:
    if len(word) < 3:
        return False
    n = len(word)
    return (
        _is_consonant(word, n - 3)
        and not _is_consonant(word, n - 2)
        and _is_consonant(word, n - 1)
        and word[-1] not in "wxy"
    )


_STEP2 = (
    ("ational", "ate"),
    ("tional", "tion"),
    ("enci", "ence"),
    ("anci", "ance"),
    ("izer", "ize"),
    ("bli", "ble"),
    ("alli", "al"),
    ("entli", "ent"),
    ("eli", "e"),
    ("ousli", "ous"),
    ("ization", "ize"),
    ("ation", "ate"),
    ("ator", "ate"),
    ("alism", "al"),
    ("iveness", "ive"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("aliti", "al"),
    ("iviti", "ive"),
    ("biliti", "ble"),
    ("logi", "log"),
)
_STEP3 = (
    ("icate", "ic"),
    ("ative", ""),
    ("alize", "al"),
    ("iciti", "ic"),
    ("ical", "ic"),
    ("ful", ""),
    ("ness", ""),
)
_STEP4 = [
    "al",
    "ance",
    "ence",
    "er",
    "ic",
    "able",
    "ible",
    "ant",
    "ement",
    "ment",
    "ent",
    "ion",
    "ou",
    "ism",
    "ate",
    "iti",
    "ous",
    "ive",
    "ize",
]


def _replace_longest(word: str, rules: Sequence[tuple[str, str]], min_m: int) -> str:
    best: tuple[str, str] | None = None
    for suffix, repl in rules:
        if word.endswith(suffix) and (best is None or len(suffix) > len(best[0])):
            best = (suffix, repl)
    if best is None:
        return word
    base = word[: -len(best[0])]
    return base + best[1] if _measure(base) > min_m else word


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Porter stem of a lower-case word; non-ASCII and short words are returned unchanged."""
    if len(word) <= 2 or not word.isascii() or not word.isalpha():
        return word
    # Step 1a: plurals.
    if word.endswith("sses") or word.endswith("ies"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    # Step 1b: -eed, -ed, -ing.
    if word.endswith("eed"):
        if _measure(word[:-3]) > 0:
            word = word[:-1]
    else:
        for suffix in ("ed", "ing"):
            if word.endswith(suffix) and _has_vowel(word[: -len(suffix)]):
                word = word[: -len(suffix)]
                if word.endswith(("at", "bl", "iz")):
                    word += "e"
                elif _double_consonant(word) and word[-1] not in "lsz":
                    word = word[:-1]
                elif _measure(word) == 1 and _cvc(word):
                    word += "e"
                break
    # Step 1c: y -> i.
    if word.endswith("y") and _has_vowel(word[:-1]):
        word = word[:-1] + "i"
    word = _replace_longest(word, _STEP2, 0)
    word = _replace_longest(word, _STEP3, 0)
    # Step 4: drop a suffix when m > 1 (-ion only after s or t).
    best = ""
    for suffix in _STEP4:
        if word.endswith(suffix) and len(suffix) > len(best):
            best = suffix
    if best:
        base = word[: -len(best)]
        if _measure(base) > 1 and (best != "ion" or base.endswith(("s", "t"))):
            word = base
    # Step 5: final -e and -ll.
    if word.endswith("e"):
        base = word[:-1]
        m = _measure(base)
        if m > 1 or (m == 1 and not _cvc(base)):
            word = base
    if word.endswith("ll") and _measure(word) > 1:
        word = word[:-1]
    return word


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
    added and removed one by one; BM25 statistics (idf, average length) always reflect the
    current set because impacts are computed at query time.
    """

    __slots__ = ("_b", "_docs", "_k1", "_length", "_norms", "_phrase", "_phrase_weight", "_tf")

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
        self._length = 0  # total tokens, for the average document length
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
        for term, tf in counts.items():
            posting = self._tf.get(term)
            if posting is None:
                self._tf[term] = {doc_id: tf}
            else:
                posting[doc_id] = tf
        for pair, tf in pairs.items():
            posting = self._phrase.get(pair)
            if posting is None:
                self._phrase[pair] = {doc_id: tf}
            else:
                posting[doc_id] = tf
        self._docs[doc_id] = _Doc(tokens, frozenset(counts), frozenset(pairs))
        self._length += len(tokens)
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
        self._length -= len(doc.tokens)
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
            avgdl = (self._length / len(self._docs)) if self._length else 1.0
            base = self._k1 * (1.0 - self._b)
            scale = self._k1 * self._b / avgdl
            self._norms = {i: base + scale * len(d.tokens) for i, d in self._docs.items()}
        return self._norms

    def relevance(self, query: str | Sequence[str]) -> dict[str, float]:
        """``bm25(q, d) / ideal(q)`` per matching document id (module docstring).

        It can exceed 1 (a short memory with every query term, a phrase match), so it ranks
        documents that the displayed score caps at 1.0; ``normalised`` gives that score."""
        tokens = tokenize(query) if isinstance(query, str) else list(query)
        n = len(self._docs)
        if not tokens or not n:
            return {}
        norms = self._length_norms()
        k1p1 = self._k1 + 1.0
        raw: dict[str, float] = {}
        ideal = 0.0
        for term, qtf in Counter(tokens).items():
            posting = self._tf.get(term)
            idf = _idf(n, len(posting) if posting else 0)
            ideal += qtf * idf
            if posting:
                weight = qtf * idf * k1p1
                for doc, tf in posting.items():
                    raw[doc] = raw.get(doc, 0.0) + weight * tf / (tf + norms[doc])
        if self._phrase_weight and raw:
            for pair, qtf in Counter(phrases(tokens)).items():
                posting = self._phrase.get(pair)
                if posting:
                    weight = self._phrase_weight * qtf * _idf(n, len(posting)) * k1p1
                    for doc, tf in posting.items():
                        raw[doc] += weight * tf / (tf + norms[doc])
        return {doc: value / ideal for doc, value in raw.items()}

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


def normalised(relevance: float) -> float:
    """The score in [0, 1] shown and thresholded: ``sqrt(min(1, relevance))``."""
    return math.sqrt(min(1.0, relevance)) if relevance > 0.0 else 0.0


# --- Result shaping: threshold and MMR ---------------------------------------------------------

KeyT = TypeVar("KeyT")


def jaccard(a: Collection[str], b: Collection[str]) -> float:
    """Token-set Jaccard similarity; two empty sets are identical."""
    sa = a if isinstance(a, frozenset | set) else set(a)
    sb = b if isinstance(b, frozenset | set) else set(b)
    if not sa and not sb:
        return 1.0
    inter = len(sa & sb)
    return inter / (len(sa) + len(sb) - inter)


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
            sim = jaccard(picked[2], pool[index][2])
            if sim >= duplicate:
                continue
            if sim > nearest[index]:
                nearest[index] = sim
            survivors.append(index)
        alive = survivors
    return chosen
