"""The contract's models build on first use in a client and all at once in the API. Each case runs
in a fresh interpreter with warnings as errors: building is process-wide, and this test process
may have imported the API already."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.support import REPO

SESSION_END = b'{"event_id": "e1", "tenant_id": "t", "user_id": "u", "conversation_id": "c"}'


def run(script: str) -> None:
    env = {"PYTHONPATH": f"{REPO}:{REPO / 'clients' / 'python'}"}
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", textwrap.dedent(script)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_a_client_builds_only_the_models_it_uses() -> None:
    run(f"""
        import memstream_client
        from memstream_client.contract import api, events

        models = [m for m in (*vars(api).values(), *vars(events).values())
                  if isinstance(m, type) and issubclass(m, api.BaseModel)
                  and m.__module__.startswith("memstream_client")]
        assert len(models) > 20 and not any(m.__pydantic_complete__ for m in models)
        events.parse_session_end({SESSION_END!r})
        built = {{m.__name__ for m in models if m.__pydantic_complete__}}
        assert built == {{"SessionEnded"}}, built
    """)


def test_the_api_routes_build_their_models_when_declared() -> None:
    # FastAPI silences pydantic's warning about its own metadata of a body only while it makes
    # the route's adapter; an adapter built later, on the first request, would warn.
    run("""
        import memstream.api
        from fastapi import FastAPI
        from fastapi.testclient import TestClient
        from memstream_client.contract.api import ContextRequest, ContextResponse, TokenCounts

        app = FastAPI()

        @app.post("/v1/context")
        def context(body: ContextRequest) -> ContextResponse:
            return ContextResponse(
                conversation_id=body.conversation_id, messages=[], long_term={"provider": None},
                tokens=TokenCounts(messages=0, user_profile=0, agent_memory=0), degraded=[],
            )

        client = TestClient(app)
        ok = client.post("/v1/context", json={"tenant_id": "t", "user_id": "u",
                                               "conversation_id": "c"})
        assert ok.status_code == 200 and ok.json()["conversation_id"] == "c", ok.text
        assert client.post("/v1/context", json={"tenant_id": "t"}).status_code == 422
        assert "ContextRequest" in client.get("/openapi.json").json()["components"]["schemas"]
    """)
