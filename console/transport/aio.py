"""Waiting and cancelling without losing a cancellation (Python 3.11).

Two asyncio habits drop a cancellation of the task that uses them, and a task that misses its
cancellation runs on for good (a log follower streamed on after the console left it, and a
teardown that awaited it hung):
- `asyncio.wait_for(aw, t)` on 3.11 returns `aw`'s result when the caller is cancelled in the
  turn `aw` completes (fixed in 3.12). `asyncio.timeout(t)` has no such gap: the code here uses
  it, through `within` where a value is awaited.
- `with suppress(CancelledError): await child` after `child.cancel()` also swallows a
  cancellation of the caller that arrives during that wait. `cancel_and_wait` does not."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")


async def within(aw: Awaitable[T], timeout: float | None) -> T:
    """`await aw`, raising TimeoutError after `timeout` seconds (None: no limit); unlike 3.11's
    `asyncio.wait_for` it never returns a result in place of the caller's cancellation."""
    async with asyncio.timeout(timeout):
        return await aw


async def cancel_and_wait(*tasks: asyncio.Future[Any] | None, limit: float | None = None
                          ) -> None:
    """Cancel `tasks` (None entries skipped) and wait until each has ended, whatever it raised;
    a cancellation of the caller meanwhile is passed on, not swallowed. `limit`: wait no longer
    than this many seconds in all (a teardown must end; the tasks stay cancelled)."""
    live = [t for t in tasks if t is not None]
    for task in live:
        task.cancel()
    if live:
        # `asyncio.wait`, not `await task`: a cancellation of the caller ends this wait at once
        # (awaiting the task would hand it to the task, and wait for it to obey).
        await asyncio.wait(live, timeout=limit)
    for task in live:
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: whatever it raised, its end is all that is wanted
