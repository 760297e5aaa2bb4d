"""A `LogFollower` running for the length of a block: what the follower tests and
benchmarks/bench_follower.py share."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from vllm_console.console.hostclient.follower import LogFollower, OnBatch


@contextlib.asynccontextmanager
async def running(follower: LogFollower, on_batch: OnBatch) -> AsyncIterator[None]:
    """`follower.run(on_batch)` in a task for the block; after it, the follower stopped, its task
    ended and its host closed."""
    task = asyncio.create_task(follower.run(on_batch))
    try:
        yield
    finally:
        follower.stop()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await follower.host.close()
