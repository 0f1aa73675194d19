"""English rules for facts about the user: name, allergies, favourites and preferences, status,
age, where they live, come from and work, what they study and speak, relations, hobbies."""

from __future__ import annotations

import re

from memstream.longterm.judge.rules.common import Handler, Hit, Rule, clean, hit
from memstream.longterm.judge.rules.en.lexicon import (
    _ABOUT_ANSWERS,
    _CLOSE_REL,
    _FAMILY_REL,
    _HAS_DATE_EN,
    _HAS_REL_EN,
    _I_AM,
    _MENTIONS_YOU,
    _REL_EN,
    _STRONG,
    _SUBJ,
)
from memstream.longterm.judge.rules.en.rewrite import _conjugate, _en, _name, _third_en, _useful
from memstream.longterm.models import Category


def _fact(
    template: str,
    category: Category,
    importance: int,
    *,
    about_you: bool = False,
    refused: re.Pattern[str] | None = None,
) -> Handler:
    """The handler that writes the capture ``x`` (and the pattern's other named groups, in
    lower case) into ``template``: none for a capture of no use, one that speaks of the
    assistant (``about_you``) or one that ``refused`` matches at its start."""

    def handler(m: re.Match[str], depth: int) -> Hit | None:
        x = m.group("x")
        if not _useful(x) or (about_you and _MENTIONS_YOU.search(x)):
            return None
        if refused is not None and refused.match(x):
            return None
        words = {k: " ".join(v.lower().split()) for k, v in m.groupdict("").items() if k != "x"}
        return hit(template.format(x=_third_en(x), **words), category, importance)

    return handler


def _named(template: str, category: Category, importance: int) -> Handler:
    """The handler that writes the name the capture ``x`` holds into ``template``."""

    def handler(m: re.Match[str], depth: int) -> Hit | None:
        name = _name(m.group("x"))
        return None if name is None else hit(template.format(x=name), category, importance)

    return handler


CALL_ME: Rule = (
    _en(
        r"^(?:(?:please|just|you\s+can|you\s+may|feel\s+free\s+to|everyone\s+calls\s+me\s+\w+"
        r"\s+so)\s+)*call\s+me\s+(?P<x>.+)"
    ),
    _named("The user wants to be called {x}", "instruction", 8),
)


NAME: Rule = (
    _en(
        rf"^(?:my\s+name\s+is|my\s+name's|my\s+names|{_I_AM}\s+called|i\s+go\s+by|"
        rf"the\s+name's|people\s+call\s+me|{_I_AM}\s+named)\s+(?P<x>.+)"
    ),
    _named("The user's name is {x}", "personal_fact", 9),
)


