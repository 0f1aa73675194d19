"""The query API from Python: ``AsyncClient`` (httpx.AsyncClient) and ``Client`` (httpx.Client),
the same calls with the same typed results, the API's own pydantic models.

Each call has a time limit; a 503 (the database or a provider is down for a moment) and a
connection that could not be opened are tried again with a doubling pause, at most
``retries`` more times, honouring ``Retry-After``. Any other error answer raises
:class:`~memstream_client.ApiError` with the API's status, code and message; no answer at all
raises :class:`~memstream_client.ServiceUnavailable`. httpx is imported when a client is made,
not with this module: a service that only publishes never loads it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, Self, TypeVar
from urllib.parse import quote

from pydantic import BaseModel, ValidationError

from memstream_client.contract.api import (
    AddMemoryRequest,
    AgentConfigBody,
    AgentConfigOut,
    ContextRequest,
    ContextResponse,
    DeletedResponse,
    ItemOut,
    ItemPutRequest,
    ItemSearchRequest,
    ItemsResponse,
    MemoriesResponse,
    MemoryOut,
    MemoryType,
    MessagesResponse,
    NamespacesResponse,
    ProviderName,
    SearchRequest,
)
from memstream_client.contract.errors import ApiError, ServiceUnavailable
from memstream_client.retry import HttpRetry, RetryLater, retry_after

if TYPE_CHECKING:
    import httpx

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
P = ParamSpec("P")

RETRY_STATUS = 503
FIRST_PAUSE_SECONDS = 0.2
LONGEST_PAUSE_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class Call(Generic[M]):
    """One API call: the request, and the model its answer is read into (None for a 404 when
    ``missing_is_none``)."""

    method: str
    path: str
    model: type[M]
    params: dict[str, Any] = field(default_factory=dict)
    body: BaseModel | None = None
    missing_is_none: bool = False

    def request(self, client: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        content = None if self.body is None else self.body.model_dump_json(exclude_unset=True)
        headers = {} if content is None else {"content-type": "application/json"}
        return client.build_request(
            self.method, self.path, params=self.params, content=content, headers=headers
        )

    def read(self, response: httpx.Response) -> M | None:
        if response.status_code == 404 and self.missing_is_none:
            return None
        if response.status_code >= 400:
            raise _error(response)
        try:
            return self.model.model_validate_json(response.content)
        except ValidationError as exc:
            raise ServiceUnavailable(
                f"{self.method} {self.path} answered what is not a {self.model.__name__}: {exc}"
            ) from None


def _error(response: httpx.Response) -> ApiError:
    try:
        detail = response.json()["error"]
        code, message = str(detail["code"]), str(detail["message"])
    except (ValueError, KeyError, TypeError):
        code, message = "http_error", response.text[:200] or response.reason_phrase
    return ApiError(response.status_code, code, message)


def _retries(retries: int) -> HttpRetry:
    """One try and ``retries`` more, pausing longer each time or as the server says."""
    return HttpRetry(retries + 1, FIRST_PAUSE_SECONDS, LONGEST_PAUSE_SECONDS)


def _pause(attempt: int, response: httpx.Response | None) -> float:
    """Before try ``attempt + 1``: at least the server's Retry-After, else a doubling pause."""
    return _retries(0).pause(attempt, None if response is None else retry_after(response))


def _answer(response: httpx.Response) -> httpx.Response:
    """``response``, or a ``RetryLater`` when it is one to try again."""
    if response.status_code == RETRY_STATUS:
        raise RetryLater(f"HTTP {RETRY_STATUS}", after=retry_after(response), response=response)
    return response


def _settled(call: Call[M], failure: Exception) -> M | None:
    """What a call whose last try raised ``failure`` answers, or the error it raises."""
    if isinstance(failure, RetryLater) and failure.response is not None:
        return call.read(failure.response)
    import httpx

    if isinstance(failure, httpx.HTTPError):
        raise _unreachable(call, failure) from failure
    raise failure


def _refused(exc: Exception) -> bool:
    """Whether a try failed before the server had the request: worth another."""
    import httpx

    return isinstance(exc, (RetryLater, httpx.ConnectError, httpx.ConnectTimeout))


