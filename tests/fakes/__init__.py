"""Local stand-ins for the external HTTP services memstream calls (an OpenAI-compatible LLM,
MemOS, Mem0): small real servers in a thread of the test process, with scripted behaviour."""
