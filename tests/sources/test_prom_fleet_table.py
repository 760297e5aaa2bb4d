"""The Prometheus fleet table's own behaviour on 1,000 rows (no Prometheus needed: the reports
are built as a refresh would build them): a live sort reorders in place and keeps the server
under the cursor, and a filter adds and removes rows without rebuilding the table."""

from __future__ import annotations

import time

from textual.app import App

from vllm_console.checks.profile import expected_acceptance
from vllm_console.console.sources.fleet_query import FleetReport, FleetServer
from vllm_console.console.tui.screens.prom_fleet import COLUMNS, PromFleetScreen


def report(n: int, shift: int) -> FleetReport:
    return FleetReport("http://prom", "", "instance", time.time(), servers=tuple(
        FleetServer(key=f"10.0.{i // 256}.{i % 256}:8000", job="vllm", up=True, model="m",
                    mean_acceptance_length=1.0 + (i + shift) % 997 / 100,
                    expected_acceptance=expected_acceptance("dflash")) for i in range(n)))


async def test_a_live_sort_keeps_the_server_under_the_cursor() -> None:
    app: App[None] = App()
    async with app.run_test(size=(200, 50)) as pilot:
        screen = PromFleetScreen("http://prom")
        await app.push_screen(screen)
        screen.sort_index = [c.key for c in COLUMNS].index("accept")
        screen.show(report(1000, 0))
        await pilot.pause()
        table = screen.query_one("DataTable")
        table.move_cursor(row=10)
        await pilot.pause()
        chosen = screen.rows[10].key
        screen.show(report(1000, 500))  # every acceptance moves: a new order
        await pilot.pause()
        values = [s.mean_acceptance_length for s in screen.rows]
        assert values == sorted(values)  # type: ignore[type-var]
        shown = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert shown == [s.key for s in screen.rows]
        assert shown[table.cursor_row] == chosen

        screen.filter = "10.0.3."
        screen._render_rows()
        await pilot.pause()
        assert table.row_count == 1000 - 768
        assert all(str(table.get_row_at(i)[0]).startswith("10.0.3.")
                   for i in range(table.row_count))


async def test_label_values_are_data_never_markup_or_escapes() -> None:
    from vllm_console.console.tui.screens.prom_fleet import PromServerScreen

    evil = "m\x1b]0;pwned\x07[bold red]x[/]"
    server = FleetServer(key="[::1]:8000", model=evil, up=True)
    app: App[None] = App()
    async with app.run_test(size=(200, 50)) as pilot:
        screen = PromFleetScreen("http://[::1]:9090")
        await app.push_screen(screen)
        screen.show(FleetReport("http://[::1]:9090", "", "instance", time.time(),
                                servers=(server,)))
        await pilot.pause()
        cell = str(screen.query_one("DataTable").get_row_at(0)[3])
        assert "\x1b" not in cell
        assert "\\x1b" in cell
        assert "[bold red]" in cell  # shown as typed, not applied
        assert "[::1]:9090" in str(screen.query_one("#promfleet-title").render())
        await app.push_screen(PromServerScreen(server))
        await pilot.pause()
        view = str(app.screen.query_one("#promserver").render())
        assert "\x1b" not in view
        assert "[bold red]x[/]" in view


def two_engines(rates: tuple[float, float]) -> FleetServer:
    return FleetServer(
        key="10.0.0.9:8000", job="vllm", up=True, model="m", mean_acceptance_length=3.8,
        per_engine_acceptance={"0": 6.4, "1": 1.2}, generation_tps=sum(rates), running=6,
        waiting=1, kv_cache_usage_pct=40.0, ttft_p99_s=0.4,
        per_engine_generation_tps={"0": rates[0], "1": rates[1]},
        per_engine_running={"0": 3, "1": 3}, per_engine_waiting={"0": 0, "1": 1},
        expected_acceptance=expected_acceptance("dflash"))


