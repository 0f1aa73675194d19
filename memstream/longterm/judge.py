"""The judge stage: which information of a session is worth remembering long-term.

``Judge.judge`` asks an OpenAI-compatible model (``LLMClient``) with the prompt below and parses
its JSON with ``parse_judge_output``, which repairs what it can (code fences, a bare list,
missing or unknown fields, out-of-range importance, unknown event ids). When there is no model,
or it fails (error, timeout, empty or malformed reply), ``rule_based_judge`` proposes the
memories instead: regular expressions over the new user messages, in English and Chinese, that
rewrite first-person statements ("I live in Paris", "我住在上海") into third-person memories
("The user lives in Paris.", "用户住在上海。"). The judge never raises.

Only messages flagged ``new`` are judged; the earlier ones are context for the model.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from prometheus_client import Counter

from memstream.errors import JudgeOutputError, LLMError
from memstream.llm import LLMClient
from memstream.longterm.models import (
    IMPORTANCE_RANGES,
    MAX_CONTENT_CHARS,
    Candidate,
    Category,
    Scope,
    SessionMessage,
)
from memstream.memory import MEMORY_TYPES, MemoryType
from memstream.text.scripts import has_han

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

CATEGORIES: tuple[Category, ...] = (
    "preference",
    "personal_fact",
    "plan",
    "relationship",
    "instruction",
)
SCOPES: tuple[Scope, ...] = ("user", "agent")
NEW_MARK = "[[NEW]"
MAX_TOKENS = 1500
# What the prompt shows of a session: each message cut, the oldest context dropped first.
MAX_MESSAGE_CHARS = 2000
MAX_CONTEXT_CHARS = 24000
# The rules look at this much of one message (regular expressions on bounded input).
MAX_RULE_CHARS = 8000


# --- the prompt -------------------------------------------------------------------------------


def _range(category: Category) -> str:
    low, high = IMPORTANCE_RANGES[category]
    return f"{low}-{high}"


SYSTEM_PROMPT = f"""\
You are the memory judge of a multi-agent platform. You read a conversation between a user \
and an AI agent and decide which information is worth remembering long-term, so that agents \
can serve this user better in future conversations.

WHAT TO JUDGE
- Only the messages marked {NEW_MARK} are to be judged. Earlier messages (without the mark) \
are context: use them to understand the new messages (pronouns, what "it" or "there" refers \
to), but never extract a memory that only they contain.
- Each message is shown as `{NEW_MARK} (event_id) role: content` or `(event_id) role: content`.
- Remember what the user states about themselves, or what the user confirms. What the \
assistant says is a memory only when the user agreed with or asked for it.

CATEGORIES (with their importance range, 1 = trivial, 10 = essential)
- "preference" ({_range("preference")}): likes, dislikes, tastes, favourites, habits. \
"The user loves spicy food."
- "personal_fact" ({_range("personal_fact")}): name, age, home, origin, job, studies, \
health and diet (allergies, vegetarian), languages, pets, possessions. \
"The user lives in Paris." "The user is allergic to peanuts."
- "plan" ({_range("plan")}): intentions, appointments, trips, goals, with their date when \
given. "The user plans to visit Tokyo in May 2026."
- "relationship" ({_range("relationship")}): family, partner, friends, colleagues, pets and \
facts about them. "The user's sister is called Anna."
- "instruction" ({_range("instruction")}): how the user wants to be served: answer language, \
length, format, tone, what to always or never do, how to address the user. \
"The user wants answers as short bullet points."
Use the upper part of a range for explicit, durable, strongly stated information, the lower \
part for weak, passing or uncertain signals.

SCOPE
- "user": a stable fact about the user that ANY agent may use (name, home, job, family, \
tastes, plans).
- "agent": how THIS agent should work with this user: instructions, conventions, feedback on \
its answers, agreed formats and workflows. Instructions are almost always "agent".

MEMORY TYPE
- "text_mem": facts and events.
- "pref_mem": preferences and instructions.
- "skill_mem": know-how the agent learned for this user (a procedure or approach that worked).
- "tool_mem": tool-use experience (which tool, parameters or sources worked or failed).

HOW TO WRITE A MEMORY
- Third person: "The user ..." (in Chinese: "用户……"), never "I" or "you".
- In the language of the conversation.
- Self-contained: resolve pronouns and references, include the names, places and dates \
needed to understand it alone.
- One piece of information per memory, at most {MAX_CONTENT_CHARS} characters.
- source_event_ids: the event ids (shown in parentheses) of the {NEW_MARK} messages the \
memory comes from.

DO NOT REMEMBER
- Greetings, thanks, small talk, questions the user asks, one-off requests about the current \
task, hypotheticals ("if I were ..."), jokes, or anything already obvious from the context.
- Secrets: passwords, API keys, card or account numbers, one-time codes.

OUTPUT
Strict JSON only, no prose and no markdown:
{{"memories": [{{"content": "...", "category": "...", "memory_type": "...", "scope": "...", \
"importance": 1, "source_event_ids": ["..."]}}]}}
When nothing is worth remembering, answer {{"memories": []}}.

EXAMPLE
(e1) assistant: Hi! How can I help?
{NEW_MARK} (e2) user: I moved to Berlin last month. Please always answer in German.
{NEW_MARK} (e3) user: Thanks!
->
{{"memories": [{{"content": "The user moved to Berlin.", "category": "personal_fact", \
"memory_type": "text_mem", "scope": "user", "importance": 8, "source_event_ids": ["e2"]}}, \
{{"content": "The user wants the agent to always answer in German.", "category": \
"instruction", "memory_type": "pref_mem", "scope": "agent", "importance": 9, \
"source_event_ids": ["e2"]}}]}}
"""


def _message_line(message: SessionMessage) -> str:
    text = message.content.strip().replace(NEW_MARK, "[NEW]")
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS] + " ..."
    # Continuation lines are indented so that every message starts a line of its own.
    text = "\n    ".join(line.rstrip() for line in text.splitlines())
    mark = f"{NEW_MARK} " if message.new else ""
    return f"{mark}({message.event_id}) {message.role}: {text}"


def build_prompt(
    messages: Sequence[SessionMessage], agent_id: str | None = None
) -> list[dict[str, str]]:
    """The chat messages asking the model to judge ``messages`` (system + user)."""
    lines = [_message_line(m) for m in messages]
    # Over budget: drop the oldest context messages first, never a new one.
    total = sum(len(line) + 1 for line in lines)
    keep = [True] * len(lines)
    for i, message in enumerate(messages):
        if total <= MAX_CONTEXT_CHARS:
            break
        if not message.new:
            keep[i] = False
            total -= len(lines[i]) + 1
    shown = [line for line, kept in zip(lines, keep, strict=True) if kept]
    omitted = len(lines) - len(shown)
    header = [
        f"Agent: {agent_id}" if agent_id else "Agent: (none)",
        f"Judge only the messages marked {NEW_MARK}; the others are context.",
    ]
    if omitted:
        header.append(f"({omitted} older context messages omitted)")
    body = "\n".join(header) + "\n\nConversation (oldest first):\n" + "\n".join(shown)
    body += '\n\nAnswer with the JSON object {"memories": [...]} only.'
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": body},
    ]


# --- parsing the model's answer -------------------------------------------------------------

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.S)
_LIST_KEYS = ("memories", "candidates", "items", "results", "facts")


def _default_memory_type(category: Category) -> MemoryType:
    return "pref_mem" if category in ("preference", "instruction") else "text_mem"


def _default_scope(category: Category) -> Scope:
    return "agent" if category == "instruction" else "user"


def _midpoint(category: Category) -> int:
    low, high = IMPORTANCE_RANGES[category]
    return (low + high + 1) // 2


def cut_content(text: str, limit: int = MAX_CONTENT_CHARS) -> str:
    """``text`` with collapsed whitespace, cut to ``limit`` characters at a word boundary
    when there is one in the second half."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-")


def _loads(text: str) -> Any:
    stripped = text.strip().lstrip("\ufeff")
    fenced = _FENCE.search(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    elif stripped.startswith("```"):
        # An unterminated fence.
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    # Prose around the JSON: try the outermost object, then the outermost list.
    for open_, close in (("{", "}"), ("[", "]")):
        start, end = stripped.find(open_), stripped.rfind(close)
        if 0 <= start < end:
            try:
                return json.loads(stripped[start : end + 1])
            except ValueError:
                continue
    raise JudgeOutputError(f"the judge answered no JSON: {_snippet(text)!r}")


def _snippet(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def _items_of(data: Any) -> list[Any]:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in _LIST_KEYS:
            if key in data:
                value = data[key]
                if value is None:
                    return []
                if isinstance(value, list):
                    return value
                if isinstance(value, dict):
                    return [value]
                raise JudgeOutputError(f"the judge's {key!r} is a {type(value).__name__}")
        if any(k in data for k in ("content", "memory", "text")):
            return [data]
    raise JudgeOutputError(f"the judge answered JSON without a memories list: {type(data)}")


def _choice(value: Any, allowed: Sequence[str]) -> str | None:
    if not isinstance(value, str):
        return None
    key = value.strip().lower().replace("-", "_").replace(" ", "_")
    return key if key in allowed else None


def _importance(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return default
    else:
        return default
    if number != number:  # NaN
        return default
    return max(1, min(10, round(number)))


def _event_ids(value: Any, allowed: Sequence[str]) -> tuple[str, ...]:
    raw: list[Any]
    if isinstance(value, list | tuple):
        raw = list(value)
    elif isinstance(value, str | int) and not isinstance(value, bool):
        raw = [value]
    else:
        raw = []
    known = set(allowed)
    out: list[str] = []
    for item in raw:
        if isinstance(item, bool) or not isinstance(item, str | int):
            continue
        key = str(item).strip().strip("()[]").strip()
        if key.startswith("[NEW]"):
            key = key[5:].strip().strip("()").strip()
        if key in known and key not in out:
            out.append(key)
    return tuple(out) if out else tuple(allowed)


def parse_judge_output(text: str, new_messages: Sequence[SessionMessage]) -> list[Candidate]:
    """The candidates of a judge model's answer; raises ``JudgeOutputError`` when it is not
    JSON or has no usable shape. Items that cannot be used are dropped, missing or unknown
    fields take their defaults."""
    data = _loads(text)
    items = _items_of(data)
    new_ids = [m.event_id for m in new_messages if m.new] or [m.event_id for m in new_messages]
    out: list[Candidate] = []
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, dict):
            continue
        raw = item.get("content", item.get("memory", item.get("text")))
        if not isinstance(raw, str):
            continue
        content = cut_content(raw)
        if not content or content.casefold() in seen:
            continue
        category: Category = _choice(item.get("category"), CATEGORIES) or "personal_fact"  # type: ignore[assignment]
        memory_type: MemoryType = _choice(
            item.get("memory_type", item.get("type")), MEMORY_TYPES
        ) or _default_memory_type(category)  # type: ignore[assignment]
        scope: Scope = _choice(item.get("scope"), SCOPES) or _default_scope(category)  # type: ignore[assignment]
        importance = _importance(item.get("importance"), _midpoint(category))
        sources = _event_ids(item.get("source_event_ids", item.get("event_ids")), new_ids)
        seen.add(content.casefold())
        out.append(Candidate(content, memory_type, scope, importance, category, sources))
    return out


# --- the rule-based judge ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Hit:
    core: str  # the memory without its final punctuation
    category: Category
    importance: int
    zh: bool = False


_Rule = tuple[re.Pattern[str], Callable[[re.Match[str], int], "_Hit | None"]]

_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "＇": "'", "`": "'"})
_CODE_BLOCK = re.compile(r"```.*?(?:```|$)", re.S)
_ABBREVIATIONS = ("mr", "mrs", "ms", "dr", "st", "jr", "sr", "prof", "e.g", "i.e", "etc", "vs")
_TRAILING = re.compile(r"[\s.,;:!?…~\"'”“)\]}*_。！？，；：、）】」』-]+$")
_EMOTICON = re.compile(r"\s*(?:[:;=]-?[)(DPp]|<3|\^_?\^)+\s*$")
_EN_TAIL = re.compile(
    r"(?:,?\s+(?:too|as\s+well|lol|haha+|hehe|though|btw|anyway|anyways|a\s+lot|"
    r"so\s+much|very\s+much|by\s+the\s+way|actually|for\s+sure|:\))\b)+$",
    re.I,
)
_ZH_TAIL = re.compile(r"[啊呀哦啦哈嘛喔噢呐哟咯~～]+$")


