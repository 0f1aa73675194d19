"""Agent defaults shared by the load path and the long-term chain, and the judge's model."""

from __future__ import annotations

import pytest

from memstream.store.agents import AgentConfig, bound_model, long_term_enabled


def config(**fields: object) -> AgentConfig:
    return AgentConfig(tenant_id="t1", agent_id="a1", **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("agent", "enabled"),
    [
        (None, True),  # no config row, or no agent: the defaults
        (config(model_target_id="m1"), True),
        (config(open_long_memory=False, model_target_id="m1"), False),
        (config(open_long_memory=True, model_target_id=None), False),
        (config(open_long_memory=True, model_target_id=""), False),
    ],
)
def test_long_term_memory_needs_it_open_and_a_bound_model(
    agent: AgentConfig | None, enabled: bool
) -> None:
    assert long_term_enabled(agent) is enabled


def test_the_judge_uses_the_model_mapped_to_the_agents_target() -> None:
    models = {"m-small": "qwen2.5:7b"}
    assert bound_model(config(model_target_id="m-small"), models) == "qwen2.5:7b"
    # Unknown targets, no target and no config all get the one global model.
    assert bound_model(config(model_target_id="m-other"), models) is None
    assert bound_model(config(), models) is None
    assert bound_model(None, models) is None
