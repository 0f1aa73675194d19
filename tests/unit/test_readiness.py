"""Whether the workers consume, from the groups the broker describes: every stage role needs a
consuming group that runs it."""

from __future__ import annotations

from memstream.broker.groups import Group, candidate_groups
from memstream.readiness import Workers

ALL = ("history", "summary", "longterm")


LATER = ("summary", "longterm")


def test_every_group_a_worker_can_be_in_is_a_candidate() -> None:
    assert candidate_groups("ms") == {
        "ms": ("history",),
        "ms-summary-longterm": LATER,
        "ms-summary": ("summary",),
        "ms-longterm": ("longterm",),
    }


def test_workers_of_every_role_are_ready() -> None:
    everything = [
        Group("ms", ("history",), "Stable", ("10.0.0.5",)),
        Group("ms-summary-longterm", LATER, "Stable", ("10.0.0.5",)),
    ]
    workers = Workers("ms", everything, {"message-written": 3})
    assert workers.consuming and workers.check() == "ok"
    shown = workers.as_json()
    assert shown["roles"] == dict.fromkeys(ALL, True)
    assert shown["groups"][1] == {
        "group": "ms-summary-longterm",
        "roles": list(LATER),
        "state": "Stable",
        "members": 1,
    }
    assert shown["lag"] == {"message-written": 3}


def test_roles_may_be_split_over_groups_but_each_must_be_run() -> None:
    history = Group("ms", ("history",), "Stable", ("a",))
    rest = Group("ms-summary-longterm", LATER, "Stable", ("b",))
    assert Workers("ms", [history, rest]).consuming
    only_history = Workers("ms", [history, Group("ms-summary-longterm", LATER)])
    assert not only_history.consuming
    assert only_history.check() == "error: no worker consumes the stage role(s) summary, longterm"


def test_a_group_still_joining_is_not_ready_and_says_so() -> None:
    history = Group("ms", ("history",), "Stable", ("a",))
    joining = Workers(
        "ms", [history, Group("ms-summary-longterm", LATER, "PreparingRebalance", ("a",))]
    )
    assert not joining.consuming
    assert joining.check().endswith("(group ms-summary-longterm is still joining)")
    assert Workers("ms", error="KafkaConnectionError").check() == "error: KafkaConnectionError"
