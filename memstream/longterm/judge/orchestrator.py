"""The judge: the LLM judge with the rule-based judge as its fallback, plus the episodes.

Facts come from the model or the rules; episodes (what the user said, dated) are selected the
same way on both paths. Relative dates left in a fact are made absolute against the time of
the message it came from, and that time is kept as the memory's own date.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from prometheus_client import Counter

from memstream.errors import JudgeOutputError, LLMError
from memstream.llm import LLMClient
from memstream.longterm.episodes import ground, select_episodes
from memstream.longterm.judge.candidates import cut_content
from memstream.longterm.judge.parse import parse_judge_output
from memstream.longterm.judge.prompt import build_prompt
from memstream.longterm.judge.rules import rule_based_judge
from memstream.longterm.models import Candidate, SessionMessage

log = logging.getLogger(__name__)

FallbackReason = Literal["error", "timeout", "empty", "malformed"]

JUDGE_FALLBACKS = Counter(
    "memstream_judge_fallbacks_total",
    "Sessions judged by the rules because the LLM judge failed, by reason.",
    ["reason"],
)
JUDGE_MEMORIES = Counter(
    "memstream_judge_memories_total",
    "Candidate memories proposed by the judge, by category and memory type.",
    ["category", "memory_type"],
)

MAX_TOKENS = 1500


@dataclass(frozen=True)
class JudgeResult:
    """The facts the model or the rules proposed, and the session's episodes."""

    candidates: tuple[Candidate, ...]
    method: Literal["llm", "rules"]
    fallback_reason: str | None = None
    episodes: tuple[Candidate, ...] = ()

    @property
    def memories(self) -> tuple[Candidate, ...]:
        """Everything to pass on: facts first, then episodes."""
        return self.candidates + self.episodes


class Judge:
    """The LLM judge with the rule-based judge as its fallback; ``judge`` never raises."""

    def __init__(self, llm: LLMClient | None) -> None:
        self.llm = llm

    async def judge(
        self, messages: Sequence[SessionMessage], *, agent_id: str | None, model: str | None = None
    ) -> JudgeResult:
        """``model`` is the LLM model the agent is bound to (the client's own when None)."""
        new = [m for m in messages if m.new]
        if not new:
            return JudgeResult((), "rules")
        if self.llm is None:
            return self._rules(messages, None)
        try:
            text = await self.llm.chat(
                build_prompt(messages, agent_id),
                json_mode=True,
                max_tokens=MAX_TOKENS,
                purpose="judge",
                model=model,
            )
        except LLMError as exc:
            reason: FallbackReason = (
                "timeout" if exc.kind == "timeout" else "empty" if exc.kind == "empty" else "error"
            )
            log.warning("the LLM judge failed (%s), using the rules: %s", exc.kind, exc.detail)
            return self._rules(messages, reason)
        if not text or not text.strip():
            log.warning("the LLM judge answered an empty completion, using the rules")
            return self._rules(messages, "empty")
        try:
            candidates = parse_judge_output(text, new)
        except JudgeOutputError as exc:
            log.warning("the LLM judge answered something unusable, using the rules: %s", exc)
            return self._rules(messages, "malformed")
        return self._result(messages, candidates, "llm", None)

    def _rules(
        self, messages: Sequence[SessionMessage], reason: FallbackReason | None
    ) -> JudgeResult:
        if reason is not None:
            JUDGE_FALLBACKS.labels(reason).inc()
        return self._result(messages, rule_based_judge(messages), "rules", reason)

    @staticmethod
    def _result(
        messages: Sequence[SessionMessage],
        facts: Sequence[Candidate],
        method: Literal["llm", "rules"],
        reason: FallbackReason | None,
    ) -> JudgeResult:
        result = JudgeResult(
            tuple(dated(facts, messages)), method, reason, tuple(select_episodes(messages))
        )
        for candidate in result.memories:
            JUDGE_MEMORIES.labels(candidate.category, candidate.memory_type).inc()
        return result


def dated(facts: Sequence[Candidate], messages: Sequence[SessionMessage]) -> list[Candidate]:
    """Facts with relative dates made absolute and the time they were said as their date."""
    said_at = {m.event_id: m.created_at for m in messages}
    out = []
    for fact in facts:
        times = [said_at[i] for i in fact.source_event_ids if i in said_at]
        if not times:
            out.append(fact)
            continue
        at = max(times)
        content = cut_content(ground(fact.content, at))
        out.append(replace(fact, content=content, occurred_at=at))
    return out
