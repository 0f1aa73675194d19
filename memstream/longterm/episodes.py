"""Episodes: what the user said that carries content, kept as one dated, attributed line.
Why it works this way: docs/design/episodes.md."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime

from memstream.longterm.models import Candidate, SessionMessage
from memstream.text.dates import display_date, display_date_zh, ground_dates
from memstream.text.scripts import is_mostly_cjk
from memstream.text.terms import CJK_STOP_CHARS, STOP_WORDS, tokenize

EPISODE_IMPORTANCE = 3
# An episode is one line of the load path; longer turns are cut at a sentence end.
MAX_EPISODE_CHARS = 600
# A user turn this short after an assistant question is an answer to it.
MAX_ANSWER_WORDS = 8
MAX_QUESTION_CHARS = 200
# Fewer content terms than this, and a turn is small talk; one is enough when the user speaks
# of themselves ("I'm vegetarian").
MIN_CONTENT_TERMS = 2

# Words that carry no information about the user in a chat turn: greetings, thanks, fillers,
# agreement. Matched after stemming, so "thanks" and "thank" are one entry.
_FILLER_EN = frozenset(
    tokenize(
        "ok okay thanks thank thx ty great cool nice sure yes yeah yep yup no nope nah right "
        "alright fine good awesome perfect wow lol haha hahaha hmm hm oh ah hello hi hey bye "
        "goodbye morning night evening afternoon see later welcome please sorry sound "
        "got understood agreed indeed exactly totally absolutely definitely really true "
        "amazing wonderful lovely glad happy tell explain again more help question"
    )
)
_FILLER_ZH = frozenset(
    "好的嗯哦啊哈呵谢您你我他她它们对是行可以没问题明白收到再见早晚安喂嗨呀啦哇耶棒赞"
)
_ACK_ZH = re.compile(
    r"^[好的嗯哦啊哈呵谢对是行可以没问题明白收到再见早晚安喂嗨呀啦哇耶棒赞了吧呢吗！!。.,，~～\s]*$"
)
_ANSWER_START = re.compile(
    r"^(?:yes|yeah|yep|no|nope|nah|sure|definitely|maybe|probably|not really|of course|"
    r"sometimes|never|always|usually|once|twice|是|不是|对|不对|没有|有|嗯|会|不会|偶尔|经常)\b",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|im|my|me|mine|we|our|us)\b|[我咱]", re.I)
_ACK_EN = frozenset(
    [
        "ok",
        "okay",
        "k",
        "kk",
        "thanks",
        "thank",
        "you",
        "thx",
        "ty",
        "cool",
        "great",
        "nice",
        "sure",
        "alright",
        "got",
        "it",
        "sounds",
        "good",
        "perfect",
        "lol",
        "haha",
        "fine",
        "will",
        "do",
        "noted",
    ]
)
_SENTENCE_END = re.compile(r"[.!?。！？](?=\s|$)")
_SPACES = re.compile(r"\s+")


def content_terms(text: str) -> list[str]:
    """The terms of ``text`` that say something: stop words and chat fillers removed."""
    return [
        t
        for t in tokenize(text)
        if t not in STOP_WORDS
        and t not in _FILLER_EN
        and not (len(t) <= 2 and all(ch in _FILLER_ZH or ch in CJK_STOP_CHARS for ch in t))
    ]


def is_small_talk(text: str) -> bool:
    """True for acknowledgements, greetings and fillers: nothing worth remembering."""
    stripped = text.strip()
    if not stripped or _ACK_ZH.match(stripped):
        return True
    terms = len(content_terms(stripped))
    return terms < (1 if _FIRST_PERSON.search(stripped) else MIN_CONTENT_TERMS)


def is_acknowledgement(text: str) -> bool:
    """ "ok", "thanks", "好的": an answer that says nothing, even to a question."""
    words = re.findall(r"[a-z']+", text.casefold())
    return _ACK_ZH.match(text.strip()) is not None or (
        bool(words) and all(w in _ACK_EN for w in words)
    )


def _clip(text: str, limit: int) -> str:
    text = _SPACES.sub(" ", text).strip()
    if len(text) <= limit:
        return text
    cut = text[:limit]
    ends = [m.end() for m in _SENTENCE_END.finditer(cut)]
    return cut[: ends[-1]] if ends and ends[-1] > limit // 2 else cut.rstrip() + "…"


def ground(text: str, at: datetime) -> str:
    """``text`` with relative dates made absolute; stored times are naive UTC."""
    return ground_dates(text, at if at.tzinfo else at.replace(tzinfo=UTC))


def _is_question(message: SessionMessage) -> bool:
    return message.role == "assistant" and message.content.rstrip().endswith(("?", "？"))


def _is_answer(text: str) -> bool:
    words = text.split()
    short = len(words) <= MAX_ANSWER_WORDS if not is_mostly_cjk(text) else len(text) <= 20
    return short and (_ANSWER_START.match(text.strip()) is not None or len(words) <= 3)


def _who(message: SessionMessage, chinese: bool) -> str:
    if message.speaker:
        return message.speaker
    return "用户" if chinese else "The user"


def _line(who: str, at: datetime, text: str, chinese: bool, question: str | None = None) -> str:
    day = display_date_zh(at) if chinese else display_date(at)
    if question is None:
        return f"{who}（{day}）：{text}" if chinese else f"{who} ({day}): {text}"
    if chinese:
        return f"{who}（{day}）被问到“{question}”时回答：{text}"
    return f'{who} ({day}), asked "{question}", answered: {text}'


def episode_of(message: SessionMessage, previous: SessionMessage | None) -> Candidate | None:
    """The episode of one user turn, or None when it is small talk."""
    text = _SPACES.sub(" ", message.content).strip()
    if not text:
        return None
    chinese = is_mostly_cjk(text)
    grounded = _clip(ground(text, message.created_at), MAX_EPISODE_CHARS)
    who = _who(message, chinese)
    if previous is not None and _is_question(previous) and _is_answer(text):
        if is_acknowledgement(text):
            return None
        question = _clip(ground(previous.content, previous.created_at), MAX_QUESTION_CHARS)
        content = _line(who, message.created_at, grounded, chinese, question)
        sources: tuple[str, ...] = (previous.event_id, message.event_id)
    elif is_small_talk(text):
        return None
    else:
        content = _line(who, message.created_at, grounded, chinese)
        sources = (message.event_id,)
    return Candidate(
        content=content,
        memory_type="text_mem",
        scope="user",
        importance=EPISODE_IMPORTANCE,
        category="episode",
        source_event_ids=sources,
        kind="episode",
        occurred_at=message.created_at,
    )


def select_episodes(messages: Sequence[SessionMessage]) -> list[Candidate]:
    """One episode per new user turn that carries content, oldest first."""
    out: list[Candidate] = []
    previous: SessionMessage | None = None
    for message in messages:
        if message.new and message.role == "user":
            episode = episode_of(message, previous)
            if episode is not None:
                out.append(episode)
        previous = message
    return out
