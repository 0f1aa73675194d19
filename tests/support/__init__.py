"""Helpers the tests share: settings, processes, Kafka reads, faults, known data, providers."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
