"""The English grammar of the rule-based judge: first-person statements rewritten in the third
person ("I live in Paris" -> "The user lives in Paris"). Rules are tried in order; the first
that yields a hit wins."""

from __future__ import annotations

import re
from collections.abc import Callable

from memstream.longterm.judge.rules.common import Hit, Rule, boost, clean, first_hit, hit
from memstream.longterm.models import Category

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
# ``(?<!\s)`` starts a match only where a run of white space starts: from inside one, the rest
# of the run leads to the same end, and trying every position of a long run is quadratic.
_CLAUSE_SPLIT_EN = re.compile(
    r",?(?<!\s)\s+(?:and|but|so|plus|also|while|whereas)\s+"
    r"(?=(?:i|i'm|i've|i'd|im|my|we|we've|we're)\b(?!\s+(?:are|were|have|both|'ve|'re)\b))"
    r"|[,:]\s*(?=(?:i|i'm|i've|im|my|we|we've|we're)\b)"
    r"|(?<!\s)\s+-+\s+",
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

    return _FIRST_PERSON.sub(swap, clean(text))


def _useful(text: str) -> bool:
    text = clean(text)
    return len(text) >= 2 and not _PRONOUN_ONLY.match(text)


_NAME_STOP = re.compile(
    r"^(?:back|later|tomorrow|when|if|at|on|anytime|now|again|please|asap|sometime|soon|"
    r"tonight|in|after|before|whenever|maybe|a|an|the|not|so|too|to|from|by|it|that)\b",
    re.I,
)


def _name(text: str) -> str | None:
    """A person's name at the start of ``text`` (up to four words)."""
    text = re.split(r",|;|\s+(?:and|but|because|since|from|who|which)\s+|\s+-\s+", text)[0]
    words = clean(text).split()[:4]
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


# English handlers: (match, depth) -> hit or None.


def _en_remember(m: re.Match[str], depth: int) -> Hit | None:
    inner = m.group("x")
    found = boost(_en_clause(inner, depth + 1)) if depth < 2 else None
    if found is not None:
        return found
    if not _useful(inner):
        return None
    return hit(f"The user wants the agent to remember that {_third_en(inner)}", "instruction", 8)


_YOU_SHOULD = re.compile(
    r"^(?:(?:you\s+(?:should|must|will|can|need\s+to|have\s+to)|please|i\s+want\s+you\s+to|"
    r"i'd\s+like\s+you\s+to|i\s+would\s+like\s+you\s+to|can\s+you|could\s+you)\s+)+",
    re.I,
)


def _en_from_now_on(m: re.Match[str], depth: int) -> Hit | None:
    inner = _YOU_SHOULD.sub("", m.group("x").strip(" ,"))
    if depth < 2:
        found = _en_clause(inner, depth + 1)
        if found is not None:
            return boost(found)
    if not _useful(inner) or re.match(r"^i\b", inner, re.I):
        return None
    action = _third_en(inner, instruction=True)
    return hit(f"The user wants the agent to {action} from now on", "instruction", 9)


def _en_call_me(m: re.Match[str], depth: int) -> Hit | None:
    name = _name(m.group("x"))
    if name is None:
        return None
    return hit(f"The user wants to be called {name}", "instruction", 8)


def _en_name(m: re.Match[str], depth: int) -> Hit | None:
    name = _name(m.group("x"))
    if name is None:
        return None
    return hit(f"The user's name is {name}", "personal_fact", 9)


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


def _en_dont(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x) or _SMALL_TALK_IMPERATIVE.match(x):
        return None
    please = 1 if m.group("please") else 0
    action = _third_en(x, instruction=True)
    return hit(f"The user wants the agent not to {action}", "instruction", 8 + please)


def _en_want_you(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    action = _third_en(x, instruction=True)
    return hit(f"The user wants the agent to {action}", "instruction", 8)


def _en_please_verb(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    verb = " ".join(m.group("verb").lower().split())
    action = _third_en(x, instruction=True)
    return hit(f"The user wants the agent to {verb} {action}", "instruction", 7)


def _en_be_style(m: re.Match[str], depth: int) -> Hit | None:
    return hit(f"The user wants the agent to be {clean(m.group('x'))}", "instruction", 7)


def _en_allergy(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    strong = 1 if re.search(r"\b(?:severely|very|deathly|highly)\b", m.group(0), re.I) else 0
    return hit(f"The user is allergic to {_third_en(x)}", "personal_fact", 8 + strong)


def _en_favourite(m: re.Match[str], depth: int) -> Hit | None:
    thing, value = clean(m.group("thing")), m.group("x")
    if not _useful(value) or not thing:
        return None
    verb = m.group("verb").lower()
    verb = "is" if verb == "'s" else verb
    return hit(
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


def _en_fan(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x) or _MENTIONS_YOU.search(x):
        return None
    size = clean(m.group("size") or "")
    return hit(f"The user is a {size + ' ' if size else ''}fan of {_third_en(x)}", "preference", 6)


def _en_rather(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x) or _MENTIONS_YOU.search(x):
        return None
    return hit(f"The user would rather {_third_en(x)}", "preference", 5)


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


def _en_dont_eat(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    verb = " ".join(m.group("verb").lower().split())
    out = {"can't": "cannot", "cannot": "cannot", "can not": "cannot"}.get(verb, "does not")
    return hit(f"The user {out} {m.group('eat').lower()} {_third_en(x)}", "personal_fact", 7)


def _en_age(m: re.Match[str], depth: int) -> Hit | None:
    age = int(m.group("n"))
    if not 1 <= age <= 120:
        return None
    return hit(f"The user is {age} years old", "personal_fact", 7)


def _en_moved(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    back = "back " if m.group("back") else ""
    origin = m.group("a")
    source = f"from {_third_en(origin)} " if origin else ""
    return hit(f"The user moved {back}{source}to {_third_en(x)}", "personal_fact", 8)


def _en_moving(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    origin = m.group("a")
    source = f" from {_third_en(origin)}" if origin else ""
    return hit(f"The user is moving{source} to {_third_en(x)}", "plan", 6)


def _en_from(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x) or _HAS_DATE_EN.match(x):
        return None
    return hit(f"The user is from {_third_en(x)}", "personal_fact", 7)


def _en_born(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    return hit(f"The user was born {m.group('prep').lower()} {_third_en(x)}", "personal_fact", 7)


def _en_work(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x) or _MENTIONS_YOU.search(x):
        return None
    prep = m.group("prep").lower()
    importance = 8 if prep in ("at", "for", "as", "in") else 7
    return hit(f"The user works {prep} {_third_en(x)}", "personal_fact", importance)


def _en_speak(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x) or _MENTIONS_YOU.search(x):
        return None
    return hit(f"The user speaks {_third_en(x)}", "personal_fact", 6)


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


def _en_progressive(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _HAS_DATE_EN.search(x) or _MENTIONS_YOU.search(x):
        return None
    return hit(f"The user is {_third_en(x)}", "plan", 6)


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


def _en_my_thing(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x):
        return None
    thing = " ".join(m.group("thing").lower().split())
    return hit(f"The user's {thing} {m.group('verb').lower()} {_third_en(x)}", "personal_fact", 7)


def _en_dated(m: re.Match[str], depth: int) -> Hit | None:
    """Any first-person statement with a future date: "I fly to Rome on Monday"."""
    verb, rest = m.group("verb"), m.group("x")
    if not _HAS_DATE_EN.search(rest) or _MENTIONS_YOU.search(rest):
        return None
    third = _conjugate(verb)
    if third is None:
        return None
    return hit(f"The user {third} {_third_en(rest)}", "plan", 5)


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


def _en_we(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x) or _MENTIONS_YOU.search(x):
        return None
    rel = m.group("rel").lower()
    text = f"The user and their {rel} {_third_en(x)}"
    if _HAS_DATE_EN.search(x) or re.match(r"^(?:are|'re)\s+(?:going|planning)\b", x, re.I):
        return hit(text.replace(" 're ", " are ").replace(" 've ", " have "), "plan", 6)
    return hit(text.replace(" 're ", " are ").replace(" 've ", " have "), "relationship", 6)


def _en_hobby(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x").strip()
    if x and (not _useful(x) or _MENTIONS_YOU.search(x)):
        return None
    verb = _conjugate(m.group("verb").lower()) or m.group("verb")
    return hit(f"The user {verb}{' ' + _third_en(x) if x else ''}", "preference", 5)


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


def _en_article(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _useful(x) or _MENTIONS_YOU.search(x) or len(x.split()) > 12:
        return None
    if _HAS_DATE_EN.search(x) and re.search(r"\b(?:meeting|appointment|trip|flight)\b", x, re.I):
        return hit(f"The user has {_third_en(x)}", "plan", 6)
    return hit(f"The user is {_third_en(x)}", "personal_fact", 7)


def _en_will_dispatch(m: re.Match[str], depth: int) -> Hit | None:
    x = m.group("x")
    if not _HAS_DATE_EN.search(x) or not _useful(x) or _MENTIONS_YOU.search(x):
        return None
    if re.match(r"^(?:be\s+)?(?:back|right\s+back)\b", x, re.I):
        return None
    return hit(f"The user plans to {_third_en(x)}", "plan", 6)


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
_EP_RULES: list[Rule] = [
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
_EN_RULES: list[Rule] = [
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


def _en_clause(clause: str, depth: int = 0) -> Hit | None:
    clause = _FILLER_EN.sub("", clause.strip()).strip(" ,")
    clause = clean(clause)
    if not clause or _QUESTION_START_EN.match(clause):
        return None
    leading = _LEADING_DATE_EN.match(clause)
    if leading:
        date = leading.group("date")
        if _RELATIVE_DATE.match(date):
            date = date[:1].lower() + date[1:]
        clause = f"{leading.group('rest')} {date}"
    return first_hit(_EN_RULES, clause, depth)


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


def judge_en(sentence: str) -> list[Hit]:
    if _is_question_en(sentence) or _is_hypothetical_en(sentence):
        return []
    body = clean(sentence)
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
