"""Conflict resolution by an OpenAI-compatible model, with the rules as the fallback whenever
the model fails or answers something unusable."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from memstream.errors import LLMError, MalformedDecision
from memstream.failure.http import snippet
from memstream.llm import LLMClient
from memstream.llm_output import Flaws, Unparseable, loads, unknown_fields
from memstream.longterm.conflict.facts import parse
from memstream.longterm.conflict.rules import Decision, outdated, resolve
from memstream.longterm.dedupe import match, similarity
from memstream.longterm.models import Candidate
from memstream.memory import MemoryItem
from memstream.text.similarity import token_jaccard
from memstream.text.terms import tokenize

log = logging.getLogger(__name__)

MAX_LLM_LIVE = 20
"""Live memories shown to the model: the ones most similar to the candidate."""

LLM_MAX_TOKENS = 64
TOKENS_PER_ID = 20
"""An answer is a few dozen tokens plus about 20 per id it expires (ids are 32 hex digits),
up to ten: a small model fills whatever it is allowed, and slowly."""


SYSTEM_PROMPT = """You maintain a user's long-term memory. Compare a NEW candidate memory with \
the EXISTING live memories of the same memory cube and decide:
- "skip": the new memory says nothing that the existing memories do not already say \
(same fact, possibly in other words).
- "store": the new memory adds information. If it updates or contradicts existing memories \
(e.g. the user moved, changed job, changed their mind, no longer likes something), or makes \
an existing memory redundant, list those memories' ids in "expire_ids" so the outdated ones \
are removed.
Only use ids from the EXISTING list. Answer with one JSON object and nothing else:
{"action": "store" or "skip", "expire_ids": ["..."], "reason": "one short sentence"}"""


DECISION_FIELDS = frozenset({"action", "expire_ids", "reason"})


def parse_decision(raw: str, allowed_ids: Sequence[str], flaws: Flaws | None = None) -> Decision:
    """A decision from the model's JSON answer (a cut-off one read up to its last complete
    field); ``MalformedDecision`` when it is not one. Each flaw is added to ``flaws``."""
    flaws = Flaws() if flaws is None else flaws
    try:
        data: Any = loads(raw, flaws)
    except Unparseable as exc:
        flaws.add("unparseable")
        raise MalformedDecision(str(exc)) from None
    if not isinstance(data, dict):
        flaws.add("wrong_shape")
        raise MalformedDecision("the answer is not a JSON object")
    if unknown_fields(data, DECISION_FIELDS):
        flaws.add("invented_field")
    action = data.get("action")
    if action not in ("store", "skip"):
        flaws.add("bad_value" if isinstance(action, str) else "wrong_type")
        raise MalformedDecision(f"the action is not store or skip ({type(action).__name__})")
    raw_ids = data.get("expire_ids", [])
    if raw_ids is None:
        raw_ids = []
    if not isinstance(raw_ids, list):
        flaws.add("wrong_type")
        raise MalformedDecision("expire_ids is not a list")
    allowed = set(allowed_ids)
    ids: list[str] = []
    for value in raw_ids:
        if isinstance(value, bool) or not isinstance(value, str | int):
            flaws.add("wrong_type")
            raise MalformedDecision(f"an expire id is a {type(value).__name__}")
        if str(value) not in allowed:
            flaws.add("unknown_id")
            raise MalformedDecision("an expire id is not one of the live memories shown")
        if str(value) not in ids:
            ids.append(str(value))
    reason = data.get("reason")
    if reason is not None and not isinstance(reason, str):
        flaws.add("wrong_type")
    reason = reason.strip() if isinstance(reason, str) and reason.strip() else "no reason given"
    if action == "skip":
        return Decision("skip", (), f"llm: {reason}")
    return Decision("store", tuple(ids), f"llm: {reason}")


def shortlist(
    candidate: Candidate, live: Sequence[MemoryItem], limit: int = MAX_LLM_LIVE
) -> list[MemoryItem]:
    """The ``limit`` live memories most similar to the candidate: those on one of its slots
    first, then by term overlap and character similarity; ties keep the input order."""
    slots = {f.slot for f in parse(candidate.content).facts}
    terms = set(tokenize(candidate.content))

    def score(item: MemoryItem) -> float:
        theirs = {f.slot for f in parse(item.content).facts}
        other = set(tokenize(item.content))
        overlap = token_jaccard(terms, other) if terms or other else 0.0
        return (
            (1.0 if slots & theirs else 0.0) + overlap + similarity(candidate.content, item.content)
        )

    ranked = sorted(enumerate(live), key=lambda p: (-score(p[1]), p[0]))
    return [item for _, item in ranked[:limit]]


class LLMConflictResolver:
    """Conflict resolution by an OpenAI-compatible model, with ``resolve`` as the fallback."""

    def __init__(self, client: LLMClient, *, max_live: int = MAX_LLM_LIVE) -> None:
        self.client = client
        self.max_live = max_live

    def messages(self, candidate: Candidate, shown: Sequence[MemoryItem]) -> list[dict[str, str]]:
        existing = [{"id": m.id, "content": m.content} for m in shown]
        body = {
            "new": {"content": candidate.content, "category": candidate.category},
            "existing": existing,
        }
        return [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": json.dumps(body, ensure_ascii=False)},
        ]

    async def resolve(self, candidate: Candidate, live: Sequence[MemoryItem]) -> Decision:
        if not live:
            return resolve(candidate, live)
        for item in live:
            if match(candidate.content, item.content) == "exact":
                return Decision("skip", (), f"already known: {item.id} (exact)")
        shown = shortlist(candidate, live, self.max_live)
        try:
            completion = await self.client.chat(
                self.messages(candidate, shown),
                json_mode=True,
                max_tokens=LLM_MAX_TOKENS + TOKENS_PER_ID * min(10, len(shown)),
                purpose="conflict",
            )
        except LLMError as exc:
            if exc.kind == "empty":
                Flaws({"empty"}).count("conflict", "rejected")
            return self._rules(candidate, live, exc)
        flaws = Flaws({"truncated"} if completion.truncated else set())
        try:
            decision = parse_decision(completion.text, [m.id for m in shown], flaws)
        except MalformedDecision as exc:
            flaws.count("conflict", "rejected")
            log.debug("the LLM conflict resolver answered: %s", snippet(completion.text))
            return self._rules(candidate, live, exc)
        flaws.count("conflict", "used")
        # The model is not shown when each memory was said: times are weighed here.
        return outdated(candidate, decision, live)

    def _rules(
        self, candidate: Candidate, live: Sequence[MemoryItem], failure: Exception
    ) -> Decision:
        log.warning("LLM conflict resolution failed, using the rules: %s", failure)
        decision = resolve(candidate, live)
        return Decision(decision.action, decision.expire_ids, f"rules: {decision.reason}")
