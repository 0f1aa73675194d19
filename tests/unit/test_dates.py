"""Temporal grounding: relative dates made absolute, in English and Chinese."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from memstream.text import dates
from memstream.text.dates import display_date, display_date_zh, ground_dates
from tests.support.texts import ADVERSARIAL, MONDAY


def at(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I went hiking yesterday", "I went hiking on 7 May 2023"),
        ("I'm free today.", "I'm free on 8 May 2023."),
        ("See you tomorrow!", "See you on 9 May 2023!"),
        ("We eat out tonight", "We eat out on the evening of 8 May 2023"),
        ("I ran this morning", "I ran on the morning of 8 May 2023"),
        ("this evening we cook", "on the evening of 8 May 2023 we cook"),
        ("I slept badly last night", "I slept badly on the night of 7 May 2023"),
        ("yesterday afternoon it rained", "on the afternoon of 7 May 2023 it rained"),
        ("the day before yesterday", "on 6 May 2023"),
        ("the day after tomorrow", "on 10 May 2023"),
        ("I started yoga last week", "I started yoga in the week of 1 May 2023"),
        ("this week is busy", "the week of 8 May 2023 is busy"),
        ("next week I fly", "in the week of 15 May 2023 I fly"),
        ("We move next month.", "We move in June 2023."),
        ("last month I quit", "in April 2023 I quit"),
        ("this month", "in May 2023"),
        ("I graduated last year", "I graduated in 2022"),
        ("next year", "in 2024"),
        ("3 days ago", "on 5 May 2023"),
        ("a day ago", "on 7 May 2023"),
        ("two weeks ago", "in the week of 24 April 2023"),
        ("six months ago", "in November 2022"),
        ("10 years ago", "in 2013"),
        ("in 3 days", "on 11 May 2023"),
        ("in two weeks", "in the week of 22 May 2023"),
        ("in 2 months", "in July 2023"),
        ("in a year", "in 2024"),
        ("last Friday", "on 5 May 2023"),
        ("last Monday", "on 1 May 2023"),  # said on a Monday: the one a week before
        ("next Monday", "on 15 May 2023"),
        ("next Tuesday", "on 9 May 2023"),
        ("this Sunday", "on 14 May 2023"),
        ("this weekend", "on the weekend of 13 May 2023"),
        ("last weekend", "on the weekend of 6 May 2023"),
        ("next weekend", "on the weekend of 20 May 2023"),
    ],
)
def test_english_expressions(text: str, expected: str) -> None:
    assert ground_dates(text, MONDAY) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A preposition already there, or a verb after the date: no second preposition.
        ("since last week", "since the week of 1 May 2023"),
        ("until next month", "until June 2023"),
        ("Yesterday was fun", "7 May 2023 was fun"),
        ("Today's plan", "8 May 2023's plan"),
        # At the start of a sentence the rewrite starts with a capital.
        ("Last week I started yoga", "In the week of 1 May 2023 I started yoga"),
        ("YESTERDAY I ran", "On 7 May 2023 I ran"),
        # A span, not a calendar unit.
        ("the last week was hard", "the last week was hard"),
        ("over the past month", "over the past month"),
        # Words that only look like dates.
        ("yesterdays", "yesterdays"),
        ("todays", "todays"),
        ("a lastweek", "a lastweek"),
        ("103 days ago", "on 25 January 2023"),
        ("in 3 daysx", "in 3 daysx"),
        # Several in one text, each from the same day.
        ("yesterday and tomorrow", "on 7 May 2023 and 9 May 2023"),
    ],
)
def test_english_sentences_stay_readable(text: str, expected: str) -> None:
    assert ground_dates(text, MONDAY) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("我昨天去爬山了", "我2023年5月7日去爬山了"),
        ("前天", "2023年5月6日"),
        ("大前天", "2023年5月5日"),
        ("今天很累", "2023年5月8日很累"),
        ("明天见", "2023年5月9日见"),
        ("后天出发", "2023年5月10日出发"),
        ("大后天", "2023年5月11日"),
        ("昨晚没睡好", "2023年5月7日晚上没睡好"),
        ("今晚吃什么", "2023年5月8日晚上吃什么"),
        ("昨天晚上", "2023年5月7日晚上"),
        ("上周开始练瑜伽", "2023年5月1日那一周开始练瑜伽"),
        ("上个星期", "2023年5月1日那一周"),
        ("这周很忙", "2023年5月8日那一周很忙"),
        ("本周", "2023年5月8日那一周"),
        ("下周", "2023年5月15日那一周"),
        ("下个礼拜", "2023年5月15日那一周"),
        ("上上周", "2023年4月24日那一周"),
        ("上周一", "2023年5月1日"),
        ("上周日", "2023年5月7日"),
        ("上星期天", "2023年5月7日"),
        ("下周五", "2023年5月19日"),
        ("这周三", "2023年5月10日"),
        ("上周末", "2023年5月6日那个周末"),
        ("下个月搬家", "2023年6月搬家"),
        ("上个月", "2023年4月"),
        ("上月", "2023年4月"),
        ("本月", "2023年5月"),
        ("去年", "2022年"),
        ("今年夏天", "2023年夏天"),
        ("明年", "2024年"),
        ("前年", "2021年"),
        ("三天前", "2023年5月5日"),
        ("3天前", "2023年5月5日"),
        ("十天以前", "2023年4月28日"),
        ("两个月前", "2023年3月"),
        ("十二个月前", "2022年5月"),
        ("二十五天后", "2023年6月2日"),
        ("两周前", "2023年4月24日那一周"),
        ("3个星期后", "2023年5月29日那一周"),
        ("十年前", "2013年"),
        ("5年后", "2028年"),
    ],
)
def test_chinese_expressions(text: str, expected: str) -> None:
    assert ground_dates(text, MONDAY) == expected


@pytest.mark.parametrize(
    "text",
    [
        "然后天气变冷了",  # 然后 + 天气
        "之前天气很好",  # 之前 + 天气
        "他很聪明天才一个",  # 聪明 + 天才
        "马上周末了",  # 马上 + 周末
        "人类登上月球",  # 登上 + 月球
        "这周围有很多餐厅",  # 周围
        "我们看一下周末的安排",  # 一下 + 周末
        "2023年前后",  # before or after 2023, not 2023 years ago
        "一百天前",  # beyond the numerals read
        "零天前",
        "一两天前",  # a range, not a number
    ],
)
def test_chinese_lookalikes_stay(text: str) -> None:
    assert ground_dates(text, MONDAY) == text


@pytest.mark.parametrize(
    ("text", "created", "expected"),
    [
        ("last month", at(2024, 1, 15), "in December 2023"),
        ("next month", at(2023, 12, 31), "in January 2024"),
        ("yesterday", at(2024, 3, 1), "on 29 February 2024"),  # leap year
        ("yesterday", at(2023, 3, 1), "on 28 February 2023"),
        ("tomorrow", at(2024, 2, 28), "on 29 February 2024"),
        ("tomorrow", at(2023, 12, 31), "on 1 January 2024"),
        ("last year", at(2024, 1, 1), "in 2023"),
        ("last week", at(2024, 1, 3), "in the week of 25 December 2023"),
        ("next week", at(2023, 12, 28), "in the week of 1 January 2024"),
        ("30 days ago", at(2024, 3, 15), "on 14 February 2024"),
        ("in 1 month", at(2024, 1, 31), "in February 2024"),
        ("13 months ago", at(2024, 1, 15), "in December 2022"),
        ("last Saturday", at(2024, 1, 1), "on 30 December 2023"),
        ("昨天", at(2024, 3, 1), "2024年2月29日"),
        ("上个月", at(2024, 1, 15), "2023年12月"),
        ("下个月", at(2023, 12, 5), "2024年1月"),
        ("上周", at(2024, 1, 3), "2023年12月25日那一周"),
        ("去年", at(2024, 1, 1), "2023年"),
        ("两个月前", at(2024, 2, 29), "2023年12月"),
        # Out of the calendar's range: left as written.
        ("9999 years ago", at(2023, 5, 8), "9999 years ago"),
        ("next year", datetime(9999, 6, 1, tzinfo=UTC), "next year"),
        ("in 9999 days", datetime(9999, 6, 1, tzinfo=UTC), "in 9999 days"),
        ("明年", datetime(9999, 6, 1, tzinfo=UTC), "明年"),
    ],
)
def test_month_and_year_boundaries(text: str, created: datetime, expected: str) -> None:
    assert ground_dates(text, created) == expected


def test_the_day_is_the_one_in_the_messages_own_time_zone() -> None:
    # 23:30 on 7 May in UTC is already 8 May in Shanghai.
    shanghai = timezone(timedelta(hours=8))
    late = datetime(2023, 5, 7, 23, 30, tzinfo=UTC)
    assert ground_dates("yesterday", late) == "on 6 May 2023"
    assert ground_dates("yesterday", late.astimezone(shanghai)) == "on 7 May 2023"


def test_a_naive_time_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        ground_dates("yesterday", datetime(2023, 5, 8))


def test_mixed_languages_and_text_without_dates() -> None:
    assert ground_dates("Yesterday 我去了上海", MONDAY) == "On 7 May 2023 我去了上海"
    assert ground_dates("昨天 I went to the zoo last week", MONDAY) == (
        "2023年5月7日 I went to the zoo in the week of 1 May 2023"
    )
    plain = "Nothing relative here: 1 May 2023, 2023年5月1日."
    assert ground_dates(plain, MONDAY) == plain
    assert ground_dates("", MONDAY) == ""


def test_display_dates() -> None:
    assert display_date(date(2023, 5, 7)) == "7 May 2023"
    assert display_date(datetime(2024, 12, 31, 23, 59, tzinfo=UTC)) == "31 December 2024"
    assert display_date_zh(date(2023, 5, 7)) == "2023年5月7日"
    assert display_date_zh(datetime(2024, 2, 29, tzinfo=UTC)) == "2024年2月29日"


def test_every_day_of_a_leap_year_grounds_consistently() -> None:
    # "yesterday" and "tomorrow" agree with date arithmetic on every day, both languages.
    day = date(2024, 1, 1)
    while day.year == 2024:
        created = datetime(day.year, day.month, day.day, 9, tzinfo=UTC)
        assert ground_dates("yesterday", created) == f"on {display_date(day - timedelta(1))}"
        assert ground_dates("明天", created) == display_date_zh(day + timedelta(1))
        day += timedelta(1)


@pytest.mark.parametrize("text", ADVERSARIAL, ids=lambda t: repr(t[:12]))
def test_adversarial_input_is_linear(text: str) -> None:
    assert len(text) >= 32000
    # How long the pass takes is measured by ``python -m bench regex``: milliseconds when
    # linear, minutes when a pattern backtracks.
    out = ground_dates(text, MONDAY)
    assert len(out) <= 4 * len(text)


def test_no_pattern_has_an_unbounded_repeat() -> None:
    # Linear time by construction: every repeat is bounded ({m,n} or ?), none nests.
    for pattern in (dates._EN, dates._ZH, dates._WORD_BEFORE, dates._WORD_AFTER):
        source = re.sub(r"\\.", "", pattern.pattern)  # escaped characters are literals
        assert not re.search(r"[*+]", source), pattern.pattern
