"""memstream as deployed, in processes of its own: workers, the API and the command line."""

from __future__ import annotations

import signal
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from memstream.errors import ServiceUnavailable
from memstream.launch import Launched, api_url, memstream_argv, settings_env
from memstream.settings import Settings
from tests.support import REPO


def start_memstream(
    command: str,
    settings: Settings,
    *,
    log_path: Path | None = None,
    cwd: Path | None = None,
    timeout: float = 30.0,
) -> Launched:
    """``memstream COMMAND`` in its own process on ``settings``, as deployed; ``api`` returns
    once its ``/healthz`` answers."""
    ready = f"{api_url(settings)}/healthz" if command == "api" else None
    return Launched.start(
        memstream_argv(command),
        env=settings_env(settings),
        ready_url=ready,
        timeout=timeout,
        log_path=log_path,
        cwd=cwd,
        name=f"memstream {command}",
    )


class WorkerProcess:
    """A real ``memstream worker`` process with its own log file; ``stages`` as the
    ``--stages`` option (every role when None)."""

    def __init__(
        self, settings: Settings, log_dir: Path, name: str = "worker", stages: str | None = None
    ) -> None:
        self.settings = settings
        self.log_path = log_dir / f"{name}-{uuid.uuid4().hex[:6]}.log"
        self.stages = stages
        self.process: Launched | None = None

    def start(self) -> WorkerProcess:
        if self.stages is None:
            self.process = start_memstream(
                "worker", self.settings, log_path=self.log_path, cwd=REPO
            )
            return self
        self.process = Launched.start(
            memstream_argv("worker", "--stages", self.stages),
            env=settings_env(self.settings),
            log_path=self.log_path,
            cwd=REPO,
            name=f"memstream worker --stages {self.stages}",
        )
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
        if self.process is not None:
            self.process.stop(sig, timeout)

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()


@contextmanager
def child_server(
    argv: list[str], ready_url: str, name: str, within: float, log_path: Path | None = None
) -> Iterator[None]:
    """A server in a child process, up once ``ready_url`` answers 200, stopped afterwards;
    ``RuntimeError`` when it does not come up within ``within`` seconds."""
    try:
        server = Launched.start(
            argv, ready_url=ready_url, timeout=within, log_path=log_path, cwd=REPO, name=name
        )
    except ServiceUnavailable as exc:
        raise RuntimeError(str(exc)) from None
    try:
        yield
    finally:
        server.stop(timeout=10)


def run_cli(
    settings: Settings, *args: str, timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``memstream ARGS`` as a separate process with ``settings``; a command still running
    after ``timeout`` seconds raises ``subprocess.TimeoutExpired``."""
    return subprocess.run(
        memstream_argv(*args),
        env=settings_env(settings),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
    )


@contextmanager
def api_process(settings: Settings, timeout: float = 30.0) -> Iterator[str]:
    """``memstream api`` as deployed: its own process on ``settings.api_port``; yields its URL
    once ``/healthz`` answers (within ``timeout`` seconds)."""
    with tempfile.TemporaryDirectory(prefix="memstream-api-") as logs:
        api = start_memstream(
            "api", settings, log_path=Path(logs) / "api.log", cwd=REPO, timeout=timeout
        )
        try:
            yield api_url(settings)
        finally:
            api.stop(timeout=10)


async def worker_metric(port: int, name: str, **labels: str) -> float:
    """The sum of the samples of a worker's metric ``name`` that carry ``labels``; raises
    ``httpx.HTTPError`` while the worker does not answer."""
    async with httpx.AsyncClient(timeout=5) as client:
        response = await client.get(f"http://127.0.0.1:{port}/metrics")
    return sum(
        sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
        if sample.name == name and labels.items() <= sample.labels.items()
    )
