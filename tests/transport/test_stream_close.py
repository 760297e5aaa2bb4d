"""Closing a stream closes its reader too: a reader left at a `yield` was finished by the
garbage collector later, on whatever loop turn that came (seen as a close still running at a
test loop's teardown), and ran the process's reap a second time there."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Coroutine
from typing import Any

import pytest

from vllm_console.console.transport.local_host import LocalHost


@pytest.mark.programs
async def test_a_closed_stream_leaves_nothing_for_the_garbage_collector() -> None:
    loop = asyncio.get_running_loop()
    started: list[str] = []

    def factory(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any],
                **kwargs: Any) -> asyncio.Task[Any]:
        started.append(type(coro).__name__)
        return asyncio.Task(coro, loop=loop, **kwargs)

    host = LocalHost("here")
    handle = await host.stream("while :; do echo tick; sleep 0.05; done")
    chunks = handle.__aiter__()
    assert b"tick" in await chunks.__anext__()  # the reader waits at its `yield` now
    await handle.close()
    loop.set_task_factory(factory)  # type: ignore[arg-type]
    try:
        del chunks, handle
        gc.collect()
        await asyncio.sleep(0.05)  # a finaliser's close would have started by now
    finally:
        loop.set_task_factory(None)
    assert "async_generator_athrow" not in started
