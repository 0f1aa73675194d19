"""The short-term token window of the load path: which recent messages go into an agent's context.

It follows the reference design (split off system messages, trim the tail alternation, walk
newest to oldest with the token counts, drop a leading assistant turn) with two fixes: over the
limit, the reference drops the conversation's system messages, memstream keeps them and counts
them against the window; and the reference prepends the conversation summary only when the
messages it read overflow the window, so with few rounds everything older silently disappears,
while memstream prepends it whenever older chat history is left out, by the rounds bound or by
tokens (the reference design's numbers).

Token counts are the ones stored at ingestion: nothing is tokenised here (DESIGN principle 5).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from memstream.settings import SUMMARY_BUDGET_TOKENS

MAX_WINDOW_TOKENS = 8000


class WindowMessage(Protocol):
    """What the window needs of a stored message (``StoredMessage`` and ``CachedMessage`` fit)."""

    @property
    def role(self) -> str: ...

    @property
    def message_type(self) -> str: ...

    @property
    def content(self) -> str: ...

    @property
    def token_count(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Message:
    """A plain ``WindowMessage``, for callers that have no stored row at hand."""

    role: str
    content: str
    token_count: int
    message_type: str = "chat"


@dataclass(frozen=True, slots=True)
class Summary:
    """The conversation summary and its stored token count."""

    text: str
    tokens: int


@dataclass(frozen=True, slots=True)
class WindowEntry:
    """One message of the window; ``summary`` marks the conversation summary."""

    role: str
    content: str
    tokens: int
    summary: bool = False


@dataclass(frozen=True, slots=True)
class Window:
    """The window, oldest first; ``truncated`` says older history was left out."""

    messages: tuple[WindowEntry, ...]
    tokens: int
    truncated: bool


# (original position, message): positions let system messages go back where they were.
_Indexed = tuple[int, WindowMessage]


def build_window(
    messages: Sequence[WindowMessage],
    summary: Summary | None = None,
    *,
    max_tokens: int = MAX_WINDOW_TOKENS,
    summary_budget: int = SUMMARY_BUDGET_TOKENS,
    earlier: bool = False,
) -> Window:
    """The short-term window over the newest ``messages`` of a conversation (oldest first).

    ``earlier`` says the conversation has older chat messages than ``messages`` (the rounds
    bound left them out). When everything fits in ``max_tokens`` all is kept; otherwise the
    newest messages that fit in ``max_tokens - summary_budget``. The summary is the first entry
    whenever older chat history is left out, and never when the window reaches the
    conversation's start. The total never exceeds ``max_tokens``.
    """
    if max_tokens < 0 or not 0 <= summary_budget <= max_tokens:
        raise ValueError("need 0 <= summary_budget <= max_tokens")
    # A summary larger than ``max_tokens`` cannot be used at all (cutting it would need
    # re-tokenising).
    head = summary if summary is not None and summary.text.strip() else None
    if head is not None and head.tokens > max_tokens:
        head = None

    # Rule 1, split. System messages (role ``system``, type ``chat``) are instructions: they are
    # kept but stand outside the user/assistant alternation. Tool messages and non-chat types
    # (``tool_call``, ``tool_result``, ``status``) are left out of the window altogether: a bare
    # ``tool`` message without the assistant's matching tool call is rejected by chat-completion
    # APIs, and tool payloads and status lines are bulky noise for the next turn. Only the
    # user/assistant ``chat`` messages form the conversation.
    systems: list[_Indexed] = []
    chat: list[_Indexed] = []
    for position, message in enumerate(messages):
        if message.message_type != "chat":
            continue
        if message.role == "system":
            systems.append((position, message))
        elif message.role in ("user", "assistant"):
            chat.append((position, message))

    # Rule 2, tail alternation. The caller appends the new user query after the window, so the
    # conversation must end with an assistant turn: every user message after the newest
    # assistant message is dropped. This also removes the current query itself when the
    # platform published it before asking for the context, and an unanswered earlier question
    # (the model call failed) that the new query supersedes; two user turns in a row would
    # otherwise end the history. Runs inside the history (two assistant parts of one answer) are
    # kept: they are what was said, and chat APIs accept them.
    while chat and chat[-1][1].role == "user":
        chat.pop()
    # Rule 4 (applied early as well): a window must not start with an assistant turn, whose
    # question is missing. A leading assistant message of the whole history can never be shown,
    # so it must not push the history over the limit either (the reference counts it).
    chat = _without_leading_assistant(chat)

    # Rule 3 and 4, everything fits in the whole window: all chat and system messages in their
    # original order. Unlike the reference, which tests only the chat messages, system messages
    # count too, so the window limit holds. When the rounds bound left older history out, the
    # summary stands for it, taking from the messages only the tokens it needs; when the
    # messages reach the conversation's start, it would only repeat what is shown.
    total = _tokens(systems) + _tokens(chat)
    if total <= max_tokens:
        if not earlier or head is None:
            return _window(_in_order(systems + chat), None, truncated=earlier)
        if total + head.tokens <= max_tokens:
            return _window(_in_order(systems + chat), head, truncated=True)
        budget = max_tokens - head.tokens
    else:
        # Rule 5, over the limit: the summary takes its budget; one larger than its budget
        # shrinks the message window instead of breaking the total.
        window = max_tokens - summary_budget
        budget = window if head is None else min(window, max_tokens - head.tokens)

    # System messages are taken first (the fix: the reference drops them here), newest first,
    # skipping any that no longer fits: they carry instructions, are usually short, and their
    # order does not matter for the budget as they need not be contiguous.
    used = 0
    kept_systems: list[_Indexed] = []
    for item in reversed(systems):
        if used + item[1].token_count <= budget:
            kept_systems.append(item)
            used += item[1].token_count

    # Rule 3, the walk: newest to oldest with the stored counts while within the budget,
    # stopping at the first message that does not fit, so the window is a contiguous run of
    # the newest turns (a single message larger than the budget ends the walk: empty window).
    start = len(chat)
    while start > 0 and used + chat[start - 1][1].token_count <= budget:
        start -= 1
        used += chat[start][1].token_count
    # Rule 4 again: the cut may fall between a question and its answer. The freed tokens are
    # not refilled: the message before the cut did not fit, and the window stays contiguous.
    recent = _without_leading_assistant(chat[start:])
    if start == 0 and not earlier:
        # Only system messages were left out: the chat reaches the conversation's start, and
        # a summary of it would repeat what is shown.
        head = None
    return _window(_in_order(kept_systems + recent), head, truncated=True)


def _tokens(items: Sequence[_Indexed]) -> int:
    return sum(message.token_count for _, message in items)


def _in_order(items: list[_Indexed]) -> list[_Indexed]:
    return sorted(items, key=lambda item: item[0])


def _without_leading_assistant(chat: list[_Indexed]) -> list[_Indexed]:
    first_user = next((i for i, (_, m) in enumerate(chat) if m.role != "assistant"), len(chat))
    return chat[first_user:]


def _window(items: Sequence[_Indexed], summary: Summary | None, *, truncated: bool) -> Window:
    entries = [WindowEntry(m.role, m.content, m.token_count) for _, m in items]
    if summary is not None:
        entries.insert(0, WindowEntry("system", summary.text, summary.tokens, summary=True))
    return Window(tuple(entries), sum(e.tokens for e in entries), truncated)
