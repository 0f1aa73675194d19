"""Two Jaccard similarities that answer different questions.

- ``token_jaccard``: of two collections of tokens (search terms): do two memories talk about
  the same things? Retrieval's MMR and the conflict shortlist rank by it.
- ``bigram_jaccard``: of the character bigrams of two texts' comparison forms, spaces removed
  ("用户喜欢猫" -> 用户 户喜 喜欢 欢猫): are two texts worded alike? Dedupe decides near
  duplicates by it. Plain character sets are far too coarse for English, where "likes tea" and
  "does not like tea" share almost every letter.

Both count two empty sets as identical (1.0).
"""

from __future__ import annotations

from collections.abc import Collection
from functools import lru_cache

from memstream.text.normalise import comparison_units


def token_jaccard(a: Collection[str], b: Collection[str]) -> float:
    """Jaccard similarity of two token sets."""
    sa = a if isinstance(a, frozenset | set) else set(a)
    sb = b if isinstance(b, frozenset | set) else set(b)
    if not sa and not sb:
        return 1.0
    inter = len(sa & sb)
    return inter / (len(sa) + len(sb) - inter)


@lru_cache(maxsize=8192)
def char_bigrams(text: str) -> frozenset[str]:
    """The character bigrams of ``text``'s comparison form without spaces; a one-character
    form is its own bigram."""
    compact = "".join(comparison_units(text))
    if len(compact) > 1:
        return frozenset(compact[i : i + 2] for i in range(len(compact) - 1))
    return frozenset([compact]) if compact else frozenset()


def bigram_jaccard(a: str, b: str) -> float:
    """Jaccard similarity of two texts' character bigrams."""
    return token_jaccard(char_bigrams(a), char_bigrams(b))
