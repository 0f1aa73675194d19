"""The distributions as a platform team installs them: memstream's wheel and the client's, built
from the tracked files and installed into an empty venv outside the checkout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from tests.support import REPO
from tests.support.distribution import CLIENT, empty_venv, outside_env, tracked_copy
from tests.support.settings import free_port

# Building two wheels and installing memstream's dependencies into an empty venv takes minutes
# on a busy machine, more than the suite's default limit.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(memstream's wheel, the client's wheel, the venv both are installed in)."""
    root = tmp_path_factory.mktemp("dist")
    source = tracked_copy(root / "src")
    wheels = root / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels),
         str(source), str(source / CLIENT)],
        check=True,
        timeout=600,
    )  # fmt: skip
    server = next(wheels.glob("memstream-*.whl"))
    client = next(wheels.glob("memstream_client-*.whl"))
    venv = root / "venv"
    pip = empty_venv(venv) / "pip"
    # Both wheels in one call: memstream's memstream-client requirement is met by the client's.
    # Without this process's PYTHONPATH, which may hold a checkout's own metadata (egg-info) that
    # pip would take for memstream installed already.
    subprocess.run(
        [str(pip), "install", "-q", "--disable-pip-version-check", str(server), str(client)],
        env=outside_env(),
        check=True,
        timeout=900,
    )
    return server, client, venv


def test_each_wheel_holds_one_import_package_and_the_schemas(
    installed: tuple[Path, Path, Path],
) -> None:
    server, client, _ = installed
    names = zipfile.ZipFile(server).namelist()
    assert _tops(names) == {"memstream"}
    for wiring in ("memstream/agents/history.py", "memstream/streams/app.py"):
        assert wiring in names
    client_names = zipfile.ZipFile(client).namelist()
    assert _tops(client_names) == {"memstream_client"}
    assert "memstream_client/py.typed" in client_names
    # Both ship the schemas (the client reads its own, copied in at build time): each the
    # checkout's schemas/ file for file.
    schemas = {path.name: path.read_bytes() for path in (REPO / "schemas").glob("*.json")}
    assert schemas
    for wheel, folder in ((server, "memstream/schemas"), (client, "memstream_client/schemas")):
        archive = zipfile.ZipFile(wheel)
        shipped = {
            name.removeprefix(f"{folder}/"): archive.read(name)
            for name in archive.namelist()
            if name.startswith(f"{folder}/")
        }
        assert shipped == schemas, wheel.name


def _tops(names: list[str]) -> set[str]:
    return {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}


def test_the_installed_command_runs_outside_the_checkout(
    installed: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    _, _, venv = installed
    env = outside_env()
    run = {"cwd": tmp_path, "env": env, "capture_output": True, "text": True, "timeout": 120}
    help_text = subprocess.run([str(venv / "bin" / "memstream"), "--help"], **run)  # type: ignore[call-overload]
    assert help_text.returncode == 0, help_text.stderr
    assert "worker" in help_text.stdout
    check = (
        "from memstream.client import Publisher\n"
        "from memstream_client.contract.schemas import validator\n"
        "v = validator('message-written.v1')\n"
        "good = {'event_id': 'e1', 'tenant_id': 't', 'user_id': 'u', 'agent_id': None,\n"
        "        'conversation_id': 'c', 'role': 'user', 'content': 'hi'}\n"
        "assert not list(v.iter_errors(good))\n"
        "assert list(v.iter_errors({**good, 'role': 'robot'}))\n"
        "import importlib.util\n"
        "assert importlib.util.find_spec('agents') is None\n"
        "assert importlib.util.find_spec('streams') is None\n"
        "print('ok')\n"
    )
    validated = subprocess.run([str(venv / "bin" / "python"), "-c", check], **run)  # type: ignore[call-overload]
    assert validated.stdout.strip() == "ok", validated.stderr


def test_the_installed_dev_command_serves_the_api(
    installed: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    _, _, venv = installed
    port = free_port()
    env = outside_env()
    env["MEMSTREAM_API_PORT"] = str(port)
    with (tmp_path / "dev.log").open("wb") as log:
        dev = subprocess.Popen(
            [str(venv / "bin" / "memstream"), "dev"],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        answer = None
        while time.monotonic() < deadline and dev.poll() is None:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.HTTPError:
                time.sleep(0.5)
        output = (tmp_path / "dev.log").read_text(errors="replace")
        assert answer is not None and answer.status_code == 200, output[-3000:]
        assert (tmp_path / "var" / "dev" / "memstream.db").exists()
    finally:
        _stop_group(dev)


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """Stop ``memstream dev``, which stops what it started (each child in a session of its own)."""
    for sig, wait in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