def _unreachable(call: Call[Any], exc: Exception) -> ServiceUnavailable:
    return ServiceUnavailable(f"{call.method} {call.path}: no answer ({exc!r})")


# The calls, each defined once; both clients send them.


def context_call(
    *,
    tenant_id: str,
    user_id: str,
    conversation_id: str,
    query: str = "",
    agent_id: str | None = None,
    context_rounds: int | None = None,
    filter_sensitive: bool = True,
    own_conversation: bool = False,
) -> Call[ContextResponse]:
    """``POST /v1/context``: the context of the next model call (short-term window and
    long-term memory); with ``own_conversation``, no turns of a conversation that holds
    another user's messages."""
    body = ContextRequest(
        tenant_id=tenant_id,
        user_id=user_id,
        agent_id=agent_id,
        conversation_id=conversation_id,
        query=query,
        context_rounds=context_rounds,
        filter_sensitive=filter_sensitive,
        own_conversation=own_conversation,
    )
    return Call("POST", "/v1/context", ContextResponse, body=body)


def messages_call(
    *, tenant_id: str, conversation_id: str, limit: int | None = None
) -> Call[MessagesResponse]:
    """``GET /v1/conversations/{id}/messages``: stored history, oldest first."""
    params: dict[str, Any] = {"tenant_id": tenant_id}
    if limit is not None:
        params["limit"] = limit
    path = f"/v1/conversations/{quote(conversation_id, safe='')}/messages"
    return Call("GET", path, MessagesResponse, params=params)


def memories_call(
    *, tenant_id: str, user_id: str, agent_id: str | None = None
) -> Call[MemoriesResponse]:
    """``GET /v1/memories``: the live long-term memories of the agent's provider."""
    params = {"tenant_id": tenant_id, "user_id": user_id}
    if agent_id is not None:
        params["agent_id"] = agent_id
    return Call("GET", "/v1/memories", MemoriesResponse, params=params)


def search_memories_call(
    *, tenant_id: str, user_id: str, query: str, agent_id: str | None = None, top_k: int = 10
) -> Call[MemoriesResponse]:
    """``POST /v1/memories/search``: memories by relevance to ``query``, best first."""
    body = SearchRequest(
        tenant_id=tenant_id, user_id=user_id, agent_id=agent_id, query=query, top_k=top_k
    )
    return Call("POST", "/v1/memories/search", MemoriesResponse, body=body)


def add_memory_call(
    *,
    tenant_id: str,
    user_id: str,
    cube_id: str,
    memory_type: MemoryType,
    content: str,
    agent_id: str | None = None,
    importance: int = 5,
) -> Call[MemoryOut]:
    """``POST /v1/memories``: one memory by hand (never an exact duplicate)."""
    body = AddMemoryRequest(
        tenant_id=tenant_id,
        user_id=user_id,
        agent_id=agent_id,
        cube_id=cube_id,
        memory_type=memory_type,
        content=content,
        importance=importance,
    )
    return Call("POST", "/v1/memories", MemoryOut, body=body)


def delete_memory_call(
    *, tenant_id: str, memory_id: str, user_id: str | None = None
) -> Call[DeletedResponse]:
    """``DELETE /v1/memories/{id}``: expire one memory (with ``user_id``, only if it is that
    user's: 404 otherwise)."""
    path = f"/v1/memories/{quote(memory_id, safe='')}"
    params = (
        {"tenant_id": tenant_id}
        if user_id is None
        else {"tenant_id": tenant_id, "user_id": user_id}
    )
    return Call("DELETE", path, DeletedResponse, params=params)


def forget_user_call(*, tenant_id: str, user_id: str) -> Call[DeletedResponse]:
    """``DELETE /v1/users/{user_id}/memories``: forget a user in every provider."""
    path = f"/v1/users/{quote(user_id, safe='')}/memories"
    return Call("DELETE", path, DeletedResponse, params={"tenant_id": tenant_id})


def agent_config_call(*, tenant_id: str, agent_id: str) -> Call[AgentConfigOut]:
    """``GET /v1/agents/{id}/config``: the agent's configuration, None when it has none."""
    path = f"/v1/agents/{quote(agent_id, safe='')}/config"
    return Call("GET", path, AgentConfigOut, params={"tenant_id": tenant_id}, missing_is_none=True)


