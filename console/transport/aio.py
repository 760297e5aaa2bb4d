"""Waiting and cancelling without losing a cancellation (Python 3.11).

Two asyncio habits drop a cancellation of the task that uses them, and a task that misses its
cancellation runs on for good (a log follower streamed on after the console left it, and a
teardown that awaited it hung):
- `asyncio.wait_for(aw, t)` on 3.11 returns `aw`'s result when the caller is cancelled in the
  turn `aw` completes (fixed in 3.12). `asyncio.timeout(t)` has no such gap: the code here uses
  it, through `within` where a value is awaited.
- `with suppress(CancelledError): await child` after `child.cancel()` also swallows a
  cancellation of the caller that arrives during that wait. `cancel_and_wait` tells the two
  apart."""

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


async def cancel_and_wait(*tasks: asyncio.Future[Any] | None) -> None:
    """Cancel `tasks` (None entries skipped) and wait until each has ended, whatever it raised;
    a cancellation of the caller meanwhile is passed on, not swallowed."""
    live = [t for t in tasks if t is not None]
    for task in live:
        task.cancel()
    cancelled = False
    for task in live:
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            cancelled = cancelled or (current is not None and current.cancelling() > 0)
        except Exception:  # its end is all that is wanted here
            pass
    if cancelled:
        raise asyncio.CancelledError