def _clean(text: str) -> str:
    """A capture without trailing punctuation, emoticons and filler words."""
    text = " ".join(text.split())
    for _ in range(3):
        before = text
        text = _EMOTICON.sub("", text)
        text = _TRAILING.sub("", text)
        text = _EN_TAIL.sub("", text)
        text = _ZH_TAIL.sub("", text)
        if text == before:
            break
    return text.strip()


def _finish(hit: _Hit) -> str:
    core = _clean(hit.core)
    if hit.zh:
        return cut_content(core, MAX_CONTENT_CHARS - 1) + "。"
    core = core[:1].upper() + core[1:]
    return cut_content(core, MAX_CONTENT_CHARS - 1) + "."


def _clamp(category: Category, importance: int) -> int:
    low, high = IMPORTANCE_RANGES[category]
    return max(low, min(high, importance))


# --- English --------------------------------------------------------------------------------

_I_AM = r"i(?:'m|\s+am|m)"
_ADV = (
    r"(?P<adv>(?:(?:really|also|actually|truly|absolutely|totally|just|still|definitely|"
    r"genuinely|kind\s+of|kinda|sort\s+of|do|generally|usually|honestly|quite|so|much|"
    r"deeply|seriously|always)\s+)*)"
)
_STRONG = re.compile(r"\b(?:really|absolutely|truly|totally|definitely|deeply|seriously|so)\b")
_MONTH_NAMES = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december)"
)
_MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_DAYS = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_SEASONS = r"(?:summer|winter|spring|autumn|fall|holidays?|vacation)"
_NUMBER_WORDS = r"(?:a\s+few|a\s+couple\s+of|\d+|two|three|four|five|six|seven|eight|nine|ten)"
_DATE_EN = (
    r"(?:(?:the\s+day\s+after\s+)?tomorrow(?:\s+(?:morning|afternoon|evening|night))?|tonight|"
    r"later\s+today|this\s+(?:morning|afternoon|evening|weekend|week|month|year|"
    rf"{_DAYS}|{_SEASONS})|next\s+(?:week|month|year|weekend|{_DAYS}|{_SEASONS})|"
    rf"(?:on\s+)?{_MONTHS}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?|"
    rf"(?:on\s+)?(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)?\s+of\s+{_MONTHS}(?:,?\s+\d{{4}})?|"
    rf"(?:in\s+)?(?:early\s+|mid[-\s]|late\s+)?(?<![a-z]){_MONTH_NAMES}\s+\d{{4}}|"
    rf"in\s+(?:early\s+|mid[-\s]|late\s+)?{_MONTH_NAMES}|"
    rf"in\s+{_NUMBER_WORDS}\s+(?:days|weeks|months|years)|in\s+a\s+(?:week|month|year)|"
    rf"\d{{4}}-\d{{2}}-\d{{2}}|(?:on\s+)?\d{{1,2}}/\d{{1,2}}(?:/\d{{2,4}})?|"
    rf"(?:on\s+|every\s+)?{_DAYS}s?|this\s+coming\s+{_DAYS}|"
    r"at\s+\d{1,2}(?::\d{2})?\s*(?:am|pm)|in\s+20\d{2}|by\s+the\s+end\s+of\s+"
    r"(?:the\s+)?(?:week|month|year))"
)
_HAS_DATE_EN = re.compile(rf"\b{_DATE_EN}\b", re.I)
# Past time expressions: only to keep "Yesterday, I went ..." in one clause (never a plan).
_PAST_DATE_EN = (
    r"(?:yesterday(?:\s+(?:morning|afternoon|evening))?|last\s+night|the\s+other\s+day|"
    rf"(?:this\s+)?past\s+(?:week|weekend|month|year|{_DAYS})|"
    rf"last\s+(?:week|weekend|month|year|time|{_DAYS}|{_SEASONS}|{_MONTH_NAMES})|"
    r"earlier\s+(?:today|this\s+(?:week|month|year))|recently|lately|over\s+the\s+weekend|"
    rf"(?:a|{_NUMBER_WORDS})\s+(?:days?|weeks?|months?|years?)\s+ago|a\s+while\s+ago)"
)
_ANY_DATE_EN = rf"(?:{_DATE_EN}|{_PAST_DATE_EN})"
_LEADING_DATE_EN = re.compile(rf"^(?P<date>{_ANY_DATE_EN})\s*,?\s+(?P<rest>(?:i|we|my)\b.*)$", re.I)
_FILLER_EN = re.compile(
    r"^(?:(?:oh|ah|well|ok|okay|so|also|actually|btw|by\s+the\s+way|anyway|anyways|and|but|"
    r"yes|yeah|yep|yup|no|nope|hi|hello|hey|fyi|just\s+so\s+you\s+know|you\s+know|"
    r"honestly|basically|um+|uh+|hmm+|sure|right|plus|oh\s+and|just\s+fyi|"
    r"for\s+the\s+record|for\s+context|to\s+be\s+honest|tbh)\b[,!.:]?\s*)+",
    re.I,
)
_QUESTION_START_EN = re.compile(
    r"^(?:do|does|did|can|could|would|will|shall|should|is|are|am|was|were|have|has|had|"
    r"what|what's|whats|where|where's|when|why|who|who's|whom|whose|which|how|how's|may|"
    r"might|isn't|aren't|doesn't|didn't|won't|wouldn't|can't|couldn't|shouldn't|"
    r"don't\s+you|any\s+idea|is\s+there|are\s+there)\b",
    re.I,
)
_HYPOTHETICAL_EN = re.compile(
    r"\b(?:if|would|might|suppose|supposing|imagine|hypothetically|unless|wish|whether)\b",
    re.I,
)
_WOULD_LIKE = re.compile(r"\bwould\s+(?:like|love|prefer|rather|appreciate)\b", re.I)
_CLAUSE_SPLIT_EN = re.compile(
    r",?\s+(?:and|but|so|plus|also|while|whereas)\s+"
    r"(?=(?:i|i'm|i've|i'd|im|my|we|we've|we're)\b(?!\s+(?:are|were|have|both|'ve|'re)\b))"
    r"|[,:]\s*(?=(?:i|i'm|i've|im|my|we|we've|we're)\b)"
    r"|\s+-+\s+",
    re.I,
)
_PRONOUN_ONLY = re.compile(
    r"^(?:it|this|that|these|those|them|him|her|you|so|too|one|ones|that\s+one|this\s+one|"
    r"it\s+here|the\s+idea|the\s+same|what\s+you\s+said|everything|nothing|all|both|"
    r"either|neither|something|anything|some|any|much|more|a\s+lot|lots)$",
    re.I,
)
_MENTIONS_YOU = re.compile(r"\b(?:you|your|yours|you're|you've|you'll)\b", re.I)
_ABOUT_ANSWERS = re.compile(
    r"\b(?:answers?|responses?|replies|reply|explanations?|summar(?:y|ies)|bullet\s+points?|"
    r"code\s+(?:examples?|snippets?|samples?)|examples|emojis?|tone|formatting|format|"
    r"markdown|tables|jargon|small\s+talk)\b",
    re.I,
)
_REL_EN = (
    r"(?:wife|husband|partner|spouse|fianc[ée]e?|girlfriend|boyfriend|sons?|daughters?|kids?|"
    r"children|child|bab(?:y|ies)|mother|mom|mum|father|dad|parents|brothers?|sisters?|"
    r"siblings?|grandmother|grandma|grandfather|grandpa|grandparents|uncle|aunt|cousin|"
    r"nephew|niece|friends?|boss|manager|colleagues?|co-?workers?|roommate|flatmate|"
    r"neighbou?rs?|dogs?|cats?|pupp(?:y|ies)|kittens?|pets?|twins?|stepson|stepdaughter|"
    r"in-laws?|mother-in-law|father-in-law)"
)
_HAS_REL_EN = re.compile(rf"\b{_REL_EN}\b", re.I)
_CLOSE_REL = re.compile(
    r"^(?:wife|husband|partner|spouse|fianc|girlfriend|boyfriend|son|daughter|kid|child|"
    r"bab|twin)",
    re.I,
)
_FAMILY_REL = re.compile(
    r"^(?:mother|mom|mum|father|dad|parent|brother|sister|sibling|grand|dog|cat|pupp|kitten|"
    r"pet)",
    re.I,
)

_FIRST_PERSON = re.compile(
    r"\b(?:i'm|im|i\s+am|i've|i'll|i'd|i\s+was|i|me|my|mine|myself)\b"
    r"|\b(?:you're|you\s+are|your|yours|yourself|you)\b",
    re.I,
)
_THIRD = {
    "i'm": "they are",
    "im": "they are",
    "i am": "they are",
    "i've": "they have",
    "i'll": "they will",
    "i'd": "they would",
    "i was": "they were",
    "i": "they",
    "me": "them",
    "my": "their",
    "mine": "theirs",
    "myself": "themselves",
}
_THIRD_INSTRUCTION = {
    "i'm": "the user is",
    "im": "the user is",
    "i am": "the user is",
    "i've": "the user has",
    "i'll": "the user will",
    "i'd": "the user would",
    "i was": "the user was",
    "i": "the user",
    "me": "the user",
    "my": "the user's",
    "mine": "the user's",
    "myself": "the user",
    "you're": "it is",
    "you are": "it is",
    "your": "its",
    "yours": "its own",
    "yourself": "itself",
    "you": "the agent",
}


def _third_en(text: str, *, instruction: bool = False) -> str:
    """``text`` with the first person (and, for instructions, the second) rewritten."""
    table = _THIRD_INSTRUCTION if instruction else _THIRD

    def swap(m: re.Match[str]) -> str:
        word = m.group(0)
        key = " ".join(word.lower().split())
        return table.get(key, word)

    return _FIRST_PERSON.sub(swap, _clean(text))


def _useful(text: str) -> bool:
    text = _clean(text)
    return len(text) >= 2 and not _PRONOUN_ONLY.match(text)


_NAME_STOP = re.compile(
    r"^(?:back|later|tomorrow|when|if|at|on|anytime|now|again|please|asap|sometime|soon|"
    r"tonight|in|after|before|whenever|maybe|a|an|the|not|so|too|to|from|by|it|that)\b",
    re.I,
)


def _name(text: str) -> str | None:
    """A person's name at the start of ``text`` (up to four words)."""
    text = re.split(r",|;|\s+(?:and|but|because|since|from|who|which)\s+|\s+-\s+", text)[0]
    words = _clean(text).split()[:4]
    if not words or _NAME_STOP.match(words[0]):
        return None
    name = " ".join(words)
    return name if re.search(r"\w", name) else None


def _conjugate(verb: str) -> str | None:
    """The third-person singular of a present-tense verb; None for a past form."""
    low = verb.lower()
    irregular = {"have": "has", "am": "is", "be": "is", "do": "does", "go": "goes"}
    past = {
        "are",
        "think",
        "guess",
        "mean",
        "believe",
        "feel",
        "hope",
        "know",
        "see",
        "was",
        "were",
        "went",
        "had",
        "did",
        "saw",
        "got",
        "made",
        "took",
        "came",
        "flew",
        "bought",
        "met",
        "left",
        "ate",
        "drank",
        "spent",
        "began",
        "gave",
        "told",
        "said",
        "thought",
        "found",
        "felt",
        "knew",
        "ran",
        "wrote",
        "read",
    }
    if low in irregular:
        return irregular[low]
    if low in past or low.endswith("ed") or not low.isalpha():
        return None
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(low) > 1 and low.endswith("y") and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _en(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I)


