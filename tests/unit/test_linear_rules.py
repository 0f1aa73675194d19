"""The regular expressions over user text on crafted inputs of the shapes that made them
backtrack quadratically (runs of what a ``$``-anchored or ``\\s+``-led pattern strips or skips):
at 16k characters they still give the answer a short input gives, exactly. How long they take
(milliseconds; the same inputs took 2 to 20 seconds before) is measured by
``python -m bench regex``, not asserted here."""

from __future__ import annotations

import pytest

from memstream.longterm.conflict.facts import MAX_CHAINED_PREDICATES, Fact, parse
from memstream.longterm.judge import rule_based_judge
from memstream.longterm.judge.rules.common import clean
from memstream.longterm.judge.rules.en.episodes import _EP_CUT
from memstream.longterm.judge.rules.en.lexicon import _CLAUSE_SPLIT_EN
from memstream.longterm.judge.rules.en.profile import _DURATION
from memstream.longterm.judge.rules.zh import _HAS_DATE_ZH
from tests.support.texts import ENDINGS, N, said


@pytest.mark.parametrize("ending", ENDINGS.values(), ids=list(ENDINGS))
def test_a_long_ending_is_stripped_in_one_pass(ending: str) -> None:
    assert clean("I love cats" + ending) == "I love cats"
    # The same run not at the end: nothing to strip, found out as fast.
    assert clean("I love cats" + ending + " x").endswith(" x")


@pytest.mark.parametrize("ending", ENDINGS.values(), ids=list(ENDINGS))
def test_the_judge_reads_a_message_with_a_long_ending(ending: str) -> None:
    found = rule_based_judge(said("I love cats" + ending))
    # One memory; the judge reads the first 8,000 characters, so the end may be cut mid-word.
    assert [c.content[:19] for c in found] == ["The user loves cats"]


def test_white_space_runs_are_entered_once() -> None:
    run = " " * N
    # A clause split after a long run of spaces, and none inside it.
    pieces = _CLAUSE_SPLIT_EN.split(f"I love cats{run}and I love dogs")
    assert pieces == ["I love cats", "I love dogs"]
    assert _CLAUSE_SPLIT_EN.split(f"I love cats{run}-x") == [f"I love cats{run}-x"]
    cut = _EP_CUT.search(f"the park{run}x{run}and it was fun")
    assert cut is not None and cut.group().strip() == "and it"
    assert _DURATION.sub("", f"I have lived here{run}for x").endswith("for x")


def test_a_long_run_of_digits_is_read_once() -> None:
    digits = "1" * 2 * N  # a message may hold 32k characters; 16k took a second before
    assert _HAS_DATE_ZH.search(f"我{digits}天") is None
    assert _HAS_DATE_ZH.search(f"我{digits}3天后去") is not None


def test_a_long_chain_of_facts_is_read_up_to_its_bound() -> None:
    text = "the user lives in paris and " * (N // 28)
    parsed = parse.__wrapped__(text)
    assert parsed.facts == (Fact("residence", "paris"),) * MAX_CHAINED_PREDICATES
    assert not parsed.complete
