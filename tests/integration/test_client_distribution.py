"""The client distribution as a platform service gets it: ``pip install ./clients/python`` into
an empty venv outside the checkout brings none of the server, and the client README's example
runs there against a real worker and API."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from memstream.broker.topics import ensure_topics
from memstream.settings import Settings
from tests.support import REPO
from tests.support.distribution import CLIENT, empty_venv, outside_env, tracked_copy
from tests.support.processes import api_process
from tests.support.settings import free_port, isolated_settings, unique

# Installing the client's dependencies into an empty venv can take minutes on a busy machine.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

# What `pip install memstream` would bring and a client must not.
SERVER_DISTRIBUTIONS = {
    "faust-streaming", "sqlalchemy", "fastapi", "starlette", "uvicorn", "aiomysql", "aiosqlite",
    "redis", "pydantic-settings",
}  # fmt: skip
SERVER_MODULES = ("faust", "sqlalchemy", "fastapi", "uvicorn", "aiomysql", "redis", "memstream")
README = REPO / CLIENT / "README.md"
# The example's addresses are memstream dev's; here the test's own broker, topics and API.
DEV_PUBLISHER = 'Publisher("127.0.0.1:19092", idempotent=False)'
DEV_API = '"http://127.0.0.1:8080"'
TENANT = '"acme"'


@pytest.fixture(scope="module")
def client_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of an empty venv outside the checkout after ``pip install ./clients/python``
    (in a copy of the tracked files, so the build leaves nothing in the work tree)."""
    root = tmp_path_factory.mktemp("client-dist")
    source = tracked_copy(root / "src", str(CLIENT), "schemas", "LICENSE")
    bin_dir = empty_venv(root / "venv")
    subprocess.run(
        [str(bin_dir / "pip"), "install", "-q", "--disable-pip-version-check", f"./{CLIENT}"],
        cwd=source,
        env=outside_env(),
        check=True,
        timeout=900,
    )
    return bin_dir / "python"


def _run(python: Path, script: str, cwd: Path, timeout: float = 60) -> str:
    done = subprocess.run(
        [str(python), "-c", script],
        cwd=cwd,
        env=outside_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_client_installs_without_the_server(client_python: Path, tmp_path: Path) -> None:
    listed = subprocess.run(
        [str(client_python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    installed = {canonicalize_name(d["name"]): d["version"] for d in json.loads(listed)}
    assert installed.get("memstream-client") == "0.1.0"
    assert {"httpx", "aiokafka", "pydantic"} <= set(installed)
    assert set(installed) & SERVER_DISTRIBUTIONS == set()
    loaded = json.loads(
        _run(
            client_python,
            "import json, sys\nfrom memstream_client import AsyncClient, Client, Publisher\n"
            "print(json.dumps(sorted(sys.modules)))",
            tmp_path,
        )
    )
    assert [m for m in loaded if m.split(".")[0] in SERVER_MODULES] == []
    assert [m for m in loaded if m.split(".")[0] in ("aiokafka", "jsonschema", "httpx")] == []


def readme_example(settings: Settings, api: str, tenant: str) -> str:
    """The client README's first Python example, pointed at ``settings``' broker and topics,
    the API at ``api`` and tenant ``tenant``."""
    example = re.search(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert example is not None, "the client README has no Python example"
    code = example.group(1)
    for dev in (DEV_PUBLISHER, DEV_API, TENANT):
        assert dev in code, f"the README's example no longer has {dev}: update this test"
    ours = (
        f"Publisher({settings.kafka_bootstrap_servers!r}, topic_prefix={settings.topic_prefix!r})"
    )
    return (
        code.replace(DEV_PUBLISHER, ours).replace(DEV_API, repr(api)).replace(TENANT, repr(tenant))
    )


async def test_the_readme_example_runs_against_memstream(
    client_python: Path, services: Settings, start_worker, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    settings = isolated_settings(api_port=free_port(), log_level="WARNING")
    await ensure_topics(settings)  # the workers' to create, with their partition count
    start_worker(settings)
    tenant = unique("readme")
    # A busy machine can take longer than the default 30 s to start the API.
    with api_process(settings, timeout=120) as api:
        printed = _run(client_python, readme_example(settings, api, tenant), tmp_path, 180)
    profile, messages = printed.strip().splitlines()[-2:]
    assert "vegetarian" in profile and "Berlin" in profile
    assert messages == str(["I am vegetarian and I live in Berlin.", "Noted!"])
