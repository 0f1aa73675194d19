"""Waiting on a condition with a deadline instead of on the clock."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


async def eventually(
    check: Callable[[], Awaitable[bool]], *, within: float = 60, what: str = "condition"
) -> None:
    """Poll ``check`` until it holds; raise TimeoutError naming ``what`` after ``within``
    seconds."""
    deadline = time.monotonic() + within
    while True:
        if await check():
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.25)
