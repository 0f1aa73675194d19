"""The distribution as a platform team installs it: a wheel built from the tracked files,
installed into an empty venv outside the checkout."""

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

from tests.support.settings import free_port

REPO = Path(__file__).resolve().parents[2]


def _tracked_copy(dest: Path) -> Path:
    """The tracked files as they are in the work tree (links kept as links)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in filter(None, listed):
        name = raw.decode()
        source, target = REPO / name, dest / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the work tree, not yet committed
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            target.write_bytes(source.read_bytes())
    return dest


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the built wheel, the venv it is installed in)."""
    root = tmp_path_factory.mktemp("dist")
    source = _tracked_copy(root / "src")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
         "-w", str(root / "wheels"), str(source)],
        check=True,
    )  # fmt: skip
    wheel = next((root / "wheels").glob("memstream-*.whl"))
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", str(wheel)],
        check=True,
        timeout=900,
    )
    return wheel, venv


def test_the_wheel_holds_one_import_package_and_the_schemas(installed: tuple[Path, Path]) -> None:
    wheel, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"memstream"}
    for schema in ("message-written.v1.json", "session-ended.v1.json", "dead-letter.v1.json"):
        assert f"memstream/schemas/{schema}" in names
    for wiring in ("memstream/agents/history.py", "memstream/streams/app.py"):
        assert wiring in names


def test_the_installed_command_runs_outside_the_checkout(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    _, venv = installed
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSTREAM_", "PYTHON"))}
    run = {"cwd": tmp_path, "env": env, "capture_output": True, "text": True, "timeout": 120}
    help_text = subprocess.run([str(venv / "bin" / "memstream"), "--help"], **run)  # type: ignore[call-overload]
    assert help_text.returncode == 0, help_text.stderr
    assert "worker" in help_text.stdout
    check = (
        "from memstream.contract.schemas import validator\n"
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
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    _, venv = installed
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSTREAM_", "PYTHON"))}
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
