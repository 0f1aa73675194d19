"""Temporal grounding: relative dates in a message rewritten as absolute ones.
Why it works this way: docs/design/dates.md."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}


def display_date(day: date) -> str:
    """A day as people write it: ``7 May 2023`` (a datetime counts by its own date)."""
    if isinstance(day, datetime):
        day = day.date()
    return f"{day.day} {MONTHS[day.month - 1]} {day.year}"


def display_date_zh(day: date) -> str:
    """A day in Chinese: ``2023年5月7日`` (a datetime counts by its own date)."""
    if isinstance(day, datetime):
        day = day.date()
    return f"{day.year}年{day.month}月{day.day}日"


def ground_dates(text: str, created_at: datetime) -> str:
    """``text`` with its relative date expressions (English and Chinese) made absolute."""
    if created_at.tzinfo is None or created_at.utcoffset() is None:
        raise ValueError("created_at must be an aware datetime")
    today = created_at.date()
    text = _EN.sub(lambda m: _grounded(m, today, _english), text)
    return _ZH.sub(lambda m: _grounded(m, today, _chinese), text)


def dated_query(query: str, at: datetime | None) -> str:
    """``query`` with its relative dates ("two weeks ago", "yesterday") made absolute against
    when it is asked (``at``, naive meaning UTC; now by default), as memories and stored turns
    carry their day."""
    if at is None:
        at = datetime.now(UTC)
    elif at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return ground_dates(query, at)


# --- calendar arithmetic -----------------------------------------------------------------------


def _monday(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _add_months(day: date, months: int) -> tuple[int, int]:
    """(year, month) ``months`` calendar months from ``day``'s month; raises past 1..9999."""
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    if not 1 <= year <= 9999:
        raise OverflowError("year out of range")
    return year, month + 1


def _add_years(day: date, years: int) -> int:
    year = day.year + years
    if not 1 <= year <= 9999:
        raise OverflowError("year out of range")
    return year


def _grounded(
    match: re.Match[str], today: date, rewrite: Callable[[re.Match[str], date], str | None]
) -> str:
    try:
        out = rewrite(match, today)
    except OverflowError:
        out = None
    return match.group(0) if out is None else out


# --- English -----------------------------------------------------------------------------------

_S = r"\s{1,3}"
_NUM = r"\d{1,4}|" + "|".join(_NUMBER_WORDS)
_UNIT = r"day|week|month|year"
_WEEKDAY = "|".join(_WEEKDAYS)
_EN = re.compile(
    rf"""\b(?:
      the{_S}day{_S}(?P<around>before{_S}yesterday|after{_S}tomorrow)
    | (?P<day>yesterday|today|tomorrow)(?:{_S}(?P<part>morning|afternoon|evening|night))?
    | (?P<tonight>tonight)
    | last{_S}(?P<lastnight>night)
    | this{_S}(?P<thispart>morning|afternoon|evening)
    | (?P<rel>last|this|next){_S}(?:(?P<period>week|month|year|weekend)|(?P<weekday>{_WEEKDAY}))
    | (?P<ago>{_NUM}){_S}(?P<ago_unit>{_UNIT})s?{_S}ago
    | in{_S}(?P<ahead>{_NUM}){_S}(?P<ahead_unit>{_UNIT})s?
    )\b""",
    re.IGNORECASE | re.VERBOSE,
)
# A word right before or after the expression that makes its own preposition redundant:
# "since last week" -> "since the week of ...", "yesterday was" -> "7 May 2023 was".
_WORD_BEFORE = re.compile(r"([A-Za-z]{1,12})\s{1,3}\Z")
_WORD_AFTER = re.compile(r"\s{0,3}([A-Za-z']{1,12}|['’]s\b)")
_PREPOSITIONS = frozenset(
    """since until till from by before after to through of for on in at during between and or
    than""".split()  # noqa: SIM905 - a word list reads better as text
)
_VERBS = frozenset("is was will has had would could should seems seemed 's ’s".split())  # noqa: SIM905


