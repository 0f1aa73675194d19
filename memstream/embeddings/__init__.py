"""Embeddings for hybrid long-term retrieval: the endpoint client (``client``), fusing the
lexical and vector rankings (``fusion``), the API's vector cache (``cache``), how vectors are
kept in the database (``rows``) and the worker's backfill that fills them (``backfill``).

Optional: with no ``MEMSTREAM_EMBEDDING_BASE_URL`` there is no client and retrieval stays
lexical.
"""

from memstream.embeddings.cache import UserVectors, VectorCache
from memstream.embeddings.client import EmbeddingClient, Vectors
from memstream.embeddings.fusion import Fused, fuse, vector_score

__all__ = [
    "EmbeddingClient",
    "Fused",
    "UserVectors",
    "VectorCache",
    "Vectors",
    "fuse",
    "vector_score",
]