def _en_allergy(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    strong = 1 if re.search(r"\b(?:severely|very|deathly|highly)\b", m.group(0), re.I) else 0
    return hit(f"The user is allergic to {_third_en(x)}", "personal_fact", 8 + strong)


ALLERGY: Rule = (
    _en(
        rf"^(?:{_I_AM}\s+(?:(?:severely|very|deathly|highly|also|really)\s+)*allergic\s+to|"
        rf"i\s+have\s+(?:an?\s+|a\s+severe\s+)?allerg(?:y|ies)\s+to)\s+(?P<x>.+)"
    ),
    _en_allergy,
)


def _en_favourite(m: re.Match[str], depth: int) -> Hit | None:
    thing, value = clean(m.group("thing")), m.group("x")
    if not _useful(value) or not thing:
        return None
    verb = m.group("verb").lower()
    verb = "is" if verb == "'s" else verb
    return hit(
        f"The user's favourite {_third_en(thing)} {verb} {_third_en(value)}", "preference", 6
    )


FAVOURITE: Rule = (
    _en(
        r"^my\s+(?:all[-\s]time\s+|absolute\s+)?favou?rite\s+(?P<thing>[\w\s'-]{1,40}?)\s+"
        r"(?P<verb>is|are|was|'s)\s+(?P<x>.+)"
    ),
    _en_favourite,
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


def _en_preference(m: re.Match[str], depth: int) -> Hit | None:
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
    return hit(f"The user {word} {_third_en(x)}", category, importance)


PREFERENCE: Rule = (
    _en(
        _SUBJ + r"(?P<verb>love|like|enjoy|adore|prefer|hate|loathe|detest|dislike|"
        r"can't\s+stand|cannot\s+stand|can\s+not\s+stand|don't\s+(?:really\s+)?like|"
        r"do\s+not\s+(?:really\s+)?like|dont\s+like|don't\s+enjoy|do\s+not\s+enjoy|"
        r"dont\s+enjoy|don't\s+love|do\s+not\s+love)\s+(?P<x>.+)"
    ),
    _en_preference,
)


def _en_fan(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x) or _MENTIONS_YOU.search(x):
        return None
    size = clean(m.group("size") or "")
    return hit(f"The user is a {size + ' ' if size else ''}fan of {_third_en(x)}", "preference", 6)


FAN: Rule = (
    _en(
        rf"^{_I_AM}\s+(?:also\s+|really\s+)?(?:a\s+)?(?P<size>(?:big|huge|massive|great|"
        r"die-?hard)\s+)?fan\s+of\s+(?P<x>.+)"
    ),
    _en_fan,
)


RATHER: Rule = (
    _en(r"^i(?:'d|\s+would)\s+(?:much\s+)?rather\s+(?P<x>.+)"),
    _fact("The user would rather {x}", "preference", 5, about_you=True),
)


def _en_status(m: re.Match[str], depth: int) -> Hit | None:
    status = clean(m.group("x"))
    rest = _third_en(m.group("rest") or "")
    diet = re.match(
        r"(?:vegetarian|vegan|pescatarian|lactose|gluten|celiac|coeliac|diabetic|"
        r"kosher|halal)",
        status,
        re.I,
    )
    text = f"The user is {m.group('art') or ''}{status}{' ' + rest if rest else ''}"
    return hit(text, "personal_fact", 8 if diet else 7)


STATUS: Rule = (
    _en(
        rf"^{_I_AM}\s+(?:(?:also|now|strictly|fully|currently|still|happily)\s+)*"
        r"(?P<art>an?\s+)?(?P<x>vegetarian|vegan|pescatarian|lactose[-\s]intolerant|"
        r"gluten[-\s]intolerant|gluten[-\s]free|celiac|coeliac|diabetic|kosher|halal|"
        r"married|single|divorced|engaged|widowed|retired|pregnant|left-handed|"
        r"right-handed|colou?r-?blind|deaf|blind|unemployed|self-employed|"
        r"freelancing|a\s+student|an?\s+\w+\s+student)\b(?P<rest>.*)"
    ),
    _en_status,
)


def _en_dont_eat(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    verb = " ".join(m.group("verb").lower().split())
    out = {"can't": "cannot", "cannot": "cannot", "can not": "cannot"}.get(verb, "does not")
    return hit(f"The user {out} {m.group('eat').lower()} {_third_en(x)}", "personal_fact", 7)


DONT_EAT: Rule = (
    _en(
        r"^i\s+(?P<verb>don't|do\s+not|dont|never|can't|cannot|can\s+not)\s+"
        r"(?P<eat>eat|drink)\s+(?P<x>.+)"
    ),
    _en_dont_eat,
)


def _en_age(m: re.Match[str], depth: int) -> Hit | None:
    age = int(m.group("n"))
    if not 1 <= age <= 120:
        return None
    return hit(f"The user is {age} years old", "personal_fact", 7)


AGE: Rule = (
    _en(
        rf"^{_I_AM}\s+(?:now\s+|already\s+|almost\s+|turning\s+)?(?P<n>\d{{1,3}})"
        r"(?:\s*(?:years?|yrs?)(?:\s+old)?|\s*y/?o)?$"
    ),
    _en_age,
)


def _en_moved(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    back = "back " if m.group("back") else ""
    origin = m.group("a")
    source = f"from {_third_en(origin)} " if origin else ""
    return hit(f"The user moved {back}{source}to {_third_en(x)}", "personal_fact", 8)


MOVED: Rule = (
    _en(
        r"^i(?:'ve|\s+have)?\s+(?:just\s+|recently\s+|finally\s+|already\s+|actually\s+)*"
        r"(?:moved|relocated)\s+(?P<back>back\s+)?(?:from\s+(?P<a>.+?)\s+)?(?:back\s+)?"
        r"to\s+(?P<x>.+)"
    ),
    _en_moved,
)


def _en_moving(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    origin = m.group("a")
    source = f" from {_third_en(origin)}" if origin else ""
    return hit(f"The user is moving{source} to {_third_en(x)}", "plan", 6)


MOVING: Rule = (
    _en(
        rf"^{_I_AM}\s+(?:(?:also|soon|finally|actually)\s+)*(?:moving|relocating)\s+"
        r"(?:from\s+(?P<a>.+?)\s+)?to\s+(?P<x>.+)"
    ),
    _en_moving,
)


FROM: Rule = (
    _en(
        rf"^(?:{_I_AM}\s+(?:originally\s+)?from|i\s+(?:originally\s+)?come\s+from|"
        r"i\s+grew\s+up\s+in)\s+(?P<x>.+)"
    ),
    _fact("The user is from {x}", "personal_fact", 7, refused=_HAS_DATE_EN),
)


BORN: Rule = (
    _en(r"^i\s+was\s+born\s+(?P<prep>in|on|at)\s+(?P<x>.+)"),
    _fact("The user was born {prep} {x}", "personal_fact", 7),
)


def _en_work(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x) or _MENTIONS_YOU.search(x):
        return None
    prep = m.group("prep").lower()
    importance = 8 if prep in ("at", "for", "as", "in") else 7
    return hit(f"The user works {prep} {_third_en(x)}", "personal_fact", importance)


WORK: Rule = (
    _en(
        r"^(?:i\s+(?:currently\s+|now\s+|still\s+|mostly\s+|actually\s+)?work|"
        rf"{_I_AM}\s+(?:currently\s+|now\s+)?(?:working|employed))\s+"
        r"(?P<prep>at|for|in|as|from|with|on)\s+(?P<x>.+)"
    ),
    _en_work,
)


SPEAK: Rule = (
    _en(r"^i\s+(?:can\s+|also\s+)?speak\s+(?P<x>.+)"),
    _fact("The user speaks {x}", "personal_fact", 6, about_you=True),
)


_HAVE_EXCLUDE = re.compile(
    r"\b(?:question|questions|problem|problems|issue|issues|idea|ideas|bit|lot|feeling|doubt|"
    r"suggestion|request|bug|bugs|error|errors|minute|minutes|moment|second|quick|few|couple|"
    r"thought|favou?r|point|look|try|chance|clue|headache|cold|day|time|question\s+about)\b",
    re.I,
)


def _en_have(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    head = " ".join(x.split()[:3])
    if not _useful(x) or _HAVE_EXCLUDE.search(head) or _MENTIONS_YOU.search(x):
        return None
    text = f"The user has {_third_en(x)}"
    if _HAS_DATE_EN.search(x):
        return hit(text, "plan", 6)
    if _HAS_REL_EN.search(head):
        return hit(text, "relationship", 6)
    if re.search(r"\b(?:allerg|diabet|asthma|disease|disorder|condition)", x, re.I):
        return hit(text, "personal_fact", 8)
    return hit(text, "personal_fact", 6)


HAVE: Rule = (
    _en(
        r"^i(?:\s+have|'ve\s+got|\s+have\s+got|\s+got|\s+own)\s+(?P<x>(?:a|an|one|two|three|"
        r"four|five|six|seven|eight|nine|ten|\d+|several|many)\s+.+)"
    ),
    _en_have,
)


_REL_IMPORTANCE_NAMED = re.compile(r"^(?:named|called|'s\s+name|is\s+(?:named|called))", re.I)


def _en_relationship(m: re.Match[str], depth: int) -> Hit | None:
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
    return hit(f"The user's {rel}{named} {_third_en(rest)}", "relationship", importance)


RELATIONSHIP: Rule = (
    _en(
        r"^my\s+(?P<adj>(?:(?:older|younger|little|big|best|elder|oldest|youngest|twin|step|"
        r"baby|new|old|late|ex|eldest)[-\s]+)*)(?P<rel>" + _REL_EN + r")"
        r"(?:,?\s+(?P<who>(?-i:[A-Z][\w'-]+)),?)?"
        r"(?P<named>'s\s+name)?\s+(?P<rest>(?:is|are|was|named|called|works|worked|lives|"
        r"lived|likes|loves|hates|has|just|recently|moved|studies|goes|got|turned|will|"
        r"plays|teaches|runs|owns|'s|can't|cannot|doesn't)\b.*)"
    ),
    _en_relationship,
)


MY_THING: Rule = (
    _en(
        r"^my\s+(?P<thing>birthday|hometown|home\s+town|job|profession|occupation|major|"
        r"native\s+language|mother\s+tongue|first\s+language|nationality|timezone|"
        r"time\s+zone|goal|dream|blood\s+type|zodiac\s+sign|(?:middle|last|full|first)"
        r"\s+name|nickname|company|employer|role|job\s+title|diet|religion|pronouns)\s+"
        r"(?P<verb>is|are|was)\s+(?P<x>.+)"
    ),
    _fact("The user's {thing} {verb} {x}", "personal_fact", 7),
)


_NOT_NAMES = re.compile(
    r"^(?:Sorry|Fine|Good|Great|Okay|Ok|OK|Back|Here|Done|Ready|Not|So|Just|Also|Still|Glad|"
    r"Happy|Sad|Tired|Busy|Sure|Home|In|On|Out|Off|Afraid|Confused|Lost|Excited|Interested|"
    r"Curious|Serious|Kidding|Joking|Free|Available|Alright|Bored|Hungry|Sick|Late|Right|Wrong|"
    r"Always|Never|Very|Really|Pretty|The|A|An|English|French|German|Spanish|Italian|Chinese|"
    r"Japanese|Korean|American|British|Canadian|Australian|Indian|Russian|Dutch|Swiss|"
    r"Brazilian|Mexican|Irish|Scottish|Polish|Swedish|Norwegian|Danish|Finnish|Greek|"
    r"Turkish|Portuguese|Vietnamese|Thai|Muslim|Christian|Jewish|Buddhist|Hindu|Catholic)\b"
)


def _en_im_name(m: re.Match[str], depth: int) -> Hit | None:
    name = m.group("x")
    if _NOT_NAMES.match(name):
        if re.match(r"^[A-Z][a-z]+(?:ese|ish|ian|an|ch|ss|ek|ai|ic|im|sh|lic|du)$", name):
            return hit(f"The user is {name}", "personal_fact", 6)
        return None
    return hit(f"The user's name is {name}", "personal_fact", 8)


IM_NAME: Rule = (
    re.compile(r"^(?i:i'm|i\s+am|im)\s+(?P<x>[A-Z][a-z'-]+(?:\s+[A-Z][a-z'-]+){0,2})$"),
    _en_im_name,
)


def _en_we(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x) or _MENTIONS_YOU.search(x):
        return None
    rel = m.group("rel").lower()
    text = f"The user and their {rel} {_third_en(x)}"
    if _HAS_DATE_EN.search(x) or re.match(r"^(?:are|'re)\s+(?:going|planning)\b", x, re.I):
        return hit(text.replace(" 're ", " are ").replace(" 've ", " have "), "plan", 6)
    return hit(text.replace(" 're ", " are ").replace(" 've ", " have "), "relationship", 6)


WE: Rule = (
    _en(
        r"^my\s+(?P<rel>" + _REL_EN + r")\s+and\s+i\s+(?P<x>(?:are|were|have|'ve|'re|will|"
        r"both|plan|want|love|like|live|often|always|usually|got|just|recently)\b.+)"
    ),
    _en_we,
)


def _en_hobby(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x").strip()
    if x and (not _useful(x) or _MENTIONS_YOU.search(x)):
        return None
    verb = _conjugate(m.group("verb").lower()) or m.group("verb")
    return hit(f"The user {verb}{' ' + _third_en(x) if x else ''}", "preference", 5)


HOBBY: Rule = (
    _en(
        r"^i\s+(?:also\s+|often\s+|regularly\s+|sometimes\s+)?(?P<verb>play|practi[cs]e|"
        r"collect|paint|knit|surf|ski|swim|climb|bake|garden|meditate|volunteer)"
        r"(?P<x>\s+.+|$)"
    ),
    _en_hobby,
)


# Read on one line of clean text: "since ..." runs to the end, so its first match is the one.
_DURATION = re.compile(
    r"(?<!\s)\s+(?:for\s+(?:(?:the\s+)?(?:past|last)\s+)?(?:\w+\s+)?(?:years?|months?|weeks?|"
    r"days?|decades?|ages|a\s+while|a\s+long\s+time)$|since\s+(?s:.+)$)",
    re.I,
)


def _en_live_dispatch(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    x = _DURATION.sub("", clean(x)) or x
    verb = (m.group("ing") or m.group("live") or "live").lower()
    phrase = {"based": "is based", "staying": "is staying"}.get(verb, "lives")
    return hit(f"The user {phrase} in {_third_en(x)}", "personal_fact", 8)


LIVE: Rule = (
    _en(
        r"^(?:i\s+(?:currently\s+|now\s+|still\s+|actually\s+)?(?P<live>live|reside)|"
        r"i(?:'ve|\s+have)\s+(?:always\s+)?been\s+(?:living|residing|based)|"
        rf"{_I_AM}\s+(?:currently\s+|now\s+|still\s+)?(?P<ing>living|residing|based|staying))"
        r"\s+in\s+(?P<x>.+)"
    ),
    _en_live_dispatch,
)


def _en_study_dispatch(m: re.Match[str], depth: int) -> Hit | None:
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
    return hit(f"The user {phrase} {_third_en(x)}", "personal_fact", importance)


STUDY: Rule = (
    _en(
        r"^(?:i\s+(?:currently\s+)?(?P<verb>study|studied|major\s+in|majored\s+in|"
        rf"graduated\s+from)|{_I_AM}\s+(?:currently\s+|also\s+|now\s+)?"
        r"(?P<ing>studying|majoring\s+in|learning))\s+(?P<x>.+)"
    ),
    _en_study_dispatch,
)


def _en_article(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x) or _MENTIONS_YOU.search(x) or len(x.split()) > 12:
        return None
    if _HAS_DATE_EN.search(x) and re.search(r"\b(?:meeting|appointment|trip|flight)\b", x, re.I):
        return hit(f"The user has {_third_en(x)}", "plan", 6)
    return hit(f"The user is {_third_en(x)}", "personal_fact", 7)


ARTICLE: Rule = (
    _en(
        rf"^(?:{_I_AM}|i\s+work\s+as)\s+(?P<x>an?\s+(?!(?:bit|little|lot|tad|kind|sort|"
        r"big\s+fan|huge\s+fan|fan|few|couple|good\s+time|great\s+time|question|"
        r"hurry|rush|mood|mess)\b).+)"
    ),
    _en_article,
)
