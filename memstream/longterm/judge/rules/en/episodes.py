"""English rules for episodes: what the user did, has done or is doing ("I went to a support
group yesterday", "I've been reading 'Charlotte's Web'")."""

from __future__ import annotations

import re
from collections.abc import Callable

from memstream.longterm.judge.rules.common import Hit, Rule, clean, hit
from memstream.longterm.judge.rules.en.lexicon import (
    _ANY_DATE_EN,
    _HAS_DATE_EN,
    _MENTIONS_YOU,
    _REL_EN,
)
from memstream.longterm.judge.rules.en.rewrite import _en, _third_en

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
# Where the object phrase ends; the text before the match is cleaned (white space stripped),
# so a match need not take the white space before it, and a run of white space is entered at
# its start only (``(?<!\s)``): ``\s*`` before ``\s+``, tried at every position, was cubic.
_EP_CUT = re.compile(
    r"[;(]|\s-+\s|—|–|(?:,|,?(?<!\s)\s+(?:and|but|so|because|cause|since|as|which|where|"
    r"when|though|although|while|until|cuz))\s+(?:it|it's|its|this|that|they|they're|he|she|"
    r"there|everyone|everybody|you|people|we|we're)\b",
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
    text = clean(text)
    cut = _EP_CUT.search(text)
    obj = clean(text[: cut.start()] if cut else text)
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


def _en_episode(kind: str) -> Callable[[re.Match[str], int], Hit | None]:
    """The handler of one tense of the episodic rules: past, perfect, perfect_ing or ing."""

    def handler(m: re.Match[str], depth: int) -> Hit | None:
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
            return hit(text, "plan", 6)  # "We're hosting a talent show next month"
        return hit(text, "personal_fact", 6)

    return handler


_HAVE_EN = r"(?:'ve|\s+have)\s+"
EPISODE_RULES: list[Rule] = [
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
