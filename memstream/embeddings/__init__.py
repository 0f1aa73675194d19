"""Embeddings for hybrid long-term retrieval: the endpoint client (``client``), fusing the
lexical and vector rankings (``fusion``), how vectors are kept in the database (``rows``, in
full; ``blocks``, packed per user for search) and the worker's backfill that fills them
(``backfill``).

Optional: with no ``MEMSTREAM_EMBEDDING_BASE_URL`` there is no client and retrieval stays
lexical.
"""

from memstream.embeddings.client import EmbeddingClient, Vectors
from memstream.embeddings.fusion import Fused, fuse, vector_score

__all__ = [
    "EmbeddingClient",
    "Fused",
    "Vectors",
    "fuse",
    "vector_score",
]
