"""What errors and logs may say: no provider's reply in an API answer, no statement's values in
a database error."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from memstream.providers.memos import memos_cube
from memstream.settings import Settings
from memstream.store.database import create_engine
from tests.fakes.mem0 import Mem0State
from tests.fakes.memos import MemOSState
from tests.support.api import client_for

pytestmark = pytest.mark.integration

PRIVATE = "my bank PIN is 4921"


async def test_a_provider_failure_answers_503_without_the_providers_reply(
    servers: tuple[Settings, MemOSState, Mem0State], tenant: str, caplog: pytest.LogCaptureFixture
) -> None:
    settings, memos, _ = servers
    memos.seed(memos_cube(tenant, "u1", "user_profile"), PRIVATE)
    memos.http_error["/product/search"] = 500  # answers {"detail": "server error"}
    async with client_for(settings) as api:
        configured = await api.put(
            "/v1/agents/a1/config",
            params={"tenant_id": tenant},
            json={"long_memory_provider": "MEMOS"},
        )
        assert configured.status_code == 200, configured.text
        with caplog.at_level(logging.INFO):
            answer = await api.post(
                "/v1/memories/search",
                json={"tenant_id": tenant, "user_id": "u1", "agent_id": "a1", "query": "PIN"},
            )
        assert answer.status_code == 503, answer.text
        error = answer.json()["error"]
        assert error["code"] == "provider_unavailable" and "HTTP 500" in error["message"]
        assert "server error" not in answer.text and "detail" not in answer.text
        assert "server error" not in caplog.text
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="memstream.providers"):
            again = await api.post(
                "/v1/memories/search",
                json={"tenant_id": tenant, "user_id": "u1", "agent_id": "a1", "query": "PIN"},
            )
        assert again.status_code == 503
        # Kept for whoever debugs the provider, at DEBUG only.
        assert "server error" in caplog.text


async def test_a_database_error_names_its_statement_never_its_values(services: Settings) -> None:
    engine = create_engine(services.database_url, pool_size=1)
    try:
        with pytest.raises(SQLAlchemyError) as raised:
            async with engine.connect() as conn:
                await conn.execute(
                    text("SELECT content FROM no_such_table WHERE content = :said"),
                    {"said": PRIVATE},
                )
    finally:
        await engine.dispose()
    shown = f"{raised.value} {raised.value!r}"
    assert "no_such_table" in shown
    assert PRIVATE not in shown
