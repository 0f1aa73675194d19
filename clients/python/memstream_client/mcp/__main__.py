"""``python -m memstream_client.mcp``: ``memstream-mcp``."""

import sys

from memstream_client.mcp.command import main

sys.exit(main())
