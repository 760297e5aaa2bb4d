"""`vllm-console fleet` against a real Prometheus scraping simulated servers (and their
dcgm-exporter series): the rows a user reads, and every failure shown as what it is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fleet_support import FleetWorld


@pytest.fixture
def world(prometheus_world: FleetWorld) -> FleetWorld:
    return prometheus_world


def fleet_cli(*args: str, config: Path | None = None) -> tuple[int, dict[str, Any] | None, str]:
    cmd = [sys.executable, "-m", "vllm_console", "fleet", "--json", *args]
    if config is not None:
        cmd += ["--config", str(config)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    body = json.loads(proc.stdout) if proc.stdout.strip() else None
    return proc.returncode, body, proc.stderr


def by_key(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["key"]: s for s in body["servers"]}


def test_rows_from_a_real_prometheus(world: FleetWorld) -> None:
    code, body, err = fleet_cli("--prometheus", world.prom.url)
    assert code == 0, err
    assert body is not None
    assert body["error"] is None
    assert body["query_errors"] == {}
    rows = by_key(body)
    # Only the vLLM job's targets are servers: the dcgm job's is not a row of its own.
    assert set(rows) == {world.incident, world.healthy, world.dead}

    broken = rows[world.incident]
    assert broken["up"] is True
    assert broken["model"].endswith("Qwen3.6-27B")
    assert 1.0 < broken["mean_acceptance_length"] < 1.6
    assert broken["per_engine_acceptance"]["0"] == pytest.approx(
        broken["mean_acceptance_length"], abs=0.01)
    assert broken["expected_acceptance"] == 6.4
    assert broken["low_acceptance"] is True
    assert broken["generation_tps"] > 0
    assert broken["running"] is not None
    assert 0 < broken["kv_cache_usage_pct"] <= 100
    assert broken["gpu_util_pct"] is not None
    assert broken["gpu_mem_used_mib"] > 0
    assert broken["gpu_mem_total_mib"] >= broken["gpu_mem_used_mib"]
    assert broken["missing"] == {}

    good = rows[world.healthy]
    assert good["mean_acceptance_length"] > 5.0
    assert good["low_acceptance"] is False
    assert 0 < good["draft_acceptance_rate_pct"] < 100
    # No dcgm-exporter series for this host: said so, never a 0 % GPU.
    assert good["gpu_util_pct"] is None
    assert good["gpu_mem_used_mib"] is None
    assert good["missing"]["gpu_util_pct"] == "no dcgm-exporter series"

    dead = rows[world.dead]
    assert dead["up"] is False
    for figure in ("mean_acceptance_length", "generation_tps", "running", "waiting",
                   "kv_cache_usage_pct"):
        assert dead[figure] is None, figure
        assert dead["missing"][figure] == "absent", figure
    assert dead["low_acceptance"] is None


def test_fleet_table_and_host_mapping_from_the_hosts_file(world: FleetWorld,
                                                          tmp_path: Path) -> None:
    config = tmp_path / "hosts.toml"
    config.write_text(f'[fleet]\nprometheus = "{world.prom.url}"\nselector = \'{{job="vllm"}}\'\n'
                      f'[hosts.gpu-a]\nurl = "http://{world.incident}"\n'
                      f'[hosts.gpu-b]\nssh = "vcssh@127.0.0.2"\n')
    code, body, err = fleet_cli(config=config)
    assert code == 0, err
    assert body is not None
    assert body["selector"] == '{job="vllm"}'
    rows = by_key(body)
    assert rows[world.incident]["host"] == "gpu-a"  # by its url's host:port
    assert rows[world.healthy]["host"] == "gpu-b"  # by its ssh host
    assert rows[world.dead]["host"] is None


def test_a_selector_that_matches_nothing_is_an_empty_table(world: FleetWorld) -> None:
    code, body, _ = fleet_cli("--prometheus", world.prom.url, "--selector", '{job="nope"}')
    assert code == 0
    assert body is not None
    assert body["servers"] == []


def test_bad_promql_is_an_error_not_an_empty_table(world: FleetWorld) -> None:
    code, body, err = fleet_cli("--prometheus", world.prom.url, "--selector", '{job=~"("}')
    assert code == 2
    assert body is not None
    assert body["servers"] == []
    assert "the `up` query failed: bad_data" in body["error"]
    assert err.startswith("vllm-console: the `up` query failed")
    assert err.count("\n") == 1


@pytest.mark.programs
def test_unreachable_prometheus_is_said_once(tmp_path: Path) -> None:
    from tests.prometheus import free_port

    code, body, err = fleet_cli("--prometheus", f"http://127.0.0.1:{free_port()}")
    assert code == 2
    assert body is not None
    assert "connection refused" in body["error"]
    assert body["servers"] == []
    assert body["query_errors"] == {}
    assert "Traceback" not in err


def test_not_prometheus_at_that_url(world: FleetWorld) -> None:
    code, body, _ = fleet_cli("--prometheus", f"http://{world.incident}/nothing-here")
    assert code == 2
    assert body is not None
    assert "no Prometheus API JSON (is this Prometheus?)" in body["error"]


@pytest.mark.programs
@pytest.mark.parametrize(("args", "message"), [
    ((), "no Prometheus: give --prometheus URL"),
    (("--prometheus", "ftp://x"), "not an http:// or https:// URL"),
    (("--prometheus", "http://127.0.0.1:9", "--selector", 'job="vllm"'), "in braces"),
])
def test_usage_errors_are_one_line(args: tuple[str, ...], message: str, tmp_path: Path) -> None:
    config = tmp_path / "empty.toml"
    config.write_text("")
    code, body, err = fleet_cli(*args, config=config)
    assert code == 2
    assert body is None
    assert message in err
    assert err.count("\n") == 1


# -- the table (Pilot, the real app on the same Prometheus) ------------------------------------
def _app(world: FleetWorld, hosts: dict[str, Any] | None = None, **fleet: str):  # type: ignore[no-untyped-def]
    from vllm_console.console.settings import FleetSettings, HostsFile
    from vllm_console.console.sources.prometheus import Prometheus
    from vllm_console.console.tui.fleet_app import FleetApp

    settings = FleetSettings(prometheus=world.prom.url, **fleet)
    return FleetApp(Prometheus(world.prom.url), settings, "",
                    HostsFile.model_validate({"hosts": hosts or {}}), refresh_s=0.3)


def _cells(app, key: str) -> list[str]:  # type: ignore[no-untyped-def]
    table = app.table.query_one("DataTable")
    return [str(c) for c in table.get_row(key)]


async def test_table_sort_filter_refresh_and_enter(world: FleetWorld) -> None:
    from tests.app_support import wait_until
    from tests.prometheus import free_port
    from vllm_console.console.sources.fleet_hosts import OpenKind
    from vllm_console.console.sources.prometheus import Prometheus
    from vllm_console.console.tui.screens.prom_fleet import COLUMNS

    app = _app(world, {"gpu-a": {"url": f"http://{world.incident}"}})
    titles = [c.key for c in COLUMNS]
    async with app.run_test(size=(200, 40)) as pilot:
        await wait_until(pilot, lambda: app.refreshes >= 1, what="the first refresh")
        table = app.table.query_one("DataTable")
        assert table.row_count == 3
        broken, good, dead = (dict(zip(titles, _cells(app, k), strict=True))
                              for k in (world.incident, world.healthy, world.dead))
        assert broken["flag"] == "LOW (expect ~6.4)"
        assert broken["host"] == "gpu-a"
        assert float(broken["accept"]) < 1.6
        assert broken["gpu"].endswith("%")
        assert good["flag"] == ""
        assert float(good["accept"]) > 5
        assert good["gpu"] == "no dcgm"
        assert good["mem"] == "no dcgm"
        assert dead["up"] == "DOWN"
        assert dead["accept"] == "absent"
        assert dead["running"] == "absent"

        for _ in range(titles.index("accept")):  # `s` steps the sort column
            await pilot.press("s")
        assert [s.key for s in app.table.rows] == [world.incident, world.healthy, world.dead]
        await pilot.press("S")  # reversed; the server with no figure stays last
        assert [s.key for s in app.table.rows] == [world.healthy, world.incident, world.dead]

        await pilot.press("slash", *"down", "enter")
        assert [s.key for s in app.table.rows] == [world.dead]
        assert table.row_count == 1
        await pilot.press("escape")
        assert table.row_count == 3

        seen = app.refreshes
        await wait_until(pilot, lambda: app.refreshes >= seen + 2, what="two more refreshes")
        assert table.row_count == 3
        app.prom = Prometheus(f"http://127.0.0.1:{free_port()}")  # Prometheus gone
        seen = app.refreshes
        await wait_until(pilot, lambda: app.refreshes > seen, what="a failed refresh")
        status = str(app.table.query_one("#promfleet-status").render())
        assert "connection refused" in status
        assert "last good refresh" in status
        assert table.row_count == 3, "a failed refresh must keep the last table"

        table.move_cursor(row=[s.key for s in app.table.rows].index(world.incident))
        await pilot.press("enter")
    target = app.return_value
    assert target is not None
    assert target.kind is OpenKind.URL
    assert (target.name, target.url) == ("gpu-a", f"http://{world.incident}")
    assert app.state.sort_index == titles.index("accept")
    assert app.state.reverse


async def test_prometheus_only_view(world: FleetWorld) -> None:
    from tests.app_support import wait_until
    from vllm_console.console.tui.screens.prom_fleet import PromServerScreen

    app = _app(world, host_label="job")  # a row named `vllm`: no URL, no hosts-file entry
    async with app.run_test(size=(200, 40)) as pilot:
        await wait_until(pilot, lambda: app.refreshes >= 1, what="the first refresh")
        assert [s.key for s in app.table.rows] == ["vllm"]
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, PromServerScreen),
                         what="the Prometheus-only view")
        text = str(app.screen.query_one("#promserver").render())
        assert "server vllm" in text
        assert "Seen through Prometheus only" in text
        assert "accept len" in text
        await pilot.press("escape")
        assert app.screen is app.table