def put_agent_config_call(
    *,
    tenant_id: str,
    agent_id: str,
    long_memory_provider: ProviderName | None = None,
    open_long_memory: bool = True,
    context_rounds: int | None = None,
    model_target_id: str | None = None,
) -> Call[AgentConfigOut]:
    """``PUT /v1/agents/{id}/config``: set the agent's configuration."""
    values: dict[str, Any] = {
        "long_memory_provider": long_memory_provider,
        "open_long_memory": open_long_memory,
        "model_target_id": model_target_id,
    }
    if context_rounds is not None:
        values["context_rounds"] = context_rounds
    path = f"/v1/agents/{quote(agent_id, safe='')}/config"
    body = AgentConfigBody(**values)
    return Call("PUT", path, AgentConfigOut, params={"tenant_id": tenant_id}, body=body)


def put_item_call(
    *,
    tenant_id: str,
    user_id: str,
    key: str,
    value: dict[str, Any],
    namespace: list[str] | tuple[str, ...] = (),
    agent_id: str | None = None,
    cube_id: str = "user_profile",
) -> Call[ItemOut]:
    """``PUT /v1/items``: store a value under a key; a new value supersedes the old one."""
    body = ItemPutRequest(
        tenant_id=tenant_id,
        user_id=user_id,
        agent_id=agent_id,
        cube_id=cube_id,
        namespace=list(namespace),
        key=key,
        value=value,
    )
    return Call("PUT", "/v1/items", ItemOut, body=body)


def _item_params(
    tenant_id: str, user_id: str, key: str, namespace: list[str] | tuple[str, ...]
) -> dict[str, Any]:
    return {"tenant_id": tenant_id, "user_id": user_id, "key": key, "namespace": list(namespace)}


def get_item_call(
    *, tenant_id: str, user_id: str, key: str, namespace: list[str] | tuple[str, ...] = ()
) -> Call[ItemOut]:
    """``GET /v1/items``: the item under a key, None when there is none."""
    params = _item_params(tenant_id, user_id, key, namespace)
    return Call("GET", "/v1/items", ItemOut, params=params, missing_is_none=True)


def delete_item_call(
    *, tenant_id: str, user_id: str, key: str, namespace: list[str] | tuple[str, ...] = ()
) -> Call[DeletedResponse]:
    """``DELETE /v1/items``: delete the item under a key and its memory."""
    params = _item_params(tenant_id, user_id, key, namespace)
    return Call("DELETE", "/v1/items", DeletedResponse, params=params)


def search_items_call(
    *,
    tenant_id: str,
    user_id: str,
    namespace_prefix: list[str] | tuple[str, ...] = (),
    query: str | None = None,
    agent_id: str | None = None,
    filter: dict[str, Any] | None = None,
    limit: int = 10,
    offset: int = 0,
) -> Call[ItemsResponse]:
    """``POST /v1/items/search``: items by relevance to ``query`` (newest first without)."""
    body = ItemSearchRequest(
        tenant_id=tenant_id,
        user_id=user_id,
        agent_id=agent_id,
        namespace_prefix=list(namespace_prefix),
        query=query,
        filter=filter,
        limit=limit,
        offset=offset,
    )
    return Call("POST", "/v1/items/search", ItemsResponse, body=body)


def item_namespaces_call(*, tenant_id: str, user_id: str | None = None) -> Call[NamespacesResponse]:
    """``GET /v1/items/namespaces``: the namespaces holding items, per user."""
    params = {"tenant_id": tenant_id} | ({"user_id": user_id} if user_id else {})
    return Call("GET", "/v1/items/namespaces", NamespacesResponse, params=params)


def _headers(api_key: str | None) -> dict[str, str]:
    return {} if not api_key else {"authorization": f"Bearer {api_key}"}


