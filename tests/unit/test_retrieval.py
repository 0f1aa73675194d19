"""The lexical retriever: tokenizer, BM25 scoring and normalisation, threshold, MMR."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstream.retrieval import (
    QUERY_TERMS,
    RELATIVITY,
    LexicalIndex,
    _idf,
    document_terms,
    impact,
    length_norms,
    mmr,
    query_terms,
    relativity_filter,
    relevance,
)
from memstream.text.similarity import token_jaccard as jaccard
from memstream.text.stem import stem
from memstream.text.terms import phrases, tokenize


def test_english_words_are_lowercased_stemmed_and_stopped() -> None:
    assert tokenize("I went to the LGBTQ support groups yesterday!") == [
        "went",
        "lgbtq",
        "support",
        "group",
        "yesterdai",
    ]
    assert tokenize("Painting, painted, paints") == ["paint", "paint", "paint"]
    assert tokenize("Caroline's adoption agencies") == ["carolin", "adopt", "agenc"]
    assert tokenize("born in 1990, 2 kids") == ["born", "1990", "2", "kid"]
    assert tokenize("the of and a") == []
    assert tokenize("") == []


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("caresses", "caress"),
        ("ponies", "poni"),
        ("hopping", "hop"),
        ("relational", "relat"),
        ("generalization", "gener"),
        ("running", "run"),
        ("sky", "sky"),
        ("über", "über"),
    ],
)
def test_porter_stemmer(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_chinese_gives_character_bigrams_and_unigrams() -> None:
    assert tokenize("我喜欢四川菜") == [
        "我",
        "喜",
        "欢",
        "四",
        "川",
        "菜",
        "我喜",
        "喜欢",
        "欢四",
        "四川",
        "川菜",
    ]
    # Function characters are not unigram terms, but their bigrams stay.
    assert tokenize("我的猫") == ["我", "猫", "我的", "的猫"]


def test_japanese_korean_and_full_width_text() -> None:
    assert tokenize("東京") == ["東", "京", "東京"]
    assert tokenize("한국어") == ["한", "국", "어", "한국", "국어"]
    assert tokenize("ＡＢＣ１２３") == ["abc123"]  # NFKC folds full-width forms


def test_mixed_text_tokenizes_each_run_by_its_rule() -> None:
    tokens = tokenize("用户喜欢Python编程 and hiking")
    assert {"用户", "喜欢", "python", "编程", "hike"} <= set(tokens)
    assert "and" not in tokens


def test_phrases_pair_adjacent_words_only() -> None:
    assert phrases(["support", "group", "四", "四川"]) == ["support group"]


DOCS = [
    ("tea", "The user drinks green tea every morning."),
    ("cat", "The user has a cat named Miso who loves tuna."),
    ("berlin", "The user moved to Berlin in 2021 for a new job."),
    ("cello", "The user plays the cello in an amateur orchestra."),
    ("coffee", "The user stopped drinking coffee last year."),
    ("trip", "Planning a trip to Japan with the cat sitter booked."),
]


def test_scores_rank_the_matching_document_first() -> None:
    index = LexicalIndex(DOCS)
    hits = index.search("what is the name of my cat?", k=3)
    assert hits[0].id == "cat"
    assert [h.id for h in index.search("moved to Berlin", k=1)] == ["berlin"]
    assert index.search("drinking tea", k=2)[0].id == "tea"
    # More matched query words score higher.
    both = {h.id: h.score for h in index.search("cat named Miso", k=None)}
    assert both["cat"] > both["trip"] > 0


def test_phrase_matches_break_ties() -> None:
    index = LexicalIndex(
        [
            ("apart", "Support from the family, and a reading group on Sundays."),
            ("phrase", "A support group for parents, every Sunday in the family room."),
        ]
    )
    assert [h.id for h in index.search("support group", k=2)] == ["phrase", "apart"]


def test_scores_are_normalised_and_absolute() -> None:
    index = LexicalIndex(DOCS)
    for query in ("cat", "cat tuna Miso", "orchestra cello amateur plays", "x y z", "用户"):
        for hit in index.search(query, k=None):
            assert 0.0 < hit.score <= 1.0
    # Every query term present: full score.
    assert index.search("cello orchestra", k=1)[0].score == pytest.approx(1.0)
    # Half the query unknown to every memory: clearly lower, but still comparable.
    partial = index.search("cello quantum chromodynamics", k=1)[0].score
    assert 0.3 < partial < 0.9
    # The score of a memory hardly depends on how many others are stored.
    bigger = LexicalIndex([*DOCS, *((f"n{i}", f"noise document {i}") for i in range(200))])
    assert bigger.search("cello orchestra", k=1)[0].score > 0.95
    alone = LexicalIndex(DOCS[3:4]).search("cello orchestra", k=1)[0].score
    assert alone == pytest.approx(1.0)
    assert LexicalIndex([]).search("cello") == []
    assert index.search("", k=3) == []


def test_threshold_filters_weak_matches() -> None:
    index = LexicalIndex(DOCS)
    weak = "the user had an unusual breakfast in Berlin during a solar eclipse with a cat"
    scored = {h.id: h.score for h in index.search(weak, k=None)}
    assert scored and all(score < RELATIVITY for score in scored.values())
    assert index.search(weak, k=None, threshold=RELATIVITY) == []
    assert index.search("cat Miso", k=None, threshold=RELATIVITY)[0].id == "cat"
    items = [("a", 0.9, frozenset("a")), ("b", 0.44, frozenset("b")), ("c", 0.45, frozenset())]
    assert [key for key, _, _ in relativity_filter(items)] == ["a", "c"]
    assert [key for key, _, _ in relativity_filter(items, 0.0)] == ["a", "b", "c"]


def test_where_restricts_the_ids() -> None:
    index = LexicalIndex(DOCS)
    assert [h.id for h in index.search("cat", where=lambda i: i != "cat")] == ["trip"]


def test_tokens_can_be_given_instead_of_text() -> None:
    from_text = LexicalIndex(DOCS).search("cat tuna", k=None)
    from_tokens = LexicalIndex([(i, tokenize(text)) for i, text in DOCS]).search("cat tuna", k=None)
    assert from_text == from_tokens


def test_jaccard() -> None:
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    assert jaccard(set(), set()) == 1.0
    assert jaccard({"a"}, set()) == 0.0


def test_mmr_removes_near_duplicates() -> None:
    def item(key: str, score: float, text: str) -> tuple[str, float, frozenset[str]]:
        return key, score, frozenset(tokenize(text))

    items = [
        item("a", 0.95, "The user's favourite band is Radiohead."),
        item("a2", 0.94, "Favourite band of the user: Radiohead!"),
        item("a3", 0.93, "the user favourite band radiohead"),
        item("b", 0.70, "The user saw Radiohead live in 2016."),
        item("c", 0.60, "The user's favourite food is ramen."),
    ]
    picked = [key for key, _, _ in mmr(items, 0.85, 3)]
    assert picked == ["a", "b", "c"]
    # Fewer distinct items than k: duplicates still do not fill the slots.
    assert [key for key, _, _ in mmr(items[:3], 0.85, 3)] == ["a"]
    # Pure relevance without duplicate removal keeps the order of scores.
    assert [k for k, _, _ in mmr(items, 1.0, 5, duplicate=1.01)] == ["a", "a2", "a3", "b", "c"]
    assert mmr(items, 0.85, 0) == []


def test_mmr_prefers_novelty_as_lambda_drops() -> None:
    def item(key: str, score: float, tokens: str) -> tuple[str, float, frozenset[str]]:
        return key, score, frozenset(tokens.split())

    items = [
        item("x", 0.9, "a b c d"),
        item("y", 0.85, "a b c e"),  # Jaccard 0.6 with x
        item("z", 0.6, "f g h"),
    ]
    assert [k for k, _, _ in mmr(items, 0.9, 2)] == ["x", "y"]
    assert [k for k, _, _ in mmr(items, 0.5, 2)] == ["x", "z"]


def test_add_and_remove_match_a_fresh_build() -> None:
    index = LexicalIndex(DOCS)
    index.add("extra", "The cat sitter feeds Miso tuna on Sundays.")
    assert index.remove("berlin") and not index.remove("berlin")
    index.add("cat", "A new text for the cat memory: Miso sleeps a lot.")  # replaces
    fresh = LexicalIndex(
        [
            *(d for d in DOCS if d[0] not in ("berlin", "cat")),
            ("extra", "The cat sitter feeds Miso tuna on Sundays."),
            ("cat", "A new text for the cat memory: Miso sleeps a lot."),
        ]
    )
    assert len(index) == len(fresh) == 6 and "berlin" not in index
    for query in ("cat tuna", "Miso sleeps", "moved to Berlin", "green tea"):
        assert index.relevance(query) == pytest.approx(fresh.relevance(query))
    for doc_id in [d for d, _ in DOCS if d != "berlin"]:
        index.remove(doc_id)
    index.remove("extra")
    assert len(index) == 0 and index.relevance("cat") == {}


# --- Scoring over stored postings ---------------------------------------------------------

_VOCABULARY = [
    "cello", "cellos", "Berlin", "cat", "the", "user", "likes", "tea", "coffee", "support",
    "group", "running", "runs", "四川菜", "上海", "yoga", "2024", "a", "night", "shifts",
]  # fmt: skip


def _postings_relevance(docs: dict[str, str], query: str) -> dict[str, float]:
    """Relevance as a search over ``memory_term`` computes it: per-document terms computed
    once (as when written), only the query terms' postings and the document count read."""
    stored = {doc_id: document_terms(text) for doc_id, text in docs.items()}
    tokens = tokenize(query)
    wanted_pairs = set(phrases(tokens))
    words: dict[str, dict[str, int]] = {}
    pairs: dict[str, dict[str, int]] = {}
    lengths: dict[str, int] = {}
    for doc_id, terms in stored.items():
        for term, tf in terms.words.items():
            if term in tokens:
                words.setdefault(term, {})[doc_id] = tf
                lengths[doc_id] = terms.length
        for pair, tf in terms.pairs.items():
            if pair in wanted_pairs:
                pairs.setdefault(pair, {})[doc_id] = tf
                lengths[doc_id] = terms.length
    return relevance(tokens, len(docs), words, pairs, length_norms(lengths))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(_VOCABULARY), min_size=0, max_size=25).map(" ".join),
        min_size=1,
        max_size=30,
    ),
    st.lists(st.sampled_from(_VOCABULARY), min_size=1, max_size=8).map(" ".join),
)
def test_stored_postings_score_exactly_as_the_index(texts: list[str], query: str) -> None:
    docs = {f"m{n}": text for n, text in enumerate(texts)}
    index = LexicalIndex(docs.items())
    assert _postings_relevance(docs, query) == index.relevance(query)


