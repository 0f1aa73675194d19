"""Whether the workers consume, from the groups the broker describes: every stage role needs a
consuming group that runs it."""

from __future__ import annotations

from memstream.readiness import Group, Workers, candidate_groups

ALL = ("history", "summary", "longterm")


def test_every_group_a_worker_can_be_in_is_a_candidate() -> None:
    groups = candidate_groups("ms")
    assert next(iter(groups)) == "ms" and groups["ms"] == ALL
    assert groups["ms-history"] == ("history",)
    assert groups["ms-summary-longterm"] == ("summary", "longterm")
    assert len(groups) == 7


def test_one_group_running_every_role_is_ready() -> None:
    workers = Workers("ms", [Group("ms", ALL, "Stable", ("10.0.0.5",))], {"message-written": 3})
    assert workers.consuming and workers.check() == "ok"
    shown = workers.as_json()
    assert shown["roles"] == dict.fromkeys(ALL, True)
    assert shown["groups"] == [{"group": "ms", "roles": list(ALL), "state": "Stable", "members": 1}]
    assert shown["lag"] == {"message-written": 3}


def test_roles_may_be_split_over_groups_but_each_must_be_run() -> None:
    history = Group("ms-history", ("history",), "Stable", ("a",))
    rest = Group("ms-summary-longterm", ("summary", "longterm"), "Stable", ("b",))
    assert Workers("ms", [history, rest]).consuming
    only_history = Workers("ms", [history, Group("ms", ALL)])
    assert not only_history.consuming
    assert only_history.check() == "error: no worker consumes the stage role(s) summary, longterm"


def test_a_group_still_joining_is_not_ready_and_says_so() -> None:
    joining = Workers("ms", [Group("ms", ALL, "PreparingRebalance", ("a",))])
    assert not joining.consuming
    assert joining.check().endswith("(group ms is still joining)")
    assert Workers("ms", error="KafkaConnectionError").check() == "error: KafkaConnectionError"
