"""The extractive conversation summary of about ``SUMMARY_BUDGET_TOKENS`` tokens.
Why it works this way: docs/design/summary-fold.md."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import orjson

from memstream.settings import SUMMARY_BUDGET_TOKENS
from memstream.store.summaries import Summary
from memstream.text.normalise import comparison_form
from memstream.text.scripts import WIDE
from memstream.text.terms import tokenize
from memstream.text.tokens import count_tokens, encoding

MAX_SENTENCE_TOKENS = 120
"""A longer sentence (or an unpunctuated message) is cut to this many tokens."""
NEW_SHARE = 0.5
"""Share of the budget the new messages may always claim from an old summary that is full."""
PREVIOUS_BONUS = 0.5
"""Score bonus of the previous summary's sentences: they were chosen before."""
TOP_UP_TRIES = 64
"""Sentences tried, with a recount each, to fill the budget the estimate left unused."""

ROLE_LABEL = {"user": "User", "assistant": "Assistant", "system": "System", "tool": "Tool"}
_PREFIX = re.compile(r"^\s*(User|Assistant|System|Tool|用户|助手)\s*[:：]\s*", re.IGNORECASE)
_PREFIX_ROLE = {"user": "user", "assistant": "assistant", "用户": "user", "助手": "assistant"}

# A sentence ends at . ! ? followed by a space and a capital, digit or non-ASCII character,
# after a Chinese full stop, exclamation or question mark or semicolon, or at a line break.
_SENTENCE_END = re.compile(
    r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[\u2018\u201c]|[^\x00-\x7f])|(?<=[。！？；!?;])\s*|\s*\n\s*"
)
# CJK characters and full-width punctuation: no space is put next to them.
_WIDE = re.compile(f"[{WIDE}]")

_FILLER_PHRASES = re.compile(
    r"\b(?:how can i (?:help|assist)(?: you)?(?: today)?|how may i (?:help|assist)(?: you)?"
    r"|is there anything else(?: i can (?:help|do)(?: you)?(?: with)?)?|anything else"
    r"|let me know if (?:you have any (?:other |more )?questions|you need anything else"
    r"|there is anything else|i can help)|feel free to ask|i hope (?:this|that) helps"
    r"|(?:glad|happy) to help|you are welcome|youre welcome|no problem|of course|certainly"
    r"|sounds good|got it|(?:great|good|nice|excellent) (?:question|choice|idea)"
    r"|nice to meet you|how are you"
    r"|have a (?:nice|good|great) (?:day|evening|night|weekend)|thank you(?: (?:so|very) much)?"
    r"|thanks(?: a lot)?|good (?:morning|afternoon|evening|night))\b"
    r"|你好|您好|谢谢(?:你|您)?|多谢|好的|嗯+|再见|拜拜|不客气|没问题|早上好|下午好|晚上好|晚安"
    r"|收到|明白了?|知道了|哈哈+|请问|(?:还)?有什么(?:可以|能|需要)?(?:帮|帮助|帮忙)(?:你|您)?的?(?:吗)?"
    r"|很高兴(?:为你|为您|能)?(?:服务|帮忙|帮到你|帮到您)?|不用谢|辛苦了"
)
_FILLER_TERMS = frozenset(
    """
    hi hello hey thank thanks ok okay sure great cool ye yes yeah yep nope bye goodby goodbye
    pleas welcom awesom nice wow lol haha fine good morn even afternoon night there glad happi
    help todai perfect alright right anyth els question assist hmm um uh oh ah well
    好 的 是 对 行 嗯 啊 哦 呀 吧 呢 嘛 你 您 我 谢
    """.split()  # noqa: SIM905 - a word list reads better as text
)
_NUMBER = re.compile(
    r"\d|[一二三四五六七八九十两百千万]+(?:个|岁|年|月|日|号|点|天|次|元|块|公里|米|人|周|小时|分钟)"
)
_TEMPORAL = re.compile(
    r"\b(?:today|tomorrow|tonight|yesterday|next|last|week|month|year|weekend|morning|evening"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april"
    r"|may|june|july|august|september|october|november|december|deadline)\b"
    r"|今天|明天|后天|昨天|今晚|下周|上周|下个月|上个月|明年|去年|周[一二三四五六日末]|星期|截止"
)
_ENTITY = re.compile(r"(?<=[\s(\"'])[A-Z][\w-]*[A-Za-z]|\b[A-Z]{2,}\b|https?://\S+|\S+@\S+\.\w+")
_USER_FACT = re.compile(
    r"\b(?:i am|im|i was|my|mine|i have|ive|i had|i live|i lived|i work|i worked|i like|i love"
    r"|i hate|i prefer|i want|i need|i will|ill|i plan|i decided|we decided|i must|i should"
    r"|i cant|i cannot|i dont|i usually|i always|i never|remember|allergic|birthday|budget)\b"
    r"|我是|我叫|我的|我在|我住|我想|我要|我喜欢|我爱|我讨厌|我不|我有|我会|我打算|我计划|我需要"
    r"|我们决定|记住|必须|预算|生日|过敏"
)
_DECISION = re.compile(
    r"\b(?:decided|decide|decision|agreed|agree|plan|planning|going to|chose|choose|booked"
    r"|scheduled|confirm|confirmed|final|settled|will|lets)\b"
    r"|决定|计划|打算|确定|预订|订了|约好|安排|同意|选择"
)
_ANSWER = re.compile(
    r"\b(?:recommend|suggest|should|answer|solution|best|you can|you could|try|use|because"
    r"|reason|means|option|steps?)\b|建议|推荐|可以|应该|答案|方法|因为|原因|步骤|选项"
)
_QUESTION = re.compile(
    r"[?？]\s*$|^(?:what|how|why|when|where|which|who|can|could|should|would|do|does|did|is|are"
    r"|will)\b|吗\s*$|什么|怎么|为什么|哪|多少|几"
)


