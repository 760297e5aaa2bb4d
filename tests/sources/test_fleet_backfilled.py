"""Fleet figures that live servers in a test cannot easily show (two engines with different
acceptance, an idle server, a counter that is not exported), from blocks backfilled into a
real Prometheus with `promtool tsdb create-blocks-from openmetrics`."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.prometheus import PrometheusServer, running_prometheus
from vllm_console.console.sources.fleet_query import ABSENT, IDLE, FleetServer, query_fleet
from vllm_console.console.sources.prometheus import Prometheus

pytestmark = pytest.mark.prometheus

STEP = 15


def series(name: str, labels: str, values: list[float], stamps: list[int]) -> list[str]:
    return [f"{name}{{{labels}}} {v:g} {t}" for v, t in zip(values, stamps, strict=True)]


def openmetrics(now: int) -> str:
    stamps = list(range(now - 180, now + 600, STEP))
    k = len(stamps)
    drafts = [100.0 * j for j in range(k)]
    flat = [500.0] * k
    fams: dict[str, list[str]] = {"up": [], "vllm:spec_decode_num_drafts": [],
                                  "vllm:spec_decode_num_draft_tokens": [],
                                  "vllm:spec_decode_num_accepted_tokens": [],
                                  "vllm:num_requests_running": [],
                                  "vllm:generation_tokens": []}
    for host in ("two-engines:8000", "idle:8000", "no-gen:8000"):
        fams["up"] += series("up", f'instance="{host}",job="vllm"', [1.0] * k, stamps)
    for engine, accept in (("0", 5.4), ("1", 0.2)):
        labels = f'engine="{engine}",instance="two-engines:8000",job="vllm",model_name="m"'
        fams["vllm:spec_decode_num_drafts"] += series("vllm:spec_decode_num_drafts_total",
                                                      labels, drafts, stamps)
        fams["vllm:spec_decode_num_draft_tokens"] += series(
            "vllm:spec_decode_num_draft_tokens_total", labels, [d * 15 for d in drafts], stamps)
        fams["vllm:spec_decode_num_accepted_tokens"] += series(
            "vllm:spec_decode_num_accepted_tokens_total", labels, [d * accept for d in drafts],
            stamps)
        fams["vllm:num_requests_running"] += series("vllm:num_requests_running", labels,
                                                    [3.0] * k, stamps)
        # Data parallel with one stuck replica: engine 0 generates 100 tokens/s, engine 1
        # holds its 3 requests and generates nothing. Summed, the server looks busy and fine.
        per_step = 100.0 * STEP if engine == "0" else 0.0
        fams["vllm:generation_tokens"] += series(
            "vllm:generation_tokens_total", labels, [1000.0 + per_step * j for j in range(k)],
            stamps)
    idle = 'engine="0",instance="idle:8000",job="vllm",model_name="m"'
    for fam, name in (("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_drafts_total"),
                      ("vllm:spec_decode_num_draft_tokens",
                       "vllm:spec_decode_num_draft_tokens_total"),
                      ("vllm:spec_decode_num_accepted_tokens",
                       "vllm:spec_decode_num_accepted_tokens_total")):
        fams[fam] += series(name, idle, flat, stamps)
    fams["vllm:num_requests_running"] += series("vllm:num_requests_running", idle, [0.0] * k,
                                                stamps)
    out = []
    for fam, lines in fams.items():
        kind = "gauge" if fam in ("up", "vllm:num_requests_running") else "counter"
        out += [f"# TYPE {fam} {kind}", *lines]
    return "\n".join(out) + "\n# EOF\n"


@pytest.fixture(scope="module")
def blocks() -> Path:
    base = Path(tempfile.mkdtemp(prefix="vc-backfill-"))
    (base / "data").mkdir()
    (base / "in.om").write_text(openmetrics(int(time.time())))
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(base / "in.om"),
                    str(base / "data")], check=True, capture_output=True, timeout=120)
    return base / "data"


@contextmanager
def serving(blocks: Path, *extra: str) -> Iterator[PrometheusServer]:
    storage = Path(tempfile.mkdtemp(prefix="vc-blocks-")) / "data"
    shutil.copytree(blocks, storage)  # one Prometheus per storage directory (it locks it)
    with running_prometheus([], storage=storage,
                            extra=["--storage.tsdb.retention.time=30d", *extra]) as server:
        server.wait_for("up", lambda v: len(v) == 3)
        yield server
    shutil.rmtree(storage.parent, ignore_errors=True)


@pytest.fixture(scope="module")
def prom(blocks: Path) -> Iterator[PrometheusServer]:
    with serving(blocks) as server:
        yield server


def rows(prom: PrometheusServer) -> dict[str, FleetServer]:
    report = asyncio.run(query_fleet(Prometheus(prom.url)))
    assert not report.error
    return {s.key: s for s in report.servers}


def test_two_engines_summed_and_each(prom: PrometheusServer) -> None:
    row = rows(prom)["two-engines:8000"]
    assert row.per_engine_acceptance == pytest.approx({"0": 6.4, "1": 1.2}, abs=0.01)
    assert row.mean_acceptance_length == pytest.approx(1 + (5.4 + 0.2) / 2, abs=0.01)
    assert row.draft_acceptance_rate_pct == pytest.approx(100 * 5.6 / 30, abs=0.1)
    assert row.running == 6  # summed over engines
    assert row.low_acceptance is True  # below the DFlash range (4.0-6.4), as check flags it


def test_one_stuck_data_parallel_engine_is_seen_though_the_sum_looks_fine(
        prom: PrometheusServer) -> None:
    """vLLM labels its series by `engine`; summed, a DP server with one hung replica still
    generates 100 tokens/s with requests running (issue 27). Per engine, engine 1 holds 3
    requests and generates nothing: the server is `stalled` (on any engine) and imbalanced."""
    row = rows(prom)["two-engines:8000"]
    assert row.generation_tps == pytest.approx(100.0, rel=0.02)
    assert row.per_engine_generation_tps == pytest.approx({"0": 100.0, "1": 0.0}, abs=1.0)
    assert row.engine == "stalled"
    assert row.stalled_engines == ("1",)
    assert row.imbalanced is True
    shown = row.to_json()
    assert shown["engine"] == "stalled"
    assert shown["stalled_engines"] == ["1"]
    assert shown["imbalanced"] is True
    # One row per engine on demand (`e` in the table): engine 1 is the stuck one.
    engines = {e.key: e for e in row.engine_rows()}
    assert list(engines) == ["two-engines:8000 · e0", "two-engines:8000 · e1"]
    e0, e1 = engines.values()
    assert (e0.running, e0.generation_tps, e0.engine) == (3, pytest.approx(100.0, rel=0.02),
                                                         "ok")
    assert (e1.running, e1.generation_tps, e1.engine) == (3, 0.0, "stalled")
    assert e1.stalled_engines == ("1",)
    assert e0.mean_acceptance_length == pytest.approx(6.4, abs=0.01)
    assert e1.low_acceptance is True
    assert e0.low_acceptance is False


def test_an_idle_server_has_no_acceptance_not_a_one(prom: PrometheusServer) -> None:
    row = rows(prom)["idle:8000"]
    assert row.up is True
    assert row.mean_acceptance_length is None
    assert row.missing["mean_acceptance_length"] == IDLE
    assert row.missing["draft_acceptance_rate_pct"] == IDLE
    assert row.low_acceptance is None
    assert row.running == 0  # a real zero stays a zero


def test_a_series_that_is_not_exported_is_absent(prom: PrometheusServer) -> None:
    found = rows(prom)
    row = found["no-gen:8000"]  # up, nothing else: its row is there, every figure absent
    assert row.up is True
    assert row.model is None
    assert row.missing["model"] == ABSENT
    assert row.missing["mean_acceptance_length"] == ABSENT


def test_a_failing_query_is_named_and_its_figures_say_error(blocks: Path) -> None:
    """Prometheus refuses the rate queries (a sample limit an operator set) while `up` works:
    the table stands, those figures say `error`, never 0, and the failure is named."""
    with serving(blocks, "--query.max-samples=6") as limited:
        report = asyncio.run(query_fleet(Prometheus(limited.url)))
    assert report.error == ""
    assert "too many samples" in report.query_errors["accepted"]
    row = {s.key: s for s in report.servers}["two-engines:8000"]
    assert row.mean_acceptance_length is None
    assert row.missing["mean_acceptance_length"].startswith("error: ")
    assert row.up is True  # what did answer is still shown
