"""Episodes: what was said that carries content, kept as one dated, attributed line: each new
user turn, and each assistant turn that tells the user something to keep (names, numbers, a
list, a recommendation). Why it works this way: docs/design/episodes.md."""

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


_LIST_ITEM = re.compile(r"^\s*(?:\d{1,3}[.)]|[-*•+])\s+(.+)$")
_MARKUP = re.compile(r"[*_`#>]+")
_HEAD_END = re.compile(r":\s|\s[-–—]\s|(?<=[.!?])\s")
_NAME = re.compile(r"(?<=[a-z,;:] )[A-Z][\w'&.-]+|\d")
_RECOMMEND = re.compile(
    r"\b(?:recommend|suggest|try|consider|check out|visit|go with|opt for|remind|reminder|"
    r"I'll|I will|I've (?:added|booked|scheduled|set|noted))\b",
    re.I,
)
_AFTER_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+")
MAX_LIST_HEAD_CHARS = 120
MAX_LEAD_CHARS = 200


def _head(item: str) -> str:
    """A list item's head: its bold title or the part before its colon or first sentence."""
    item = _MARKUP.sub("", item).strip()
    cut = _HEAD_END.search(item)
    head = item[: cut.start()] if cut and cut.start() > 2 else item
    return _clip(head.rstrip(" :.,;"), MAX_LIST_HEAD_CHARS)


def _informative(sentence: str) -> bool:
    return bool(_NAME.search(sentence) or _RECOMMEND.search(sentence))


def assistant_episode(message: SessionMessage) -> Candidate | None:
    """What an assistant turn told the user, as one dated, attributed line: its opening
    sentence and the heads of its list items, or without a list its sentences with a name, a
    number or a recommendation; None when it has none of these (small talk, a question back,
    a plain explanation)."""
    lines = [_MARKUP.sub("", line).strip() for line in message.content.splitlines()]
    lines = [line for line in lines if line]
    items = [i for i, line in enumerate(lines) if _LIST_ITEM.match(line)]
    heads = [h for i in items if (h := _head(_LIST_ITEM.match(lines[i]).group(1)))]  # type: ignore[union-attr]
    if len(heads) >= 2:
        opening = _SENTENCE_END.split(" ".join(lines[: items[0]]), maxsplit=1)[0].strip()
        opening = _clip(opening, MAX_LEAD_CHARS).rstrip(" :")
        body = f"{opening}: {'; '.join(heads)}" if opening else "; ".join(heads)
    else:
        sentences = [s.strip() for s in _AFTER_SENTENCE.split(" ".join(lines)) if s.strip()]
        # A question back tells the user nothing.
        kept = [s for s in sentences if _informative(s) and not s.endswith(("?", "？"))]
        body = " ".join(kept)
        if not kept or is_small_talk(body):
            return None
    chinese = is_mostly_cjk(message.content)
    who = "助手告诉用户" if chinese else "The assistant told the user"
    text = _clip(ground(body, message.created_at), MAX_EPISODE_CHARS)
    return Candidate(
        content=_line(who, message.created_at, text, chinese),
        memory_type="text_mem",
        scope="user",
        importance=EPISODE_IMPORTANCE,
        category="episode",
        source_event_ids=(message.event_id,),
        kind="episode",
        occurred_at=message.created_at,
    )


def select_episodes(messages: Sequence[SessionMessage]) -> list[Candidate]:
    """One episode per new user turn that carries content, and per new assistant turn that
    told the user something to keep, oldest first."""
    out: list[Candidate] = []
    previous: SessionMessage | None = None
    for message in messages:
        episode: Candidate | None = None
        if message.new and message.role == "user":
            episode = episode_of(message, previous)
        elif message.new and message.role == "assistant":
            episode = assistant_episode(message)
        if episode is not None:
            out.append(episode)
        previous = message
    return out
