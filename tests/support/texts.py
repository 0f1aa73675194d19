"""Crafted user texts that made regular expressions backtrack (the unit tests check the
answers on them, ``python -m bench regex`` times them), and a user saying one of them."""

from __future__ import annotations

from datetime import UTC, datetime

from memstream.longterm.models import SessionMessage

MONDAY = datetime(2023, 5, 8, 15, 30, tzinfo=UTC)  # Monday 8 May 2023

ADVERSARIAL = [
    " " * 32768,
    "last " * 6553,
    "last" + " " * 32760 + "week",
    "1 " * 16384,
    "in 1 " * 6553,
    "123 days" * 4096,
    "the day before " * 2184,
    "a" * 32768,
    "yesterday" * 3640,
    "上" * 32768,
    "上个" * 16384,
    "十" * 32768,
    "三天" * 16384,
    "1" * 32768,
    "\u200b\t\n" * 10922,
]

N = 16_000


def said(text: str) -> list[SessionMessage]:
    return [SessionMessage("e1", "user", text, True, datetime(2025, 1, 1, tzinfo=UTC))]


ENDINGS = {
    "emoticons": "^_^" * (N // 3),
    "fillers": ", too" * (N // 5),
    "laughs": ", haha" * (N // 6),
    "punctuation": "." * N,
    "spaced punctuation": " !" * (N // 2),
}
