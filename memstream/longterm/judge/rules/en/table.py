"""The English rule table, in the order the rules are tried (the first that yields a hit wins),
and the clause judge that walks it."""

from __future__ import annotations

import re

from memstream.longterm.judge.rules.common import Hit, Rule, clean, first_hit
from memstream.longterm.judge.rules.en import episodes, instructions, plans, profile
from memstream.longterm.judge.rules.en.lexicon import (
    _ANY_DATE_EN,
    _CLAUSE_SPLIT_EN,
    _FILLER_EN,
    _HYPOTHETICAL_EN,
    _LEADING_DATE_EN,
    _QUESTION_START_EN,
    _REL_EN,
    _WOULD_LIKE,
)


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


_EN_RULES: list[Rule] = [
    instructions.remember(_en_clause),
    instructions.from_now_on(_en_clause),
    profile.CALL_ME,
    profile.NAME,
    profile.IM_NAME,
    instructions.KEEP_SHORT,
    instructions.ANSWER_IN,
    instructions.ALWAYS_NEVER,
    instructions.DONT,
    instructions.WANT_YOU,
    instructions.PLEASE_VERB,
    instructions.BE_STYLE,
    profile.ALLERGY,
    profile.FAVOURITE,
    profile.PREFERENCE,
    profile.FAN,
    profile.RATHER,
    profile.STATUS,
    profile.DONT_EAT,
    profile.AGE,
    profile.LIVE,
    profile.MOVED,
    profile.MOVING,
    profile.FROM,
    profile.BORN,
    profile.WORK,
    profile.STUDY,
    profile.SPEAK,
    profile.ARTICLE,
    profile.HAVE,
    plans.GOING_TO,
    plans.PLAN_TO,
    plans.WILL,
    plans.PROGRESSIVE,
    profile.RELATIONSHIP,
    profile.MY_THING,
    profile.WE,
    profile.HOBBY,
    *episodes.EPISODE_RULES,
    plans.DATED,
]


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
