"""Reading a model's JSON leniently: whole, around prose, and cut off at max_tokens."""

from __future__ import annotations

import json

import pytest
from prometheus_client import REGISTRY

from memstream.llm_output import Flaws, Unparseable, closed_prefix, loads

ITEMS = [{"content": "The user lives in Paris.", "importance": 8}, {"content": "x", "a": [1]}]


def test_a_whole_answer_has_no_flaw() -> None:
    flaws = Flaws()
    assert loads(json.dumps({"memories": ITEMS}), flaws) == {"memories": ITEMS}
    assert not flaws


@pytest.mark.parametrize(
    "text",
    [
        "```json\n" + json.dumps({"memories": ITEMS}) + "\n```",
        "Sure, here it is: " + json.dumps({"memories": ITEMS}) + " Anything else?",
        json.dumps({"memories": ITEMS}) + "\n" + json.dumps({"memories": []}),
    ],
    ids=["fenced", "prose", "two-values"],
)
def test_json_around_noise_is_whole(text: str) -> None:
    flaws = Flaws()
    assert loads(text, flaws) == {"memories": ITEMS}
    assert not flaws


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '{"memories": [{"content": "a"}, {"content": "b", "imp',
            {"memories": [{"content": "a"}, {"content": "b"}]},
        ),
        ('{"memories": [{"content": "a"}, {"content": "b', {"memories": [{"content": "a"}]}),
        (
            '{"memories": [{"content": "a", "x": {"y": 1}}, {"con',
            {"memories": [{"content": "a", "x": {"y": 1}}]},
        ),
        ('{"memories": [', {"memories": []}),
        ('{"memories": [{"content": "a \\" [ {"}, {', {"memories": [{"content": 'a " [ {'}]}),
        (
            '```json\n[{"content": "a"}, {"content": "b"}, {"content": "c',
            [{"content": "a"}, {"content": "b"}],
        ),
    ],
    ids=[
        "mid-key",
        "mid-string",
        "nested",
        "opened-list",
        "brackets-in-strings",
        "bare-list-in-fence",
    ],
)
def test_a_cut_off_answer_is_closed_after_its_last_complete_value(
    text: str, expected: object
) -> None:
    flaws = Flaws()
    assert loads(text, flaws) == expected
    assert flaws.found == {"truncated"}


@pytest.mark.parametrize("text", ["no json here", '{"memories', "", "}{"])
def test_no_json_at_all_is_unparseable(text: str) -> None:
    with pytest.raises(Unparseable):
        loads(text, Flaws())


def test_closed_prefix_stops_at_a_mismatched_bracket() -> None:
    assert closed_prefix('[{"a": 1}, {"b": 2]]') == [{"a": 1}]


def sample(stage: str, name: str, value: str) -> float:
    labels = {"stage": stage, "reason" if name == "malformed" else "outcome": value}
    return REGISTRY.get_sample_value(f"memstream_llm_{name}_total", labels) or 0.0


def test_flaws_are_counted_once_per_answer_with_its_outcome() -> None:
    before = [sample("judge", "malformed", "truncated"), sample("judge", "answers", "repaired")]
    clean = sample("judge", "answers", "clean")
    flaws = Flaws()
    flaws.add("truncated")
    flaws.add("truncated")
    assert flaws.count("judge", "used") == "repaired"
    assert Flaws().count("judge", "used") == "clean"
    assert [
        sample("judge", "malformed", "truncated"),
        sample("judge", "answers", "repaired"),
    ] == [before[0] + 1, before[1] + 1]
    assert sample("judge", "answers", "clean") == clean + 1
    rejected = sample("conflict", "answers", "rejected")
    assert Flaws({"unparseable"}).count("conflict", "rejected") == "rejected"
    assert sample("conflict", "answers", "rejected") == rejected + 1
