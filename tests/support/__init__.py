"""Helpers for tests on the real services: settings, processes, Kafka reads, faults, known data."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
