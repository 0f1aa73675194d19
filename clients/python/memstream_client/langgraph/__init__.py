"""memstream as a LangGraph agent's long-term store: ``MemstreamStore``, a ``BaseStore`` on the
query API (the ``langgraph`` extra); its namespaces name users by a template
(``namespaces.py``), see docs/integrations/langgraph.md."""

from memstream_client.langgraph.namespaces import NamespaceTemplate
from memstream_client.langgraph.store import MemstreamStore

__all__ = ["MemstreamStore", "NamespaceTemplate"]