def _english(match: re.Match[str], today: date) -> str | None:
    preposition, phrase = _english_date(match, today)
    text = match.string
    before = _WORD_BEFORE.search(text, max(0, match.start() - 16), match.start())
    word_before = before.group(1).lower() if before else ""
    if match.group("rel") and word_before in ("the", "past", "coming"):
        return None  # "the last week" is a span of seven days, not a calendar week
    after = _WORD_AFTER.match(text, match.end(), match.end() + 16)
    word_after = after.group(1).lower() if after else ""
    bare = word_before in _PREPOSITIONS or word_after in _VERBS
    out = phrase if bare else f"{preposition} {phrase}"
    return out[0].upper() + out[1:] if match.group(0)[0].isupper() else out


def _english_date(match: re.Match[str], today: date) -> tuple[str, str]:
    """(preposition, absolute phrase) for one English match."""
    group = match.group
    if around := group("around"):
        offset = -2 if around.lower().startswith("before") else 2
        return "on", display_date(today + timedelta(days=offset))
    if day_word := group("day"):
        offset = {"yesterday": -1, "today": 0, "tomorrow": 1}[day_word.lower()]
        day = display_date(today + timedelta(days=offset))
        part = group("part")
        return ("on", f"the {part.lower()} of {day}") if part else ("on", day)
    if group("tonight"):
        return "on", f"the evening of {display_date(today)}"
    if group("lastnight"):
        return "on", f"the night of {display_date(today - timedelta(days=1))}"
    if part := group("thispart"):
        return "on", f"the {part.lower()} of {display_date(today)}"
    if rel := group("rel"):
        step = {"last": -1, "this": 0, "next": 1}[rel.lower()]
        if weekday := group("weekday"):
            return "on", display_date(_weekday(today, _WEEKDAYS.index(weekday.lower()), step))
        return _period(today, group("period").lower(), step)
    if amount := group("ago"):
        return _period_offset(today, amount, group("ago_unit"), -1)
    return _period_offset(today, group("ahead"), group("ahead_unit"), 1)


def _weekday(today: date, weekday: int, step: int) -> date:
    if step == 0:
        return _monday(today) + timedelta(days=weekday)
    if step < 0:
        return today - timedelta(days=(today.weekday() - weekday - 1) % 7 + 1)
    return today + timedelta(days=(weekday - today.weekday() - 1) % 7 + 1)


def _period(today: date, period: str, step: int) -> tuple[str, str]:
    if period == "week":
        return "in", f"the week of {display_date(_monday(today) + timedelta(weeks=step))}"
    if period == "weekend":
        saturday = _monday(today) + timedelta(weeks=step, days=5)
        return "on", f"the weekend of {display_date(saturday)}"
    if period == "month":
        year, month = _add_months(today, step)
        return "in", f"{MONTHS[month - 1]} {year}"
    return "in", str(_add_years(today, step))


def _period_offset(today: date, amount: str, unit: str, sign: int) -> tuple[str, str]:
    n = int(amount) if amount.isdigit() else _NUMBER_WORDS[amount.lower()]
    unit = unit.lower()
    if unit == "day":
        return "on", display_date(_shift_days(today, sign * n))
    if unit == "week":
        return "in", f"the week of {display_date(_monday(_shift_days(today, sign * 7 * n)))}"
    if unit == "month":
        year, month = _add_months(today, sign * n)
        return "in", f"{MONTHS[month - 1]} {year}"
    return "in", str(_add_years(today, sign * n))


def _shift_days(day: date, days: int) -> date:
    try:
        return day + timedelta(days=days)
    except OverflowError:
        raise OverflowError("date out of range") from None


# --- Chinese -----------------------------------------------------------------------------------

_ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7}
_ZH_DIGITS |= {"八": 8, "九": 9}
_ZH_DAYS = {"大前天": -3, "前天": -2, "昨天": -1, "今天": 0, "明天": 1, "后天": 2, "大后天": 3}
_ZH_EVENINGS = {"昨晚": (-1, "晚上"), "今晚": (0, "晚上"), "明晚": (1, "晚上")}
_ZH_EVENINGS |= {"今早": (0, "早上"), "明早": (1, "早上")}
_ZH_YEARS = {"前年": -2, "去年": -1, "今年": 0, "明年": 1, "后年": 2}
_ZH_STEPS = {"上上": -2, "上": -1, "这": 0, "本": 0, "下": 1, "下下": 2}
_ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}

# Each look-behind keeps a longer word whole: 聪明 + 天才, 然后 + 天气, 马上 + 周末, 登上 + 月球.
_ZH = re.compile(
    r"(?P<day>大前天|大后天|昨天|今天|(?<![聪光说证表声文透])明天"
    r"|(?<![之以从提眼面目])前天|(?<![之以然最随落背])后天)"
    r"|(?P<evening>昨晚|今晚|今早|(?<![聪光说证表声文透])明[晚早])"
    r"|(?P<year>前年|去年|今年|(?<![聪光说证表声文透])明年|(?<![之以然最随落背])后年)"
    # 周围, 周边, 周到, 周年 are words of their own, not "week".
    r"|(?P<week_step>上上|(?<![马晚早路身网楼线台])上|这|本|下下|(?<![一底地楼线])下)"
    r"个?(?:周(?![围边到年])|星期|礼拜)(?P<weekday>[一二三四五六日天末])?"
    r"|(?P<month_step>上上|(?<![马晚早路身网楼线台登])上|这|本|下下|(?<![一底地楼线])下)"
    r"个?月(?![球亮光饼])"
    r"|(?<![\d.])(?P<amount>\d{1,3}|[零一二两三四五六七八九十]{1,3})"
    r"(?P<unit>天|周|个星期|个礼拜|个月|年)(?P<direction>以前|之前|前|以后|之后|后)"
)


def _chinese(match: re.Match[str], today: date) -> str | None:
    group = match.group
    if word := group("day"):
        return display_date_zh(today + timedelta(days=_ZH_DAYS[word]))
    if word := group("evening"):
        offset, part = _ZH_EVENINGS[word]
        return display_date_zh(today + timedelta(days=offset)) + part
    if word := group("year"):
        return f"{_add_years(today, _ZH_YEARS[word])}年"
    if step_word := group("week_step"):
        monday = _monday(today) + timedelta(weeks=_ZH_STEPS[step_word])
        weekday = group("weekday")
        if weekday == "末":
            return f"{display_date_zh(monday + timedelta(days=5))}那个周末"
        if weekday:
            return display_date_zh(monday + timedelta(days=_ZH_WEEKDAYS[weekday]))
        return f"{display_date_zh(monday)}那一周"
    if step_word := group("month_step"):
        year, month = _add_months(today, _ZH_STEPS[step_word])
        return f"{year}年{month}月"
    n = _zh_number(group("amount"))
    if n is None:
        return None
    sign = 1 if group("direction").endswith("后") else -1
    unit = group("unit")
    if unit == "天":
        return display_date_zh(_shift_days(today, sign * n))
    if unit == "个月":
        year, month = _add_months(today, sign * n)
        return f"{year}年{month}月"
    if unit == "年":
        return f"{_add_years(today, sign * n)}年"
    return f"{display_date_zh(_monday(_shift_days(today, sign * 7 * n)))}那一周"


def _zh_number(text: str) -> int | None:
    """1..99 in Arabic or Chinese numerals (三, 十二, 二十五, 两); None for anything else."""
    if text.isdigit():
        value = int(text)
        return value if 0 < value < 100 else None  # "2023年前" is "before 2023", not an age
    tens, sep, units = text.partition("十")
    if not sep:
        value = _ZH_DIGITS.get(text, 0) if len(text) == 1 else 0
    elif len(tens) > 1 or len(units) > 1:
        value = 0
    else:
        value = (_ZH_DIGITS.get(tens, -100) if tens else 1) * 10
        value += _ZH_DIGITS.get(units, -100) if units else 0
    return value if 0 < value < 100 else None
