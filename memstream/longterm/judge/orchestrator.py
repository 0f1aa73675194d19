"""The judge: the LLM judge with the rule-based judge as its fallback."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from prometheus_client import Counter

from memstream.errors import JudgeOutputError, LLMError
from memstream.llm import LLMClient
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
    candidates: tuple[Candidate, ...]
    method: Literal["llm", "rules"]
    fallback_reason: str | None = None


class Judge:
    """The LLM judge with the rule-based judge as its fallback; ``judge`` never raises."""

    def __init__(self, llm: LLMClient | None) -> None:
        self.llm = llm

    async def judge(
        self, messages: Sequence[SessionMessage], *, agent_id: str | None
    ) -> JudgeResult:
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
        self._count(candidates)
        return JudgeResult(tuple(candidates), "llm")

    def _rules(
        self, messages: Sequence[SessionMessage], reason: FallbackReason | None
    ) -> JudgeResult:
        if reason is not None:
            JUDGE_FALLBACKS.labels(reason).inc()
        candidates = rule_based_judge(messages)
        self._count(candidates)
        return JudgeResult(tuple(candidates), "rules", reason)

    @staticmethod
    def _count(candidates: Sequence[Candidate]) -> None:
        for candidate in candidates:
            JUDGE_MEMORIES.labels(candidate.category, candidate.memory_type).inc()
