"""Run processes side by side on one machine and wait until they answer: how ``memstream dev``
starts the broker, the worker and the API (the tests and benchmarks start theirs with it too)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

from memstream.errors import ServiceUnavailable
from memstream.settings import ApiSettings, Settings

TAIL_LINES = 40


def memstream_argv(*args: str) -> list[str]:
    """The command line of ``memstream ARGS`` with this interpreter."""
    return [sys.executable, "-m", "memstream", *args]


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that makes a child process build exactly ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")}
    for name, value in settings.model_dump().items():
        if hasattr(value, "get_secret_value"):
            value = value.get_secret_value()
        env[f"MEMSTREAM_{name.upper()}"] = str(value)
    return env


def api_url(settings: ApiSettings) -> str:
    """Where a local client reaches the API these settings serve."""
    host = "127.0.0.1" if settings.api_host in ("", "0.0.0.0", "::") else settings.api_host
    return f"http://{host}:{settings.api_port}"


def answers(url: str) -> bool:
    """Whether ``url`` answers 200 right now."""
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


class Launched:
    """A child process started by :meth:`start`, with the file its output goes to."""

    def __init__(self, name: str, proc: subprocess.Popen[bytes], log_path: Path | None) -> None:
        self.name = name
        self.proc = proc
        self.log_path = log_path

    @classmethod
    def start(
        cls,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        ready_url: str | None = None,
        timeout: float = 30.0,
        log_path: Path | None = None,
        cwd: Path | None = None,
        name: str | None = None,
    ) -> Launched:
        """Start ``argv``, its output into ``log_path`` (else into this process's own); with
        ``ready_url``, return once that answers 200, else stop it and raise
        :class:`ServiceUnavailable` with the end of its log."""
        child_env = None if env is None else dict(env)
        if log_path is None:
            proc = subprocess.Popen(list(argv), env=child_env, cwd=cwd)
        else:
            with log_path.open("wb") as log:
                proc = subprocess.Popen(
                    list(argv), env=child_env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT
                )
        launched = cls(name or shlex.join([Path(argv[0]).name, *argv[1:]]), proc, log_path)
        if ready_url is not None:
            try:
                launched.wait_ready(ready_url, timeout)
            except BaseException:
                launched.stop()
                raise
        return launched

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, url: str, timeout: float = 30.0) -> None:
        """Return once ``url`` answers 200; raise :class:`ServiceUnavailable` with the end of
        the log when the process exits first or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while not answers(url):
            if not self.alive():
                raise self._failed(f"exited with code {self.proc.returncode} before {url} answered")
            if time.monotonic() > deadline:
                raise self._failed(f"did not answer {url} within {timeout:g}s")
            time.sleep(0.2)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> None:
        """``sig`` (SIGTERM: a graceful stop), then SIGKILL after ``timeout`` seconds."""
        stop_all([self], sig, timeout)

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed or committed."""
        self.stop(signal.SIGKILL)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""

    def tail(self, lines: int = TAIL_LINES) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def _failed(self, what: str) -> ServiceUnavailable:
        where = f"; the end of {self.log_path}:\n{self.tail()}" if self.log_path else ""
        return ServiceUnavailable(f"{self.name} {what}{where}")


def stop_all(
    launched: Sequence[Launched], sig: int = signal.SIGTERM, timeout: float = 15.0
) -> None:
    """Send ``sig`` to every process still running (the last started first), give them
    ``timeout`` seconds in all to exit, then SIGKILL the rest."""
    running = [p for p in reversed(launched) if p.alive()]
    for p in running:
        p.proc.send_signal(sig)
    deadline = time.monotonic() + timeout
    for p in running:
        try:
            p.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.proc.kill()
            p.proc.wait()
