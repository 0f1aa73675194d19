"""The model-written conversation summary.

``llm_summary`` asks an OpenAI-compatible model to merge the previous summary with the new
messages, and falls back to the extractive summary when the model fails or answers nothing;
its answer is also cut to the budget. ``model_summary`` is its model half alone (None when the
model gave nothing usable), for callers that run the fallback elsewhere.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Sequence

from memstream.errors import LLMError
from memstream.llm import LLMClient
from memstream.llm_output import Flaws
from memstream.settings import SUMMARY_BUDGET_TOKENS
from memstream.shortterm.fold import (
    ROLE_LABEL,
    extractive_summary,
    fit_budget,
    truncate_tokens,
)
from memstream.text.tokens import count_tokens

log = logging.getLogger(__name__)

PROMPT_MESSAGE_TOKENS = 1000
"""Each new message is cut to this many tokens in the LLM prompt."""
PROMPT_TOKENS = 12000
"""The LLM prompt's new messages are limited to this many tokens (the newest are kept)."""


SUMMARY_PROMPT = """You keep a running summary of a conversation between a user and an AI \
assistant. Merge the previous summary (if any) with the new messages into one updated summary.
Keep: facts about the user (who they are, preferences, circumstances), decisions and plans, \
commitments, the assistant's key answers and recommendations, and questions that are still \
open. Drop greetings, thanks and small talk. Keep names, numbers and dates exactly.
Write plain text (short lines or sentences, no headings, no markdown), in the language of the \
conversation, at most about {words} words. Answer with the summary only."""


def summary_messages(
    previous: str | None, messages: Sequence[tuple[str, str]], budget_tokens: int
) -> list[dict[str, str]]:
    """The chat request of ``llm_summary``: bounded, whatever the messages' size."""
    lines: list[str] = []
    used = 0
    for role, content in reversed(messages):
        label = ROLE_LABEL.get(role.lower(), role.capitalize() or "Message")
        line = f"{label}: {truncate_tokens((content or '').strip(), PROMPT_MESSAGE_TOKENS)}"
        cost = count_tokens(line) + 1
        if used + cost > PROMPT_TOKENS:
            break
        lines.append(line)
        used += cost
    transcript = "\n".join(reversed(lines))
    prior = fit_budget(previous, budget_tokens) if previous and previous.strip() else "(none)"
    words = max(20, int(budget_tokens * 0.6))
    return [
        {"role": "system", "content": SUMMARY_PROMPT.format(words=words)},
        {
            "role": "user",
            "content": f"Previous summary:\n{prior}\n\nNew messages:\n{transcript}",
        },
    ]


_SENTENCE_END = re.compile(r"[.!?。！？]['\")\]]*(?=\s|$)|\n")


def _clean(answer: str) -> str:
    text = unicodedata.normalize("NFC", answer).strip()
    if text.startswith("```"):
        text = text.strip("`").strip()
    return text


def whole_sentences(text: str) -> str:
    """A summary cut off at ``max_tokens`` without its unfinished last sentence, when at least
    half of it is whole sentences (a cut mid-word would start the next fold from a fragment)."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    if ends and ends[-1] >= len(text) // 2:
        return text[: ends[-1]].rstrip()
    return text


async def model_summary(
    client: LLMClient,
    previous: str | None,
    messages: Sequence[tuple[str, str]],
    *,
    budget_tokens: int = SUMMARY_BUDGET_TOKENS,
) -> str | None:
    """The model's merged summary, cut to ``budget_tokens``; None when the model fails or
    answers nothing. Its prompt and cut are bounded (``PROMPT_TOKENS``, the budget)."""
    try:
        completion = await client.chat(
            summary_messages(previous, messages, budget_tokens),
            json_mode=False,
            max_tokens=budget_tokens,
            purpose="summary",
        )
    except LLMError as exc:
        if exc.kind == "empty":
            Flaws({"empty"}).count("summary", "rejected")
        log.warning("LLM summary failed, using the extractive summary: %s", exc)
        return None
    flaws = Flaws()
    text = _clean(completion.text)
    if not text:
        Flaws({"empty"}).count("summary", "rejected")
        log.warning("LLM summary was empty, using the extractive summary")
        return None
    if completion.truncated:
        flaws.add("truncated")
        text = whole_sentences(text)
    flaws.count("summary", "used")
    return fit_budget(text, budget_tokens)


async def llm_summary(
    client: LLMClient,
    previous: str | None,
    messages: Sequence[tuple[str, str]],
    *,
    budget_tokens: int = SUMMARY_BUDGET_TOKENS,
) -> str:
    """The model's merged summary, cut to ``budget_tokens``; the extractive summary when the
    model fails or answers nothing."""
    if budget_tokens <= 0:
        return ""
    text = await model_summary(client, previous, messages, budget_tokens=budget_tokens)
    if text is None:
        return extractive_summary(previous, messages, budget_tokens=budget_tokens)
    return text
