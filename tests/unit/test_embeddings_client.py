"""The embeddings client against a fake OpenAI-compatible server served in process: batching,
checks, retries."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import httpx
import numpy as np
import pytest

from memstream.embeddings.client import EmbeddingClient
from memstream.errors import ConfigurationError, EmbeddingError, MemstreamError
from memstream.settings import Settings
from tests.fakes.embeddings import EmbeddingScript, Fault, embeddings_app, fake_vector
from tests.support.settings import free_port

URL = "http://embeddings.test/v1"


@pytest.fixture
def script() -> EmbeddingScript:
    script = EmbeddingScript()
    script.dimension = 8
    return script


@pytest.fixture
async def client(script: EmbeddingScript) -> AsyncIterator[EmbeddingClient]:
    async with quick_client(URL, script) as embedder:
        yield embedder


def quick_client(
    url: str, script: EmbeddingScript | None = None, **options: float | int | str
) -> EmbeddingClient:
    """A client with short timeouts and backoff, on the fake server of ``script`` served in
    this process (on ``url`` itself when there is none)."""
    transport = None if script is None else httpx.ASGITransport(app=embeddings_app(script))
    values: dict[str, float | int | str] = {
        "batch_size": 4,
        "timeout": 2.0,
        "max_attempts": 3,
        "backoff_base": 0.01,
        "backoff_max": 0.05,
    }
    values.update(options)
    return EmbeddingClient(url, "mini", "sk-test", transport=transport, **values)  # type: ignore[arg-type]


def unit(text: str, dimension: int = 8) -> np.ndarray:
    vector = np.asarray(fake_vector(text, dimension))
    return vector / np.linalg.norm(vector)


async def test_vectors_are_unit_float32_rows_in_input_order(
    client: EmbeddingClient, script: EmbeddingScript
) -> None:
    texts = ["The user is vegetarian.", "Where should I eat tonight?", "素食"]
    vectors = await client.embed(texts)
    assert vectors.dtype == np.float32
    assert vectors.shape == (3, 8)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    for row, text in zip(vectors, texts, strict=True):
        np.testing.assert_allclose(row, unit(text), rtol=1e-5, atol=1e-6)
    assert client.dimension == 8
    assert script.requests == [{"model": "mini", "input": texts}]
    assert script.headers[0]["authorization"] == "Bearer sk-test"
    one = await client.embed_one("素食")
    np.testing.assert_allclose(one, vectors[2], rtol=1e-6)


async def test_texts_go_in_batches_of_the_batch_size(
    client: EmbeddingClient, script: EmbeddingScript
) -> None:
    texts = [f"memory {i}" for i in range(10)]
    vectors = await client.embed(texts)
    assert script.batches == [texts[0:4], texts[4:8], texts[8:10]]
    assert vectors.shape == (10, 8)
    for row, text in zip(vectors, texts, strict=True):
        np.testing.assert_allclose(row, unit(text), rtol=1e-5, atol=1e-6)


async def test_answers_are_placed_by_their_index(
    client: EmbeddingClient, script: EmbeddingScript
) -> None:
    script.faults.append(Fault(reversed=True))
    vectors = await client.embed(["a", "b", "c"])
    np.testing.assert_allclose(vectors[0], unit("a"), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(vectors[2], unit("c"), rtol=1e-5, atol=1e-6)


async def test_no_texts_is_an_empty_matrix_without_a_request(
    client: EmbeddingClient, script: EmbeddingScript
) -> None:
    assert (await client.embed([])).shape == (0, 0)
    await client.embed(["x"])
    assert (await client.embed([])).shape == (0, 8)
    assert len(script.requests) == 1
    with pytest.raises(TypeError):
        await client.embed("one string")


@pytest.mark.parametrize("status", [500, 502, 503, 429])
async def test_server_errors_and_rate_limits_are_retried(
    client: EmbeddingClient, script: EmbeddingScript, status: int
) -> None:
    script.faults += [status, status]
    vectors = await client.embed(["a"])
    assert vectors.shape == (1, 8)
    assert len(script.requests) == 3


async def test_retry_after_is_honoured_up_to_the_backoff_cap(
    client: EmbeddingClient, script: EmbeddingScript, caplog: pytest.LogCaptureFixture
) -> None:
    script.faults.append(Fault(status=429, retry_after="30"))
    caplog.set_level(logging.WARNING, logger="memstream.embeddings.client")
    await client.embed(["a"])
    assert len(script.requests) == 2
    # The pause before the second attempt is the cap (0.05 s), not the 30 s asked for.
    [pause] = [r.getMessage() for r in caplog.records if "attempt 2 of 3" in r.getMessage()]
    assert pause.endswith("attempt 2 of 3 in 0.05s"), pause


async def test_retries_end_in_an_error_that_says_why(
    client: EmbeddingClient, script: EmbeddingScript, caplog: pytest.LogCaptureFixture
) -> None:
    script.faults += [503, 503, 503, 503]
    caplog.set_level(logging.DEBUG, logger="memstream.embeddings.client")
    with pytest.raises(EmbeddingError, match=r"failed 3 times; last: HTTP 503$") as caught:
        await client.embed(["a"])
    assert len(script.requests) == 3
    # The reply may echo the texts: at DEBUG only, never in a warning or the error.
    assert "scripted 503" not in str(caught.value)
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warned and not any("scripted" in line for line in warned)
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any("scripted 503" in line for line in debug)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
async def test_client_errors_are_not_retried(
    client: EmbeddingClient, script: EmbeddingScript, status: int
) -> None:
    script.faults.append(status)
    with pytest.raises(EmbeddingError, match=f"HTTP {status}$") as caught:
        await client.embed(["a"])
    assert isinstance(caught.value, MemstreamError)
    assert len(script.requests) == 1


async def test_a_slow_answer_is_a_timeout_and_retried(
    script: EmbeddingScript,
) -> None:
    script.faults += [Fault(delay=1.0)]
    async with quick_client(URL, script, timeout=0.2) as embedder:
        assert (await embedder.embed(["a"])).shape == (1, 8)
        assert len(script.requests) == 2
        script.faults += [Fault(delay=1.0)] * 3
        with pytest.raises(EmbeddingError, match=r"no answer within 0.2s"):
            await embedder.embed(["b"])
    assert len(script.requests) == 5


async def test_an_unreachable_endpoint_is_retried_then_an_error() -> None:
    async with quick_client(f"http://127.0.0.1:{free_port()}/v1") as embedder:
        with pytest.raises(EmbeddingError, match=r"failed 3 times; last: not reachable"):
            await embedder.embed(["a"])


async def test_the_first_answer_fixes_the_dimension(
    client: EmbeddingClient, script: EmbeddingScript
) -> None:
    await client.embed(["a"])
    script.faults.append(Fault(dimension=4))
    with pytest.raises(EmbeddingError, match=r"4-dimensional vector at index 0, where the "):
        await client.embed(["b"])
    assert len(script.requests) == 2  # a wrong answer is not retried
    assert client.dimension == 8
    assert (await client.embed(["c"])).shape == (1, 8)


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (Fault(missing=1), r"answered 2 vectors for 3 texts"),
        (Fault(raw="<html>oops</html>"), r"a body that is not JSON$"),
        (Fault(body={"object": "list"}), r"without a data list"),
        (Fault(body=[1, 2]), r"without a data list"),
        (
            Fault(body={"data": [{"index": 0, "embedding": [1.0, 0.0]}] * 3}),
            r"repeated or out-of-range index 0",
        ),
        (
            Fault(body={"data": [{"index": i, "embedding": [1.0] * (2 + i)} for i in range(3)]}),
            r"3-dimensional vector at index 1, where the vectors have 2 dimensions",
        ),
        (
            Fault(body={"data": [{"index": i, "embedding": [0.0, 0.0]} for i in range(3)]}),
            r"zero or non-finite vector at index 0",
        ),
        (
            Fault(body={"data": [{"index": i, "embedding": ["1", "2"]} for i in range(3)]}),
            r"not a list of numbers",
        ),
        (
            Fault(body={"data": [{"index": i, "embedding": []} for i in range(3)]}),
            r"no embedding list at index 0",
        ),
    ],
)
async def test_unusable_answers_are_errors(
    client: EmbeddingClient, script: EmbeddingScript, fault: Fault, message: str
) -> None:
    script.faults.append(fault)
    with pytest.raises(EmbeddingError, match=message):
        await client.embed(["a", "b", "c"])
    assert len(script.requests) == 1


def test_from_settings() -> None:
    assert EmbeddingClient.from_settings(Settings(embedding_base_url="")) is None
    assert EmbeddingClient.from_settings(Settings(embedding_base_url="  ")) is None
    configured = EmbeddingClient.from_settings(
        Settings(
            embedding_base_url="http://127.0.0.1:9/v1/",
            embedding_model="all-MiniLM-L6-v2",
            embedding_api_key="sk-secret",
            embedding_batch_size=16,
            embedding_timeout_seconds=3.5,
        )
    )
    assert configured is not None
    assert configured.url == "http://127.0.0.1:9/v1/embeddings"
    assert (configured.model, configured.batch_size, configured.timeout) == (
        "all-MiniLM-L6-v2",
        16,
        3.5,
    )
    assert "sk-secret" not in repr(configured)


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="http"):
        EmbeddingClient("127.0.0.1:8091", "m")
    with pytest.raises(ConfigurationError, match="positive"):
        EmbeddingClient("http://127.0.0.1:8091", "m", batch_size=0)
    full = EmbeddingClient("http://127.0.0.1:8091/v1/embeddings", "m")
    assert full.url == "http://127.0.0.1:8091/v1/embeddings"