def _hit(core: str, category: Category, importance: int, *, zh: bool = False) -> _Hit:
    return _Hit(core, category, _clamp(category, importance), zh)


def _boost(hit: _Hit | None, by: int = 1) -> _Hit | None:
    if hit is None:
        return None
    return _Hit(hit.core, hit.category, _clamp(hit.category, hit.importance + by), hit.zh)


# English handlers: (match, depth) -> hit or None.


def _en_remember(m: re.Match[str], depth: int) -> _Hit | None:
    inner = m.group("x")
    found = _boost(_en_clause(inner, depth + 1)) if depth < 2 else None
    if found is not None:
        return found
    if not _useful(inner):
        return None
    return _hit(f"The user wants the agent to remember that {_third_en(inner)}", "instruction", 8)


_YOU_SHOULD = re.compile(
    r"^(?:(?:you\s+(?:should|must|will|can|need\s+to|have\s+to)|please|i\s+want\s+you\s+to|"
    r"i'd\s+like\s+you\s+to|i\s+would\s+like\s+you\s+to|can\s+you|could\s+you)\s+)+",
    re.I,
)


def _en_from_now_on(m: re.Match[str], depth: int) -> _Hit | None:
    inner = _YOU_SHOULD.sub("", m.group("x").strip(" ,"))
    if depth < 2:
        found = _en_clause(inner, depth + 1)
        if found is not None:
            return _boost(found)
    if not _useful(inner) or re.match(r"^i\b", inner, re.I):
        return None
    action = _third_en(inner, instruction=True)
    return _hit(f"The user wants the agent to {action} from now on", "instruction", 9)


def _en_call_me(m: re.Match[str], depth: int) -> _Hit | None:
    name = _name(m.group("x"))
    if name is None:
        return None
    return _hit(f"The user wants to be called {name}", "instruction", 8)


def _en_name(m: re.Match[str], depth: int) -> _Hit | None:
    name = _name(m.group("x"))
    if name is None:
        return None
    return _hit(f"The user's name is {name}", "personal_fact", 9)


def _en_keep_short(m: re.Match[str], depth: int) -> _Hit | None:
    obj = m.group("obj").lower()
    what = "answers" if obj in ("it", "things", "them", "your answers", "it all") else obj
    what = _third_en(what, instruction=True)
    always = 1 if m.group("always") else 0
    return _hit(
        f"The user wants the agent to keep {what} {_clean(m.group('x'))}",
        "instruction",
        8 + always,
    )


