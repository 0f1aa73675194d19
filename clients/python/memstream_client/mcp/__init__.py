"""memstream's memory tools for MCP hosts, on the official ``mcp`` SDK (the ``mcp`` extra).

``tools`` holds the tools, one implementation for both transports: ``command`` serves them over
stdio (``memstream-mcp``), and memstream's API serves them over streamable HTTP at ``/mcp``.
Nothing is imported here, so that the command line can read its options without the SDK.
"""
