"""What the assistant told the user, by rules: its recommendations and its promises, written
attributed ("The assistant recommended Roscioli to the user."), never as facts about the
user. One sentence at a time, like the user's rules."""

from __future__ import annotations

import re

from memstream.longterm.judge.rules.common import Hit, clean, hit

# "I'd recommend X", "I would highly recommend X", "I suggest trying X", "my top pick is X".
_RECOMMEND = re.compile(
    r"(?:^|\b)(?:I(?:'d| would)?\s+(?:(?:highly|strongly|definitely|personally)\s+)?"
    r"(?:recommend|suggest)(?:ing)?|my\s+(?:top\s+)?(?:recommendation|suggestion|pick)\s+"
    r"(?:would\s+be|is))\s+(?P<what>.{3,200})",
    re.I,
)
# "I'll remind you ...", "I will send you ...", "I've booked ..." (a promise or an action).
_PROMISE = re.compile(
    r"(?:^|\b)I(?:'ll| will|'ve| have)\s+(?P<what>(?:remind|send|book|schedule|follow up|"
    r"add|set up|note|reserve|booked|scheduled|added|set|noted|reserved)\b.{3,200})",
    re.I,
)
_YOU = [
    (re.compile(r"\byourself\b", re.I), "themselves"),
    (re.compile(r"\byours\b", re.I), "the user's"),
    (re.compile(r"\byour\b", re.I), "the user's"),
    (re.compile(r"\byou\b", re.I), "the user"),
]


def _third_person(text: str) -> str:
    for pattern, replacement in _YOU:
        text = pattern.sub(replacement, text)
    return text


def judge_assistant_en(sentence: str) -> list[Hit]:
    """The assistant's recommendation or promise in ``sentence``, if any."""
    if sentence.rstrip().endswith("?"):
        return []
    found = _RECOMMEND.search(sentence)
    if found:
        what = clean(_third_person(found.group("what")))
        # "For a romantic dinner, I would recommend ...": what the recommendation was for.
        purpose = clean(_third_person(sentence[: found.start()])).strip(" ,")
        if len(what) >= 3:
            core = f"The assistant recommended {what} to the user"
            if len(purpose) >= 3:
                core += f", {purpose[:1].lower()}{purpose[1:]}"
            return [hit(core, "episode", 4)]
    found = _PROMISE.search(sentence)
    if found:
        what = clean(_third_person(found.group("what")))
        if len(what) >= 3:
            return [hit(f"The assistant told the user it will {what}", "plan", 5)]
    return []
