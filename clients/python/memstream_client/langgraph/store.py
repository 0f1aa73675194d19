"""``MemstreamStore``: a LangGraph ``BaseStore`` whose items are memstream memories.

An item is a memory of the agent's provider, stored under its namespace and key with its JSON
value (``/v1/items``): searchable like any memory, and a new value under a key supersedes the
old one (its history and ``memory-changed`` say so). Search at a user's root finds what the
long-term chain learned from the user's sessions too. Sync calls go through a ``Client``,
async ones through an ``AsyncClient``; pass your own or let the store make them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, Literal

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from memstream_client.api import AsyncClient, Client
from memstream_client.contract.api import ItemOut
from memstream_client.langgraph.namespaces import NamespaceTemplate, matches

Cube = Literal["user_profile", "agent"]


class MemstreamStore(BaseStore):
    """A LangGraph store on memstream's query API, for one tenant and agent."""

    supports_ttl = False

    def __init__(
        self,
        api_url: str = "http://127.0.0.1:8080",
        *,
        tenant_id: str,
        agent_id: str | None = None,
        api_key: str | None = None,
        namespace_template: tuple[str, ...] = ("memories", "{user_id}"),
        cube: Cube = "user_profile",
        client: Client | None = None,
        async_client: AsyncClient | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.tenant_id = tenant_id
        self.agent_id = agent_id
        self.template = NamespaceTemplate(tuple(namespace_template))
        if cube == "agent" and agent_id is None:
            raise ValueError("cube='agent' needs an agent_id")
        self.cube_id = "user_profile" if cube == "user_profile" else f"agent_{agent_id}"
        self._url, self._key, self._timeout = api_url, api_key, timeout
        self._client = client
        self._async_client = async_client
        # A client passed in is its owner's to close; one made here is the store's.
        self._owned: set[str] = set()

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client(self._url, api_key=self._key, timeout=self._timeout)
            self._owned.add("sync")
        return self._client

    @property
    def async_client(self) -> AsyncClient:
        if self._async_client is None:
            self._async_client = AsyncClient(self._url, api_key=self._key, timeout=self._timeout)
            self._owned.add("async")
        return self._async_client

    # --- the two methods a store implements ----------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._run_sync(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return list(await asyncio.gather(*(self._run_async(op) for op in ops)))

    # --- one operation ---------------------------------------------------------------------

    def _run_sync(self, op: Op) -> Result:
        api = self.client
        if isinstance(op, GetOp):
            user, below = self.template.split(op.namespace)
            found = api.get_item(
                tenant_id=self.tenant_id, user_id=user, key=op.key, namespace=below
            )
            return None if found is None else self._item(user, found)
        if isinstance(op, PutOp):
            user, below = self.template.split(op.namespace)
            if op.value is None:
                api.delete_item(tenant_id=self.tenant_id, user_id=user, key=op.key, namespace=below)
            else:
                api.put_item(**self._put(user, below, op))
            return None
        if isinstance(op, SearchOp):
            user, below = self.template.split(op.namespace_prefix)
            answer = api.search_items(**self._search(user, below, op))
            return [self._found(user, i) for i in answer.items]
        if isinstance(op, ListNamespacesOp):
            listed = api.item_namespaces(tenant_id=self.tenant_id)
            return self._namespaces(op, [(n.user_id, n.namespace) for n in listed.namespaces])
        raise ValueError(f"unknown operation {type(op).__name__}")

    async def _run_async(self, op: Op) -> Result:
        api = self.async_client
        if isinstance(op, GetOp):
            user, below = self.template.split(op.namespace)
            found = await api.get_item(
                tenant_id=self.tenant_id, user_id=user, key=op.key, namespace=below
            )
            return None if found is None else self._item(user, found)
        if isinstance(op, PutOp):
            user, below = self.template.split(op.namespace)
            if op.value is None:
                await api.delete_item(
                    tenant_id=self.tenant_id, user_id=user, key=op.key, namespace=below
                )
            else:
                await api.put_item(**self._put(user, below, op))
            return None
        if isinstance(op, SearchOp):
            user, below = self.template.split(op.namespace_prefix)
            answer = await api.search_items(**self._search(user, below, op))
            return [self._found(user, i) for i in answer.items]
        if isinstance(op, ListNamespacesOp):
            listed = await api.item_namespaces(tenant_id=self.tenant_id)
            return self._namespaces(op, [(n.user_id, n.namespace) for n in listed.namespaces])
        raise ValueError(f"unknown operation {type(op).__name__}")

    # --- between LangGraph's shapes and the API's -------------------------------------------

    def _put(self, user: str, below: tuple[str, ...], op: PutOp) -> dict[str, Any]:
        assert op.value is not None
        return {
            "tenant_id": self.tenant_id,
            "user_id": user,
            "agent_id": self.agent_id,
            "cube_id": self.cube_id,
            "namespace": below,
            "key": op.key,
            "value": dict(op.value),
        }

    def _search(self, user: str, below: tuple[str, ...], op: SearchOp) -> dict[str, Any]:
        return {
            "tenant_id": self.tenant_id,
            "user_id": user,
            "agent_id": self.agent_id,
            "namespace_prefix": below,
            "query": op.query,
            "filter": op.filter,
            "limit": op.limit,
            "offset": op.offset,
        }

    def _item(self, user: str, found: ItemOut) -> Item:
        return Item(
            value=dict(found.value),
            key=found.key,
            namespace=self.template.join(user, found.namespace),
            created_at=found.created_at,
            updated_at=found.updated_at,
        )

    def _found(self, user: str, found: ItemOut) -> SearchItem:
        return SearchItem(
            namespace=self.template.join(user, found.namespace),
            key=found.key,
            value=dict(found.value),
            created_at=found.created_at,
            updated_at=found.updated_at,
            score=found.score,
        )

    def _namespaces(
        self, op: ListNamespacesOp, listed: list[tuple[str, list[str]]]
    ) -> list[tuple[str, ...]]:
        names = {self.template.join(user, below) for user, below in listed}
        if op.max_depth is not None:
            names = {n[: op.max_depth] for n in names}
        kept = sorted(n for n in names if matches(n, op.match_conditions))
        return kept[op.offset : op.offset + op.limit]

    # --- closing ----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the sync client the store made (not one it was given)."""
        if self._client is not None and "sync" in self._owned:
            self._client.close()

    async def aclose(self) -> None:
        """Close the clients the store made (not those it was given)."""
        self.close()
        if self._async_client is not None and "async" in self._owned:
            await self._async_client.aclose()
