"""The slot facts a memory text states, read by a small grammar in English and in Chinese.

Facts are extracted from normalised third-person memory texts ("The user ...", "User ...",
"用户..."; a text may also start directly with the predicate, "Lives in Paris"). A clause
joined by "and" / "but" (or a Chinese clause after a comma) is read with the same subject.
Slots (``Fact.slot``): ``residence``, ``employer``, ``job``, ``name``, ``age``, ``diet`` and
``favourite:<thing>`` hold one value each (a different value is an update); ``likes`` holds
many (only a polarity flip on the same object is a contradiction). A fact can be negative
("no longer lives in Paris", "used to work at Google", "不喜欢猫"): it contradicts the same
value held positively. Values are compared by stemmed words (``Fact.key``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from memstream.text.normalise import comparison_form, fold
from memstream.text.scripts import has_han
from memstream.text.stem import stem

MAX_VALUE_WORDS = 6
MAX_CHAINED_PREDICATES = 8  # "lives in Paris and works at Google and ...": more is not read
MAX_CJK_VALUE_CHARS = 20
SINGLE_VALUED = ("residence", "employer", "job", "name", "age", "diet", "favourite:")
"""Slots (or slot prefixes) holding one value: a different value replaces the old."""


@dataclass(frozen=True, slots=True)
class Fact:
    """One slot value stated by a memory text; ``positive`` False for "no longer ..."."""

    slot: str
    value: str
    positive: bool = True

    @property
    def single_valued(self) -> bool:
        return self.slot.startswith(SINGLE_VALUED)

    @property
    def key(self) -> str:
        return " ".join(stem(w) if w.isascii() and w.isalpha() else w for w in self.value.split())

    def __str__(self) -> str:
        return f"{self.slot}{'=' if self.positive else '!='}{self.value}"


@dataclass(frozen=True, slots=True)
class Parsed:
    """The facts of a text; ``complete`` when they cover all of it (nothing else is said)."""

    facts: tuple[Fact, ...]
    complete: bool


SlotRule = tuple[re.Pattern[str], str, bool, str | None]
"""(pattern matched at the start of a predicate, slot, positive, fixed value)"""


def _compiled(rules: list[tuple[str, str, bool, str | None]]) -> list[SlotRule]:
    return [(re.compile(p), slot, positive, value) for p, slot, positive, value in rules]


# ---------------------------------------------------------------------------------------------
# English

_EN_SUBJECT = re.compile(r"(?:(?:the|this|our) )?users? ")
_EN_ADVERBS = re.compile(
    r"(?:(?:now|currently|still|also|recently|just|has|have|already|actually|really|finally"
    r"|officially|presently|meanwhile) )*"
)
_NOT = r"(?:does not|doesnt|do not|dont|did not|didnt|no longer|never)"
_PAST = r"(?:no longer|does not|doesnt|do not|dont|used to|previously|formerly|once|did not|didnt)"
_ART = r"(?:(?:a|an) )?"

# The value is the group ``v`` when there is one, else the words after the match. ``{k}`` in
# the slot is the group ``k``. Negative patterns come before the positive ones of a slot.
_EN_RULES = _compiled(
    [
        (r"(?:first |full |real |preferred |nick)?name is ", "name", True, None),
        (
            r"(?:is called|is named|goes by|prefers to be called|wants to be called"
            r"|likes to be called|asks to be called) ",
            "name",
            True,
            None,
        ),
        (r"(?:is|turned|is turning) (?P<v>\d{1,3}) (?:years?|yrs?) old\b ?", "age", True, None),
        (r"(?:is aged|age is|turned) (?P<v>\d{1,3})\b ?", "age", True, None),
        (
            r"(?:favourite|favorite) (?P<k>[^ ]+(?: [^ ]+)?) (?:is|are) no longer ",
            "favourite:{k}",
            False,
            None,
        ),
        (
            r"(?:favourite|favorite) (?P<k>[^ ]+(?: [^ ]+)?) (?:is|are) ",
            "favourite:{k}",
            True,
            None,
        ),
        (r"(?:is not|isnt|is no longer) " + _ART + r"vegan\b ?", "diet", False, "vegan"),
        (
            r"(?:is not|isnt|is no longer) " + _ART + r"vegetarian\b ?",
            "diet",
            False,
            "vegetarian",
        ),
        (r"(?:is|became|has become) " + _ART + r"(?:strict )?vegan\b ?", "diet", True, "vegan"),
        (
            r"(?:is|became|has become) " + _ART + r"(?:strict )?vegetarian\b ?",
            "diet",
            True,
            "vegetarian",
        ),
        (_NOT + r" eats? (?:any )?meat\b ?", "diet", True, "vegetarian"),
        (r"(?:eats|eat|started eating) meat\b ?", "diet", True, "omnivore"),
        (
            _PAST + r" (?:live|lives|lived|reside|resides|resided|stay|stays) in ",
            "residence",
            False,
            None,
        ),
        (r"(?:moved|has moved|relocated) (?:away |out )(?:from|of) ", "residence", False, None),
        (
            r"(?:lives|live|is living|resides|is residing|is based|is located|stays|is staying"
            r"|settled|has settled|is settled) in ",
            "residence",
            True,
            None,
        ),
        (
            r"(?:moved|relocated|has moved|has relocated|moved back|relocated back)"
            r"(?: from (?P<from>.+?))? to ",
            "residence",
            True,
            None,
        ),
        (r"(?:home|residence) is in ", "residence", True, None),
        (_PAST + r" (?:work|works|worked) (?:at|for) ", "employer", False, None),
        (
            r"(?:quit|left|has quit|has left) (?:(?:his|her|their|the|a) )?(?:job|position|role)"
            r" (?:at|with) ",
            "employer",
            False,
            None,
        ),
        (
            r"(?:works|work|is working|is employed|is now employed|works full time"
            r"|works part time) (?:at|for|with) ",
            "employer",
            True,
            None,
        ),
        (r"is employed by ", "employer", True, None),
        (
            r"(?:got|has|started|took|accepted) (?:a |an )?(?:new )?(?:job|position|role)"
            r" (?:at|with) ",
            "employer",
            True,
            None,
        ),
        (r"employer is ", "employer", True, None),
        (_PAST + r" (?:work|works|worked) as ", "job", False, None),
        (r"(?:works|work|is working|is employed) as ", "job", True, None),
        (r"(?:job|occupation|profession|job title) is ", "job", True, None),
        (
            _NOT + r" (?:really )?(?:like|likes|liked|love|loves|loved|enjoy|enjoys|enjoyed) ",
            "likes",
            False,
            None,
        ),
        (
            r"(?:dislikes|hates|detests|despises|cannot stand|cant stand|can not stand"
            r"|(?:is not|isnt) (?:a |much of a )?fan of|(?:is not|isnt) fond of"
            r"|(?:is not|isnt) into"
            r"|(?:has )?stopped (?:liking|enjoying)|(?:has )?lost interest in) ",
            "likes",
            False,
            None,
        ),
        (
            r"(?:likes|loves|enjoys|adores|prefers|is fond of|is (?:a )?(?:big |huge )?fan of"
            r"|is into|is passionate about|is keen on) ",
            "likes",
            True,
            None,
        ),
    ]
)

_EN_LEADING = frozenset(["the", "a", "an", "his", "her", "their", "to"])
_EN_BOUNDARY = frozenset(
    """
    with and since for because but where while now currently anymore after before as from to
    who which that near in on at last this next ago until when by so though although instead
    again too yet nowadays these over than rather or also very every each whose if during
    recently already about whereas around lately
    """.split()  # noqa: SIM905 - a word list reads better as text
)
_EN_CHAIN = frozenset(["and", "but", "while", "whereas", "also"])
# Words that may end a text without saying anything more ("lives in Berlin now").
_EN_FILLER = frozenset(
    """
    now currently anymore nowadays these days again too also as well at the moment right any more
    """.split()  # noqa: SIM905 - a word list reads better as text
)
_EN_SUBJECT_AGAIN = re.compile(r"(?:(?:the|this|our) )?(?:users?|he|she|they) ")
_SYNONYM_THINGS = {"color": "colour", "colors": "colour", "film": "movie", "films": "movie"}


def _en_value(words: list[str], *, numbers: bool = False) -> tuple[list[str], list[str]]:
    """The value words at the start of ``words`` and the words after them."""
    i = 0
    while i < len(words) and words[i] in _EN_LEADING:
        i += 1
    start = i
    while i < len(words) and i - start < MAX_VALUE_WORDS:
        w = words[i]
        if w in _EN_BOUNDARY or (not numbers and any(c.isdigit() for c in w)):
            break
        i += 1
    value = words[start:i]
    while value and value[-1] in _EN_LEADING:
        value.pop()
    return value, words[i:]


def _thing(k: str) -> str:
    words = [_SYNONYM_THINGS.get(w, w) for w in k.split()]
    return " ".join(stem(w) if w.isalpha() else w for w in words)


def _en_predicate(text: str) -> tuple[list[Fact], str | None]:
    """Facts of one predicate at the start of ``text`` and the unread rest, or ([], None)."""
    text = _EN_ADVERBS.sub("", text, count=1)
    for pattern, slot, positive, fixed in _EN_RULES:
        m = pattern.match(text)
        if m is None:
            continue
        groups = m.groupdict()
        if groups.get("k"):
            slot = slot.format(k=_thing(groups["k"]))
        rest = text[m.end() :].split()
        facts: list[Fact] = []
        if fixed is not None:
            facts.append(Fact(slot, fixed, positive))
        elif groups.get("v"):
            facts.append(Fact(slot, groups["v"], positive))
        else:
            value, rest = _en_value(rest)
            if not value:
                return [], None
            facts.append(Fact(slot, " ".join(value), positive))
        if groups.get("from"):
            old, _ = _en_value(groups["from"].split())
            if old:
                facts.append(Fact(slot, " ".join(old), False))
        elif slot == "residence" and positive and rest[:1] == ["from"]:
            # "moved to Berlin from Paris"
            old, rest = _en_value(rest[1:])
            if old:
                facts.append(Fact(slot, " ".join(old), False))
        return facts, " ".join(rest)
    return [], None


def _parse_en(text: str) -> Parsed:
    m = _EN_SUBJECT.match(text + " ")
    rest: str | None = text[m.end() :] if m else text
    facts: list[Fact] = []
    # Each predicate re-reads the rest of the text: a bounded chain keeps a long text linear.
    for _ in range(MAX_CHAINED_PREDICATES):
        if not rest:
            break
        found, rest = _en_predicate(rest)
        if not found:
            break
        facts += found
        words = (rest or "").split()
        if words and words[0] in _EN_CHAIN:
            after = " ".join(words[1:])
            again = _EN_SUBJECT_AGAIN.match(after + " ")
            rest = after[again.end() :] if again else after
            continue
        if all(w in _EN_FILLER for w in words):
            rest = ""
        break
    return Parsed(tuple(facts), bool(facts) and not rest)


# ---------------------------------------------------------------------------------------------
# Chinese

_ZH_SUBJECT = re.compile(r"(?:该|这位|这个)?用户(?:的)?")
_ZH_ADVERBS = re.compile(
    r"(?:现在|目前|如今|已经|最近|刚刚|刚|也|还|一直|很|非常|特别|真的|确实|仍然|依然|其实|平时)*"
)
_ZH_LIVE = r"(?:住|居住|生活|定居)在"
_ZH_WORK = r"(?:工作|上班|任职|就职)"
_ZH_TAIL = r"(?:了|的|啦|呢)?"
_ZH_RULES = _compiled(
    [
        (r"(?:名字|姓名)(?:是|叫)(?P<v>.+?)", "name", True, None),
        (r"名?叫(?!了)(?P<v>.+?)", "name", True, None),
        (r"(?:自称|希望被称为|希望被叫做|让别人叫他|让别人叫她)(?P<v>.+?)", "name", True, None),
        (r"(?:今年|现年)?(?P<v>\d{1,3})周?岁" + _ZH_TAIL, "age", True, None),
        (r"(?:的)?年龄(?:是|为)?(?P<v>\d{1,3})岁?" + _ZH_TAIL, "age", True, None),
        (r"最喜欢的(?P<k>.+?)是(?P<v>.+?)" + _ZH_TAIL, "favourite:{k}", True, None),
        (r"(?:不再|不)(?:吃素|是素食者|是素食主义者)" + _ZH_TAIL, "diet", False, "vegetarian"),
        (r"(?:是|是一名|是一位|是一个)?纯素(?:食)?(?:者|主义者)" + _ZH_TAIL, "diet", True, "vegan"),
        (
            r"(?:(?:是|是一名|是一位|是一个)?素食(?:者|主义者)|吃素|不吃肉|不吃荤)" + _ZH_TAIL,
            "diet",
            True,
            "vegetarian",
        ),
        (r"(?:开始)?(?:吃肉|吃荤)" + _ZH_TAIL, "diet", True, "omnivore"),
        (r"(?:不再|不|没有|没)" + _ZH_LIVE + r"(?P<v>.+?)" + _ZH_TAIL, "residence", False, None),
        (
            r"(?:以前|之前|曾经|原来|过去)" + _ZH_LIVE + r"(?P<v>.+?)(?:过)?" + _ZH_TAIL,
            "residence",
            False,
            None,
        ),
        (r"(?:搬离|搬出)了?(?P<v>.+?)" + _ZH_TAIL, "residence", False, None),
        (_ZH_LIVE + r"(?P<v>.+?)" + _ZH_TAIL, "residence", True, None),
        (
            r"(?:从(?P<from>.+?))?(?:搬到|搬去|搬家到|搬往|迁居到|迁居|移居到|移居|迁到|搬回)了?"
            r"(?P<v>.+?)(?:去了|了|去|居住|住|生活)?",
            "residence",
            True,
            None,
        ),
        (
            r"(?:不再|已经不|不|没有|没)在(?P<v>.+?)" + _ZH_WORK + _ZH_TAIL,
            "employer",
            False,
            None,
        ),
        (
            r"(?:以前|之前|曾经|原来|过去)在(?P<v>.+?)" + _ZH_WORK + r"(?:过)?" + _ZH_TAIL,
            "employer",
            False,
            None,
        ),
        (r"(?:已经)?从(?P<v>.+?)离职" + _ZH_TAIL, "employer", False, None),
        (r"辞去了?(?P<v>.+?)的(?:工作|职位)" + _ZH_TAIL, "employer", False, None),
        (r"在(?P<v>.+?)" + _ZH_WORK + _ZH_TAIL, "employer", True, None),
        (r"(?:就职于|任职于|供职于|受雇于)(?P<v>.+?)" + _ZH_TAIL, "employer", True, None),
        (r"(?:职业|工作)(?:是|为)(?P<v>.+?)" + _ZH_TAIL, "job", True, None),
        (r"是一(?:名|位)(?P<v>.+?)" + _ZH_TAIL, "job", True, None),
        (
            r"(?:不再|不太|不怎么|并不|从不|不)(?:喜欢|喜爱|爱)(?P<v>.+?)" + _ZH_TAIL,
            "likes",
            False,
            None,
        ),
        (r"(?:讨厌|厌恶|反感|受不了|不爱)(?P<v>.+?)" + _ZH_TAIL, "likes", False, None),
        (r"最?(?:喜欢|喜爱|热爱|爱(?!好))(?P<v>.+?)" + _ZH_TAIL, "likes", True, None),
    ]
)
_ZH_CUT = re.compile(r"因为|但是|但|而且|所以|并且|然后")
_ZH_CLAUSE = re.compile(r"[\s,;:!?。，、；：！？…]+|并且|而且|但是|同时")


def _zh_value(value: str) -> str | None:
    value = _ZH_CUT.split(value, maxsplit=1)[0]
    if not value or len(value) > MAX_CJK_VALUE_CHARS:
        return None
    return value


def _zh_predicate(clause: str) -> list[Fact]:
    clause = _ZH_ADVERBS.sub("", clause, count=1)
    for pattern, slot, positive, fixed in _ZH_RULES:
        m = pattern.fullmatch(clause)
        if m is None:
            continue
        groups = m.groupdict()
        if groups.get("k"):
            slot = slot.format(k=groups["k"])
        facts: list[Fact] = []
        if fixed is not None:
            facts.append(Fact(slot, fixed, positive))
        else:
            value = _zh_value(groups["v"] or "")
            if value is None:
                return []
            facts.append(Fact(slot, value, positive))
        if groups.get("from"):
            old = _zh_value(groups["from"])
            if old:
                facts.append(Fact(slot, old, False))
        return facts
    return []


def _parse_zh(text: str) -> Parsed:
    clauses = [c for c in _ZH_CLAUSE.split(text) if c]
    if not clauses:
        return Parsed((), False)
    m = _ZH_SUBJECT.match(clauses[0])
    if m:
        clauses[0] = clauses[0][m.end() :]
    facts: list[Fact] = []
    complete = True
    for i, clause in enumerate(clauses):
        if i:
            again = _ZH_SUBJECT.match(clause) or re.match(r"(?:他|她)的?", clause)
            if again:
                clause = clause[again.end() :]
        found = _zh_predicate(clause)
        if not found:
            complete = False
            if i == 0:
                break
        facts += found
    return Parsed(tuple(facts), bool(facts) and complete)


@lru_cache(maxsize=8192)
def parse(text: str) -> Parsed:
    """The slot facts a memory text states (see the module documentation)."""
    plain = comparison_form(text)
    if has_han(plain):
        # Chinese: clauses split on the original punctuation, spaces dropped.
        zh = _parse_zh(re.sub(r"(?<=\S) (?=\S)", "", fold(text).strip()))
        if zh.facts:
            return zh
    return _parse_en(plain)


def facts(text: str) -> tuple[Fact, ...]:
    """The slot facts of ``text``."""
    return parse(text).facts
