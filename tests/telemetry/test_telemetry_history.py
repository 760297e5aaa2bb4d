"""console/telemetry/history.py: what a host screen remembers beyond one snapshot."""

from __future__ import annotations

from vllm_console.console.hostclient.agent.samples import AgentSample
from vllm_console.console.telemetry.history import (
    GPU_HISTORY,
    RESTART,
    AcceptanceHistory,
    GpuHistory,
)
from vllm_console.console.telemetry.spec_decode import (
    SpecDecodePoint,
    SpecDecodeState,
    SpecDecodeStatus,
    SpecSource,
)


def state(*points: tuple[float, float | None]) -> SpecDecodeState:
    return SpecDecodeState(SpecDecodeStatus.ACTIVE, history=tuple(
        SpecDecodePoint(at, value, None, SpecSource.LOG) for at, value in points))


def test_acceptance_is_kept_across_a_restart_with_the_restart_marked() -> None:
    history = AcceptanceHistory()
    assert history.new_run() == (), "no mark before any figure"
    history.add(state((10, 1.17), (12, 1.18)))
    assert history.add(state((10, 1.17), (12, 1.18), (14, 1.17))) == (1.17, 1.18, 1.17), \
        "a point already taken is not taken twice"
    history.new_run()
    assert history.new_run()[-1] is RESTART
    # The new run's state starts empty, then climbs.
    history.add(state())
    assert history.add(state((30, None), (32, 6.1), (34, 6.4))) == (
        1.17, 1.18, 1.17, RESTART, 6.1, 6.4)


def test_acceptance_history_is_bounded() -> None:
    history = AcceptanceHistory(limit=3)
    history.add(state(*((float(t), 2.0 + t) for t in range(5))))
    assert history.points == (4.0, 5.0, 6.0)


def sample(*utils: float | None) -> AgentSample:
    return AgentSample.from_json({"seq": 1, "ts": 0.0, "gpu_source": "nvml", "gpus": [
        {"index": i, "util_pct": u} for i, u in enumerate(utils)]}, 0.0)


def test_gpu_history_per_gpu_skips_unknowns_and_is_bounded() -> None:
    history = GpuHistory()
    history.add(sample(10, None))
    assert history.add(sample(20, 5)) == {0: (10.0, 20.0), 1: (5.0,)}
    for _ in range(GPU_HISTORY + 5):
        kept = history.add(sample(50, 50))
    assert len(kept[0]) == GPU_HISTORY


def test_the_load_history_takes_each_sample_once_and_keeps_missing_figures_out() -> None:
    from vllm_console.console.telemetry.history import LoadHistory
    from vllm_console.console.telemetry.server import ServerLoad

    history = LoadHistory(limit=3)
    history.add(ServerLoad(running=2, generation_tps=10.0, at=1.0))
    history.add(ServerLoad(running=2, generation_tps=10.0, at=1.0))  # the same sample again
    history.add(ServerLoad(running=3, generation_tps=None, at=2.0))
    points = history.add(None)
    assert points["running"] == (2.0, 3.0)
    assert points["generation_tps"] == (10.0,)  # a missing figure is no zero
    for at in (3.0, 4.0, 5.0):
        points = history.add(ServerLoad(running=int(at), at=at))
    assert points["running"] == (3.0, 4.0, 5.0)  # the newest `limit`