def test_document_terms_are_what_the_index_counts() -> None:
    terms = document_terms("The support group met; the support group helps.")
    assert terms.length == len(tokenize("The support group met; the support group helps."))
    assert terms.words["support"] == 2 and terms.pairs["support group"] == 2
    assert sum(terms.words.values()) == terms.length


def _distinct_words(length: int) -> str:
    """Distinct words ("w0 w1 w2 ...") filling ``length`` characters."""
    return " ".join(f"w{n}" for n in range(length // 2))[:length]


def _distinct_terms(tokens: list[str]) -> int:
    return len(set(tokens) | set(phrases(tokens)))


def test_a_query_of_32768_characters_is_cut_to_the_term_bound() -> None:
    query = _distinct_words(32_768)
    assert len(query) == 32_768
    tokens = tokenize(query)
    assert _distinct_terms(tokens) > 50 * QUERY_TERMS
    kept = query_terms(tokens)
    assert kept == tokens[: len(kept)]  # a prefix, in query order: the same for every call
    assert _distinct_terms(kept) <= QUERY_TERMS
    assert _distinct_terms(tokens[: len(kept) + 1]) > QUERY_TERMS  # the longest such prefix


def test_a_query_within_the_bound_is_kept_whole_repeats_included() -> None:
    tokens = tokenize("cello concert in Berlin, the cello concert again, cello " * 20)
    assert query_terms(tokens) == tokens
    assert query_terms(tokens, limit=1) == ["cello"]
    assert query_terms([], limit=4) == []


def test_a_term_left_unread_weighs_in_the_ideal_and_leaves_other_scores_as_they_were() -> None:
    index = LexicalIndex(
        [("a", "cello concert tonight"), ("b", "cello lesson"), ("c", "concert hall")]
        + [(f"f{n}", f"filler words number {n}") for n in range(40)]
    )
    docs = {"a": "cello concert tonight", "b": "cello lesson", "c": "concert hall"}
    docs |= {f"f{n}": f"filler words number {n}" for n in range(40)}
    terms = {doc: document_terms(text) for doc, text in docs.items()}
    words: dict[str, dict[str, int]] = {}
    pairs: dict[str, dict[str, int]] = {}
    for doc, found in terms.items():
        for term, tf in found.words.items():
            words.setdefault(term, {})[doc] = tf
        for term, tf in found.pairs.items():
            pairs.setdefault(term, {})[doc] = tf
    norms = length_norms({doc: found.length for doc, found in terms.items()})
    query = tokenize("cello concert")
    full = relevance(query, len(docs), words, pairs, norms)
    assert full == pytest.approx(index.relevance(query))
    # "concert" left unread: its document frequency still counts, its postings add nothing.
    unread = {"concert": len(words.pop("concert"))}
    bounded = relevance(query, len(docs), words, pairs, norms, unread=unread)
    assert bounded["b"] == pytest.approx(full["b"])  # "b" lacks the unread term
    assert "c" not in bounded  # only the unread term matched it
    assert bounded["a"] < full["a"]


def test_stored_impacts_score_as_relevance_does() -> None:
    # What the database sums from the stored impacts (postings.ranked) is relevance's score.
    docs = {
        "a": "the user plays the cello in a quartet",
        "b": "cello lessons on sundays with the quartet leader and her sister",
        "c": "the user likes tea",
    }
    terms = {doc: document_terms(text) for doc, text in docs.items()}
    words: dict[str, dict[str, int]] = {}
    for doc, found in terms.items():
        for term, tf in found.words.items():
            words.setdefault(term, {})[doc] = tf
    query = tokenize("cello quartet the cello")
    lengths = {doc: found.length for doc, found in terms.items()}
    expected = relevance(query, len(docs), words, {}, length_norms(lengths), phrase_weight=0.0)
    ideal = sum(_idf(len(docs), len(words.get(t, {}))) for t in query)
    for doc, found in terms.items():
        raw = sum(
            _idf(len(docs), len(words[t])) * impact(found.words[t], found.length)
            for t in query
            if t in found.words
        )
        assert raw / ideal == pytest.approx(expected.get(doc, 0.0), rel=1e-12)
