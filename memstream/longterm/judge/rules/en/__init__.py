"""The English grammar of the rule-based judge: first-person statements rewritten in the third
person ("I live in Paris" -> "The user lives in Paris"). Rules are tried in order; the first
that yields a hit wins."""

from memstream.longterm.judge.rules.en.table import judge_en

__all__ = ["judge_en"]
