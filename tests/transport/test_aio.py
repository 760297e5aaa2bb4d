"""`transport.aio`: the waits that keep a cancellation (Python 3.11's `wait_for` and
`suppress(CancelledError)` each dropped one, and a log follower streamed on for good)."""

from __future__ import annotations

import asyncio

import pytest

from vllm_console.console.transport.aio import cancel_and_wait, within


async def test_within_never_trades_the_callers_cancellation_for_a_result() -> None:
    """The turn the awaited value is ready is the turn the caller is cancelled: 3.11's
    `wait_for` returned the value (and the caller went on); `within` raises CancelledError."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    got: list[int] = []

    async def take() -> None:
        got.append(await within(queue.get(), 10))

    task = asyncio.create_task(take())
    await asyncio.sleep(0.01)
    queue.put_nowait(1)
    task.cancel()
    await asyncio.wait({task}, timeout=2)
    assert task.cancelled()
    assert got == []


async def test_within_times_out() -> None:
    with pytest.raises(TimeoutError):
        await within(asyncio.Event().wait(), 0.05)


async def test_cancel_and_wait_ends_children_and_passes_on_its_own_cancellation() -> None:
    child = asyncio.create_task(asyncio.sleep(10))
    await cancel_and_wait(child, None)  # a child's cancellation is not the caller's
    assert child.cancelled()

    stubborn_started = asyncio.Event()
    release = asyncio.Event()

    async def stubborn() -> None:
        stubborn_started.set()
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue  # misses its cancellation, as a buggy task would

    task = asyncio.create_task(stubborn())
    await stubborn_started.wait()
    loop = asyncio.get_running_loop()
    started = loop.time()
    await cancel_and_wait(task, limit=0.2)  # bounded: returns, the task still runs
    assert loop.time() - started < 2
    assert not task.done()

    async def caller() -> None:
        await cancel_and_wait(task)  # waits for the stubborn task...

    outer = asyncio.create_task(caller())
    await asyncio.sleep(0.05)
    outer.cancel()  # ...until its own caller is cancelled: that is passed on
    await asyncio.wait({outer}, timeout=2)
    assert outer.cancelled()
    release.set()
    await asyncio.wait({task}, timeout=2)
    assert task.done()