async def test_e_shows_one_row_per_data_parallel_engine_under_its_server() -> None:
    """vLLM labels its series by `engine`: a server's row sums them, `e` shows each engine's
    own figures under it, the stuck or slow one flagged; Enter on it opens its server."""
    single = FleetServer(key="10.0.0.1:8000", job="vllm", up=True, model="m",
                         mean_acceptance_length=6.0, per_engine_acceptance={"0": 6.0},
                         per_engine_running={"0": 2}, per_engine_generation_tps={"0": 50.0},
                         generation_tps=50.0, running=2)
    chosen: list[FleetServer] = []

    class Opens(App[None]):
        def on_prom_fleet_screen_server_chosen(self, event: PromFleetScreen.ServerChosen
                                               ) -> None:
            chosen.append(event.server)

    app = Opens()
    async with app.run_test(size=(200, 50)) as pilot:
        screen = PromFleetScreen("http://prom")
        await app.push_screen(screen)
        screen.show(FleetReport("http://prom", "", "instance", time.time(),
                                servers=(single, two_engines((100.0, 0.0)))))
        await pilot.pause()
        table = screen.query_one("DataTable")
        assert table.row_count == 2
        await pilot.press("e")
        await pilot.pause()
        names = [c.key for c in COLUMNS]

        def row(i: int) -> dict[str, str]:
            return {k: str(v) for k, v in zip(names, table.get_row_at(i), strict=True)}

        assert table.row_count == 4  # a single-engine server gets no engine rows
        assert [row(i)["server"] for i in range(4)] == [
            "10.0.0.1:8000", "10.0.0.9:8000", "10.0.0.9:8000 · e0", "10.0.0.9:8000 · e1"]
        server, e0, e1 = row(1), row(2), row(3)
        assert server["engine"] == "stalled"
        assert "ENGINE 1 STUCK" in server["flag"]
        assert (e0["accept"], e0["gen"], e0["running"], e0["waiting"], e0["engine"]) == (
            "6.40", "100.0", "3", "0", "ok")
        assert (e1["accept"], e1["gen"], e1["running"], e1["waiting"], e1["engine"]) == (
            "1.20", "0.0", "3", "1", "stalled")
        assert "ENGINE 1 STUCK" in e1["flag"]
        assert "LOW" in e1["flag"]
        assert e0["flag"] == ""
        assert e0["kv"] == e0["ttft"] == e0["up"] == ""  # the server's figures, on its row
        assert "per engine" in str(screen.query_one("#promfleet-title").render())

        table.move_cursor(row=3)
        await pilot.press("enter")
        await pilot.pause()
        assert [s.key for s in chosen] == ["10.0.0.9:8000"]
        assert chosen[0].key == "10.0.0.9:8000"

        # A slow replica (under half the fastest's rate) is flagged on its own row.
        screen.show(FleetReport("http://prom", "", "instance", time.time(),
                                servers=(single, two_engines((100.0, 20.0)))))
        await pilot.pause()
        assert "DP IMBALANCE" in row(1)["flag"]
        assert row(3)["flag"] == "LOW (expect ~6.4) DP SLOW"
        assert row(2)["flag"] == ""
        await pilot.press("e")
        await pilot.pause()
        assert table.row_count == 2


async def test_help_lists_the_fleet_keys() -> None:
    from tests.prometheus import free_port
    from vllm_console.console.settings import FleetSettings, HostsFile
    from vllm_console.console.sources.prometheus import Prometheus
    from vllm_console.console.tui.fleet_app import FleetApp

    url = f"http://127.0.0.1:{free_port()}"  # nothing there: the table says so, keys work
    app = FleetApp(Prometheus(url), FleetSettings(prometheus=url), "", HostsFile())
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        text = str(app.screen.query_one("#help-body").render())
        for words in ("Sort", "Reverse", "Filter", "Refresh", "Open", "Engines", "Quit"):
            assert words in text, words


async def test_a_refresh_before_the_table_is_on_screen_is_shown_once_it_is() -> None:
    """The first refresh can come before the fleet screen has been put together (a quick
    Prometheus, a loaded machine: seen in a two-worker run): it is kept and shown on mount,
    not a crash that ends the app."""
    screen = PromFleetScreen("http://prom")
    screen.show(report(3, 0))  # before mounting: the app's first refresh
    app: App[None] = App()
    async with app.run_test(size=(200, 50)) as pilot:
        await app.push_screen(screen)
        await pilot.pause()
        table = screen.query_one("DataTable")
        assert table.row_count == 3
        assert "3/3 servers" in str(screen.query_one("#promfleet-title").render())


async def test_a_refresh_cancelled_before_its_thread_started_leaves_no_coroutine_behind(
        ) -> None:
    """`r` cancels the refresh under way; one whose query had not yet reached a thread (all
    busy with slow answers) must not leave its coroutine behind, never awaited (a
    RuntimeWarning seen in CI): the query is made in the thread that runs it."""
    import asyncio
    import concurrent.futures
    import gc
    import warnings

    from tests.prometheus import free_port
    from vllm_console.console.settings import FleetSettings, HostsFile
    from vllm_console.console.sources.prometheus import Prometheus
    from vllm_console.console.tui.fleet_app import FleetApp

    class BusyThreads(concurrent.futures.ThreadPoolExecutor):
        """Every thread busy: what is handed in waits (and is never run here)."""

        def __init__(self) -> None:
            super().__init__(max_workers=1)
            self.waiting: list[concurrent.futures.Future[object]] = []

        def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def, override]
            future: concurrent.futures.Future[object] = concurrent.futures.Future()
            self.waiting.append(future)
            return future

    busy = BusyThreads()
    asyncio.get_running_loop().set_default_executor(busy)
    url = f"http://127.0.0.1:{free_port()}"
    app = FleetApp(Prometheus(url), FleetSettings(prometheus=url), "", HostsFile())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with app.run_test(size=(200, 50)) as pilot:
            for _ in range(3):
                await pilot.press("r")
                await pilot.pause()
            assert len(busy.waiting) == 4  # the first refresh and three more
            assert [f.cancelled() for f in busy.waiting] == [True, True, True, False]
        del app, pilot
        gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
