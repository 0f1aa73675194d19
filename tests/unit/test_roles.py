"""Stage roles: what ``--stages`` accepts, the consumer group of each set of roles, the
agents a worker of some roles runs, and the compose deployment by roles."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from memstream.cli.main import build_parser
from memstream.roles import (
    ROLES,
    group_id,
    groups_running,
    inputs_of,
    parse_stages,
    reading_group,
    role_of_topic,
)
from memstream.streams.worker import agent_modules


def test_stages_are_parsed_in_their_own_order() -> None:
    assert parse_stages("longterm, HISTORY") == ("history", "longterm")
    assert parse_stages("summary,summary") == ("summary",)
    with pytest.raises(ValueError, match="unknown stage role"):
        parse_stages("history,ingest")
    with pytest.raises(ValueError, match="at least one"):
        parse_stages(" , ")


def test_the_worker_command_takes_stages() -> None:
    assert build_parser().parse_args(["worker"]).stages == ROLES
    args = build_parser().parse_args(["worker", "--stages", "summary,longterm"])
    assert args.stages == ("summary", "longterm")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["worker", "--stages", "judge"])


def test_history_reads_in_the_app_id_group_and_the_others_in_groups_named_for_them() -> None:
    assert group_id("memstream", ROLES) == "memstream-summary-longterm"
    assert group_id("memstream", ("summary", "longterm")) == "memstream-summary-longterm"
    assert group_id("memstream", ("history", "longterm")) == "memstream-longterm"
    assert group_id("memstream", ("history",)) == "memstream-history"  # no Faust stage to run
    assert reading_group("m", ROLES, "message-written") == "m"
    assert reading_group("m", ("history",), "message-written") == "m"
    assert reading_group("m", ROLES, "session-ended") == "m-summary-longterm"


def test_the_groups_that_can_run_a_role() -> None:
    assert groups_running("m", "history") == ["m"]
    # The app id's group last: it read every topic before history had a consumer of its own.
    assert groups_running("m", "summary") == ["m-summary", "m-summary-longterm", "m"]
    assert groups_running("m", "longterm") == ["m-longterm", "m-summary-longterm", "m"]


def test_each_topic_a_stage_reads_belongs_to_one_role() -> None:
    assert inputs_of("history") == ("message-written",)
    assert inputs_of("summary", "history") == ("message-written", "summary-check")
    assert role_of_topic("lt-persist") == "longterm"
    assert role_of_topic("dead-letter") is None
    everything = inputs_of(*ROLES)
    assert len(everything) == len(set(everything))


def test_a_worker_imports_its_roles_agents_and_the_retry_stage_when_it_retries() -> None:
    assert agent_modules(("history",)) == ["memstream.agents.history"]
    summary = agent_modules(("summary",))
    assert summary == ["memstream.agents.summary", "memstream.agents.retry"]
    every = agent_modules(ROLES)
    assert "memstream.agents.session" in every and "memstream.agents.embed" in every
    assert every.count("memstream.agents.retry") == 1


def test_the_compose_roles_deployment_runs_each_role_once() -> None:
    root = Path(__file__).resolve().parents[2]
    compose = yaml.safe_load((root / "docker-compose.roles.yml").read_text(encoding="utf-8"))
    services = compose["services"]
    assert services["worker"]["profiles"]  # the all-roles worker stays out
    run: list[str] = []
    for name, service in services.items():
        if name == "worker":
            continue
        assert service["extends"] == {"file": "docker-compose.yml", "service": "worker"}
        command = service["command"]
        assert command[:2] == ["worker", "--stages"]
        run += parse_stages(command[2])
    assert sorted(run) == sorted(ROLES)  # every role, each in one kind of worker
