"""Fake embeddings the hybrid search tests share: a question, the memory close to it in meaning
that shares no word with it, the fake endpoint serving them, and a client of it."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from memstream.embeddings.client import EmbeddingClient
from tests.fakes.embeddings import EmbeddingScript, embeddings_app
from tests.fakes.http import serve

DIMENSION = 384  # unrelated random vectors then have cosines near 0, as a real model's do
MODEL = "fake-minilm"

QUESTION = "Where should I eat tonight?"
VEGETARIAN = "The user is vegetarian."
FACTS = [
    VEGETARIAN,
    "The user lives in Berlin.",
    "The user plays the cello on weekends.",
    "The user works night shifts as a nurse.",
]


def axis(n: int) -> np.ndarray:
    vector = np.zeros(DIMENSION)
    vector[n] = 1.0
    return vector


def at_cosine(cosine: float, to: int, other: int) -> list[float]:
    """A unit vector whose cosine with ``axis(to)`` is ``cosine``."""
    vector = cosine * axis(to) + np.sqrt(1.0 - cosine * cosine) * axis(other)
    return [float(x) for x in vector]


@pytest.fixture
def script() -> EmbeddingScript:
    # The question sits on axis 0; the vegetarian memory is close to it in meaning and
    # shares no word with it; every other text gets a random vector (cosine about 0).
    return EmbeddingScript(
        dimension=DIMENSION,
        meanings={QUESTION: at_cosine(1.0, 0, 1), VEGETARIAN: at_cosine(0.55, 0, 2)},
    )


@pytest.fixture
def server(script: EmbeddingScript) -> Iterator[str]:
    with serve(embeddings_app(script)) as url:
        yield f"{url}/v1"


def client(url: str, **options: float) -> EmbeddingClient:
    defaults: dict[str, float] = {"max_attempts": 1, "backoff_base": 0.01, "timeout": 2.0}
    return EmbeddingClient(url, MODEL, **{**defaults, **options})  # type: ignore[arg-type]
