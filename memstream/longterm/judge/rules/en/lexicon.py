"""The English judge's vocabulary: dates, fillers, questions, clause boundaries, relations and
the first person."""

from __future__ import annotations

import re

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


_SUBJ = r"^i\s+" + _ADV