@dataclass(slots=True)
class _Unit:
    group: int  # the message (or previous summary line) it belongs to
    prefix: str  # "User: " ...; "" for a previous summary line without one
    text: str
    score: float
    order: int
    tokens: int
    key: str  # the comparison form's digest: a sentence already kept is not added again
    kept: float  # its score once it is a sentence of the previous summary


def _kept(summary: Summary) -> list[_Unit] | None:
    """The sentences an extractive summary kept, as units of the next fold; None when it has
    none to give (a model's text) or they do not match its text (then the text is read
    again). Each is stored as [line, prefix length, length, score, tokens, key]: its text is
    cut from the summary's own lines (sentences are stripped, so a space after one is the
    separator ``_join`` put there)."""
    if summary.sentences is None:
        return None
    lines = summary.text.split("\n")
    units: list[_Unit] = []
    at: dict[int, int] = {}
    try:
        for order, (group, prefix_len, length, score, tokens, key) in enumerate(
            orjson.loads(summary.sentences)
        ):
            line = lines[group]
            start = at.get(group, prefix_len)
            if line[start : start + 1] == " " and start > prefix_len:
                start += 1
            text = line[start : start + length]
            if len(text) != length or not text.strip():
                return None
            at[group] = start + length
            units.append(_Unit(group, line[:prefix_len], text, score, order, tokens, key, score))
    except (orjson.JSONDecodeError, TypeError, ValueError, IndexError):
        return None
    return units