def _async(
    build: Callable[P, Call[M]],
) -> Callable[Concatenate[AsyncClient, P], Awaitable[M]]:
    async def send(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> M:
        answer = await self.send(build(*args, **kwargs))
        assert answer is not None  # only calls that may miss say so in their type
        return answer

    send.__doc__, send.__name__ = build.__doc__, build.__name__.removesuffix("_call")
    return send


def _sync(build: Callable[P, Call[M]]) -> Callable[Concatenate[Client, P], M]:
    def send(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> M:
        answer = self.send(build(*args, **kwargs))
        assert answer is not None
        return answer

    send.__doc__, send.__name__ = build.__doc__, build.__name__.removesuffix("_call")
    return send


class AsyncClient:
    """The query API for asyncio code; ``async with AsyncClient(url, api_key=...) as api:``."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        *,
        api_key: str | None = None,
        timeout: float = 5.0,
        retries: int = 3,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        import httpx

        self.retries = retries
        self._http = httpx.AsyncClient(
            base_url=base_url, headers=_headers(api_key), timeout=timeout, transport=transport
        )

    async def send(self, call: Call[M]) -> M | None:
        """Send ``call``, trying a 503 or a refused connection again."""
        import httpx

        async def attempt() -> httpx.Response:
            return _answer(await self._http.send(call.request(self._http)))

        try:
            response = await _retries(self.retries).run(attempt, worth=_refused)
        except (RetryLater, httpx.HTTPError) as failure:
            return _settled(call, failure)
        return call.read(response)

    async def agent_config(self, *, tenant_id: str, agent_id: str) -> AgentConfigOut | None:
        """``GET /v1/agents/{id}/config``: the agent's configuration, None when it has none."""
        return await self.send(agent_config_call(tenant_id=tenant_id, agent_id=agent_id))

    async def get_item(
        self, *, tenant_id: str, user_id: str, key: str, namespace: list[str] | tuple[str, ...] = ()
    ) -> ItemOut | None:
        """``GET /v1/items``: the item under a key, None when there is none."""
        call = get_item_call(tenant_id=tenant_id, user_id=user_id, key=key, namespace=namespace)
        return await self.send(call)

    context = _async(context_call)
    messages = _async(messages_call)
    memories = _async(memories_call)
    search_memories = _async(search_memories_call)
    add_memory = _async(add_memory_call)
    delete_memory = _async(delete_memory_call)
    forget_user = _async(forget_user_call)
    put_agent_config = _async(put_agent_config_call)
    put_item = _async(put_item_call)
    delete_item = _async(delete_item_call)
    search_items = _async(search_items_call)
    item_namespaces = _async(item_namespaces_call)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class Client:
    """The query API for code without an event loop; ``with Client(url, api_key=...) as api:``."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        *,
        api_key: str | None = None,
        timeout: float = 5.0,
        retries: int = 3,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        import httpx

        self.retries = retries
        self._http = httpx.Client(
            base_url=base_url, headers=_headers(api_key), timeout=timeout, transport=transport
        )

    def send(self, call: Call[M]) -> M | None:
        """Send ``call``, trying a 503 or a refused connection again."""
        import httpx

        def attempt() -> httpx.Response:
            return _answer(self._http.send(call.request(self._http)))

        try:
            response = _retries(self.retries).run_sync(attempt, worth=_refused)
        except (RetryLater, httpx.HTTPError) as failure:
            return _settled(call, failure)
        return call.read(response)

    def agent_config(self, *, tenant_id: str, agent_id: str) -> AgentConfigOut | None:
        """``GET /v1/agents/{id}/config``: the agent's configuration, None when it has none."""
        return self.send(agent_config_call(tenant_id=tenant_id, agent_id=agent_id))

    def get_item(
        self, *, tenant_id: str, user_id: str, key: str, namespace: list[str] | tuple[str, ...] = ()
    ) -> ItemOut | None:
        """``GET /v1/items``: the item under a key, None when there is none."""
        call = get_item_call(tenant_id=tenant_id, user_id=user_id, key=key, namespace=namespace)
        return self.send(call)

    context = _sync(context_call)
    messages = _sync(messages_call)
    memories = _sync(memories_call)
    search_memories = _sync(search_memories_call)
    add_memory = _sync(add_memory_call)
    delete_memory = _sync(delete_memory_call)
    forget_user = _sync(forget_user_call)
    put_agent_config = _sync(put_agent_config_call)
    put_item = _sync(put_item_call)
    delete_item = _sync(delete_item_call)
    search_items = _sync(search_items_call)
    item_namespaces = _sync(item_namespaces_call)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


__all__ = ["AsyncClient", "Call", "Client"]
