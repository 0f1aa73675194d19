"""memstream as the long-term memory of AgentScope 2.x agents (``pip install
'memstream-client[agentscope]'``); docs/integrations/agentscope.md has the whole example.

    from memstream_client.agentscope import MemstreamMiddleware

    memory = MemstreamMiddleware(api=api, publisher=publisher, tenant_id="acme",
                                 user_id="u1", agent_id="travel", mode="both")
    agent = Agent(..., toolkit=Toolkit(tools=await memory.list_tools()), middlewares=[memory])
    await agent.reply(UserMsg(name="user", content="I'm allergic to peanuts."))
    await memory.end_session(agent)
"""

from memstream_client.agentscope.middleware import MemstreamMiddleware, Mode, Recall
from memstream_client.agentscope.tools import AddMemoryTool, SearchMemoryTool

__all__ = ["AddMemoryTool", "MemstreamMiddleware", "Mode", "Recall", "SearchMemoryTool"]