def sentences(text: str) -> list[str]:
    """``text`` split into sentences (English and Chinese punctuation, line breaks)."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _terms(plain: str) -> set[str]:
    return {t for t in tokenize(_FILLER_PHRASES.sub(" ", plain)) if t not in _FILLER_TERMS}


def content_terms(sentence: str) -> set[str]:
    """The informative terms of a sentence: no stop words, greetings or filler."""
    return _terms(comparison_form(sentence))


def is_filler(sentence: str) -> bool:
    """Greetings, thanks and other sentences without content."""
    return not content_terms(sentence)


def score_sentence(
    sentence: str, role: str | None, *, first: bool = False, recency: float = 0.0
) -> float:
    """How much a sentence is worth keeping (0 for filler); see the module documentation."""
    base = _base_score(sentence, comparison_form(sentence), role, count_tokens(sentence))
    if base is None:
        return 0.0
    return base + _bonus(role, first, recency)


def _bonus(role: str | None, first: bool, recency: float) -> float:
    return (0.3 * first if role == "assistant" else 0.0) + 0.3 * recency


def _base_score(sentence: str, plain: str, role: str | None, tokens: int) -> float | None:
    """The score without the bonuses of position; None for filler."""
    terms = _terms(plain)
    if not terms:
        return None
    score = 0.8 * min(1.0, len(terms) / max(1, tokens)) + 0.8 * min(1.0, len(terms) / 8)
    score += 0.5 * bool(_NUMBER.search(sentence))
    score += 0.4 * bool(_ENTITY.search(" " + sentence))
    score += 0.3 * bool(_TEMPORAL.search(plain))
    question = bool(_QUESTION.search(sentence.strip()) or _QUESTION.search(plain))
    if role == "user":
        score += 0.5 + 0.6 * bool(_USER_FACT.search(plain)) + 0.4 * bool(_DECISION.search(plain))
        score += 0.5 * question
    elif role == "assistant":
        score += 0.4 * bool(_ANSWER.search(plain))
        score += 0.3 * bool(_DECISION.search(plain)) - 0.3 * question
    return score


def _as_previous(base: float | None) -> float:
    return max(base or 0.0, 0.1) + PREVIOUS_BONUS


def _digest(plain: str) -> str:
    return hashlib.blake2b(plain.encode(), digest_size=8).hexdigest()


def truncate_tokens(text: str, limit: int, *, ellipsis: str = "…") -> str:
    """``text`` cut to at most ``limit`` tokens (with ``ellipsis`` when cut)."""
    if limit <= 0:
        return ""
    if count_tokens(text) <= limit:
        return text
    enc = encoding()
    room = limit - count_tokens(ellipsis)
    if room <= 0:
        return ""
    ids = enc.encode_ordinary(text)[:room]
    while ids:
        cut = enc.decode(ids, errors="replace").rstrip("\ufffd").rstrip()
        candidate = cut + ellipsis
        if count_tokens(candidate) <= limit:
            return candidate
        ids = ids[:-1]
    return ""


def _sentence(sentence: str) -> tuple[str, int]:
    """A sentence cut to ``MAX_SENTENCE_TOKENS``, and its tokens."""
    tokens = count_tokens(sentence)
    if tokens <= MAX_SENTENCE_TOKENS:
        return sentence, tokens
    text = truncate_tokens(sentence, MAX_SENTENCE_TOKENS)
    return text, count_tokens(text)


def _join(parts: Sequence[str]) -> str:
    """Sentences of one message on one line: a space between them, none next to CJK text."""
    out = ""
    for part in parts:
        if out and not (_WIDE.match(part[0]) or _WIDE.match(out[-1])):
            out += " "
        out += part
    return out


@lru_cache(maxsize=16384)
def _line_tokens(line: str) -> int:
    return count_tokens(line)


class _Draft:
    """The sentences chosen so far, one line per group, and the exact token count of their
    text. A line break ends the token before it (it joins a closing punctuation mark, never the
    next line's first word), so the text's count is the sum of its lines' counts, each with its
    line break but the last; a changed line is the only one counted again."""

    def __init__(self, units: Sequence[_Unit] = ()) -> None:
        self.groups: dict[int, list[_Unit]] = {}
        self._lines: dict[int, str] = {}
        self._ended: dict[int, int] = {}  # each line's tokens with its line break
        self._sum = 0  # of ``_ended``
        for unit in sorted(units, key=lambda u: u.order):
            self.groups.setdefault(unit.group, []).append(unit)
        for group in self.groups:
            self._count(group)

    @property
    def units(self) -> list[_Unit]:
        return [u for g in sorted(self.groups) for u in self.groups[g]]

    def add(self, unit: _Unit) -> None:
        group = self.groups.setdefault(unit.group, [])
        group.append(unit)
        group.sort(key=lambda u: u.order)
        self._count(unit.group)

    def remove(self, unit: _Unit) -> None:
        group = self.groups[unit.group]
        group.remove(unit)
        if not group:
            del self.groups[unit.group]
        self._count(unit.group)

    def _count(self, group: int) -> None:
        self._sum -= self._ended.pop(group, 0)
        self._lines.pop(group, None)
        if group in self.groups:
            self._ended[group] = _line_tokens(self.line(group) + "\n")
            self._sum += self._ended[group]

    def line(self, group: int) -> str:
        line = self._lines.get(group)
        if line is None:
            units = self.groups[group]
            line = self._lines[group] = units[0].prefix + _join([u.text for u in units])
        return line

    def tokens(self) -> int:
        if not self.groups:
            return 0
        last = max(self.groups)
        return self._sum - self._ended[last] + _line_tokens(self.line(last))

    def text(self) -> str:
        return "\n".join(self.line(g) for g in sorted(self.groups))


def _cost(units: Sequence[_Unit]) -> int:
    """Estimated tokens of assembled units: their own, one separator each, one prefix a
    group."""
    groups = {u.group: u.prefix for u in units}
    return sum(u.tokens + 1 for u in units) + sum(_line_tokens(p) for p in groups.values())


def _greedy(units: Sequence[_Unit], budget: int, chosen: list[_Unit]) -> list[_Unit]:
    """Add the best-scoring units that still fit to ``chosen`` (in place) and return it."""
    used = _cost(chosen)
    groups = {u.group for u in chosen}
    taken = {u.order for u in chosen}
    for unit in sorted(units, key=lambda u: (-u.score, u.order)):
        if unit.order in taken:
            continue
        extra = unit.tokens + 1
        if unit.group not in groups:
            extra += _line_tokens(unit.prefix)
        if used + extra <= budget:
            chosen.append(unit)
            taken.add(unit.order)
            groups.add(unit.group)
            used += extra
    return chosen


def _previous_units(previous: str, order: int, group: int) -> tuple[list[_Unit], int, int]:
    units: list[_Unit] = []
    for line in previous.splitlines():
        if not line.strip():
            continue
        m = _PREFIX.match(line)
        prefix, role = "", None
        if m:
            label = m.group(1)
            role = _PREFIX_ROLE.get(label.lower()) or _PREFIX_ROLE.get(label)
            prefix = f"{ROLE_LABEL.get(role or '', label)}: "
            line = line[m.end() :]
        for sentence in sentences(line):
            text, tokens = _sentence(sentence)
            if not text:
                continue
            plain = comparison_form(text)
            score = _as_previous(_base_score(text, plain, role, tokens))
            units.append(_Unit(group, prefix, text, score, order, tokens, _digest(plain), score))
            order += 1
        group += 1
    return units, order, group


def _message_units(
    messages: Sequence[tuple[str, str]], order: int, group: int, seen: set[str]
) -> list[_Unit]:
    units: list[_Unit] = []
    n = len(messages)
    for i, (role, content) in enumerate(messages):
        role = role.lower()
        prefix = f"{ROLE_LABEL.get(role, role.capitalize() or 'Message')}: "
        first = True
        for sentence in sentences(content or ""):
            text, tokens = _sentence(sentence)
            plain = comparison_form(text)
            base = _base_score(text, plain, role, tokens)
            if base is None or not plain:
                continue
            score = base + _bonus(role, first, (i + 1) / n)
            if score <= 0:
                continue
            first = False
            key = _digest(plain)
            if key in seen:
                continue
            seen.add(key)
            units.append(_Unit(group, prefix, text, score, order, tokens, key, _as_previous(base)))
            order += 1
        group += 1
    return units


def fold(
    previous: Summary | str | None,
    messages: Sequence[tuple[str, str]],
    *,
    budget_tokens: int = SUMMARY_BUDGET_TOKENS,
) -> Summary:
    """The previous summary merged with the informative sentences of ``messages`` ((role,
    content), oldest first), at most ``budget_tokens`` tokens, with its sentences for the next
    fold. Only the new messages are scored: an extractive previous summary brings its
    sentences' scores along, so the cost grows with the new messages, not the conversation."""
    if budget_tokens <= 0:
        return Summary("", 0, "[]")
    old: list[_Unit] | None = None
    if isinstance(previous, Summary):
        old = _kept(previous)
        previous = previous.text
    if old is None:
        old, order, group = _previous_units(previous or "", 0, 0)
    else:
        order = len(old)
        group = max((u.group for u in old), default=-1) + 1
    seen = {u.key for u in old}
    new = _message_units(messages, order, group, seen)
    if _cost(old) + _cost(new) <= budget_tokens:
        chosen = old + new
    else:
        new_share = min(_cost(new), max(int(budget_tokens * NEW_SHARE), budget_tokens - _cost(old)))
        chosen_new = _greedy(new, new_share, [])
        chosen_old = _greedy(old, budget_tokens - _cost(chosen_new), [])
        chosen = _greedy(new, budget_tokens, chosen_old + chosen_new)
    draft = _Draft(chosen)
    # The estimate is close; the exact count is the guarantee.
    used = draft.tokens()
    while draft.groups and used > budget_tokens:
        draft.remove(min(draft.units, key=lambda u: (u.score, -u.order)))
        used = draft.tokens()
    used = _top_up(draft, used, old + new, budget_tokens)
    kept = draft.units
    lines = {g: i for i, g in enumerate(sorted(draft.groups))}  # numbered afresh each fold
    state = [[lines[u.group], len(u.prefix), len(u.text), u.kept, u.tokens, u.key] for u in kept]
    return Summary(draft.text(), used, orjson.dumps(state).decode())


def fold_many(
    work: Sequence[tuple[Summary | None, Sequence[tuple[str, str]]]], budget_tokens: int
) -> list[Summary]:
    """``fold`` of each (previous summary, new messages): one call of the summary stage's CPU
    process for many conversations."""
    return [fold(previous, messages, budget_tokens=budget_tokens) for previous, messages in work]


def _top_up(draft: _Draft, used: int, units: Sequence[_Unit], budget: int) -> int:
    """Fill what the (cautious) estimate left unused, counting each addition."""
    taken = {u.order for u in draft.units}
    tries = 0
    for unit in sorted(units, key=lambda u: (-u.score, u.order)):
        if used >= budget or tries >= TOP_UP_TRIES:
            break
        if unit.order in taken or unit.tokens >= budget - used:
            continue
        tries += 1
        draft.add(unit)
        trial = draft.tokens()
        if trial <= budget:
            taken.add(unit.order)
            used = trial
        else:
            draft.remove(unit)
    return used


def extractive_summary(
    previous: str | None,
    messages: Sequence[tuple[str, str]],
    *,
    budget_tokens: int = SUMMARY_BUDGET_TOKENS,
) -> str:
    """The previous summary merged with the informative sentences of ``messages`` ((role,
    content), oldest first), at most ``budget_tokens`` tokens."""
    return fold(previous, messages, budget_tokens=budget_tokens).text


def fit_budget(text: str, budget_tokens: int) -> str:
    """``text`` cut to ``budget_tokens``: whole lines first, then the last line's tokens."""
    text = text.strip()
    if count_tokens(text) <= budget_tokens:
        return text
    lines = text.splitlines()
    kept: list[str] = []
    for line in lines:
        trial = "\n".join([*kept, line])
        if count_tokens(trial) <= budget_tokens:
            kept.append(line)
            continue
        room = budget_tokens - count_tokens("\n".join([*kept, ""])) if kept else budget_tokens
        part = truncate_tokens(line, room)
        if part:
            kept.append(part)
        break
    out = "\n".join(kept)
    while out and count_tokens(out) > budget_tokens:  # separators can merge into tokens
        out = truncate_tokens(out, budget_tokens - 1)
    return out
