"""What every test module shares: its topics are dropped after it. The integration tests'
fixtures (the real services, the fake servers) are in ``tests/integration/conftest.py``, so a
unit run loads none of the server stack it does not test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.topics import drop_made_topics, take_made


@pytest.fixture(scope="module", autouse=True)
def _drop_module_topics(request: pytest.FixtureRequest) -> Iterator[None]:
    """After an integration module, drop the topics its tests' settings named (set up first
    among the module's fixtures, so torn down after every worker they started)."""
    yield
    if "integration" in request.path.parts:
        from memstream.settings import Settings

        drop_made_topics(Settings())
    else:
        take_made()
