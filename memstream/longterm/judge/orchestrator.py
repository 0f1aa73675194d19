"""The judge: the LLM judge with the rule-based judge as its fallback, plus the episodes.

Facts come from the model or the rules; episodes (what the user said, dated) are selected the
same way on both paths. Relative dates left in a fact are made absolute against the time of
the message it came from, and that time is kept as the memory's own date.

The rules, the dating and the episodes are regular expressions over user text: with a
``CpuPool`` they run in its process (``facts_and_episodes``), never on the worker's event
loop; the rules read at most ``RULE_INPUT_CHARS`` of each message and keep at most
``MAX_RULE_FACTS`` facts.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from prometheus_client import Counter

from memstream.cpu import CpuPool
from memstream.errors import JudgeOutputError, LLMError
from memstream.failure.http import snippet
from memstream.llm import LLMClient
from memstream.llm_output import Flaws
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
TOKENS_PER_USER_MESSAGE = 120
"""The answer asked for grows with the new user messages (a memory or two each, about 100
tokens of JSON apiece) up to ``MAX_TOKENS``: a small model fills whatever it is allowed, and
at tens of tokens per second a short session must not wait for 1500 of them."""
RULE_INPUT_CHARS = 8000
"""The rules read this much of each message: facts sit in sentences, not in a 30,000-character
paste, and it bounds what one crafted message costs."""
MAX_RULE_FACTS = 60
"""The rules' facts kept per session, the most important first: about what the model's answer
can hold, and a bound on the dedupe and conflict work after (quadratic in the facts), which a
session of crafted statements would otherwise make thousands."""


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

    def __init__(self, llm: LLMClient | None, cpu: CpuPool | None = None) -> None:
        self.llm = llm
        self.cpu = cpu

    async def judge(
        self, messages: Sequence[SessionMessage], *, agent_id: str | None, model: str | None = None
    ) -> JudgeResult:
        """``model`` is the LLM model the agent is bound to (the client's own when None)."""
        new = [m for m in messages if m.new]
        if not new:
            return JudgeResult((), "rules")
        if self.llm is None:
            return await self._rules(messages, None)
        try:
            completion = await self.llm.chat(
                build_prompt(messages, agent_id),
                json_mode=True,
                max_tokens=answer_tokens(new),
                purpose="judge",
                model=model,
            )
        except LLMError as exc:
            reason: FallbackReason = (
                "timeout" if exc.kind == "timeout" else "empty" if exc.kind == "empty" else "error"
            )
            if exc.kind == "empty":
                Flaws({"empty"}).count("judge", "rejected")
            log.warning("the LLM judge failed (%s), using the rules: %s", exc.kind, exc.detail)
            return await self._rules(messages, reason)
        flaws = Flaws({"truncated"} if completion.truncated else set())
        try:
            candidates = parse_judge_output(completion.text, new, flaws)
        except JudgeOutputError as exc:
            flaws.count("judge", "rejected")
            log.warning(
                "the LLM judge answered something unusable (%s), using the rules: %s",
                ", ".join(sorted(flaws.found)),
                exc,
            )
            log.debug("the LLM judge answered: %s", snippet(completion.text))
            return await self._rules(messages, "malformed")
        if flaws.count("judge", "used") == "repaired":
            log.info("the LLM judge's answer was repaired (%s)", ", ".join(sorted(flaws.found)))
        return await self._result(messages, candidates, "llm", None)

    async def _rules(
        self, messages: Sequence[SessionMessage], reason: FallbackReason | None
    ) -> JudgeResult:
        if reason is not None:
            JUDGE_FALLBACKS.labels(reason).inc()
        return await self._result(messages, None, "rules", reason)

    async def _result(
        self,
        messages: Sequence[SessionMessage],
        facts: Sequence[Candidate] | None,
        method: Literal["llm", "rules"],
        reason: FallbackReason | None,
    ) -> JudgeResult:
        """``facts`` None: the rules' facts."""
        given = None if facts is None else list(facts)
        if self.cpu is None:
            kept, episodes = facts_and_episodes(list(messages), given)
        else:
            kept, episodes = await self.cpu.run(facts_and_episodes, list(messages), given)
        result = JudgeResult(tuple(kept), method, reason, tuple(episodes))
        for candidate in result.memories:
            JUDGE_MEMORIES.labels(candidate.category, candidate.memory_type).inc()
        return result


def answer_tokens(new: Sequence[SessionMessage]) -> int:
    """The ``max_tokens`` asked of the model for a session with ``new`` messages."""
    users = sum(1 for m in new if m.role == "user")
    return min(MAX_TOKENS, 64 + TOKENS_PER_USER_MESSAGE * max(1, users))


def facts_and_episodes(
    messages: list[SessionMessage], facts: list[Candidate] | None
) -> tuple[list[Candidate], list[Candidate]]:
    """The CPU part of judging a session: the rules' facts when ``facts`` is None (each
    message cut to ``RULE_INPUT_CHARS``, at most ``MAX_RULE_FACTS`` of them), the facts
    dated, and the episodes."""
    if facts is None:
        found = rule_based_judge(
            [replace(m, content=m.content[:RULE_INPUT_CHARS]) for m in messages]
        )
        kept = set(sorted(range(len(found)), key=lambda i: -found[i].importance)[:MAX_RULE_FACTS])
        facts = [fact for i, fact in enumerate(found) if i in kept]
    return dated(facts, messages), select_episodes(messages)


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
