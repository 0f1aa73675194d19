"""English rules for what the user asks of the agent: remember this, from now on, call me,
answer in, always, never, don't."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial

from memstream.longterm.judge.rules.common import Hit, Rule, boost, clean, hit
from memstream.longterm.judge.rules.en.rewrite import _en, _third_en, _useful

# Judges a clause at a depth: how a rule judges the clause it holds ("remember that ...").
ClauseJudge = Callable[[str, int], "Hit | None"]


_REMEMBER = _en(
    r"^(?:please\s+)?(?:remember|don't\s+forget|do\s+not\s+forget|keep\s+in\s+mind|"
    r"note|make\s+a\s+note)\s*(?:that|this)?\s*[:,]?\s+(?P<x>.+)"
)


def _en_remember(m: re.Match[str], depth: int, clause: ClauseJudge) -> Hit | None:
    inner = m.group("x")
    found = boost(clause(inner, depth + 1)) if depth < 2 else None
    if found is not None:
        return found
    if not _useful(inner):
        return None
    return hit(f"The user wants the agent to remember that {_third_en(inner)}", "instruction", 8)


def remember(clause: ClauseJudge) -> Rule:
    """The rule of ``_en_remember``, judging the clause it holds with ``clause``."""
    return (_REMEMBER, partial(_en_remember, clause=clause))


_YOU_SHOULD = re.compile(
    r"^(?:(?:you\s+(?:should|must|will|can|need\s+to|have\s+to)|please|i\s+want\s+you\s+to|"
    r"i'd\s+like\s+you\s+to|i\s+would\s+like\s+you\s+to|can\s+you|could\s+you)\s+)+",
    re.I,
)


_FROM_NOW_ON = _en(
    r"^(?:from\s+now\s+on|going\s+forward|in\s+(?:the\s+)?future|from\s+here\s+on(?:\s+out)?"
    r"|for\s+future\s+reference|henceforth)\s*,?\s*(?P<x>.+)"
)


def _en_from_now_on(m: re.Match[str], depth: int, clause: ClauseJudge) -> Hit | None:
    inner = _YOU_SHOULD.sub("", m.group("x").strip(" ,"))
    if depth < 2:
        found = clause(inner, depth + 1)
        if found is not None:
            return boost(found)
    if not _useful(inner) or re.match(r"^i\b", inner, re.I):
        return None
    action = _third_en(inner, instruction=True)
    return hit(f"The user wants the agent to {action} from now on", "instruction", 9)


def from_now_on(clause: ClauseJudge) -> Rule:
    """The rule of ``_en_from_now_on``, judging the clause it holds with ``clause``."""
    return (_FROM_NOW_ON, partial(_en_from_now_on, clause=clause))


def _en_keep_short(m: re.Match[str], depth: int) -> Hit | None:
    obj = m.group("obj").lower()
    what = "answers" if obj in ("it", "things", "them", "your answers", "it all") else obj
    what = _third_en(what, instruction=True)
    always = 1 if m.group("always") else 0
    return hit(
        f"The user wants the agent to keep {what} {clean(m.group('x'))}",
        "instruction",
        8 + always,
    )


KEEP_SHORT: Rule = (
    _en(
        r"^(?:please\s+)?(?P<always>always\s+)?keep\s+(?P<obj>it|it\s+all|things|them|answers|"
        r"your\s+answers|responses|your\s+responses|replies|your\s+replies|explanations|"
        r"the\s+answers)\s+(?P<x>(?:very\s+|really\s+|super\s+)?(?:short|brief|concise|simple|"
        r"casual|formal|friendly|professional|technical|under\s+\S+\s+\w+|to\s+the\s+point)"
        r".*)"
    ),
    _en_keep_short,
)


def _en_answer_in(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    adverb = (m.group("always") or "").lower()
    verb = m.group("verb").lower()
    prep = m.group("prep").lower()
    mode = f"{adverb} " if adverb else ""
    action = f"{mode}{verb} {prep} {_third_en(x, instruction=True)}"
    return hit(f"The user wants the agent to {action}", "instruction", 9 if adverb else 8)


ANSWER_IN: Rule = (
    _en(
        r"^(?:(?:please|kindly|can\s+you|could\s+you)\s+)?(?:(?P<always>always|only)\s+)?"
        r"(?P<verb>answer|reply|respond|write|talk|speak|communicate|explain\s+things|"
        r"format\s+(?:your\s+)?(?:answers|responses|code|replies))(?:\s+to\s+me)?\s+"
        r"(?P<prep>in|using|with|as)\s+(?P<x>.+)"
    ),
    _en_answer_in,
)


_SMALL_TALK_IMPERATIVE = re.compile(
    r"^(?:worry|mind|bother|mention\s+it|be\s+silly|be\s+sorry|thank\s+me|panic|stress|"
    r"get\s+me\s+wrong|judge|laugh|forget|hesitate)\b",
    re.I,
)


def _en_always_never(m: re.Match[str], depth: int) -> Hit | None:
    word = m.group("word").lower()
    x = m.group("x")
    if not _useful(x) or _SMALL_TALK_IMPERATIVE.match(x) or re.match(r"^(?:i|we)\b", x, re.I):
        return None
    please = 1 if m.group("please") else 0
    action = _third_en(x, instruction=True)
    if word == "only":
        return hit(f"The user wants the agent to only {action}", "instruction", 8 + please)
    return hit(f"The user wants the agent to {word} {action}", "instruction", 9 + please)


ALWAYS_NEVER: Rule = (
    _en(r"^(?P<please>please\s+)?(?P<word>always|never|only)\s+(?P<x>.+)"),
    _en_always_never,
)


def _en_dont(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x) or _SMALL_TALK_IMPERATIVE.match(x):
        return None
    please = 1 if m.group("please") else 0
    action = _third_en(x, instruction=True)
    return hit(f"The user wants the agent not to {action}", "instruction", 8 + please)


DONT: Rule = (
    _en(r"^(?P<please>please\s+)?(?:don't|do\s+not|dont|stop|quit)\s+(?P<x>.+)"),
    _en_dont,
)


def _en_want_you(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    action = _third_en(x, instruction=True)
    return hit(f"The user wants the agent to {action}", "instruction", 8)


WANT_YOU: Rule = (
    _en(
        r"^i\s+(?:really\s+)?(?:want|need|prefer|expect|'d\s+like|would\s+like|'d\s+prefer|"
        r"would\s+prefer)\s+you\s+to\s+(?P<x>.+)"
    ),
    _en_want_you,
)


def _en_please_verb(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    verb = " ".join(m.group("verb").lower().split())
    action = _third_en(x, instruction=True)
    return hit(f"The user wants the agent to {verb} {action}", "instruction", 7)


PLEASE_VERB: Rule = (
    _en(
        r"^(?:i'd\s+like\s+you\s+to\s+|i'd\s+prefer\s+you\s+to\s+|please\s+)"
        r"(?P<verb>use|avoid|include|format|address\s+me\s+as|refer\s+to\s+me\s+as|"
        r"be|add|cite|prefer|stick\s+to|switch\s+to)\s+(?P<x>.+)"
    ),
    _en_please_verb,
)


def _en_be_style(m: re.Match[str], depth: int) -> Hit | None:
    return hit(f"The user wants the agent to be {clean(m.group('x'))}", "instruction", 7)


BE_STYLE: Rule = (
    _en(
        r"^be\s+(?P<x>(?:more\s+|less\s+|very\s+|extra\s+)?(?:concise|brief|short|formal|"
        r"informal|casual|polite|direct|detailed|specific|honest|blunt|precise|"
        r"thorough|technical|friendly|professional|succinct)\b.*)"
    ),
    _en_be_style,
)
