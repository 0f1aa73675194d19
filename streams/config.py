"""What this worker process runs with: its settings (command-line options included) and its
stage roles. ``memstream worker`` binds them before the Faust app is built; a process that only
imports the wiring (tests, tools) gets the environment's settings and every role."""

from __future__ import annotations

from dataclasses import dataclass

from memstream.roles import ROLES
from memstream.settings import Settings


@dataclass(frozen=True)
class WorkerConfig:
    settings: Settings
    roles: tuple[str, ...] = ROLES


_bound: WorkerConfig | None = None


def bind(settings: Settings, roles: tuple[str, ...] = ROLES) -> None:
    """Set what the app is built from; only before ``memstream.streams.app`` is imported."""
    global _bound
    _bound = WorkerConfig(settings, roles)


def current() -> WorkerConfig:
    global _bound
    if _bound is None:
        _bound = WorkerConfig(Settings())
    return _bound
