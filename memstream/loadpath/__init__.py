"""The load path behind ``POST /v1/context``: what an agent request waits on.

``assemble`` (``LoadPath``) loads the short-term window and the long-term memory in parallel,
degrading instead of failing; ``recent`` reads a conversation's newest chat turns from the cache
or the record; ``window`` and ``budget`` are its pure rules (which recent messages fit, how
long-term memory is filtered and fitted to its token budget); ``sensitive`` says which
memories must not reach a prompt. Its request and answer are the API's bodies
(``memstream_client.contract.api``), served as they are. Nothing here imports the API.
"""
