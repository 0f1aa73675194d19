"""The forms texts are compared in, from the lightest to the most forgiving.
Why it works this way: docs/design/normalise.md."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from memstream.text.scripts import CJK

_CJK_CHAR = re.compile(f"[{CJK}]")
# A unit is one CJK character, one word (letters and digits, a "." inside a number kept) or
# one symbol character (emoji, currency, "+" ...).
_UNIT = re.compile(rf"[{CJK}]|(?:[^\W_{CJK}]|(?<=\d)\.(?=\d))+|[^\w\s]")
_APOSTROPHES = str.maketrans("", "", "'’‘`´")
_LONE_DOT = re.compile(r"(?<!\d)\.|\.(?!\d)")  # every "." but one inside a number


def collapse_whitespace(text: str) -> str:
    """``text`` with each run of white space as one space, trimmed."""
    return " ".join(text.split())


def fold(text: str) -> str:
    """``text`` in NFKC, case-folded."""
    return unicodedata.normalize("NFKC", text).casefold()


def fold_spaces_and_case(text: str) -> str:
    """``text`` in NFKC with white space collapsed, case-folded; punctuation is kept."""
    return collapse_whitespace(unicodedata.normalize("NFKC", text)).casefold()


@lru_cache(maxsize=8192)
def comparison_units(text: str) -> tuple[str, ...]:
    """The units of ``text``'s comparison form: CJK characters, words, numbers, symbols."""
    folded = _LONE_DOT.sub(" ", fold(text).translate(_APOSTROPHES))
    cleaned = "".join(
        " " if unicodedata.category(ch).startswith("P") and ch != "." else ch for ch in folded
    )
    return tuple(_UNIT.findall(cleaned))


def is_cjk_unit(unit: str) -> bool:
    """Whether a comparison unit is a CJK character."""
    return len(unit) == 1 and _CJK_CHAR.match(unit) is not None


def comparison_form(text: str) -> str:
    """The form near duplicates are compared in (see the module documentation)."""
    units = comparison_units(text)
    parts: list[str] = []
    for i, unit in enumerate(units):
        if i and not (is_cjk_unit(unit) and is_cjk_unit(units[i - 1])):
            parts.append(" ")
        parts.append(unit)
    return "".join(parts)
