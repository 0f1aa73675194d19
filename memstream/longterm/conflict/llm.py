"""Conflict resolution by an OpenAI-compatible model, with the rules as the fallback whenever
the model fails or answers something unusable."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from memstream.errors import LLMError, MalformedDecision
from memstream.llm import LLMClient
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

LLM_MAX_TOKENS = 400


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


def parse_decision(raw: str, allowed_ids: Sequence[str]) -> Decision:
    """A decision from the model's JSON answer; ``MalformedDecision`` when it is not one."""
    text = raw.strip()
    if text.startswith("```"):
        text = text.strip("`")
        text = text.removeprefix("json").strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise MalformedDecision("no JSON object in the answer")
    try:
        data: Any = json.loads(text[start : end + 1])
    except ValueError as exc:
        raise MalformedDecision(f"invalid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise MalformedDecision("the answer is not a JSON object")
    action = data.get("action")
    if action not in ("store", "skip"):
        raise MalformedDecision(f"the action is not store or skip ({type(action).__name__})")
    raw_ids = data.get("expire_ids", [])
    if raw_ids is None:
        raw_ids = []
    if not isinstance(raw_ids, list):
        raise MalformedDecision("expire_ids is not a list")
    allowed = set(allowed_ids)
    ids: list[str] = []
    for value in raw_ids:
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise MalformedDecision(f"an expire id is a {type(value).__name__}")
        if str(value) not in allowed:
            raise MalformedDecision("an expire id is not one of the live memories shown")
        if str(value) not in ids:
            ids.append(str(value))
    reason = data.get("reason")
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
            raw = await self.client.chat(
                self.messages(candidate, shown),
                json_mode=True,
                max_tokens=LLM_MAX_TOKENS,
                purpose="conflict",
            )
            # The model is not shown when each memory was said: times are weighed here.
            return outdated(candidate, parse_decision(raw, [m.id for m in shown]), live)
        except (LLMError, MalformedDecision) as exc:
            log.warning("LLM conflict resolution failed, using the rules: %s", exc)
            decision = resolve(candidate, live)
            return Decision(decision.action, decision.expire_ids, f"rules: {decision.reason}")
