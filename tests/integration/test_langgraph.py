"""``MemstreamStore`` under a real LangGraph graph, on the real API and worker: an item put in
one thread is found by search in another (sync and async), a new value under a key
supersedes the old memory (its history says so), None deletes, namespaces list, and what
the long-term chain learned from a session is found by the same search."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypedDict

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from memstream.broker.topics import ensure_topics
from memstream.settings import Settings
from memstream_client import AsyncClient, Client, Publisher
from memstream_client.langgraph import MemstreamStore
from tests.support.processes import WorkerProcess, api_process
from tests.support.settings import free_port, isolated_settings, unique
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

AGENT = "planner"


@dataclass(frozen=True)
class Served:
    settings: Settings
    url: str
    worker: WorkerProcess


@pytest.fixture(scope="module")
def served(services: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    settings = isolated_settings(api_port=free_port(), log_level="WARNING")
    worker = WorkerProcess(settings, tmp_path_factory.mktemp("langgraph"))
    with api_process(settings) as url:
        yield Served(settings, url, worker)
        worker.kill()


class State(TypedDict, total=False):
    user_id: str
    remember: str
    recall: str
    found: list[str]


def graph(store: BaseStore) -> Any:
    """One node: it stores what it is told to remember and searches what it is asked."""

    def memory(state: State, *, store: BaseStore) -> State:
        namespace = ("memories", state["user_id"])
        if state.get("remember"):
            store.put(namespace, uuid.uuid4().hex, {"content": state["remember"]})
        if state.get("recall"):
            found = store.search(namespace, query=state["recall"], limit=5)
            return {"found": [str(i.value["content"]) for i in found]}
        return {}

    builder = StateGraph(State)
    builder.add_node("memory", memory)
    builder.add_edge(START, "memory")
    builder.add_edge("memory", END)
    return builder.compile(checkpointer=InMemorySaver(), store=store)


def agraph(store: BaseStore) -> Any:
    async def memory(state: State, *, store: BaseStore) -> State:
        namespace = ("memories", state["user_id"])
        if state.get("remember"):
            await store.aput(namespace, uuid.uuid4().hex, {"content": state["remember"]})
        if state.get("recall"):
            found = await store.asearch(namespace, query=state["recall"], limit=5)
            return {"found": [str(i.value["content"]) for i in found]}
        return {}

    builder = StateGraph(State)
    builder.add_node("memory", memory)
    builder.add_edge(START, "memory")
    builder.add_edge("memory", END)
    return builder.compile(checkpointer=InMemorySaver(), store=store)


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def test_an_item_put_in_one_thread_is_found_in_another(served: Served) -> None:
    tenant = unique("langgraph")
    store = MemstreamStore(api_url=served.url, tenant_id=tenant, agent_id=AGENT)
    app = graph(store)
    app.invoke({"user_id": "u1", "remember": "The user prefers window seats"}, thread("t1"))
    answer = app.invoke(
        {"user_id": "u1", "recall": "which seats does the user prefer"}, thread("t2")
    )
    assert answer["found"] == ["The user prefers window seats"]
    other = app.invoke(
        {"user_id": "u2", "recall": "which seats does the user prefer"}, thread("t3")
    )
    assert other["found"] == []
    store.close()


def test_a_new_value_supersedes_the_old_one_and_none_deletes(served: Served) -> None:
    tenant = unique("langgraph")
    with Client(served.url) as api:
        store = MemstreamStore(tenant_id=tenant, agent_id=AGENT, client=api)
        namespace = ("memories", "u1", "trips")
        store.put(namespace, "next", {"content": "The user flies to Lisbon in May"})
        first = store.get(namespace, "next")
        assert first is not None and first.namespace == namespace
        store.put(namespace, "next", {"content": "The user flies to Porto in June"})
        second = store.get(namespace, "next")
        assert second is not None and second.value == {"content": "The user flies to Porto in June"}
        assert second.created_at == first.created_at and second.updated_at > first.updated_at
        found = store.search(("memories", "u1"), query="where does the user fly")
        assert [i.value["content"] for i in found] == ["The user flies to Porto in June"]
        assert [i.key for i in store.search(("memories", "u1", "trips"))] == ["next"]
        assert store.search(("memories", "u1", "hotels"), query="Porto") == []
        assert store.list_namespaces(prefix=("memories",)) == [namespace]
        assert store.list_namespaces(max_depth=2) == [("memories", "u1")]

        item = api.get_item(tenant_id=tenant, user_id="u1", key="next", namespace=["trips"])
        assert item is not None
        history = httpx.get(
            f"{served.url}/v1/memories/{item.memory_id}/history", params={"tenant_id": tenant}
        ).json()["items"]
        assert [(h["content"], h["state"]) for h in history] == [
            ("The user flies to Lisbon in May", "superseded"),
            ("The user flies to Porto in June", "live"),
        ]
        store.put(namespace, "next", None)
        assert store.get(namespace, "next") is None
        assert store.search(("memories", "u1"), query="where does the user fly") == []


async def test_the_async_graph_and_a_memory_the_chain_learned(served: Served) -> None:
    if not served.worker.alive():
        await ensure_topics(served.settings)
        served.worker.start()
    tenant = unique("langgraph")
    async with AsyncClient(served.url) as api:
        await api.put_agent_config(tenant_id=tenant, agent_id=AGENT, model_target_id="m")
        store = MemstreamStore(tenant_id=tenant, agent_id=AGENT, async_client=api)
        app = agraph(store)
        await app.ainvoke({"user_id": "u1", "remember": "The user likes aisle seats"}, thread("a"))
        answer = await app.ainvoke({"user_id": "u1", "recall": "aisle seats"}, thread("b"))
        assert answer["found"] == ["The user likes aisle seats"]

        # A session the platform published: the chain's memory is at the user's root too.
        async with Publisher.from_settings(served.settings) as publisher:
            conversation = unique("c")
            await publisher.message(
                tenant_id=tenant,
                user_id="u1",
                agent_id=AGENT,
                conversation_id=conversation,
                role="user",
                content="I'm allergic to peanuts.",
            )
            await publisher.session_ended(
                tenant_id=tenant, user_id="u1", agent_id=AGENT, conversation_id=conversation
            )

        async def learned() -> bool:
            found = await app.ainvoke({"user_id": "u1", "recall": "peanuts allergy"}, thread("c"))
            return any("allergic to peanuts" in text for text in found["found"])

        await eventually(learned, within=120, what=f"the chain's memory ({served.worker.log_path})")


def test_a_forgotten_user_takes_the_items_values_along(served: Served) -> None:
    tenant = unique("langgraph")
    with Client(served.url) as api:
        store = MemstreamStore(tenant_id=tenant, agent_id=AGENT, client=api)
        store.put(("memories", "u3"), "diet", {"content": "The user is vegetarian"})
        assert store.list_namespaces() == [("memories", "u3")]
        forgotten = httpx.delete(f"{served.url}/v1/users/u3/memories", params={"tenant_id": tenant})
        assert forgotten.status_code == 200, forgotten.text
        assert store.get(("memories", "u3"), "diet") is None
        # The value itself is gone, not only hidden: no namespace holds it any more.
        assert store.list_namespaces() == []