def _en_answer_in(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    adverb = (m.group("always") or "").lower()
    verb = m.group("verb").lower()
    prep = m.group("prep").lower()
    mode = f"{adverb} " if adverb else ""
    action = f"{mode}{verb} {prep} {_third_en(x, instruction=True)}"
    return _hit(f"The user wants the agent to {action}", "instruction", 9 if adverb else 8)


_SMALL_TALK_IMPERATIVE = re.compile(
    r"^(?:worry|mind|bother|mention\s+it|be\s+silly|be\s+sorry|thank\s+me|panic|stress|"
    r"get\s+me\s+wrong|judge|laugh|forget|hesitate)\b",
    re.I,
)


def _en_always_never(m: re.Match[str], depth: int) -> _Hit | None:
    word = m.group("word").lower()
    x = m.group("x")
    if not _useful(x) or _SMALL_TALK_IMPERATIVE.match(x) or re.match(r"^(?:i|we)\b", x, re.I):
        return None
    please = 1 if m.group("please") else 0
    action = _third_en(x, instruction=True)
    if word == "only":
        return _hit(f"The user wants the agent to only {action}", "instruction", 8 + please)
    return _hit(f"The user wants the agent to {word} {action}", "instruction", 9 + please)


def _en_dont(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful(x) or _SMALL_TALK_IMPERATIVE.match(x):
        return None
    please = 1 if m.group("please") else 0
    action = _third_en(x, instruction=True)
    return _hit(f"The user wants the agent not to {action}", "instruction", 8 + please)


def _en_want_you(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    action = _third_en(x, instruction=True)
    return _hit(f"The user wants the agent to {action}", "instruction", 8)


def _en_please_verb(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    verb = " ".join(m.group("verb").lower().split())
    action = _third_en(x, instruction=True)
    return _hit(f"The user wants the agent to {verb} {action}", "instruction", 7)


def _en_be_style(m: re.Match[str], depth: int) -> _Hit | None:
    return _hit(f"The user wants the agent to be {_clean(m.group('x'))}", "instruction", 7)


def _en_allergy(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    strong = 1 if re.search(r"\b(?:severely|very|deathly|highly)\b", m.group(0), re.I) else 0
    return _hit(f"The user is allergic to {_third_en(x)}", "personal_fact", 8 + strong)


def _en_favourite(m: re.Match[str], depth: int) -> _Hit | None:
    thing, value = _clean(m.group("thing")), m.group("x")
    if not _useful(value) or not thing:
        return None
    verb = m.group("verb").lower()
    verb = "is" if verb == "'s" else verb
    return _hit(
        f"The user's favourite {_third_en(thing)} {verb} {_third_en(value)}", "preference", 6
    )


_PREF_VERBS = {
    "love": ("loves", 7),
    "adore": ("adores", 7),
    "like": ("likes", 6),
    "enjoy": ("enjoys", 6),
    "prefer": ("prefers", 6),
    "hate": ("hates", 7),
    "loathe": ("hates", 7),
    "detest": ("hates", 7),
    "dislike": ("dislikes", 6),
    "can't stand": ("cannot stand", 7),
    "cannot stand": ("cannot stand", 7),
    "can not stand": ("cannot stand", 7),
    "don't like": ("does not like", 6),
    "do not like": ("does not like", 6),
    "dont like": ("does not like", 6),
    "don't really like": ("does not really like", 5),
    "do not really like": ("does not really like", 5),
    "don't enjoy": ("does not enjoy", 5),
    "do not enjoy": ("does not enjoy", 5),
    "dont enjoy": ("does not enjoy", 5),
    "don't love": ("does not love", 5),
    "do not love": ("does not love", 5),
}


def _en_preference(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful(x) or _MENTIONS_YOU.search(x):
        return None
    if re.match(r"^(?:the\s+idea|how|when|what|that|this|it|about)\b", x, re.I):
        return None
    verb = " ".join(m.group("verb").lower().split())
    word, importance = _PREF_VERBS.get(verb, ("likes", 6))
    if _STRONG.search(m.group("adv") or ""):
        importance += 1
    category: Category = "instruction" if _ABOUT_ANSWERS.search(x) else "preference"
    if category == "instruction":
        importance += 2
    return _hit(f"The user {word} {_third_en(x)}", category, importance)


def _en_fan(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful(x) or _MENTIONS_YOU.search(x):
        return None
    size = _clean(m.group("size") or "")
    return _hit(f"The user is a {size + ' ' if size else ''}fan of {_third_en(x)}", "preference", 6)


def _en_rather(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful(x) or _MENTIONS_YOU.search(x):
        return None
    return _hit(f"The user would rather {_third_en(x)}", "preference", 5)


def _en_status(m: re.Match[str], depth: int) -> _Hit | None:
    status = _clean(m.group("x"))
    rest = _third_en(m.group("rest") or "")
    diet = re.match(
        r"(?:vegetarian|vegan|pescatarian|lactose|gluten|celiac|coeliac|diabetic|"
        r"kosher|halal)",
        status,
        re.I,
    )
    text = f"The user is {m.group('art') or ''}{status}{' ' + rest if rest else ''}"
    return _hit(text, "personal_fact", 8 if diet else 7)


def _en_dont_eat(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    verb = " ".join(m.group("verb").lower().split())
    out = {"can't": "cannot", "cannot": "cannot", "can not": "cannot"}.get(verb, "does not")
    return _hit(f"The user {out} {m.group('eat').lower()} {_third_en(x)}", "personal_fact", 7)


def _en_age(m: re.Match[str], depth: int) -> _Hit | None:
    age = int(m.group("n"))
    if not 1 <= age <= 120:
        return None
    return _hit(f"The user is {age} years old", "personal_fact", 7)


def _en_moved(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    back = "back " if m.group("back") else ""
    origin = m.group("a")
    source = f"from {_third_en(origin)} " if origin else ""
    return _hit(f"The user moved {back}{source}to {_third_en(x)}", "personal_fact", 8)


def _en_moving(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    origin = m.group("a")
    source = f" from {_third_en(origin)}" if origin else ""
    return _hit(f"The user is moving{source} to {_third_en(x)}", "plan", 6)


def _en_from(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful(x) or _HAS_DATE_EN.match(x):
        return None
    return _hit(f"The user is from {_third_en(x)}", "personal_fact", 7)


def _en_born(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    return _hit(f"The user was born {m.group('prep').lower()} {_third_en(x)}", "personal_fact", 7)


def _en_work(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful(x) or _MENTIONS_YOU.search(x):
        return None
    prep = m.group("prep").lower()
    importance = 8 if prep in ("at", "for", "as", "in") else 7
    return _hit(f"The user works {prep} {_third_en(x)}", "personal_fact", importance)


def _en_speak(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful(x) or _MENTIONS_YOU.search(x):
        return None
    return _hit(f"The user speaks {_third_en(x)}", "personal_fact", 6)


_HAVE_EXCLUDE = re.compile(
    r"\b(?:question|questions|problem|problems|issue|issues|idea|ideas|bit|lot|feeling|doubt|"
    r"suggestion|request|bug|bugs|error|errors|minute|minutes|moment|second|quick|few|couple|"
    r"thought|favou?r|point|look|try|chance|clue|headache|cold|day|time|question\s+about)\b",
    re.I,
)


def _en_have(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    head = " ".join(x.split()[:3])
    if not _useful(x) or _HAVE_EXCLUDE.search(head) or _MENTIONS_YOU.search(x):
        return None
    text = f"The user has {_third_en(x)}"
    if _HAS_DATE_EN.search(x):
        return _hit(text, "plan", 6)
    if _HAS_REL_EN.search(head):
        return _hit(text, "relationship", 6)
    if re.search(r"\b(?:allerg|diabet|asthma|disease|disorder|condition)", x, re.I):
        return _hit(text, "personal_fact", 8)
    return _hit(text, "personal_fact", 6)


_PLAN_PHRASES = {
    "planning": "plans to",
    "plan": "plans to",
    "intending": "intends to",
    "intend": "intends to",
    "going": "plans to",
    "gonna": "plans to",
    "about": "is about to",
    "hoping": "hopes to",
    "hope": "hopes to",
    "want": "wants to",
    "aim": "aims to",
    "expect": "expects to",
    "need": "needs to",
    "will": "plans to",
    "'ll": "plans to",
    "shall": "plans to",
}
_CHAT_ACTIONS = re.compile(
    r"^(?:ask|tell|say|try|check|see|explain|show|think|answer|reply|respond|read|look|"
    r"share|send|paste|give|clarify|rephrase|test|be\s+right\s+back|brb|go\s+now|"
    r"leave\s+now|need|have\s+to|keep|let|get\s+back)\b",
    re.I,
)
_NOUN_START = re.compile(r"^(?:the|a|an|my|our|his|her|their|some|this|that)\b", re.I)


def _en_plan(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    verb = " ".join(m.group("verb").lower().split())
    dated = bool(_HAS_DATE_EN.search(x))
    if not _useful(x) or _MENTIONS_YOU.search(x):
        return None
    if verb in ("will", "'ll", "shall", "need", "expect") and not dated:
        return None
    if not dated and _CHAT_ACTIONS.match(x):
        return None
    action = _third_en(x)
    to = m.group("to")
    if verb == "going" and (not to or _NOUN_START.match(x) or x[:1].isupper()):
        if not dated:
            return None  # "I'm going home", "I'm going to the gym": passing, not a plan
        text = f"The user is going {'to ' if to else ''}{action}"
    elif not to and verb != "gonna":
        if verb in ("about", "hoping", "intending"):
            return None
        text = f"The user is {verb} {action}"
    else:
        text = f"The user {_PLAN_PHRASES.get(verb, 'plans to')} {action}"
    importance = 4 + (1 if verb in ("plan", "planning", "intend", "intending") else 0)
    importance += 2 if dated else 0
    return _hit(text, "plan", importance)


def _en_progressive(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _HAS_DATE_EN.search(x) or _MENTIONS_YOU.search(x):
        return None
    return _hit(f"The user is {_third_en(x)}", "plan", 6)


_REL_IMPORTANCE_NAMED = re.compile(r"^(?:named|called|'s\s+name|is\s+(?:named|called))", re.I)


def _en_relationship(m: re.Match[str], depth: int) -> _Hit | None:
    rest = m.group("rest")
    if not _useful(rest) or _MENTIONS_YOU.search(rest):
        return None
    rel = " ".join((m.group("adj") + m.group("rel")).split())
    if m.group("who"):
        rel = f"{rel} {m.group('who')}"
    rest = re.sub(r"^'s\b", "is", rest)
    named = m.group("named") or ""
    importance = 7 if _CLOSE_REL.match(m.group("rel")) else 6 if _FAMILY_REL.match(rel) else 5
    if named or _REL_IMPORTANCE_NAMED.match(rest):
        importance += 1
    return _hit(f"The user's {rel}{named} {_third_en(rest)}", "relationship", importance)


def _en_my_thing(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    thing = " ".join(m.group("thing").lower().split())
    return _hit(f"The user's {thing} {m.group('verb').lower()} {_third_en(x)}", "personal_fact", 7)


def _en_dated(m: re.Match[str], depth: int) -> _Hit | None:
    """Any first-person statement with a future date: "I fly to Rome on Monday"."""
    verb, rest = m.group("verb"), m.group("x")
    if not _HAS_DATE_EN.search(rest) or _MENTIONS_YOU.search(rest):
        return None
    third = _conjugate(verb)
    if third is None:
        return None
    return _hit(f"The user {third} {_third_en(rest)}", "plan", 5)


_NOT_NAMES = re.compile(
    r"^(?:Sorry|Fine|Good|Great|Okay|Ok|OK|Back|Here|Done|Ready|Not|So|Just|Also|Still|Glad|"
    r"Happy|Sad|Tired|Busy|Sure|Home|In|On|Out|Off|Afraid|Confused|Lost|Excited|Interested|"
    r"Curious|Serious|Kidding|Joking|Free|Available|Alright|Bored|Hungry|Sick|Late|Right|Wrong|"
    r"Always|Never|Very|Really|Pretty|The|A|An|English|French|German|Spanish|Italian|Chinese|"
    r"Japanese|Korean|American|British|Canadian|Australian|Indian|Russian|Dutch|Swiss|"
    r"Brazilian|Mexican|Irish|Scottish|Polish|Swedish|Norwegian|Danish|Finnish|Greek|"
    r"Turkish|Portuguese|Vietnamese|Thai|Muslim|Christian|Jewish|Buddhist|Hindu|Catholic)\b"
)


def _en_im_name(m: re.Match[str], depth: int) -> _Hit | None:
    name = m.group("x")
    if _NOT_NAMES.match(name):
        if re.match(r"^[A-Z][a-z]+(?:ese|ish|ian|an|ch|ss|ek|ai|ic|im|sh|lic|du)$", name):
            return _hit(f"The user is {name}", "personal_fact", 6)
        return None
    return _hit(f"The user's name is {name}", "personal_fact", 8)


def _en_we(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful(x) or _MENTIONS_YOU.search(x):
        return None
    rel = m.group("rel").lower()
    text = f"The user and their {rel} {_third_en(x)}"
    if _HAS_DATE_EN.search(x) or re.match(r"^(?:are|'re)\s+(?:going|planning)\b", x, re.I):
        return _hit(text.replace(" 're ", " are ").replace(" 've ", " have "), "plan", 6)
    return _hit(text.replace(" 're ", " are ").replace(" 've ", " have "), "relationship", 6)


def _en_hobby(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x").strip()
    if x and (not _useful(x) or _MENTIONS_YOU.search(x)):
        return None
    verb = _conjugate(m.group("verb").lower()) or m.group("verb")
    return _hit(f"The user {verb}{' ' + _third_en(x) if x else ''}", "preference", 5)


_DURATION = re.compile(
    r"\s+(?:for\s+(?:(?:the\s+)?(?:past|last)\s+)?(?:\w+\s+)?(?:years?|months?|weeks?|days?|"
    r"decades?|ages|a\s+while|a\s+long\s+time)|since\s+.+)$",
    re.I,
)


def _en_live_dispatch(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    x = _DURATION.sub("", _clean(x)) or x
    verb = (m.group("ing") or m.group("live") or "live").lower()
    phrase = {"based": "is based", "staying": "is staying"}.get(verb, "lives")
    return _hit(f"The user {phrase} in {_third_en(x)}", "personal_fact", 8)


def _en_study_dispatch(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful(x) or _MENTIONS_YOU.search(x):
        return None
    verb = " ".join((m.group("verb") or m.group("ing") or "study").lower().split())
    phrase = {
        "study": "studies",
        "studying": "studies",
        "studied": "studied",
        "major in": "majors in",
        "majoring in": "majors in",
        "majored in": "majored in",
        "graduated from": "graduated from",
        "learning": "is learning",
    }.get(verb, "studies")
    importance = 6 if verb == "learning" else 7
    return _hit(f"The user {phrase} {_third_en(x)}", "personal_fact", importance)


def _en_article(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful(x) or _MENTIONS_YOU.search(x) or len(x.split()) > 12:
        return None
    if _HAS_DATE_EN.search(x) and re.search(r"\b(?:meeting|appointment|trip|flight)\b", x, re.I):
        return _hit(f"The user has {_third_en(x)}", "plan", 6)
    return _hit(f"The user is {_third_en(x)}", "personal_fact", 7)


def _en_will_dispatch(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _HAS_DATE_EN.search(x) or not _useful(x) or _MENTIONS_YOU.search(x):
        return None
    if re.match(r"^(?:be\s+)?(?:back|right\s+back)\b", x, re.I):
        return None
    return _hit(f"The user plans to {_third_en(x)}", "plan", 6)


# Episodic events and activities: "I went to a support group yesterday", "We took the kids
# camping last weekend", "I've been reading 'Charlotte's Web'", "I'm painting a sunset".

_EP_PAST = (
    r"went|visited|attended|joined|started|began|finished|completed|made|painted|drew|wrote|"
    r"read|bought|got|adopted|took|ran|won|lost|met|signed\s+up\s+for|tried|learned|learnt|"
    r"found|saw|watched|played|baked|cooked|built|created|volunteered|travel+ed|hiked|"
    r"organi[sz]ed|hosted|received|celebrated|graduated|performed|recorded|published|"
    r"launched|taught|climbed|explored|planted|picked\s+up|gave|did|ate|sang|danced|"
    r"decided\s+to|signed"
)
_EP_PERFECT = (
    r"gone|been\s+to|visited|attended|joined|started|begun|finished|completed|made|painted|"
    r"drawn|written|read|bought|gotten|adopted|taken|run|won|lost|met|signed\s+up\s+for|"
    r"tried|learned|learnt|found|seen|watched|played|baked|cooked|built|created|"
    r"volunteered|travel+ed|hiked|organi[sz]ed|hosted|received|celebrated|graduated|"
    r"performed|recorded|published|launched|taught|climbed|explored|planted|picked\s+up|"
    r"given|done|decided\s+to|signed"
)
_EP_ADV = (
    r"(?P<adv>(?:(?:just|recently|finally|already|also|actually|really|even|once|first|"
    r"lately|literally|totally|officially|successfully|currently|now|still|ever|"
    r"kinda|sort\s+of|kind\s+of)\s+)*)"
)
_EP_KEEP_ADV = {"just", "recently", "finally", "already", "once", "first", "officially", "lately"}
_EP_KEEP_ADV |= {"currently", "now", "still", "successfully", "ever"}
_EP_SUBJECT = (
    r"(?P<subj>i|we|my\s+family(?:\s+and\s+i)?|my\s+(?P<rel>" + _REL_EN + r")\s+and\s+i|"
    r"(?P<name>(?-i:[A-Z][a-z]+))\s+and\s+i)"
)
# The activity verbs a progressive is not about: "I'm going home", "I've been thinking".
_EP_NOT_ING_WORDS = (
    "going gonna thinking feeling wondering hoping wishing wanting trying doing saying "
    "telling asking kidding joking getting being looking waiting talking planning "
    "meaning dying rooting counting missing"
)
_EP_NOT_ING = frozenset(_EP_NOT_ING_WORDS.split())
# Words that make no content of an object: pronouns, particles, times, vague words.
_EP_STOP_WORDS = (
    "the and but for with from into onto over after before back around away down off out "
    "along through about there here that this these those them they their theirs its it's "
    "one ones some something anything everything nothing thing things stuff lot lots well "
    "really very much more most too also just all any yesterday today tonight last week "
    "weeks weekend month months year years ago recently lately earlier now then again once "
    "day days night morning afternoon evening time times while alright okay fine good great "
    "nice home bit little few couple other another such what which who whom whose way "
    "him her his hers she our ours ourselves myself yourself you your yours"
)
_EP_STOP = frozenset(_EP_STOP_WORDS.split())
_EP_CUT = re.compile(
    r"\s*(?:[;(]|\s-+\s|—|–|(?:,|,?\s+(?:and|but|so|because|cause|since|as|which|where|"
    r"when|though|although|while|until|cuz))\s+(?:it|it's|its|this|that|they|they're|he|she|"
    r"there|everyone|everybody|you|people|we|we're)\b)",
    re.I,
)
# A date moved to the end of the clause ("Yesterday, I went ..."), kept when the object is cut.
_EP_LAST_DATE = re.compile(rf"\s(?P<date>{_ANY_DATE_EN})$", re.I)
_EP_OPEN_QUOTE = re.compile(r"(?<!\w)'(?=\w)")
_EP_CLOSE_QUOTE = re.compile(r"(?<=\w)'(?!\w)")
_EP_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?", re.I)
_EP_SMALL_TALK = re.compile(
    r"^(?:to\s+(?:say|admit|tell|go|run|leave|be|ask|know|thank)\b|a\s+(?:lot|bit|chance)\s+to\b|"
    r"my\s+(?:point|mind|breath)\b|wrong|right|lucky|it\b|what\s)",
    re.I,
)


def _ep_object(text: str) -> str | None:
    """The object phrase of an event, cut at the next clause; None when it says nothing."""
    text = _clean(text)
    cut = _EP_CUT.search(text)
    obj = _clean(text[: cut.start()] if cut else text)
    moved = _EP_LAST_DATE.search(text) if cut else None
    if moved and obj:
        obj = f"{obj} {moved.group('date')}"
    if not obj or _MENTIONS_YOU.search(obj) or _EP_SMALL_TALK.match(obj):
        return None
    if obj.count('"') % 2:
        obj = obj.replace('"', "")
    if len(_EP_OPEN_QUOTE.findall(obj)) > len(_EP_CLOSE_QUOTE.findall(obj)):
        obj = _EP_OPEN_QUOTE.sub("", obj)  # the closing quote was cut with the punctuation
    words = [w.lower() for w in _EP_WORD.findall(obj)]
    if not any(len(w) >= 3 and w not in _EP_STOP for w in words):
        return None
    return obj


def _en_episode(kind: str) -> Callable[[re.Match[str], int], _Hit | None]:
    """The handler of one tense of the episodic rules: past, perfect, perfect_ing or ing."""

    def handler(m: re.Match[str], depth: int) -> _Hit | None:
        verb = " ".join(m.group("verb").lower().split())
        if kind in ("perfect_ing", "ing") and (verb in _EP_NOT_ING or len(verb) < 5):
            return None
        obj = _ep_object(m.group("x"))
        if obj is None:
            return None
        plural = " ".join(m.group("subj").lower().split()) != "i"
        if m.group("name"):
            who = f"The user and {m.group('name')}"
        elif m.group("rel"):
            who = f"The user and their {m.group('rel').lower()}"
        else:
            who = "The user and their family" if plural else "The user"
        adv = "".join(f"{w} " for w in m.group("adv").lower().split() if w in _EP_KEEP_ADV)
        have, be = ("have", "are") if plural else ("has", "is")
        phrase = {
            "past": f"{adv}{verb}",
            "perfect": f"{have} {adv}{verb}",
            "perfect_ing": f"{have} {adv}been {verb}",
            "ing": f"{be} {adv}{verb}",
        }[kind]
        text = f"{who} {phrase} {_third_en(obj)}"
        if kind == "ing" and _HAS_DATE_EN.search(obj):
            return _hit(text, "plan", 6)  # "We're hosting a talent show next month"
        return _hit(text, "personal_fact", 6)

    return handler


_HAVE_EN = r"(?:'ve|\s+have)\s+"
_EP_RULES: list[_Rule] = [
    (
        _en(rf"^{_EP_SUBJECT}{_HAVE_EN}{_EP_ADV}been\s+(?P<verb>[a-z]+ing)\s+(?P<x>\S.*)"),
        _en_episode("perfect_ing"),
    ),
    (
        _en(rf"^{_EP_SUBJECT}{_HAVE_EN}{_EP_ADV}(?P<verb>{_EP_PERFECT})\s+(?P<x>\S.*)"),
        _en_episode("perfect"),
    ),
    (
        _en(
            rf"^{_EP_SUBJECT}(?:'m|'re|\s+am|\s+are|m)\s+{_EP_ADV}(?P<verb>[a-z]+ing)\s+"
            r"(?P<x>\S.*)"
        ),
        _en_episode("ing"),
    ),
    (
        _en(rf"^{_EP_SUBJECT}\s+{_EP_ADV}(?P<verb>{_EP_PAST})\s+(?P<x>\S.*)"),
        _en_episode("past"),
    ),
]


_SUBJ = r"^i\s+" + _ADV
_EN_RULES: list[_Rule] = [
    (
        _en(
            r"^(?:please\s+)?(?:remember|don't\s+forget|do\s+not\s+forget|keep\s+in\s+mind|"
            r"note|make\s+a\s+note)\s*(?:that|this)?\s*[:,]?\s+(?P<x>.+)"
        ),
        _en_remember,
    ),
    (
        _en(
            r"^(?:from\s+now\s+on|going\s+forward|in\s+(?:the\s+)?future|from\s+here\s+on(?:\s+out)?"
            r"|for\s+future\s+reference|henceforth)\s*,?\s*(?P<x>.+)"
        ),
        _en_from_now_on,
    ),
    (
        _en(
            r"^(?:(?:please|just|you\s+can|you\s+may|feel\s+free\s+to|everyone\s+calls\s+me\s+\w+"
            r"\s+so)\s+)*call\s+me\s+(?P<x>.+)"
        ),
        _en_call_me,
    ),
    (
        _en(
            rf"^(?:my\s+name\s+is|my\s+name's|my\s+names|{_I_AM}\s+called|i\s+go\s+by|"
            rf"the\s+name's|people\s+call\s+me|{_I_AM}\s+named)\s+(?P<x>.+)"
        ),
        _en_name,
    ),
    (
        re.compile(r"^(?i:i'm|i\s+am|im)\s+(?P<x>[A-Z][a-z'-]+(?:\s+[A-Z][a-z'-]+){0,2})$"),
        _en_im_name,
    ),
    (
        _en(
            r"^(?:please\s+)?(?P<always>always\s+)?keep\s+(?P<obj>it|it\s+all|things|them|answers|"
            r"your\s+answers|responses|your\s+responses|replies|your\s+replies|explanations|"
            r"the\s+answers)\s+(?P<x>(?:very\s+|really\s+|super\s+)?(?:short|brief|concise|simple|"
            r"casual|formal|friendly|professional|technical|under\s+\S+\s+\w+|to\s+the\s+point)"
            r".*)"
        ),
        _en_keep_short,
    ),
    (
        _en(
            r"^(?:(?:please|kindly|can\s+you|could\s+you)\s+)?(?:(?P<always>always|only)\s+)?"
            r"(?P<verb>answer|reply|respond|write|talk|speak|communicate|explain\s+things|"
            r"format\s+(?:your\s+)?(?:answers|responses|code|replies))(?:\s+to\s+me)?\s+"
            r"(?P<prep>in|using|with|as)\s+(?P<x>.+)"
        ),
        _en_answer_in,
    ),
    (_en(r"^(?P<please>please\s+)?(?P<word>always|never|only)\s+(?P<x>.+)"), _en_always_never),
    (
        _en(r"^(?P<please>please\s+)?(?:don't|do\s+not|dont|stop|quit)\s+(?P<x>.+)"),
        _en_dont,
    ),
    (
        _en(
            r"^i\s+(?:really\s+)?(?:want|need|prefer|expect|'d\s+like|would\s+like|'d\s+prefer|"
            r"would\s+prefer)\s+you\s+to\s+(?P<x>.+)"
        ),
        _en_want_you,
    ),
    (
        _en(
            r"^(?:i'd\s+like\s+you\s+to\s+|i'd\s+prefer\s+you\s+to\s+|please\s+)"
            r"(?P<verb>use|avoid|include|format|address\s+me\s+as|refer\s+to\s+me\s+as|"
            r"be|add|cite|prefer|stick\s+to|switch\s+to)\s+(?P<x>.+)"
        ),
        _en_please_verb,
    ),
    (
        _en(
            r"^be\s+(?P<x>(?:more\s+|less\s+|very\s+|extra\s+)?(?:concise|brief|short|formal|"
            r"informal|casual|polite|direct|detailed|specific|honest|blunt|precise|"
            r"thorough|technical|friendly|professional|succinct)\b.*)"
        ),
        _en_be_style,
    ),
    (
        _en(
            rf"^(?:{_I_AM}\s+(?:(?:severely|very|deathly|highly|also|really)\s+)*allergic\s+to|"
            rf"i\s+have\s+(?:an?\s+|a\s+severe\s+)?allerg(?:y|ies)\s+to)\s+(?P<x>.+)"
        ),
        _en_allergy,
    ),
    (
        _en(
            r"^my\s+(?:all[-\s]time\s+|absolute\s+)?favou?rite\s+(?P<thing>[\w\s'-]{1,40}?)\s+"
            r"(?P<verb>is|are|was|'s)\s+(?P<x>.+)"
        ),
        _en_favourite,
    ),
    (
        _en(
            _SUBJ + r"(?P<verb>love|like|enjoy|adore|prefer|hate|loathe|detest|dislike|"
            r"can't\s+stand|cannot\s+stand|can\s+not\s+stand|don't\s+(?:really\s+)?like|"
            r"do\s+not\s+(?:really\s+)?like|dont\s+like|don't\s+enjoy|do\s+not\s+enjoy|"
            r"dont\s+enjoy|don't\s+love|do\s+not\s+love)\s+(?P<x>.+)"
        ),
        _en_preference,
    ),
    (
        _en(
            rf"^{_I_AM}\s+(?:also\s+|really\s+)?(?:a\s+)?(?P<size>(?:big|huge|massive|great|"
            r"die-?hard)\s+)?fan\s+of\s+(?P<x>.+)"
        ),
        _en_fan,
    ),
    (_en(r"^i(?:'d|\s+would)\s+(?:much\s+)?rather\s+(?P<x>.+)"), _en_rather),
    (
        _en(
            rf"^{_I_AM}\s+(?:(?:also|now|strictly|fully|currently|still|happily)\s+)*"
            r"(?P<art>an?\s+)?(?P<x>vegetarian|vegan|pescatarian|lactose[-\s]intolerant|"
            r"gluten[-\s]intolerant|gluten[-\s]free|celiac|coeliac|diabetic|kosher|halal|"
            r"married|single|divorced|engaged|widowed|retired|pregnant|left-handed|"
            r"right-handed|colou?r-?blind|deaf|blind|unemployed|self-employed|"
            r"freelancing|a\s+student|an?\s+\w+\s+student)\b(?P<rest>.*)"
        ),
        _en_status,
    ),
    (
        _en(
            r"^i\s+(?P<verb>don't|do\s+not|dont|never|can't|cannot|can\s+not)\s+"
            r"(?P<eat>eat|drink)\s+(?P<x>.+)"
        ),
        _en_dont_eat,
    ),
    (
        _en(
            rf"^{_I_AM}\s+(?:now\s+|already\s+|almost\s+|turning\s+)?(?P<n>\d{{1,3}})"
            r"(?:\s*(?:years?|yrs?)(?:\s+old)?|\s*y/?o)?$"
        ),
        _en_age,
    ),
    (
        _en(
            r"^(?:i\s+(?:currently\s+|now\s+|still\s+|actually\s+)?(?P<live>live|reside)|"
            r"i(?:'ve|\s+have)\s+(?:always\s+)?been\s+(?:living|residing|based)|"
            rf"{_I_AM}\s+(?:currently\s+|now\s+|still\s+)?(?P<ing>living|residing|based|staying))"
            r"\s+in\s+(?P<x>.+)"
        ),
        _en_live_dispatch,
    ),
    (
        _en(
            r"^i(?:'ve|\s+have)?\s+(?:just\s+|recently\s+|finally\s+|already\s+|actually\s+)*"
            r"(?:moved|relocated)\s+(?P<back>back\s+)?(?:from\s+(?P<a>.+?)\s+)?(?:back\s+)?"
            r"to\s+(?P<x>.+)"
        ),
        _en_moved,
    ),
    (
        _en(
            rf"^{_I_AM}\s+(?:(?:also|soon|finally|actually)\s+)*(?:moving|relocating)\s+"
            r"(?:from\s+(?P<a>.+?)\s+)?to\s+(?P<x>.+)"
        ),
        _en_moving,
    ),
    (
        _en(
            rf"^(?:{_I_AM}\s+(?:originally\s+)?from|i\s+(?:originally\s+)?come\s+from|"
            r"i\s+grew\s+up\s+in)\s+(?P<x>.+)"
        ),
        _en_from,
    ),
    (_en(r"^i\s+was\s+born\s+(?P<prep>in|on|at)\s+(?P<x>.+)"), _en_born),
    (
        _en(
            r"^(?:i\s+(?:currently\s+|now\s+|still\s+|mostly\s+|actually\s+)?work|"
            rf"{_I_AM}\s+(?:currently\s+|now\s+)?(?:working|employed))\s+"
            r"(?P<prep>at|for|in|as|from|with|on)\s+(?P<x>.+)"
        ),
        _en_work,
    ),
    (
        _en(
            r"^(?:i\s+(?:currently\s+)?(?P<verb>study|studied|major\s+in|majored\s+in|"
            rf"graduated\s+from)|{_I_AM}\s+(?:currently\s+|also\s+|now\s+)?"
            r"(?P<ing>studying|majoring\s+in|learning))\s+(?P<x>.+)"
        ),
        _en_study_dispatch,
    ),
    (_en(r"^i\s+(?:can\s+|also\s+)?speak\s+(?P<x>.+)"), _en_speak),
    (
        _en(
            rf"^(?:{_I_AM}|i\s+work\s+as)\s+(?P<x>an?\s+(?!(?:bit|little|lot|tad|kind|sort|"
            r"big\s+fan|huge\s+fan|fan|few|couple|good\s+time|great\s+time|question|"
            r"hurry|rush|mood|mess)\b).+)"
        ),
        _en_article,
    ),
    (
        _en(
            r"^i(?:\s+have|'ve\s+got|\s+have\s+got|\s+got|\s+own)\s+(?P<x>(?:a|an|one|two|three|"
            r"four|five|six|seven|eight|nine|ten|\d+|several|many)\s+.+)"
        ),
        _en_have,
    ),
    (
        _en(
            rf"^{_I_AM}\s+(?:(?:really|also|still|just|actually|seriously|definitely)\s+)*"
            r"(?P<verb>going|planning|about|hoping|gonna|intending)\s+(?P<to>to\s+)?(?P<x>.+)"
        ),
        _en_plan,
    ),
    (
        _en(
            r"^i\s+(?:(?:really|also|still|just|definitely|actually)\s+)*(?P<verb>plan|intend|"
            r"want|hope|aim|expect|need)\s+(?P<to>to)\s+(?P<x>.+)"
        ),
        _en_plan,
    ),
    (
        _en(r"^i(?:\s+(?P<verb>will|shall)|(?P<verb2>'ll))\s+(?P<to>)(?P<x>.+)"),
        _en_will_dispatch,
    ),
    (
        _en(
            rf"^{_I_AM}\s+(?P<x>(?:flying|travel+ing|visiting|leaving|meeting|starting|going|"
            r"heading|driving|taking|attending|getting|having|seeing|giving|running|"
            r"presenting|moving|coming|returning|celebrating|hosting|joining)\b.*)"
        ),
        _en_progressive,
    ),
    (
        _en(
            r"^my\s+(?P<adj>(?:(?:older|younger|little|big|best|elder|oldest|youngest|twin|step|"
            r"baby|new|old|late|ex|eldest)[-\s]+)*)(?P<rel>" + _REL_EN + r")"
            r"(?:,?\s+(?P<who>(?-i:[A-Z][\w'-]+)),?)?"
            r"(?P<named>'s\s+name)?\s+(?P<rest>(?:is|are|was|named|called|works|worked|lives|"
            r"lived|likes|loves|hates|has|just|recently|moved|studies|goes|got|turned|will|"
            r"plays|teaches|runs|owns|'s|can't|cannot|doesn't)\b.*)"
        ),
        _en_relationship,
    ),
    (
        _en(
            r"^my\s+(?P<thing>birthday|hometown|home\s+town|job|profession|occupation|major|"
            r"native\s+language|mother\s+tongue|first\s+language|nationality|timezone|"
            r"time\s+zone|goal|dream|blood\s+type|zodiac\s+sign|(?:middle|last|full|first)"
            r"\s+name|nickname|company|employer|role|job\s+title|diet|religion|pronouns)\s+"
            r"(?P<verb>is|are|was)\s+(?P<x>.+)"
        ),
        _en_my_thing,
    ),
    (
        _en(
            r"^my\s+(?P<rel>" + _REL_EN + r")\s+and\s+i\s+(?P<x>(?:are|were|have|'ve|'re|will|"
            r"both|plan|want|love|like|live|often|always|usually|got|just|recently)\b.+)"
        ),
        _en_we,
    ),
    (
        _en(
            r"^i\s+(?:also\s+|often\s+|regularly\s+|sometimes\s+)?(?P<verb>play|practi[cs]e|"
            r"collect|paint|knit|surf|ski|swim|climb|bake|garden|meditate|volunteer)"
            r"(?P<x>\s+.+|$)"
        ),
        _en_hobby,
    ),
    *_EP_RULES,
    (_en(r"^i\s+(?P<verb>[a-z]+)\s+(?P<x>.+)"), _en_dated),
]


def _en_clause(clause: str, depth: int = 0) -> _Hit | None:
    clause = _FILLER_EN.sub("", clause.strip()).strip(" ,")
    clause = _clean(clause)
    if not clause or _QUESTION_START_EN.match(clause):
        return None
    leading = _LEADING_DATE_EN.match(clause)
    if leading:
        date = leading.group("date")
        if _RELATIVE_DATE.match(date):
            date = date[:1].lower() + date[1:]
        clause = f"{leading.group('rest')} {date}"
    for pattern, handler in _EN_RULES:
        m = pattern.match(clause)
        if m:
            found = handler(m, depth)
            if found is not None:
                return found
    return None


_RELATIVE_DATE = re.compile(
    r"^(?:next|this|tomorrow|tonight|later|in|on|by|the|at|every|yesterday|last|past|earlier|"
    r"recently|lately|over|a|two|three|four|five|six|seven|eight|nine|ten)\b",
    re.I,
)
_ONLY_DATE_EN = re.compile(rf"^\s*{_ANY_DATE_EN}\s*$", re.I)


def _is_question_en(sentence: str) -> bool:
    return sentence.rstrip().endswith(("?", "？")) or bool(
        _QUESTION_START_EN.match(_FILLER_EN.sub("", sentence.strip()))
    )


def _is_hypothetical_en(sentence: str) -> bool:
    return bool(_HYPOTHETICAL_EN.search(_WOULD_LIKE.sub("", sentence)))


_JOINT_SUBJECT_EN = re.compile(
    r"^(?P<lead>(?:my\s+family|my\s+(?:[a-z-]+\s+)?" + _REL_EN + r"|(?-i:[A-Z][a-z]+))"
    r"\s+and\s+)(?=i\s)",
    re.I,
)


def _judge_en(sentence: str) -> list[_Hit]:
    if _is_question_en(sentence) or _is_hypothetical_en(sentence):
        return []
    body = _clean(sentence)
    # "My husband and I went ...", "Anthony and I ...": the subject is not a clause of its own.
    joint = _JOINT_SUBJECT_EN.match(_FILLER_EN.sub("", body))
    lead = joint.group("lead") if joint else ""
    if joint:
        body = joint.string[joint.end() :]
    clauses: list[str] = []
    pending = ""
    for clause in _CLAUSE_SPLIT_EN.split(body):
        if not clause or not clause.strip():
            continue
        if _ONLY_DATE_EN.match(_FILLER_EN.sub("", clause.strip())):
            pending = f"{pending} {clause.strip()}".strip()  # "Next week, I ..." stays one
            continue
        clause = f"{lead}{clause}"
        lead = ""
        clauses.append(f"{pending}, {clause}" if pending else clause)
        pending = ""
    hits = []
    for clause in clauses:
        if clause.strip():
            found = _en_clause(clause)
            if found is not None:
                hits.append(found)
    return hits


# --- Chinese --------------------------------------------------------------------------------

_ZH_NUM = r"[一二三四五六七八九十两〇零]"
_DATE_ZH = (
    r"(?:大后天|后天|明天(?:早上|上午|中午|下午|晚上)?|明早|明晚|今晚|今天晚上|今天下午|"
    r"下下?(?:个)?(?:周|星期|礼拜)[一二三四五六日天末]?|这(?:个)?(?:周|星期|礼拜)[一二三四五六日天末]|"
    r"本周末|周末|下个?月(?:初|底|中)?|明年(?:初|底|春天|夏天|秋天|冬天)?|下半年|年底|月底|"
    r"\d{1,2}月\d{1,2}[日号]|" + _ZH_NUM + r"{1,3}月" + _ZH_NUM + r"{1,3}[日号]|"
    r"\d{4}年(?:\d{1,2}月)?(?:\d{1,2}[日号])?|\d{4}-\d{2}-\d{2}|\d{1,2}月(?:份|初|底)?|"
    + _ZH_NUM
    + r"{1,2}月(?:份|初|底)?|(?:今年|明年)?(?:春节|国庆|五一|寒假|暑假|圣诞节?|中秋)|"
    r"(?:周|星期|礼拜)[一二三四五六日天]|过几天|过两天|几天后|\d+天后)"
)
_HAS_DATE_ZH = re.compile(_DATE_ZH)
_LEADING_DATE_ZH = re.compile(rf"^(?P<date>{_DATE_ZH})[，,\s]*(?P<rest>我.*)$")
_FILLER_ZH = re.compile(
    r"^(?:(?:嗯|哦|噢|啊|对|对了|是的|好的|好|另外|还有|而且|并且|但是|但|不过|所以|其实|顺便说一下|"
    r"顺便说|顺便|说实话|老实说|你知道吗|那个|然后|也)[，,、\s]*)+"
)
_QUESTION_ZH = re.compile(
    r"(?:什么|哪里|哪儿|怎么|为什么|为啥|谁|多少|哪个|哪些|几点|是不是|有没有|能不能|可不可以|"
    r"要不要|会不会|好不好|对不对|行不行)(?![都也])"
)
_QUESTION_END_ZH = re.compile(r"[吗呢么嘛]\s*$")
_HYPOTHETICAL_ZH = re.compile(r"如果|假如|要是|假设|万一|的话|假若|倘若|若是")
_REL_ZH = (
    r"(?:男朋友|女朋友|男友|女友|未婚妻|未婚夫|妻子|老婆|太太|爱人|丈夫|老公|对象|儿子|女儿|孩子|宝宝|"
    r"妈妈|母亲|老妈|爸爸|父亲|老爸|父母|哥哥|姐姐|弟弟|妹妹|爷爷|奶奶|外公|外婆|姥姥|姥爷|叔叔|"
    r"阿姨|舅舅|表哥|表姐|表弟|表妹|堂哥|堂姐|堂弟|堂妹|好朋友|朋友|闺蜜|室友|同学|老板|领导|上司|"
    r"同事|小狗|小猫|狗狗|猫咪|狗|猫|宠物)"
)
_CLOSE_REL_ZH = re.compile(
    r"^(?:男朋友|女朋友|男友|女友|未婚|妻子|老婆|太太|爱人|丈夫|老公|对象|儿子|女儿|孩子|宝宝)"
)
_FAMILY_REL_ZH = re.compile(
    r"^(?:妈妈|母亲|老妈|爸爸|父亲|老爸|父母|哥哥|姐姐|弟弟|妹妹|爷爷|奶奶|外|姥|小狗|小猫|狗|猫|宠物)"
)
_HAS_REL_ZH = re.compile(_REL_ZH)
# A comma-separated piece that starts a clause of its own (the subject may be omitted).
_ZH_CLAUSE_START = re.compile(
    r"^(?:我|而且|并且|但是|另外|以后|今后|从现在开始|请|不要|别|叫我|今年|现在住在|住在|来自|"
    r"在\S{1,12}(?:工作|上班|上学)|喜欢|不喜欢|讨厌|是一名|是一个|是一位|有一|养了|打算|计划|准备|"
    r"明天|下周|下个月|明年|(?:昨天|前天|上周|上个月|去年|最近)我)"
)
_ZH_SUBJECTLESS = re.compile(
    r"^(?:今年|现在住在|住在|来自|在\S{1,12}(?:工作|上班|上学)|喜欢|不喜欢|讨厌|是一名|是一个|是一位|"
    r"有一|养了|打算|计划|准备)"
)


def _third_zh(text: str, *, instruction: bool = False) -> str:
    text = _clean(text)
    if instruction:
        text = text.replace("你的", "助手的").replace("你们", "助手").replace("你", "助手")
        return text.replace("我们", "用户").replace("我的", "用户的").replace("我", "用户")
    return text.replace("我们", "他们").replace("我的", "自己的").replace("我", "自己")


def _useful_zh(text: str) -> bool:
    text = _clean(text)
    return len(text) >= 1 and text not in (
        "它",
        "这个",
        "那个",
        "这",
        "那",
        "你",
        "他",
        "她",
        "这样",
        "那样",
    )


def _zh(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _zh_hit(core: str, category: Category, importance: int) -> _Hit:
    return _hit(core, category, importance, zh=True)


def _zh_remember(m: re.Match[str], depth: int) -> _Hit | None:
    inner = m.group("x")
    if depth < 2:
        found = _zh_clause(inner, depth + 1)
        if found is not None:
            return _boost(found)
    if not _useful_zh(inner):
        return None
    return _zh_hit(f"用户希望助手记住{_third_zh(inner, instruction=True)}", "instruction", 8)


def _zh_from_now_on(m: re.Match[str], depth: int) -> _Hit | None:
    inner = re.sub(r"^(?:请|你要|你得|你应该|麻烦)+", "", m.group("x").strip("，, "))
    if depth < 2:
        found = _zh_clause(inner, depth + 1)
        if found is not None:
            return _boost(found)
    if not _useful_zh(inner) or inner.startswith("我"):
        return None
    return _zh_hit(f"用户希望以后{_third_zh(inner, instruction=True)}", "instruction", 9)


def _zh_call_me(m: re.Match[str], depth: int) -> _Hit | None:
    name = re.sub(r"(?:就好|就行|就可以|吧|好了|好吗)$", "", _clean(m.group("x")))
    if not name or len(name) > 12:
        return None
    return _zh_hit(f"用户希望被称为{name}", "instruction", 8)


def _zh_name(m: re.Match[str], depth: int) -> _Hit | None:
    name = _clean(m.group("x"))
    if not name or len(name) > 12 or re.match(r"^(?:了|过|他|她|它|你|人|车|外卖|醒|错|好)", name):
        return None
    return _zh_hit(f"用户叫{name}", "personal_fact", 9)


def _zh_answer_in(m: re.Match[str], depth: int) -> _Hit | None:
    lang = _clean(m.group("x"))
    if not lang or len(lang) > 20:
        return None
    verb = m.group("verb")
    always = m.group("always") or ""
    word = "总是" if always and always != "都" else ""
    return _zh_hit(f"用户希望助手{word}用{lang}{verb}", "instruction", 8 + (1 if always else 0))


def _zh_always(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful_zh(x):
        return None
    return _zh_hit(f"用户希望助手总是{_third_zh(x, instruction=True)}", "instruction", 9)


_ZH_SMALL_TALK_NEG = re.compile(r"^(?:客气|担心|谢|着急|紧张|在意|介意|急|怕|难过|生气|麻烦了|了)")


def _zh_dont(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful_zh(x) or _ZH_SMALL_TALK_NEG.match(x):
        return None
    please = 1 if m.group("please") else 0
    return _zh_hit(f"用户希望助手不要{_third_zh(x, instruction=True)}", "instruction", 8 + please)


def _zh_answer_style(m: re.Match[str], depth: int) -> _Hit | None:
    x = re.sub(r"^(?:请|务必)+", "", m.group("x"))
    return _zh_hit(f"用户希望{m.group('what')}{_third_zh(x, instruction=True)}", "instruction", 8)


def _zh_allergy(m: re.Match[str], depth: int) -> _Hit | None:
    x = _clean(m.group("x"))
    if not x:
        return None
    return _zh_hit(f"用户对{_third_zh(x)}过敏", "personal_fact", 8)


def _zh_favourite(m: re.Match[str], depth: int) -> _Hit | None:
    thing, value = _clean(m.group("thing")), _clean(m.group("x"))
    if not thing or not value:
        return None
    return _zh_hit(f"用户最喜欢的{_third_zh(thing)}是{_third_zh(value)}", "preference", 6)


def _zh_dislike(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful_zh(x) or "你" in x:
        return None
    verb = m.group("verb")
    word = "讨厌" if verb in ("讨厌", "很讨厌") else "受不了" if verb == "受不了" else "不喜欢"
    importance = 7 if word in ("讨厌", "受不了") or m.group("adv") else 6
    return _zh_hit(f"用户{m.group('when')}{word}{_third_zh(x)}", "preference", importance)


def _zh_like(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    if not _useful_zh(x) or "你" in x or x.startswith(("的", "上了你")):
        return None
    verb = m.group("verb")
    importance = 7 if verb in ("爱", "热爱") or m.group("adv") else 6
    category: Category = "preference"
    if re.search(r"回答|回复|答案|解释|列表|要点|表格|简短|简洁|详细", x):
        category, importance = "instruction", importance + 2
    return _zh_hit(f"用户{m.group('when')}{verb}{_third_zh(x)}", category, importance)


def _zh_fan(m: re.Match[str], depth: int) -> _Hit | None:
    x = _clean(m.group("x"))
    if not x or "你" in x:
        return None
    return _zh_hit(f"用户是{_third_zh(x)}的粉丝", "preference", 6)


def _zh_diet(m: re.Match[str], depth: int) -> _Hit | None:
    what = m.group("x")
    if what.startswith("不吃") or what.startswith("不能吃") or what.startswith("不喝"):
        rest = _clean(what)
        if len(rest) <= 2:
            return None
        return _zh_hit(f"用户{_third_zh(rest)}", "personal_fact", 7)
    return _zh_hit(f"用户{_clean(what)}", "personal_fact", 8)


def _zh_age(m: re.Match[str], depth: int) -> _Hit | None:
    return _zh_hit(f"用户今年{m.group('n')}岁", "personal_fact", 7)


def _zh_live(m: re.Match[str], depth: int) -> _Hit | None:
    x = _clean(m.group("x"))
    if not x:
        return None
    return _zh_hit(f"用户住在{_third_zh(x)}", "personal_fact", 8)


def _zh_moved(m: re.Match[str], depth: int) -> _Hit | None:
    x = _clean(m.group("x"))
    if not x or x in ("家",):
        return None
    origin = m.group("a")
    source = f"从{_third_zh(origin)}" if origin else ""
    return _zh_hit(f"用户{source}搬到了{_third_zh(x)}", "personal_fact", 8)


def _zh_from(m: re.Match[str], depth: int) -> _Hit | None:
    x = _clean(m.group("x"))
    if not x:
        return None
    return _zh_hit(f"用户来自{_third_zh(x)}", "personal_fact", 7)


def _zh_born(m: re.Match[str], depth: int) -> _Hit | None:
    x = _clean(m.group("x"))
    if not x:
        return None
    return _zh_hit(f"用户出生在{_third_zh(x)}", "personal_fact", 7)


def _zh_work(m: re.Match[str], depth: int) -> _Hit | None:
    x = _clean(m.group("x"))
    if not x or "你" in x:
        return None
    return _zh_hit(f"用户在{_third_zh(x)}{m.group('verb')}", "personal_fact", 8)


def _zh_work_as(m: re.Match[str], depth: int) -> _Hit | None:
    x, y = _clean(m.group("x")), _clean(m.group("y"))
    if not x or not y or "你" in x + y or len(y) > 30:
        return None
    return _zh_hit(f"用户在{_third_zh(x)}{m.group('verb')}{_third_zh(y)}", "personal_fact", 8)


def _zh_my_thing(m: re.Match[str], depth: int) -> _Hit | None:
    x = _clean(m.group("x"))
    if not x or "你" in x:
        return None
    return _zh_hit(f"用户的{m.group('thing')}{m.group('verb')}{_third_zh(x)}", "personal_fact", 7)


def _zh_speak(m: re.Match[str], depth: int) -> _Hit | None:
    x = _clean(m.group("x"))
    if not x or "你" in x or len(x) > 30 or re.match(r"^(?:话|什么|不|错|过)", x):
        return None
    return _zh_hit(f"用户会说{_third_zh(x)}", "personal_fact", 6)


def _zh_job(m: re.Match[str], depth: int) -> _Hit | None:
    x = _clean(m.group("x"))
    if not x:
        return None
    return _zh_hit(f"用户的工作是{_third_zh(x)}", "personal_fact", 8)


def _zh_study(m: re.Match[str], depth: int) -> _Hit | None:
    x = _clean(m.group("x"))
    if not x or "你" in x or len(x) > 30:
        return None
    if m.group("major"):
        return _zh_hit(f"用户的专业是{_third_zh(x)}", "personal_fact", 7)
    return _zh_hit(f"用户在学习{_third_zh(x)}", "personal_fact", 6)


_ZH_IS_EXCLUDE = re.compile(
    r"^(?:说|不是|在|从|来|想|觉得|的|因为|为了|要|个好|这样|那样|真的|挺|很|不|这么|那么|问|随便|"
    r"开玩笑|认真|故意|刚|自己|你|对|错)"
)


def _zh_is(m: re.Match[str], depth: int) -> _Hit | None:
    x = _clean(m.group("x"))
    if not x or _ZH_IS_EXCLUDE.match(x) or "你" in x or len(x) > 40:
        return None
    measure = m.group("measure") or ""
    return _zh_hit(f"用户是{measure}{_third_zh(x)}", "personal_fact", 7)


_ZH_HAVE_EXCLUDE = re.compile(
    r"^(?:点|一点|些|一些|个问题|一个问题|问题|事|空|时间|没有|疑问|个想法|一个想法|想法|个建议|"
    r"一个建议|建议|个请求|一个请求|件事|一件事|机会|可能|必要|道理|意思|兴趣|印象|感觉|办法|"
    r"数|把握|信心)"
)


def _zh_have(m: re.Match[str], depth: int) -> _Hit | None:
    x = _clean(m.group("x"))
    if not x or _ZH_HAVE_EXCLUDE.match(x) or "你" in x:
        return None
    verb = m.group("verb")
    verb = "养了" if verb.startswith("养") else "有"
    text = f"用户{verb}{_third_zh(x)}"
    if _HAS_DATE_ZH.search(x):
        return _zh_hit(text, "plan", 5)
    if _HAS_REL_ZH.search(x):
        return _zh_hit(text, "relationship", 6)
    if re.search(r"病|过敏|症|哮喘|残疾", x):
        return _zh_hit(text, "personal_fact", 8)
    return _zh_hit(text, "personal_fact", 6)


def _zh_relationship(m: re.Match[str], depth: int) -> _Hit | None:
    rest = _clean(m.group("rest"))
    if len(rest) < 2 or "你" in rest:
        return None
    rel = m.group("rel")
    importance = 7 if _CLOSE_REL_ZH.match(rel) else 6 if _FAMILY_REL_ZH.match(rel) else 5
    if re.match(r"^(?:叫|名叫|的名字)", rest):
        importance += 1
    return _zh_hit(f"用户的{rel}{_third_zh(rest)}", "relationship", importance)


_ZH_CHAT_ACTION = re.compile(r"^(?:问|说|知道|了解|请教|确认|看看|试试|想想|告诉|回答|解释)")


def _zh_plan(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    date = (m.group("d1") or "") + (m.group("d2") or "")
    verb = m.group("verb")
    dated = bool(date) or bool(_HAS_DATE_ZH.search(x))
    if not _useful_zh(x) or "你" in x or _ZH_CHAT_ACTION.match(x):
        return None
    if verb in ("想", "想要"):
        if not dated and not re.match(r"^(?:学|去|考|成为|换|搬|开始|买|参加|报名|旅行|旅游)", x):
            return None
        word = "想"
    elif verb in ("要", "将要", "将", "会"):
        if not dated:
            return None
        word = "打算"
    else:
        word = verb.removeprefix("正")
    importance = 4 + (1 if verb in ("打算", "计划", "正打算") else 0) + (2 if dated else 0)
    return _zh_hit(f"用户{word}{date}{_third_zh(x)}", "plan", importance)


def _zh_dated(m: re.Match[str], depth: int) -> _Hit | None:
    x = m.group("x")
    date = (m.group("d1") or "") + (m.group("d2") or "")
    if not date or not _useful_zh(x) or "你" in x or _ZH_CHAT_ACTION.match(x):
        return None
    return _zh_hit(f"用户{date}{_third_zh(x)}", "plan", 5)


_ZH_PAST = (
    r"(?:昨天(?:早上|上午|中午|下午|晚上)?|前天|昨晚|上上?(?:个)?(?:周|星期|礼拜)[一二三四五六日天末]?|"
    r"上个?月|去年|前年|最近|刚刚|刚才|刚|今天(?:早上|上午|下午)?|今早|前几天|前段时间|那天|"
    r"之前|已经|终于|也|还)"
)
_ZH_EPISODE_VERB = (
    r"(?:去了|去过|参加了|参加过|开始了?|完成了|读了|读完了|看了|看完了|买了|画了|画完了|写了|"
    r"写完了|学会了|认识了|加入了|报名了|参观了|拜访了|做了|收到了|赢了|获得了|领养了|收养了|"
    r"尝试了|爬了|跑了|玩了|拍了|种了|烤了|学了)"
)
_ZH_EPISODE_EXCLUDE = re.compile(
    r"^(?:了|那里|这里|那儿|这儿|一下|一点|些|它|这个|那个|他|她|觉得|想|担心|明白|怀疑|后悔|喜欢|"
    r"好|过|吧|啊|呢)"
)


def _zh_episode(m: re.Match[str], depth: int) -> _Hit | None:
    x = _clean(m.group("x"))
    if not x or "你" in x or _ZH_EPISODE_EXCLUDE.match(x):
        return None
    when = (m.group("d1") or "") + (m.group("d2") or "")
    return _zh_hit(f"用户{when}{m.group('verb')}{_third_zh(x)}", "personal_fact", 6)


_ZH_WHEN = (
    r"(?P<when>(?:平时|周末|每天|平常|一般|通常|经常|有空(?:的时候|时)?|闲暇时|业余时间|晚上|"
    r"早上)?)"
)
_ZH_ADV = r"(?P<adv>(?:很|真|非常|特别|超级?|真的|挺|比较|一直|也|还|蛮|相当|十分|最)*)"
_ZH_RULES: list[_Rule] = [
    (_zh(r"^(?:请|麻烦)?(?:你)?(?:记住|记得|别忘了|不要忘了)[：:，,]?(?P<x>.+)"), _zh_remember),
    (
        _zh(r"^(?:你|请)?(?:以后|今后|从现在开始|从现在起|从今以后|从今往后|往后)[，,]?(?P<x>.+)"),
        _zh_from_now_on,
    ),
    (_zh(r"^(?:你可以|你就|请|以后|就|大家都)*叫我(?P<x>.+)"), _zh_call_me),
    (_zh(r"^我(?:叫|名叫|的名字(?:是|叫))(?P<x>.+)"), _zh_name),
    (
        _zh(
            r"^(?:请|麻烦)?(?:你)?(?P<always>总是|始终|一直|每次都|都)?(?:用|使用)(?P<x>.{1,20}?)"
            r"(?P<verb>回答|回复|来回答|来回复|交流|说话|和我交流|跟我说话|写|沟通)"
        ),
        _zh_answer_in,
    ),
    (_zh(r"^(?:请)?(?:你)?(?:总是|始终|每次都|一定要|务必)(?P<x>.+)"), _zh_always),
    (_zh(r"^(?P<please>请|麻烦)?(?:你)?(?:不要|别|不用|请勿|千万别|千万不要)(?P<x>.+)"), _zh_dont),
    (
        _zh(
            r"^(?:请|麻烦)?(?:你的)?(?P<what>回答|回复|答案|解释)(?P<x>(?:请|要|尽量|最好|都|务必)*"
            r"(?:简短|简洁|详细|具体|短|精炼|通俗|正式|口语化|列点).*)"
        ),
        _zh_answer_style,
    ),
    (_zh(r"^我(?:对|吃)(?P<x>.+?)过敏"), _zh_allergy),
    (_zh(r"^我(?P<x>.{1,10}?)过敏"), _zh_allergy),
    (_zh(r"^我(?:最最?)喜欢的(?P<thing>.{1,15}?)是(?P<x>.+)"), _zh_favourite),
    (
        _zh(
            r"^我" + _ZH_WHEN + _ZH_ADV + r"(?P<verb>不喜欢|不太喜欢|讨厌|很讨厌|不爱|受不了|反感)"
            r"(?P<x>.+)"
        ),
        _zh_dislike,
    ),
    (_zh(r"^我(?:是|算是)?(?:一个|一名|个)?(?P<x>.+?)的(?:忠实)?粉丝"), _zh_fan),
    (
        _zh(r"^我" + _ZH_WHEN + _ZH_ADV + r"(?P<verb>喜欢|爱|偏爱|热爱|喜爱|迷上了|偏好)(?P<x>.+)"),
        _zh_like,
    ),
    (_zh(r"^我(?:一直|从小)?(?P<x>吃素|是素食(?:主义)?者|吃斋|不吃.+|不能吃.+|不喝.+)"), _zh_diet),
    (
        _zh(r"^我(?:今年|已经|现在)?(?P<n>\d{1,3}|" + _ZH_NUM + r"{1,3})(?:周)?岁"),
        _zh_age,
    ),
    (_zh(r"^我(?:现在|目前|一直|还)?(?:住在|居住在|定居在|住)(?P<x>.+)"), _zh_live),
    (
        _zh(
            r"^我(?:刚|最近|已经|刚刚|去年|上个月|前不久)*(?:从(?P<a>.+?))?(?:搬|搬家)(?:到|去)了?"
            r"(?P<x>.+)"
        ),
        _zh_moved,
    ),
    (_zh(r"^我(?:来自|老家(?:在|是)|的老家(?:在|是)|是从)(?P<x>.+?)(?:来的)?$"), _zh_from),
    (_zh(r"^我(?:出生在|出生于|生于|生在)(?P<x>.+)"), _zh_born),
    (
        _zh(
            r"^我(?:现在|目前|一直|在)?在(?P<x>.+?)(?P<verb>工作|上班|实习|任职|打工|上学|读书|读大学|念书)$"
        ),
        _zh_work,
    ),
    (
        _zh(r"^我(?:现在|目前|一直)?在(?P<x>.+?)(?P<verb>当|做|担任)(?P<y>.+)"),
        _zh_work_as,
    ),
    (_zh(r"^我的(?:工作|职业)是(?P<x>.+)"), _zh_job),
    (
        _zh(
            r"^我的(?P<thing>生日|老家|家乡|母语|血型|星座|小名|昵称|英文名|邮箱|时区|目标|梦想|"
            r"宗教信仰|属相)(?P<verb>是|在)(?P<x>.+)"
        ),
        _zh_my_thing,
    ),
    (_zh(r"^我(?:会说|能说|讲)(?P<x>.+)"), _zh_speak),
    (_zh(r"^我(?:从事|做)(?P<x>.+?)(?:工作|行业)$"), _zh_job),
    (
        _zh(
            r"^(?P<d1>" + _DATE_ZH + "|" + _ZH_PAST + r")?我(?P<d2>" + _ZH_PAST + r"{0,3})"
            r"(?P<verb>" + _ZH_EPISODE_VERB + r")(?P<x>.+)"
        ),
        _zh_episode,
    ),
    (_zh(r"^我的(?P<major>专业)是(?P<x>.+)"), _zh_study),
    (_zh(r"^我(?:现在|目前)?(?:正在|在)?(?:学习|学|读|念)(?P<major>)(?P<x>.+)"), _zh_study),
    (
        _zh(
            r"^我(?:的)?(?P<rel>" + _REL_ZH + r")(?P<rest>(?:叫|名叫|的名字|是|在|住在|今年|喜欢|"
            r"不喜欢|讨厌|也|刚|最近|有|会|已经|做|当|从事|养了|下个月|明天|在|怀孕|生病|退休|工作|上班|"
            r"读|学|开|养|特别|很|非常|对|不吃|不能).*)"
        ),
        _zh_relationship,
    ),
    (_zh(r"^我(?:们)?(?:家)?(?P<verb>有|养了|养着|养)(?P<x>.+)"), _zh_have),
    (
        _zh(
            r"^(?P<d1>" + _DATE_ZH + r")?我(?P<d2>" + _DATE_ZH + r")?(?:还|也|已经|正在|一直)?"
            r"(?P<verb>打算|计划|准备|想要|将要|正打算|要|将|会|想)(?P<x>.+)"
        ),
        _zh_plan,
    ),
    (_zh(r"^我是(?P<measure>一名|一个|一位|个|名)?(?P<x>.+)"), _zh_is),
    (_zh(r"^(?P<d1>" + _DATE_ZH + r")?我(?P<d2>" + _DATE_ZH + r")?(?P<x>.+)"), _zh_dated),
]


def _zh_clause(clause: str, depth: int = 0) -> _Hit | None:
    clause = _FILLER_ZH.sub("", clause.strip()).strip("，, ")
    clause = _clean(clause)
    if not clause:
        return None
    leading = _LEADING_DATE_ZH.match(clause)
    if leading:
        clause = "我" + leading.group("date") + leading.group("rest")[1:]
    for pattern, handler in _ZH_RULES:
        m = pattern.match(clause)
        if m:
            found = handler(m, depth)
            if found is not None:
                return found
    return None


def _is_question_zh(sentence: str) -> bool:
    body = _clean(sentence)
    return (
        sentence.rstrip().endswith(("?", "？"))
        or bool(_QUESTION_END_ZH.search(body))
        or bool(_QUESTION_ZH.search(body))
    )


_ZH_PREFIX_ONLY = re.compile(r"(?:记住|记得|别忘了|不要忘了|以后|今后|从现在开始|从现在起)$")


def _zh_clauses(sentence: str) -> list[str]:
    pieces = [p.strip() for p in re.split(r"[，,]", sentence) if p.strip()]
    out: list[str] = []
    subject = False
    for piece in pieces:
        body = _FILLER_ZH.sub("", piece)
        if out and (not _ZH_CLAUSE_START.match(body) or _ZH_PREFIX_ONLY.search(out[-1])):
            out[-1] = f"{out[-1]}，{piece}"
            continue
        if subject and _ZH_SUBJECTLESS.match(body):
            body = "我" + body
        subject = body.startswith("我") or subject
        out.append(body)
    return out


def _judge_zh(sentence: str) -> list[_Hit]:
    if _is_question_zh(sentence) or _HYPOTHETICAL_ZH.search(sentence):
        return []
    hits = []
    for clause in _zh_clauses(_clean(sentence)):
        found = _zh_clause(clause)
        if found is not None:
            hits.append(found)
    return hits


# --- sentences and messages -----------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；;!?])|\n+")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: after . ! ? (then a space) and 。！？; and newlines. Common
    abbreviations ("Dr.", "e.g.") do not end a sentence."""
    pieces = [p for p in _SENTENCE_END.split(text) if p and p.strip()]
    out: list[str] = []
    for piece in pieces:
        piece = piece.strip()
        if out:
            last_word = out[-1].rsplit(None, 1)[-1].lower().rstrip(".")
            if out[-1].endswith(".") and last_word in _ABBREVIATIONS:
                out[-1] = f"{out[-1]} {piece}"
                continue
        out.append(piece)
    return out


def _hits_of(text: str) -> list[_Hit]:
    text = _CODE_BLOCK.sub("\n", text.translate(_APOSTROPHES))[:MAX_RULE_CHARS]
    hits: list[_Hit] = []
    for sentence in split_sentences(text):
        sentence = re.sub(r"^[\s>*#\-•·]+", "", sentence)  # quote marks and bullets
        if not sentence:
            continue
        if has_han(sentence):
            hits += _judge_zh(sentence)
        else:
            hits += _judge_en(sentence)
    return hits


def _memory_type(category: Category) -> MemoryType:
    return _default_memory_type(category)


def rule_based_judge(messages: Sequence[SessionMessage]) -> list[Candidate]:
    """Candidates from the new user messages by regular expressions (English and Chinese);
    the fallback when there is no LLM or it fails."""
    out: list[Candidate] = []
    index: dict[str, int] = {}
    for message in messages:
        if not message.new or message.role != "user":
            continue
        for hit in _hits_of(message.content):
            content = _finish(hit)
            key = content.casefold()
            if key in index:
                # The same memory from another message: one candidate, both sources.
                i = index[key]
                old = out[i]
                if message.event_id not in old.source_event_ids:
                    out[i] = Candidate(
                        old.content,
                        old.memory_type,
                        old.scope,
                        max(old.importance, hit.importance),
                        old.category,
                        (*old.source_event_ids, message.event_id),
                    )
                continue
            index[key] = len(out)
            out.append(
                Candidate(
                    content,
                    _memory_type(hit.category),
                    _default_scope(hit.category),
                    hit.importance,
                    hit.category,
                    (message.event_id,),
                )
            )
    return out


# --- the judge --------------------------------------------------------------------------------


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
