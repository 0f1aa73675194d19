"""English rules for the user's plans: going to, planning to, will, and any dated statement."""

from __future__ import annotations

import re

from memstream.longterm.judge.rules.common import Hit, Rule, hit
from memstream.longterm.judge.rules.en.lexicon import _HAS_DATE_EN, _I_AM, _MENTIONS_YOU
from memstream.longterm.judge.rules.en.rewrite import _conjugate, _en, _third_en, _useful

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


def _en_plan(m: re.Match[str], depth: int) -> Hit | None:
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
    return hit(text, "plan", importance)


GOING_TO: Rule = (
    _en(
        rf"^{_I_AM}\s+(?:(?:really|also|still|just|actually|seriously|definitely)\s+)*"
        r"(?P<verb>going|planning|about|hoping|gonna|intending)\s+(?P<to>to\s+)?(?P<x>.+)"
    ),
    _en_plan,
)


PLAN_TO: Rule = (
    _en(
        r"^i\s+(?:(?:really|also|still|just|definitely|actually)\s+)*(?P<verb>plan|intend|"
        r"want|hope|aim|expect|need)\s+(?P<to>to)\s+(?P<x>.+)"
    ),
    _en_plan,
)


def _en_progressive(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _HAS_DATE_EN.search(x) or _MENTIONS_YOU.search(x):
        return None
    return hit(f"The user is {_third_en(x)}", "plan", 6)


PROGRESSIVE: Rule = (
    _en(
        rf"^{_I_AM}\s+(?P<x>(?:flying|travel+ing|visiting|leaving|meeting|starting|going|"
        r"heading|driving|taking|attending|getting|having|seeing|giving|running|"
        r"presenting|moving|coming|returning|celebrating|hosting|joining)\b.*)"
    ),
    _en_progressive,
)


def _en_dated(m: re.Match[str], depth: int) -> Hit | None:
    """Any first-person statement with a future date: "I fly to Rome on Monday"."""
    verb, rest = m.group("verb"), m.group("x")
    if not _HAS_DATE_EN.search(rest) or _MENTIONS_YOU.search(rest):
        return None
    third = _conjugate(verb)
    if third is None:
        return None
    return hit(f"The user {third} {_third_en(rest)}", "plan", 5)


DATED: Rule = (
    _en(r"^i\s+(?P<verb>[a-z]+)\s+(?P<x>.+)"),
    _en_dated,
)


def _en_will_dispatch(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _HAS_DATE_EN.search(x) or not _useful(x) or _MENTIONS_YOU.search(x):
        return None
    if re.match(r"^(?:be\s+)?(?:back|right\s+back)\b", x, re.I):
        return None
    return hit(f"The user plans to {_third_en(x)}", "plan", 6)


WILL: Rule = (
    _en(r"^i(?:\s+(?P<verb>will|shall)|(?P<verb2>'ll))\s+(?P<to>)(?P<x>.+)"),
    _en_will_dispatch,
)
