"""Regular expressions over user text on crafted input: how long one pass over each shape that
once made a pattern backtrack takes. The unit tests check the answers on the same inputs; a
pattern that backtracks again shows here as seconds instead of milliseconds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from memstream.longterm.episodes import select_episodes
from memstream.longterm.judge import rule_based_judge
from memstream.longterm.judge.rules.common import clean
from memstream.text.dates import ground_dates
from tests.support.texts import ADVERSARIAL, ENDINGS, MONDAY, said

SLOW_SECONDS = 0.5  # a linear pass over these inputs takes milliseconds


def timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


async def main() -> None:
    rows: list[tuple[str, float]] = []
    for text in ADVERSARIAL:
        rows.append((f"ground_dates {text[:12]!r}", timed(lambda t=text: ground_dates(t, MONDAY))))
    for name, ending in ENDINGS.items():
        message = "I love cats" + ending
        rows.append((f"clean, {name}", timed(lambda m=message: clean(m))))
        rows.append((f"rule judge, {name}", timed(lambda m=message: rule_based_judge(said(m)))))
        rows.append((f"episodes, {name}", timed(lambda m=message: select_episodes(said(m)))))
    width = max(len(name) for name, _ in rows)
    for name, seconds in rows:
        flag = "  SLOW" if seconds > SLOW_SECONDS else ""
        print(f"{name:<{width}}  {seconds * 1000:8.1f} ms{flag}")
    slowest = max(rows, key=lambda row: row[1])
    print(f"slowest: {slowest[0]} in {slowest[1] * 1000:.1f} ms")
