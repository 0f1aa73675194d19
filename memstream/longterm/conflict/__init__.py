"""Conflict resolution: a candidate memory against the live memories of its target cube.

``rules.resolve`` is rule-based and needs no service: it compares the candidate with each live
memory by text (``dedupe.match``) and by the slot facts both state (``facts.parse``: "lives in
Paris" is ``residence=paris``). ``llm.LLMConflictResolver`` asks an OpenAI-compatible model and
falls back to ``resolve`` whenever the model fails or answers something unusable. Either way a
candidate never expires a memory said after it (``outdated``).
"""

from memstream.longterm.conflict.facts import Fact, Parsed, facts, parse
from memstream.longterm.conflict.llm import (
    MAX_LLM_LIVE,
    LLMConflictResolver,
    parse_decision,
    shortlist,
)
from memstream.longterm.conflict.rules import Decision, clash, outdated, resolve, said_later

__all__ = [
    "MAX_LLM_LIVE",
    "Decision",
    "Fact",
    "LLMConflictResolver",
    "Parsed",
    "clash",
    "facts",
    "outdated",
    "parse",
    "parse_decision",
    "resolve",
    "said_later",
    "shortlist",
]
